"""megtrace's COCO, Objects365, PascalVOC and Cityscapes on tiny synthetic folders against the samples the real
MegEngine 1.13 read from the same folders (tests/data/make_megengine_detection_datasets.py wrote
tests/data/detection_datasets_golden.json)."""
import importlib.util
import json
import os

import pytest

from megtrace.data.dataset import COCO, Cityscapes, Objects365, PascalVOC
from megtrace.data.dataset import vision

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
with open(os.path.join(HERE, "detection_datasets_golden.json")) as _f:
    GOLDEN = json.load(_f)


def _script():
    spec = importlib.util.spec_from_file_location(
        "make_megengine_detection_datasets", os.path.join(HERE, "make_megengine_detection_datasets.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("detection"))
    _script().write_fixtures(path)
    return path


@pytest.fixture(scope="module")
def ours(root):
    return json.loads(json.dumps(_script().read_all("megtrace", root)))


DATASETS = sorted(k for k in GOLDEN if k not in ("class_tables", "errors"))


@pytest.mark.parametrize("name", DATASETS)
def test_samples_match_megengine(ours, name):
    """Same length, ids, category renumbering, image records and every field (dtype, shape, values, types)."""
    want, got = GOLDEN[name], ours[name]
    assert sorted(got) == sorted(want)
    for key in want:
        if key != "samples":
            assert got[key] == want[key], (name, key)
    assert len(got["samples"]) == len(want["samples"]) == want["len"]
    for i, (g, w) in enumerate(zip(got["samples"], want["samples"])):
        assert g == w, (name, i)


def test_golden_covers_filtering():
    """The fixtures exercise what remove_images_without_annotations drops (crowd, zero-size, no boxes)."""
    assert GOLDEN["coco"]["len"] == 4 and GOLDEN["coco_filtered"]["len"] == 2
    assert GOLDEN["coco_keypoints"]["len"] == 1  # only one image shows >= 10 visible keypoints
    assert GOLDEN["objects365_filtered"]["ids"] == [2, 7]


def test_class_tables_match_megengine(ours):
    assert ours["class_tables"] == GOLDEN["class_tables"]
    assert len(COCO.class_names) == 80 and len(Objects365.class_names) == 365
    assert PascalVOC.class_names[0] == "aeroplane" and Cityscapes.class_names[-1] == "bicycle"


def test_errors_match_megengine(ours):
    assert ours["errors"] == GOLDEN["errors"]


def test_exported_like_megengine():
    for name in ("COCO", "Objects365", "PascalVOC", "Cityscapes"):
        assert getattr(vision, name) is globals()[name] and name in vision.__all__


def test_cityscapes_lists_files_in_sorted_order(root):
    """MegEngine takes os.listdir's order (file-system dependent); megtrace sorts cities and files."""
    ds = Cityscapes(os.path.join(root, "cityscapes"), "train", "gtFine", order=("info",))
    paths = [ds[i][0][2] for i in range(len(ds))]
    assert [os.path.relpath(p, ds.images_dir) for p in paths] == [
        "aachen/aachen_000000_000019_leftImg8bit.png", "aachen/aachen_000001_000019_leftImg8bit.png",
        "bremen/bremen_000000_000019_leftImg8bit.png"]


def test_missing_image_is_an_error(root, tmp_path):
    """cv2.imread gives None for a missing file; megtrace names the file instead of returning None."""
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps({"images": [{"id": 1, "file_name": "gone.jpg", "height": 2, "width": 2}],
                               "annotations": [], "categories": []}))
    with pytest.raises(FileNotFoundError, match="gone.jpg"):
        COCO(str(tmp_path), str(ann))[0]


def test_voc_without_boxes_or_mask_is_refused(root):
    with pytest.raises(NotImplementedError, match="boxes, boxes_category, mask"):
        PascalVOC(os.path.join(root, "voc"), "train", order=("image",))
