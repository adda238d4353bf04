"""Reading MegEngine 1.13's MultiHeadAttn opr (how it dumps M.MultiHeadAttention and
F.nn.multi_head_attention) as the `multi_head_attn` op (ops/attention.py), which
computes what MegEngine's CPU kernel does (tests/modelfile/test_mha_dump.py). Masks,
bias_kv, zero attention, the residual link, the attention weights as an output
(need_weights) and dropout in training are refused.
"""
from __future__ import annotations

from megtrace.errors import FormatError, UnsupportedModelError
from megtrace.ops import get
from megtrace.ops.attention import MULTI_HEAD_ATTN

from .to_graph import rule

_REFUSED = {"tensor_combination_type": "NONE", "attn_mask_type": "NO_MASK",
            "add_zero_attn": False, "reslink": False, "input_order": 0,
            "need_weights": False}


@rule("MultiHeadAttn")
def _mha(g, opr, ins, _shapes):
    f = opr.params[0][1] if opr.params else {}
    for name, ok in _REFUSED.items():
        if f.get(name, ok) != ok:
            raise UnsupportedModelError(f"MultiHeadAttn: {name}={f[name]!r} is not supported "
                                        f"(megtrace reads {name}={ok!r})")
    if f.get("training") and (f.get("attn_prob") or f.get("out_prob")):
        raise UnsupportedModelError("MultiHeadAttn: dropout in training mode is not supported")
    if any(not f.get(f"{p}proj_size") for p in "qkvo"):
        raise UnsupportedModelError("MultiHeadAttn: a projection size of 0 (no projection) "
                                    "is not supported")
    if len(ins) != 4:
        raise FormatError(f"MultiHeadAttn: expected 4 inputs, got {len(ins)}")
    (out,) = g.add_node(get("multi_head_attn"), ins, MULTI_HEAD_ATTN.decode(f),
                        name_hint=opr.name or opr.type)
    return [out] + [None] * (len(opr.outputs) - 1)
