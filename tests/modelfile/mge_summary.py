"""What a .mge file holds, summarized as tests/data/make_megengine_optimize_options.py
summarizes real MegEngine's dumps: per opr a signature "Type key=value ...", with MegEngine's
graph-side type names (ConvolutionForward, MatrixMul, TypeCvt, ...), the params that
optimize_for_inference options change, and the dtype where the file itself states it
(constants, TypeCvt's target)."""
from __future__ import annotations

import collections
import re

from megtrace.fbs.reader import read_model

PARAMS = ("format", "compute_mode", "data_type", "nonlineMode", "mode")
# serialized type -> the name MegEngine's Network gives the opr
GRAPH_NAMES = {"Convolution": "ConvolutionForward", "ConvolutionV2": "ConvolutionForward",
               "ConvBiasForwardV4": "ConvBiasForward", "Pooling": "PoolingForward",
               "AdaptivePooling": "AdaptivePoolingForward", "Resize": "ResizeForward", "MultipleDeviceTensorHolder":
               "ImmutableTensor", "SharedDeviceTensor": "ImmutableTensor"}
REDUCE_DATA_TYPES = {0: "DEFAULT", 1: "FLOAT_IO16xC32", 2: "FLOAT_O32xC32", 3: "FLOAT_O16xC32"}


def graph_name(serialized: str) -> str:
    name = GRAPH_NAMES.get(serialized, serialized)
    return GRAPH_NAMES.get(re.sub(r"V\d+$", "", name), re.sub(r"V\d+$", "", name))


def signature(opr) -> str:
    fields = {}
    for _, table in opr.params:
        fields.update(table)
    name = graph_name(opr.type)
    if "data_type" in fields and name == "Reduce":
        fields["data_type"] = REDUCE_DATA_TYPES.get(fields["data_type"], fields["data_type"])
    shown = " ".join(f"{k}={fields[k]}" for k in PARAMS if k in fields)
    out = ""
    if opr.tensors:
        out = " -> " + ",".join(t.dtype for t in opr.tensors)
    elif name == "TypeCvt":
        out = " -> " + str(fields.get("type", "?")).lower()
    return f"{name} {shown}".strip() + out


def counts(data: bytes) -> collections.Counter:
    return collections.Counter(signature(o) for o in read_model(data).oprs)


def golden_counts(entry: dict) -> collections.Counter:
    """Real MegEngine's counts with the dtype kept only where the file states it."""
    out: collections.Counter = collections.Counter()
    for sig, n in entry["counts"].items():
        head, _, dtype = sig.partition(" -> ")
        name = head.split(" ")[0]
        keep = name in ("ImmutableTensor", "TypeCvt", "Host2DeviceCopy")
        head = re.sub(r" mode=\w+", lambda m: m.group(0).replace("MAX", "MAX_"), head)
        out[head + (" -> " + dtype if keep else "")] += n
    return out
