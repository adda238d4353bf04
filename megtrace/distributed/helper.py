"""Distributed helpers that have a single-process meaning: the barrier decorator and
the parameter packing MegEngine's gradient all-reduce uses (one flat buffer for many
tensors), built from ordinary tensor ops so that it traces and dumps."""
from __future__ import annotations

import functools
import math
from typing import Callable, Sequence

from .. import functional as F
from ..device import get_device_count
from ..tensor import Tensor
from .group import group_barrier, is_distributed


def synchronized(func: Callable) -> Callable:
    """Decorator: every rank waits for the others after `func` (a no-op in one process)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        result = func(*args, **kwargs)
        if is_distributed():
            group_barrier()
        return result

    return wrapper


def get_offsets(shapes: Sequence[Sequence[int]]) -> list[int]:
    """[begin0, end0, begin1, end1, ...] of tensors of `shapes` packed back to back."""
    offsets, at = [], 0
    for shape in shapes:
        offsets.append(at)
        at += int(math.prod(shape))
        offsets.append(at)
    return offsets


def _spans(name: str, offsets: Sequence[int], sizes: Sequence[int]) -> list[tuple[int, int]]:
    """(begin, end) per tensor, checked against the tensors' sizes."""
    offsets = [int(o) for o in offsets]
    if len(offsets) != 2 * len(sizes):
        raise ValueError(f"{name}: offsets must hold a [begin, end] pair per tensor "
                         f"({2 * len(sizes)} values); got {len(offsets)}")
    spans, last = [], 0
    for i, size in enumerate(sizes):
        begin, end = offsets[2 * i], offsets[2 * i + 1]
        if begin < last or end - begin != size:
            raise ValueError(f"{name}: tensor {i} of {size} elements cannot take offsets "
                             f"[{begin}, {end}) (after {last})")
        spans.append((begin, end))
        last = end
    return spans


def param_pack_split(inp: Tensor, offsets: Sequence[int],
                     shapes: Sequence[Sequence[int]]) -> list[Tensor]:
    """The tensors packed in the flat `inp`: tensor i is inp[begin_i:end_i] in shape
    `shapes[i]` (a scalar's shape () reads as (1,), as in MegEngine)."""
    shapes = [tuple(s) or (1,) for s in shapes]
    flat = inp.flatten()
    spans = _spans("param_pack_split", offsets, [math.prod(s) for s in shapes])
    if spans and spans[-1][1] > flat.shape[0]:
        raise ValueError(f"param_pack_split: offsets reach {spans[-1][1]}, the input has "
                         f"{flat.shape[0]} elements")
    return [flat[begin:end].reshape(shape) for (begin, end), shape in zip(spans, shapes)]


def param_pack_concat(inps: Sequence[Tensor], offsets: Tensor,
                      offsets_val: Sequence[int]) -> Tensor:
    """One flat tensor of `offsets_val[-1]` elements holding each input, flattened, at
    [begin_i, end_i); elements between spans (alignment gaps) are zero. `offsets` (the
    same offsets as a tensor, which MegEngine's opr reads on the device) is not needed
    to compute it."""
    pieces, at = [], 0
    for t, (begin, end) in zip(inps, _spans("param_pack_concat", offsets_val,
                                            [t.size for t in inps])):
        if begin > at:
            pieces.append(F.zeros((begin - at,), dtype=t.dtype))
        pieces.append(t.flatten())
        at = end
    return F.concat(pieces) if len(pieces) > 1 else pieces[0]


def get_device_count_by_fork(device_type: str) -> int:
    """Deprecated since MegEngine 1.5 (megengine.device.get_device_count); MegEngine's
    model scripts still call it to count GPUs."""
    return get_device_count(device_type)
