"""Every public name of MegEngine 1.13's Python modules (tests/data/megengine_module_paths.json,
made from MegEngine's source by tests/data/make_megengine_module_paths.py) can be imported
from the same module path with `megengine` replaced by `megtrace`, so code that imports from
a submodule (`from megengine.functional.elemwise import clip`) runs unchanged. The names
left out below are listed with the reason."""
import importlib
import json
from pathlib import Path

import pytest

PATHS = json.loads((Path(__file__).parent / "data" / "megengine_module_paths.json").read_text())

# module path (or "path:name") -> why megtrace does not provide it
NOT_PROVIDED = {
    "megengine.data.dataset.vision.cityscapes": "datasets megtrace does not provide (README)",
    "megengine.data.dataset.vision.coco": "datasets megtrace does not provide (README)",
    "megengine.data.dataset.vision.objects365": "datasets megtrace does not provide (README)",
    "megengine.data.dataset.vision.voc": "datasets megtrace does not provide (README)",
    "megengine.data.dataset.vision.utils:load_raw_data_from_url": "no downloads (README)",
    "megengine.data.dataset.vision.utils:untar": "no downloads (README)",
    "megengine.data.dataset.vision.utils:untargz": "no downloads (README)",
    "megengine.data.dataloader:PreLoader": "MegEngine's CUDA-stream prefetcher",
    "megengine.data.dataloader:ManagerWatchdog": "internal helper of MegEngine's workers",
    "megengine.data.dataloader:stream_fetcher": "internal helper of MegEngine's workers",
    "megengine.data.dataloader:map_fetcher": "internal helper of MegEngine's workers",
    "megengine.dtr.dtr": "module-level properties of MegEngine's C++ DTR; megtrace.dtr has "
                         "enable/disable and the same settings",
    "megengine.experimental.weight_scaler": "experimental",
    "megengine.functional.external": "TensorRT/Cambricon/Atlas/MagicMind runtime oprs",
    "megengine.module.external": "TensorRT/Cambricon/Atlas/MagicMind runtime oprs",
    "megengine.functional.tensor_cache": "MegEngine's cached scalar constants (internal)",
    "megengine.functional.vision:nvof": "NVIDIA optical flow (CUDA only)",
    "megengine.utils.deprecation": "internal decorators",
    "megengine.utils.dlpack": "DLPack exchange of device tensors",
    "megengine.utils.future": "internal",
    "megengine.utils.http_download": "downloads",
    "megengine.utils.max_recursion_limit": "internal",
    "megengine.utils.naming": "internal (AutoNaming of C++ graph vars)",
    "megengine.utils.profile_analyzer": "MegEngine's C++ profiler output",
    "megengine.utils.tensor_sanity_check": "checks MegEngine's C++ tensor storage",
    "megengine.utils.tensorboard": "tensorboard graph export",
    "megengine.utils.tuple_function": "internal",
    "megengine.serialization:dmap": "internal helper of load(map_location=...)",
}


def _cases():
    for path, names in sorted(PATHS.items()):
        if path in NOT_PROVIDED:
            continue
        for name in names:
            if f"{path}:{name}" not in NOT_PROVIDED and name != "logger":
                yield path, name


@pytest.mark.parametrize("path,name", list(_cases()), ids=lambda v: v)
def test_megengine_name_imports_from_its_module_path(path, name):
    module = importlib.import_module("megtrace" + path[len("megengine"):])
    assert hasattr(module, name), f"{path}.{name}"


def test_the_left_out_names_are_still_megengines():
    """The exclusion list names only paths and names MegEngine 1.13 has."""
    for key in NOT_PROVIDED:
        path, _, name = key.partition(":")
        assert path in PATHS and (not name or name in PATHS[path]), key
