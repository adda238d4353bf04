"""Reading MegEngine 1.13's MultiHeadAttn opr (how it dumps M.MultiHeadAttention and
F.nn.multi_head_attention) as the `multi_head_attn` op (ops/attention.py), computing what
MegEngine's CPU kernel (its proxy of matmuls, Elemwise and Softmax) does with the file
(tests/modelfile/test_mha_dump.py, tests/modelfile/test_mha_masks.py):

- a mask input (tensor_combination_type ONLY_MASK) is added to the scaled scores when
  attn_mask_type is DEFAULT_MASK (is_causal's hint) or USER_DEFINED_MASK, and ignored
  under NO_MASK, as the kernel does;
- `reslink` is ignored: MegEngine documents it as adding the query to the output, but
  its CPU kernel never does (real MegEngine's output for such a file is the plain one);
- `need_weights` (F.nn.multi_head_attention returning the attention weights) makes the
  opr's second output, the softmax, the op's second result;
- refused as MegEngine's CPU kernel refuses them: bias_k/bias_v (ONLY_BIASKV, ALL) and
  add_zero_attn (its attention-weight layout check), DEFAULT_MASK or USER_DEFINED_MASK
  with no mask input (it adds an absent mask); refused by megtrace: cuDNN-style masks,
  dropout in training mode;
- a projection size of 0 (no projection) leaves that input whole for every head, as the
  kernel does.
"""
from __future__ import annotations

from megtrace.errors import FormatError, UnsupportedModelError
from megtrace.ops import get
from megtrace.ops.attention import MASK_TYPES, MULTI_HEAD_ATTN

from .to_graph import rule


def _cpu_refuses(f: dict, ins) -> str:
    """MegEngine 1.13's CPU kernel on bias_kv and zero attention: its check_exec's message
    (attn_add counts the keys they would add, which its proxy never adds)."""
    add = int(f.get("tensor_combination_type") in ("ONLY_BIASKV", "ALL")) + \
        int(bool(f.get("add_zero_attn")))
    n, length = ins[0].type.shape[:2]
    rows, source = n * f.get("num_heads", 1), ins[1].type.shape[1]
    return (f"MegEngine 1.13's CPU kernel refuses it too ('attn_weight.shape should be "
            f"[{rows}, {length}, {source + add}](attn_add={add}), but got "
            f"[{rows}, {length}, {source}]')")


def _refusal(f: dict, ins) -> str | None:
    combination = f.get("tensor_combination_type", "NONE")
    mask_type = f.get("attn_mask_type", "NO_MASK")
    if combination in ("ONLY_BIASKV", "ALL"):
        return f"bias_k/bias_v (tensor_combination_type={combination}) are not " \
               f"supported: {_cpu_refuses(f, ins)}"
    if f.get("add_zero_attn"):
        return f"add_zero_attn=True is not supported: {_cpu_refuses(f, ins)}"
    if mask_type == "CUDNN_STYLE_MASK":
        return "attn_mask_type=CUDNN_STYLE_MASK (maybe_cudnn_style_mask) describes cuDNN's " \
               "sequence windows; megtrace does not read it"
    if mask_type in MASK_TYPES and combination != "ONLY_MASK":
        return f"attn_mask_type={mask_type} without a mask input (is_causal without " \
               "attn_mask) is not supported: MegEngine 1.13's CPU kernel adds the absent " \
               "mask and fails (assertion `dtype == i->dtype')"
    if f.get("input_order", 0) != 0:
        return f"input_order={f['input_order']!r} is not supported (megtrace reads 0)"
    if f.get("training") and (f.get("attn_prob") or f.get("out_prob")):
        return "dropout in training mode is not supported"
    want = 5 if combination == "ONLY_MASK" else 4
    if len(ins) != want:
        raise FormatError(f"MultiHeadAttn: tensor_combination_type={combination} takes "
                          f"{want} inputs, got {len(ins)}")
    return None


@rule("MultiHeadAttn")
def _mha(g, opr, ins, _shapes):
    f = opr.params[0][1] if opr.params else {}
    if len(ins) < 4:
        raise FormatError(f"MultiHeadAttn: expected at least 4 inputs, got {len(ins)}")
    refused = _refusal(f, ins)
    if refused:
        raise UnsupportedModelError(f"MultiHeadAttn: {refused}")
    params = MULTI_HEAD_ATTN.decode(f)
    if params["attn_mask_type"] not in MASK_TYPES:     # a mask under NO_MASK: not added
        ins, params["attn_mask_type"] = ins[:4], "NO_MASK"
    outs = list(g.add_node(get("multi_head_attn"), ins, params,
                           name_hint=opr.name or opr.type))
    return outs + [None] * (len(opr.outputs) - len(outs))
