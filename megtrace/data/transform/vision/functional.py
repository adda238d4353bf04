"""Image helpers on (H, W, C) NumPy arrays via OpenCV, as MegEngine 1.13's transform.vision.functional."""
from __future__ import annotations

import collections.abc
import functools
import random

import cv2
import numpy as np


def wrap_keepdims(func):
    """Refuse non-(H, W, C) input and give a channel axis back to results OpenCV returns as (H, W)."""

    @functools.wraps(func)
    def wrapper(image, *args, **kwargs):
        if len(image.shape) != 3:
            raise ValueError("image must have 3 dims, but got {} dims".format(len(image.shape)))
        out = func(image, *args, **kwargs)
        return out[:, :, np.newaxis] if out.ndim == 2 else out

    return wrapper


@wrap_keepdims
def to_gray(image: np.ndarray) -> np.ndarray:
    """BGR -> single-channel gray (OpenCV's weights)."""
    return cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)


@wrap_keepdims
def to_bgr(image: np.ndarray) -> np.ndarray:
    """Gray -> 3-channel BGR."""
    return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)


def _pad_sizes(size):
    if isinstance(size, int):
        return (size, size, size, size)
    if isinstance(size, collections.abc.Sequence) and len(size) == 2:
        return (0, size[0], 0, size[1])  # (bottom, right) only
    return tuple(size)


@wrap_keepdims
def pad(input: np.ndarray, size, value) -> np.ndarray:
    """Constant padding; ``size`` is an int (all sides), (bottom, right) or (top, bottom, left, right).
    A float ``value`` turns the image into float32 first."""
    if np.array(value).dtype == float:
        input = input.astype(np.float32)
    return cv2.copyMakeBorder(input, *_pad_sizes(size), cv2.BORDER_CONSTANT, value=value)


@wrap_keepdims
def flip(image: np.ndarray, flipCode: int) -> np.ndarray:
    """1: horizontal, 0: vertical, -1: both."""
    return cv2.flip(image, flipCode=flipCode)


@wrap_keepdims
def resize(input: np.ndarray, size, interpolation=cv2.INTER_LINEAR) -> np.ndarray:
    """Resize to ``size`` = (height, width); a sequence of interpolations picks one at random."""
    if len(size) != 2:
        raise ValueError("resize needs (h, w), but got {}".format(size))
    if isinstance(interpolation, collections.abc.Sequence):
        interpolation = random.choice(interpolation)
    return cv2.resize(input, (int(size[1]), int(size[0])), interpolation=interpolation)
