"""MegEngine's strip-info JSON (`get_info_for_strip`): which dtypes, Elemwise modes and
operator classes a dump asked for, before compatibility rewrites."""
from __future__ import annotations

import re

# C++ class names MegEngine reports in strip-info JSON, where they differ from the
# serialized type with its version suffix removed.
_CLASS_NAMES = {"Convolution": "ConvolutionForward", "PoolingV1": "PoolingForward",
                "AdaptivePoolingV1": "AdaptivePoolingForward", "BatchNormV1": "BatchNormForward",
                "Softmax": "SoftmaxForward", "LayerNorm": "LayerNormForward",
                "ConvBiasForward": "ConvBiasForward", "ResizeV2": "ResizeForward"}
_DTYPE_NAMES = {"float32": "Float32", "float16": "Float16", "int32": "Int32", "int8": "Int8",
                "uint8": "Uint8", "int16": "Int16", "bool": "Bool", "uint16": "Uint16"}


def strip_info(em) -> dict:
    """MegEngine's `get_info_for_strip` JSON for what was asked to be written."""
    types = {_CLASS_NAMES.get(t, re.sub(r"V\d$", "", t)) for t in em.requested_types}
    return {"dtypes": sorted({d.name if hasattr(d, "scale") else _DTYPE_NAMES[d]
                              for d in em.dtypes.values()}),
            "elemwise_modes": sorted(m.rstrip("_") for m in em.requested_modes),
            "opr_types": sorted(types)}


