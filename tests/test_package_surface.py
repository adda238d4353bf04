"""Single-process answers of megtrace.distributed and the device/logger names MegEngine 1.13
exports from its top-level package (values as MegEngine reports them on a CPU-only machine)."""
import logging
import os
import subprocess
import sys

import pytest

import megtrace as mge
import megtrace.distributed as dist

MEGENGINE_TOP_LEVEL = [
    "Parameter", "Tensor", "coalesce_free_memory", "distributed", "enable_debug_log",
    "functional", "get_allocated_memory", "get_cuda_compute_capability",
    "get_cuda_device_property", "get_cuda_driver_version", "get_cuda_version",
    "get_cudnn_version", "get_default_device", "get_device_count", "get_logger",
    "get_max_allocated_memory", "get_max_reserved_memory", "get_mem_status_bytes",
    "get_reserved_memory", "get_tensorrt_version", "hub", "is_atlas_available",
    "is_cambricon_available", "is_cuda_available", "is_rocm_available", "jit", "load",
    "module", "reset_max_memory_stats", "save", "set_default_device", "set_log_file",
    "set_log_level", "set_prealloc_config", "tensor"]


@pytest.mark.parametrize("name", MEGENGINE_TOP_LEVEL)
def test_megengine_top_level_name_exists(name):
    assert hasattr(mge, name)


# the subpackages megengine/__init__.py imports, each a package attribute without an
# import of its own (tests/data/show_megengine_top_level.py prints them in MegEngine 1.13)
MEGENGINE_SUBPACKAGES = ["amp", "autodiff", "core", "data", "distributed", "dtr", "functional",
                         "hub", "jit", "module", "optimizer", "quantization", "random",
                         "traced_module", "utils"]


def test_subpackages_are_attributes_of_a_fresh_import():
    """In a new interpreter, so that no test's own import has set the attribute."""
    code = ("import megtrace as mge\n"     # dir() lists them before any is imported
            f"assert set(dir(mge)) >= set({MEGENGINE_SUBPACKAGES!r}), 'dir'\n"
            f"for name in {MEGENGINE_SUBPACKAGES!r}:\n"
            "    assert getattr(mge, name).__name__ == 'megtrace.' + name, name\n"
            "print(mge.data.DataLoader.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "DataLoader"


def test_single_process_distributed_answers():
    assert (dist.get_rank(), dist.get_world_size(), dist.is_distributed()) == (0, 1, False)
    assert dist.WORLD.proc_ranks is None
    assert dist.group_barrier() is None
    for getter in (dist.get_backend, dist.get_py_server_addr, dist.get_mm_server_addr,
                   dist.get_client):
        with pytest.raises(AssertionError, match="please call init_process_group first"):
            getter()
    calls = []
    assert dist.synchronized(lambda x: calls.append(x) or x + 1)(2) == 3 and calls == [2]


def test_init_process_group_checks_then_refuses():
    with pytest.raises(TypeError, match="Expect type str"):
        dist.init_process_group(1, 2, 2, 0, 0)
    with pytest.raises(ValueError, match="backend should be one of"):
        dist.init_process_group("localhost", 2345, 2, 0, 0, backend="gloo")
    with pytest.raises(ValueError, match="xpu is not a valid distributed device type"):
        dist.init_process_group("localhost", 2345, 2, 0, 0)
    with pytest.raises(NotImplementedError, match="single process"):
        dist.init_process_group("localhost", 2345, 2, 0, 0, device_type="gpu")
    assert not dist.is_distributed()


def test_device_facts_on_a_cpu_machine():
    assert mge.get_device_count("cpu") == os.cpu_count()
    with pytest.raises(AssertionError, match="device must be one of"):
        mge.get_device_count("tpu")
    assert mge.is_cuda_available() == (mge.get_device_count("gpu") > 0)
    if not mge.is_cuda_available():
        assert mge.get_device_count("xpu") == os.cpu_count()
        with pytest.raises(RuntimeError, match=r"request gpu 0 out of valid range \[0, 0\)"):
            mge.get_cuda_compute_capability(0)
    assert not (mge.is_rocm_available() or mge.is_atlas_available()
                or mge.is_cambricon_available())
    total, free = mge.get_mem_status_bytes("cpu0")
    assert 0 < free <= total
    assert mge.get_allocated_memory() == mge.get_max_reserved_memory() == 0
    with pytest.raises(AssertionError):
        mge.set_prealloc_config(alignment=0)


def test_logger_level_and_file(tmp_path):
    log = mge.get_logger("megtrace.test_surface")
    assert mge.get_logger("megtrace.test_surface") is log and not log.propagate
    old = mge.set_log_level(logging.ERROR)
    try:
        assert log.level == logging.ERROR
        mge.set_log_file(str(tmp_path / "log.txt"))
        log.error("written to the file")
        log.info("below the level")
    finally:
        mge.set_log_level(old)
        mge.logger.MegEngineLogFormatter.log_fout = None
    text = (tmp_path / "log.txt").read_text()
    assert "written to the file" in text and "below the level" not in text
