"""Model families of MegEngine's official model zoo (github.com/MegEngine/Models), written
with MegEngine's API (only `import megengine` reads `import megtrace`) and scaled down in
width and resolution so tests stay fast.

FAMILIES maps a name to (builder, input maker): the maker returns the inputs of one call
for a batch size, as {argument name: array}. The same files run under the real MegEngine
(tests/data/make_zoo_golden.py imports them with `megtrace` aliased to `megengine`)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .bert import BertForSequenceClassification
from .clip import CLIP, VisionTransformer
from .dcgan import DCGANGenerator
from .deeplab import DeepLabV3Plus
from .mobilenet import mobilenet_v2_tiny
from .resnet import resnet_tiny, resnext_tiny
from .retinanet import RetinaNet
from .shufflenet import shufflenet_tiny
from .shufflenet_v1 import ShuffleNetV1
from .simplebaseline import SimpleBaseline


def _image(size: int) -> Callable:
    return lambda batch, rng: {"data": rng.uniform(-1, 1, (batch, 3, size, size)).astype(
        np.float32)}


def _tokens(batch, rng):
    ids = rng.integers(1, 50, (batch, 8)).astype(np.int32)
    mask = np.ones((batch, 8), np.int32)
    mask[:, 6:] = 0
    return {"input_ids": ids, "token_type_ids": np.zeros((batch, 8), np.int32),
            "attention_mask": mask}


def _image_and_text(batch, rng):
    return {"image": rng.uniform(-1, 1, (batch, 3, 32, 32)).astype(np.float32),
            "text": rng.integers(1, 40, (batch, 8)).astype(np.int32)}


FAMILIES: dict[str, tuple[Callable, Callable]] = {
    "resnet": (resnet_tiny, _image(64)),
    "resnext": (resnext_tiny, _image(64)),
    "shufflenet_v2": (shufflenet_tiny, _image(64)),
    "shufflenet_v1": (ShuffleNetV1, _image(64)),
    "mobilenet_v2": (mobilenet_v2_tiny, _image(64)),
    "retinanet_fpn": (RetinaNet, lambda b, rng: {"data": rng.uniform(
        0, 255, (b, 3, 64, 64)).astype(np.float32)}),
    "deeplabv3plus": (DeepLabV3Plus, _image(64)),
    "dcgan_generator": (DCGANGenerator, lambda b, rng: {"z": rng.normal(
        size=(b, 16)).astype(np.float32)}),
    "bert": (BertForSequenceClassification, _tokens),
    "vit": (VisionTransformer, _image(32)),
    "clip": (CLIP, _image_and_text),
    "simplebaseline": (SimpleBaseline, _image(64)),
}
