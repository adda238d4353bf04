"""Writers are all-or-nothing: a process killed while writing never leaves a torn or
missing file where a good one was, nor (after the next write) its temp file; files get
the permissions open() gives and symlinks are written through; a torn or foreign
library is refused before it is loaded."""
import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import megtrace as mge
from megtrace import atomic_io

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("crash_writer.py")


def test_new_files_get_the_umask_permissions_and_replacing_keeps_the_mode(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_io.write_bytes(tmp_path / "a.bin", b"1")
        assert stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == 0o644
        os.chmod(tmp_path / "a.bin", 0o600)
        atomic_io.write_bytes(tmp_path / "a.bin", b"2")
        assert stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == 0o600
        assert (tmp_path / "a.bin").read_bytes() == b"2"
    finally:
        os.umask(old)


def test_a_symlink_is_written_through(tmp_path):
    (tmp_path / "real.mge").write_bytes(b"old")
    (tmp_path / "link.mge").symlink_to(tmp_path / "real.mge")
    atomic_io.write_bytes(tmp_path / "link.mge", b"new")
    assert (tmp_path / "link.mge").is_symlink()
    assert (tmp_path / "real.mge").read_bytes() == b"new"


def test_an_error_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "m.mge"
    target.write_bytes(b"good")
    with pytest.raises(RuntimeError):
        with atomic_io.atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("disk full")
    assert target.read_bytes() == b"good" and os.listdir(tmp_path) == ["m.mge"]


def test_stale_temps_of_dead_writers_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".m.mge.tmp-{dead.pid}-abc.mge"
    stale.write_bytes(b"x" * 100)
    atomic_io.write_bytes(tmp_path / "m.mge", b"good")
    assert sorted(os.listdir(tmp_path)) == ["m.mge"]


def _kill_while_writing(kind: str, path: Path, rounds: int) -> None:
    env = {**os.environ, "TVM_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    rng = random.Random(0)
    for _ in range(rounds):
        proc = subprocess.Popen([sys.executable, str(WRITER), kind, str(path)],
                                stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 1.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.slow
def test_sigkill_during_dump_never_tears_the_file(tmp_path):
    path = tmp_path / "wide.mge"
    _kill_while_writing("dump", path, rounds=4)
    model = mge.load_graph(path)                      # complete and well-formed
    out = model.run(data=np.ones((1, 256), np.float32))["out"]
    assert out.shape == (1, 512)
    mge.load_graph(path)                              # and the next write cleans up
    from megtrace.jit import trace
    infer = trace(lambda x: x * 2, symbolic=True, capture_as_const=True)
    infer(mge.tensor(np.ones(3, np.float32)))
    infer.dump(path)
    assert sorted(os.listdir(tmp_path)) == ["wide.mge"]


@pytest.mark.slow
def test_sigkill_during_export_never_tears_the_library(tmp_path):
    path = tmp_path / "wide.so"
    _kill_while_writing("export", path, rounds=3)
    leftovers = [p for p in os.listdir(tmp_path) if p not in ("wide.so", "wide.so.json")]
    assert all(p.startswith((".wide.so.tmp-", ".wide.so.json.tmp-")) for p in leftovers)
    try:
        model = mge.load_exported(path)
    except ValueError as e:                 # killed between the library and its manifest
        assert "does not match its manifest" in str(e)
    else:
        assert model(np.ones((1, 256), np.float32))[0].shape == (1, 512)


@pytest.mark.slow
def test_sigkill_during_tune_leaves_a_usable_database(tmp_path, caplog):
    from megtrace.relay_bridge.targets import resolve
    from megtrace.relay_bridge.tuning_store import Store
    work = tmp_path / "tuning"
    work.mkdir()
    rng = random.Random(1)
    env = {**os.environ, "TVM_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for _ in range(2):
        proc = subprocess.Popen([sys.executable, str(WRITER), "tune", str(work)],
                                stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(2.0, 12.0))           # somewhere inside a tuning run
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    stores = [p for p in work.iterdir() if p.is_dir()]
    assert len(stores) == 1
    store = Store(work, resolve(None))
    assert store.dir == stores[0]
    assert isinstance(store.decisions(), dict) and isinstance(store.read_meta(), dict)
    store.database()                                  # loads (repaired if it was torn)
    for name in ("megtrace.json", "decisions.json"):  # never torn: written atomically
        path = store.dir / name
        if path.exists():
            json.loads(path.read_text())


def _export_small(tmp_path) -> Path:
    from megtrace.jit import trace
    infer = trace(lambda x: x * 2 + 1, symbolic=True, capture_as_const=True)
    infer(mge.tensor(np.ones(4, np.float32)))
    path = tmp_path / "small.so"
    mge.export(infer, path)
    return path


def test_a_truncated_library_is_refused_before_loading(tmp_path):
    path = _export_small(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="does not match its manifest"):
        mge.load_exported(path)


def test_a_library_for_another_cpu_is_refused(tmp_path, monkeypatch):
    from megtrace.relay_bridge import deploy
    path = _export_small(tmp_path)
    manifest_file = Path(str(path) + ".json")
    manifest = json.loads(manifest_file.read_text())
    manifest["target"] = {"kind": "llvm", "mcpu": "sapphirerapids"}
    manifest_file.write_text(json.dumps(manifest))
    # loaded on a CPU without Sapphire Rapids' AMX / AVX512-FP16: this one, or this one
    # with them masked out of what /proc/cpuinfo says (some hosts here have them)
    flags = deploy.host_cpu_flags()
    assert flags is not None
    monkeypatch.setattr(deploy, "host_cpu_flags",
                        lambda: flags - {"amx_tile", "avx512_fp16"})
    # (an AVX2 host lacks AVX-512 too: the list names those as well)
    with pytest.raises(ValueError, match="needs CPU features this machine lacks: "
                                         "amx-tile, (.+, )?avx512fp16"):
        mge.load_exported(path)


def test_a_torn_tuning_database_is_ignored_with_a_warning(tmp_path, caplog):
    from megtrace.relay_bridge.targets import resolve
    from megtrace.relay_bridge.tuning_store import Store
    store = Store(tmp_path, resolve(None))
    store.dir.mkdir(parents=True)
    (store.dir / "database_workload.json").write_text('["0x1", "{}"]\n["0x2", "{')
    (store.dir / "database_tuning_record.json").write_text('[0, [1, 2, 3, 4]]\n[1, [1, 2')
    (store.dir / "decisions.json").write_text('{"a": ')
    assert store.decisions() == {}
    db = store.database()             # torn lines dropped; what TVM still cannot read
    assert len(db) == 0               # is moved aside: an empty, working database
    assert "torn" in caplog.text and "unreadable" in caplog.text
    assert any(p.name.startswith("database_workload.json.unreadable-")
               for p in store.dir.iterdir())
