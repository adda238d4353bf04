"""Golden samples of MegEngine 1.13's COCO, Objects365, PascalVOC and Cityscapes read from tiny synthetic
dataset folders. Run with the real MegEngine from a scratch folder holding a copy of this file:
    /work/shared/megref/mpy make_megengine_detection_datasets.py
then copy the written detection_datasets_golden.json to tests/data/. tests/test_data_detection_datasets.py
builds the same folders with write_fixtures and reads them with megtrace through read_all.

Images are PNG bytes even under .jpg names (cv2 reads by content), so pixels do not depend on a JPEG codec.
"""
import json
import os
import tempfile

import cv2
import numpy as np


def _image(path: str, height: int, width: int, seed: int) -> None:
    pixels = np.random.RandomState(seed).randint(0, 256, size=(height, width, 3)).astype(np.uint8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(cv2.imencode(".png", pixels)[1].tobytes())


def _gray_png(path: str, values: np.ndarray) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    cv2.imwrite(path, values.astype(np.uint8))


def _keypoints(visible: int) -> list:
    points = []
    for k in range(17):
        points += [float(k), float(k) + 0.5, 2 if k < visible else 0]
    return points


def _coco_json(root: str, name: str, with_keypoints: bool) -> None:
    """Images listed out of id order, categories with gaps, crowd / empty / zero-size boxes."""
    images = [{"id": 9, "file_name": "b.jpg", "height": 5, "width": 6, "license": 1, "coco_url": "u"},
              {"id": 2, "file_name": "a.jpg", "height": 4, "width": 7, "flickr_url": "f", "date_captured": "d"},
              {"id": 5, "file_name": "c.jpg", "height": 6, "width": 4},
              {"id": 7, "file_name": "d.jpg", "height": 3, "width": 3}]
    boxes = [(2, 90, [1.5, 2.0, 3.25, 1.0], 0), (2, 3, [0.0, 0.0, 2.0, 2.0], 0),
             (9, 7, [1.0, 1.0, 0.0, 2.0], 0), (9, 3, [2.0, 1.0, 1.0, 1.0], 1),
             (5, 3, [0.5, 0.5, 1.0, 4.0], 1), (7, 7, [0.0, 1.0, 2.0, 1.0], 0), (7, 90, [1.0, 0.0, 1.0, 1.0], 0)]
    annotations = []
    for i, (img, cat, bbox, crowd) in enumerate(boxes):
        ann = {"id": 100 + i, "image_id": img, "category_id": cat, "bbox": bbox, "iscrowd": crowd,
               "area": bbox[2] * bbox[3], "segmentation": [[0, 0, 1, 0, 1, 1]]}
        if with_keypoints:
            ann["keypoints"] = _keypoints({2: 6, 9: 12, 5: 17, 7: 3}[img])
        annotations.append(ann)
    categories = [{"id": c, "name": "cat%d" % c} for c in (90, 3, 7)]
    with open(os.path.join(root, name), "w") as f:
        json.dump({"images": images, "annotations": annotations, "categories": categories}, f)


def _voc(root: str) -> None:
    voc = os.path.join(root, "voc")
    objects = {"2008_000001": [("dog", (1, 2, 4, 5), 0), ("person", ("1.5", " 0 ", "3", "4.25"), 1)],
               "2008_000002": [("tvmonitor", (0, 0, 3, 3), 0)],
               "2008_000003": []}
    for i, (name, objs) in enumerate(objects.items()):
        _image(os.path.join(voc, "JPEGImages", name + ".jpg"), 5 + i, 6, 30 + i)
        body = "".join(
            "<object>\n  <name>{}</name>\n  <pose>Left</pose>\n  <difficult>{}</difficult>\n  <bndbox>"
            "<xmin>{}</xmin><ymin>{}</ymin><xmax>{}</xmax><ymax>{}</ymax></bndbox>\n</object>\n".format(
                cls, difficult, *box) for cls, box, difficult in objs)
        xml = "<annotation>\n<filename>{}.jpg</filename>\n<size><width>6</width></size>\n{}</annotation>\n"
        os.makedirs(os.path.join(voc, "Annotations"), exist_ok=True)
        with open(os.path.join(voc, "Annotations", name + ".xml"), "w") as f:
            f.write(xml.format(name, body))
    splits = {"Main/train.txt": "2008_000002\n2008_000001\n2008_000003\n",
              "Segmentation/val.txt": "2008_000001\n2008_000003\n",
              "Segmentation/train_aug.txt": "2008_000002\n"}
    for split, text in splits.items():
        os.makedirs(os.path.dirname(os.path.join(voc, "ImageSets", split)), exist_ok=True)
        with open(os.path.join(voc, "ImageSets", split), "w") as f:
            f.write(text)
    # colour masks: class colours (BGR) plus a colour no class has
    palette = np.array([[0, 0, 0], [0, 0, 128], [0, 128, 0], [128, 64, 0], [0, 0, 192], [224, 224, 192]])
    for i, name in enumerate(("2008_000001", "2008_000003")):
        labels = np.random.RandomState(40 + i).randint(0, len(palette), size=(5 + 2 * i, 6))
        os.makedirs(os.path.join(voc, "SegmentationClass"), exist_ok=True)
        cv2.imwrite(os.path.join(voc, "SegmentationClass", name + ".png"), palette[labels].astype(np.uint8))
    _gray_png(os.path.join(voc, "SegmentationClass_aug", "2008_000002.png"),
              np.random.RandomState(50).choice([0, 3, 20, 255], size=(6, 6)))


def _cityscapes(root: str) -> None:
    city = os.path.join(root, "cityscapes")
    files = {"train": {"bremen": ["bremen_000000_000019"], "aachen": ["aachen_000001_000019", "aachen_000000_000019"]},
             "val": {"lindau": ["lindau_000000_000019"]}}
    seed = 60
    for split, cities in files.items():
        for town, stems in cities.items():
            for stem in stems:
                seed += 1
                _image(os.path.join(city, "leftImg8bit", split, town, stem + "_leftImg8bit.png"), 4, 5, seed)
                ids = np.random.RandomState(seed).randint(0, 35, size=(4, 5))
                _gray_png(os.path.join(city, "gtFine", split, town, stem + "_gtFine_labelIds.png"), ids)


def write_fixtures(root: str) -> None:
    """Deterministic tiny COCO / Objects365 / VOC / Cityscapes folders under ``root``."""
    for i, (name, h, w) in enumerate((("a.jpg", 4, 7), ("b.jpg", 5, 6), ("c.jpg", 6, 4), ("d.jpg", 3, 3))):
        _image(os.path.join(root, "coco", "images", name), h, w, 10 + i)
    _coco_json(os.path.join(root, "coco"), "instances.json", with_keypoints=False)
    _coco_json(os.path.join(root, "coco"), "keypoints.json", with_keypoints=True)
    _voc(root)
    _cityscapes(root)


def _encode(value, root: str):
    """JSON form of one sample field: arrays with dtype and shape, scalars with their type, paths relative."""
    if isinstance(value, np.ndarray):
        return {"dtype": str(value.dtype), "shape": list(value.shape), "values": value.ravel().tolist()}
    if isinstance(value, (list, tuple)):
        return [_encode(v, root) for v in value]
    if isinstance(value, str) and value.startswith(root):
        value = "<root>" + value[len(root):]
    return [type(value).__name__, value]


def _error(make) -> str:
    try:
        make()
    except Exception as e:  # noqa: BLE001 - the golden records which error MegEngine raises
        return "{}: {}".format(type(e).__name__, e)
    return "no error"


def read_all(module: str, root: str) -> dict:
    """Every sample and the public tables of each fixture dataset, made JSON-comparable."""
    ds = __import__(module + ".data.dataset", fromlist=["*"])
    coco_dir = os.path.join(root, "coco")
    det = ("image", "boxes", "boxes_category", "info")
    made = {
        "coco": ds.COCO(os.path.join(coco_dir, "images"), os.path.join(coco_dir, "instances.json"), order=det),
        "coco_filtered": ds.COCO(os.path.join(coco_dir, "images"), os.path.join(coco_dir, "instances.json"),
                                 True, order=("boxes_category", "boxes", "info", "image")),
        "coco_keypoints": ds.COCO(os.path.join(coco_dir, "images"), os.path.join(coco_dir, "keypoints.json"),
                                  remove_images_without_annotations=True, order=("image", "boxes", "keypoints")),
        "coco_keypoints_all": ds.COCO(os.path.join(coco_dir, "images"), os.path.join(coco_dir, "keypoints.json"),
                                      order=("keypoints", "boxes_category")),
        "objects365": ds.Objects365(os.path.join(coco_dir, "images"), os.path.join(coco_dir, "instances.json"),
                                    order=det),
        "objects365_filtered": ds.Objects365(os.path.join(coco_dir, "images"),
                                             os.path.join(coco_dir, "instances.json"), True, order=det),
        "voc_det": ds.PascalVOC(os.path.join(root, "voc"), "train", order=det),
        "voc_boxes": ds.PascalVOC(os.path.join(root, "voc"), "train", order=("boxes_category", "boxes")),
        "voc_seg": ds.PascalVOC(os.path.join(root, "voc"), "val", order=("image", "mask", "info")),
        "voc_seg_aug": ds.PascalVOC(os.path.join(root, "voc"), "train_aug", order=("mask", "image", "info")),
        "cityscapes_train": ds.Cityscapes(os.path.join(root, "cityscapes"), "train", "gtFine",
                                          order=("image", "mask", "info")),
        "cityscapes_val": ds.Cityscapes(os.path.join(root, "cityscapes"), "val", "gtFine", order=("mask",)),
    }
    out = {}
    for name, dataset in made.items():
        samples = [_encode(dataset[i], root) for i in range(len(dataset))]
        if name.startswith("cityscapes"):  # MegEngine lists cities and files in os.listdir order
            samples = sorted(samples, key=json.dumps)
        out[name] = {"len": len(dataset), "order": list(dataset.order), "samples": samples}
        if hasattr(dataset, "get_img_info") and not name.startswith("voc"):
            out[name]["img_info"] = [dataset.get_img_info(i) for i in range(len(dataset))]
            out[name]["ids"] = list(dataset.ids)
            out[name]["json_to_contiguous"] = sorted(dataset.json_category_id_to_contiguous_id.items())
            out[name]["contiguous_to_json"] = sorted(dataset.contiguous_category_id_to_json_id.items())
        if name == "voc_det":
            out[name]["img_info"] = [dataset.get_img_info(i) for i in range(len(dataset))]
    out["class_tables"] = {
        "COCO.class_names": list(ds.COCO.class_names),
        "COCO.classes_originID": sorted(ds.COCO.classes_originID.items()),
        "COCO.keypoint_names": list(ds.COCO.keypoint_names),
        "Objects365.class_names": list(ds.Objects365.class_names),
        "PascalVOC.class_names": list(ds.PascalVOC.class_names),
        "PascalVOC.class_colors": ds.PascalVOC.class_colors,
        "Cityscapes.class_names": list(ds.Cityscapes.class_names),
        "COCO.supported_order": list(ds.COCO.supported_order),
        "Objects365.supported_order": list(ds.Objects365.supported_order),
        "PascalVOC.supported_order": list(ds.PascalVOC.supported_order),
        "Cityscapes.supported_order": list(ds.Cityscapes.supported_order),
    }
    voc = os.path.join(root, "voc")
    out["errors"] = {
        "voc_boxes_and_mask": _error(lambda: ds.PascalVOC(voc, "train", order=("boxes", "mask"))),
        "voc_missing_root": _error(lambda: ds.PascalVOC(voc + "_none", "train", order=("boxes",))),
        "voc_unsupported": _error(lambda: ds.PascalVOC(voc, "train", order=("image", "keypoints"))),
        "coco_unsupported": _error(lambda: ds.COCO(coco_dir, os.path.join(coco_dir, "instances.json"),
                                                   order=("image", "mask"))),
        "cityscapes_missing_root": _error(lambda: ds.Cityscapes(voc + "_none", "train", "gtFine")),
    }
    return out


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        write_fixtures(tmp)
        golden = read_all("megengine", tmp)
    with open("detection_datasets_golden.json", "w") as f:
        json.dump(golden, f, sort_keys=True, separators=(",", ":"))
    print("wrote detection_datasets_golden.json")
