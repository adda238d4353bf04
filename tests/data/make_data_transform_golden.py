"""Golden outputs of MegEngine 1.13's megengine.data transforms and samplers (run with the real MegEngine:
/work/shared/megref/mpy tests/data/make_data_transform_golden.py). Writes tests/data/data_transform_golden.npz.

Each case seeds NumPy, applies one transform to a fixed (image, boxes, mask) sample and records the result, so
megtrace must draw its random numbers in the same order as MegEngine to match."""
import os

import numpy as np

T = D = DS = None  # the package under test, bound by compute()

ORDER = ("image", "boxes", "mask")


def sample():
    rng = np.random.RandomState(123)
    image = rng.randint(0, 256, size=(13, 17, 3)).astype(np.uint8)
    boxes = np.array([[1.0, 2.0, 9.0, 11.0], [0.0, 0.0, 16.0, 12.0]], dtype=np.float32)
    mask = rng.randint(0, 4, size=(13, 17, 1)).astype(np.uint8)
    return image, boxes, mask


CASES = {
    "resize_hw": lambda: T.Resize((7, 23), order=ORDER),
    "resize_int": lambda: T.Resize(9, order=ORDER),
    "resize_cubic": lambda: T.Resize((20, 11), interpolation=2, order=ORDER),
    "random_resize": lambda: T.RandomResize((0.5, 1.5), order=ORDER),
    "shortest_edge": lambda: T.ShortestEdgeResize((8, 12), 14, order=ORDER),
    "center_crop": lambda: T.CenterCrop((6, 9), order=ORDER),
    "random_crop": lambda: T.RandomCrop((10, 20), padding_size=2, order=ORDER),
    "random_resized_crop": lambda: T.RandomResizedCrop((9, 8), order=ORDER),
    "hflip": lambda: T.RandomHorizontalFlip(1.0, order=ORDER),
    "vflip": lambda: T.RandomVerticalFlip(1.0, order=ORDER),
    "pad4": lambda: T.Pad((1, 2, 3, 4), value=[7, 8, 9], mask_value=5, order=ORDER),
    "normalize_chw": lambda: T.Compose([T.Normalize([100.0, 110.0, 120.0], [50.0, 60.0, 70.0]), T.ToMode("CHW")],
                                       order=ORDER),
    "noise": lambda: T.GaussianNoise(0.0, 0.1, order=ORDER),
    "brightness": lambda: T.BrightnessTransform(0.5, order=ORDER),
    "contrast": lambda: T.ContrastTransform(0.5, order=ORDER),
    "saturation": lambda: T.SaturationTransform(0.5, order=ORDER),
    "hue": lambda: T.HueTransform(0.3, order=ORDER),
    "color_jitter": lambda: T.ColorJitter(0.3, 0.3, 0.3, 0.1, order=ORDER),
    "lighting": lambda: T.Lighting(0.2, order=ORDER),
}


def compute(module: str) -> dict:
    """All golden arrays computed with ``module`` (megengine, or megtrace in the test)."""
    global T, D, DS
    T = __import__(module + ".data.transform", fromlist=["*"])
    D = __import__(module + ".data", fromlist=["*"])
    DS = __import__(module + ".data.dataset", fromlist=["*"])
    out = {}
    for name, make in CASES.items():
        np.random.seed(7)
        image, boxes, mask = sample()
        result = make().apply((image, boxes, mask))
        for i, field in enumerate(ORDER):
            out[name + "/" + field] = np.asarray(result[i])
    ds = DS.ArrayDataset(np.arange(23))
    out["sampler/random"] = np.array([i for b in D.RandomSampler(ds, batch_size=4, seed=3) for i in b])
    out["sampler/replacement"] = np.array(
        [i for b in D.ReplacementSampler(ds, batch_size=4, num_samples=10, weights=list(range(23)), seed=4) for i in b])
    out["sampler/scatter_rank1"] = np.array(
        [i for b in D.RandomSampler(ds, batch_size=2, world_size=3, rank=1) for i in b])
    return out


if __name__ == "__main__":
    np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data_transform_golden.npz"),
                        **compute("megengine"))
