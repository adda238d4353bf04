"""optimize_for_inference the way megtrace is built: the graph goes to Relax, TVM's passes
optimize it (BatchNorm folded into every kind of convolution by fold_conv_bn.py first,
constants folded, common
subexpressions and dead code removed), and the optimized Relax comes back as a megtrace
graph (lift.py) with MegEngine's fused Elemwise modes, ready for the .mge writer.

Options mirror MegEngine's optimize_for_inference kwargs; `optimize_options` is the
Metadata bit set MegEngine stores (bit 0: f16_io_f32_comp, 1: f16_io_comp, 2:
fuse_conv_bias_nonlinearity, 6: fuse_grain).
"""
from __future__ import annotations

import numpy as np

from megtrace.errors import MegtraceError
from megtrace.ir import Graph
from megtrace.ops import get

from ._tvm import relax, tvm
from .float16 import convert_f32_to_f16
from .fold_conv_bn import fold_batchnorm_into_conv
from .lift import lift
from .lower import emit_node, to_relax
from .nchwxx import convert_to_nchwxx
from .nhwcd4 import convert_to_nhwcd4
from .padding_channel import pad_channels
from .param_redistribute import redistribute_params
from .preprocess import fuse_warp_typecvt
from .shape_cut import split as split_shape_arithmetic

F16_IO_F32_COMP = 1 << 0
F16_IO_COMP = 1 << 1
FUSE_CONV_BIAS_NONLINEARITY = 1 << 2
FUSE_CONV_BIAS_WITH_Z = 1 << 3
FUSE_PREPROCESS = 1 << 5
FUSE_GRAIN = 1 << 6
# MegEngine's GraphCommonOptimizeOptions::LayoutTransform, stored in bits 32..63
LAYOUTS = {"nchw4": 1, "nhwcd4": 2, "nchw88": 3, "nchw44": 4, "nchw44_dot": 5, "nchw32": 6,
           "chwn4": 7, "nchw64": 8}
# Layouts whose MegEngine passes re-lay-out only quantized (int8/int4) convolutions: a
# float graph gets their conv-bias fusion and nothing else (as MegEngine 1.13's own
# dumps of float models show).
QUANTIZED_ONLY_LAYOUTS = ("nchw4", "nchw32", "chwn4", "nchw64")


class _Named:
    """A BlockBuilder whose emits carry one name (so names survive the round trip)."""

    def __init__(self, bb, name: str):
        self.bb, self.name = bb, name

    def emit(self, expr):
        return self.bb.emit(expr, name_hint=self.name)

    def normalize(self, expr):     # lowerings type intermediates through LowerContext
        return self.bb.normalize(expr)


def to_relax_for_inference(graph: Graph, kept: dict | None = None) -> tuple:
    """Like lower.to_relax, but BatchNorm as R.nn.batch_norm so TVM can fold it; also
    returns Relax variable name -> node name. A node TVM's passes may rewrite only if
    its lowering lifts back as the same single op (`_lifts_as_itself`); every other
    node -- `opaque_in_optimize` ops, ops lowered to several Relax ops (hswish, log1p:
    lifted they would be written as several oprs instead of one), ops lift.py has no
    converter for -- becomes an opaque call named by its key in `kept`, which lift turns
    back into the node. Nodes of constants only are computed here (eagerly)."""
    rx = relax()
    bb = rx.BlockBuilder()
    names: dict[str, str] = {}
    kept = {} if kept is None else kept
    params = [rx.Var(f"in{i}", rx.TensorType(v.type.shape, v.type.dtype))
              for i, v in enumerate(graph.inputs)]
    env = dict(zip(graph.inputs, params))
    consts = dict(graph.consts)
    bn = get("batch_norm")
    probes: dict = {}
    with bb.function("main", params):
        with bb.dataflow():
            for var, value in graph.consts.items():
                env[var] = rx.const(value, var.type.dtype)
            for node in graph.nodes:
                args = [env[v] for v in node.inputs]
                if node.inputs and all(v in consts for v in node.inputs) and \
                        not node.op.opaque_in_optimize:
                    values = node.op.run_eager([consts[v] for v in node.inputs],
                                               dict(node.kwargs))
                    for var, value in zip(node.outputs, values):
                        consts[var] = np.asarray(value, var.type.dtype)
                        env[var] = rx.const(consts[var], var.type.dtype)
                elif node.op is bn and all(v in graph.consts for v in node.inputs[1:]):
                    x, w, b, m, v = node.inputs
                    flat = [rx.const(graph.consts[t].reshape(-1), t.type.dtype) for t in (w, b, m, v)]
                    out = bb.emit(rx.op.nn.batch_norm(args[0], *flat, axis=1,
                                                      epsilon=node.kwargs["eps"],
                                                      training=False))
                    env[node.outputs[0]] = bb.emit(rx.TupleGetItem(out, 0))
                else:
                    name = f"n{len(names)}"
                    names[name] = node.outputs[0].name_hint
                    if node.op.opaque_in_optimize or not _lifts_as_itself(node, consts, probes):
                        outs = _emit_opaque(bb, name, node, args, kept)
                    else:
                        outs = emit_node(_Named(bb, name), node, args)
                    env.update(zip(node.outputs, outs))
            out = bb.emit_output(rx.Tuple([env[v] for v in graph.outputs]))
        bb.emit_func_output(out)
    return bb.get(), names


def _lifts_as_itself(node, consts: dict, cache: dict) -> bool:
    """Whether the node, lowered alone and lifted straight back, is one node of its own
    op (besides nodes of constants only, which fold away): then TVM's passes may see
    its Relax form without making the written graph bigger."""
    const_in = tuple(v in consts for v in node.inputs)
    key = (node.op.name, tuple(str(v.type) for v in node.inputs), const_in,
           repr(sorted(node.kwargs.items())))
    if key not in cache:
        cache[key] = _probe(node, const_in)
    return cache[key]


def _probe(node, const_in: tuple[bool, ...]) -> bool:
    g = Graph()
    ins = [g.add_const(np.zeros(v.type.shape, v.type.dtype)) if c else
           g.add_input(v.type, f"x{i}") for i, (v, c) in enumerate(zip(node.inputs, const_in))]
    outs = g.add_node(node.op, ins, dict(node.kwargs))
    out_names = [f"y{i}" for i in range(len(outs))]
    g.set_outputs(outs, out_names)
    try:
        lifted = lift(to_relax(g), list(g.input_names), out_names)
    except (MegtraceError, KeyError, TypeError, AttributeError):
        return False
    known = set(lifted.consts)
    live = []
    for n in lifted.nodes:
        if all(v in known for v in n.inputs):
            known.update(n.outputs)
        else:
            live.append(n)
    return len(live) == 1 and live[0].op is node.op


def _emit_opaque(bb, name: str, node, args: list, kept: dict) -> list:
    """The node as a pure packed call TVM's passes move around but never look into."""
    rx = relax()
    key = f"megtrace.kept.{len(kept)}"
    kept[key] = node
    types = [rx.TensorType(v.type.shape, v.type.dtype) for v in node.outputs]
    call = rx.op.call_pure_packed(key, *args, ty_args=types[0] if len(types) == 1 else
                                  rx.TupleType(types))
    out = bb.emit(call, name_hint=name)
    if len(types) == 1:
        return [out]
    return [bb.emit(rx.TupleGetItem(out, i)) for i in range(len(types))]


def _bias_before_bn(mod):
    """bn(conv(x) + b) -> bn(conv(x)) + b * scale, so FoldBatchnormToConv2D applies."""
    rx = relax()
    from tvm.relax.dpl import is_const, is_op, is_tuple_get_item, wildcard
    conv = is_op("relax.nn.conv2d")(wildcard(), is_const())
    bias = is_const()
    gamma, beta, mean, var = is_const(), is_const(), is_const(), is_const()
    bn = is_op("relax.nn.batch_norm")(is_op("relax.add")(conv, bias), gamma, beta, mean, var)
    pattern = is_tuple_get_item(bn, 0)

    def rewrite(expr, m):
        call = m[bn]
        eps = float(call.attrs.epsilon)
        g_, v_ = m[gamma].value.numpy(), m[var].value.numpy()
        scale = (g_ / np.sqrt(v_.astype(np.float64) + eps)).astype(g_.dtype)
        b = m[bias].value.numpy()
        shifted = rx.const((b * scale.reshape(1, -1, 1, 1)).astype(b.dtype))
        folded = rx.op.nn.batch_norm(m[conv], m[gamma], m[beta], m[mean], m[var],
                                     axis=int(call.attrs.axis), epsilon=eps, training=False)
        return rx.op.add(rx.TupleGetItem(folded, 0), shifted)

    from tvm.relax.dpl import rewrite_call
    return tvm().IRModule({"main": rewrite_call(pattern, rewrite, mod["main"])})


def _arith_fusion(g: Graph, fuse_conv_bias: bool) -> Graph:
    """MegEngine's arithmetic fusion on the lifted graph: add+relu -> FUSE_ADD_RELU,
    mul+add -> FUSE_MUL_ADD3, and (with fuse_conv_bias) conv+bias[+relu] -> ConvBias, a
    conv plus a tensor of its output's shape (a residual) -> ConvBias with that bias."""
    users, producer, outputs = g.users(), g.producers(), set(g.outputs)
    relu, add, mul, conv = get("relu"), get("add"), get("mul"), get("conv2d")

    def single_use(v):
        return len(users.get(v, [])) == 1 and v not in outputs

    def conv_with_tensor_bias(node):
        """(conv node, bias var) for add(conv(x), t) with t a tensor of the output's shape,
        MegEngine's ConvBias with a full bias (a residual)."""
        if node.op is not add or node.inputs[0] in g.consts or node.inputs[1] in g.consts:
            return None
        for mine, other in ((0, 1), (1, 0)):
            base = producer.get(node.inputs[mine])
            if base is not None and base.op is conv and single_use(node.inputs[mine]) and \
                    node.inputs[other].type.shape == node.outputs[0].type.shape:
                return base, node.inputs[other]
        return None

    def rule(node, ins, new, remap):
        def mapped(vs):
            return [remap.get(v, v) for v in vs]
        residual = conv_with_tensor_bias(node) if fuse_conv_bias else None
        if residual is not None:
            base, bias = residual
            return new.add_node(get("conv_bias"), mapped(list(base.inputs) + [bias]),
                                {**base.kwargs, "nonline": "IDENTITY"},
                                node.outputs[0].name_hint)
        first = producer.get(node.inputs[0]) if node.inputs else None
        if first is None or not single_use(node.inputs[0]):
            return None
        if node.op is relu and first.op is add:
            base = producer.get(first.inputs[0])
            if fuse_conv_bias and base is not None and base.op is conv and \
                    single_use(first.inputs[0]) and first.inputs[1] in g.consts:
                op, args = get("conv_bias"), mapped(base.inputs) + mapped(first.inputs[1:2])
                params = {**base.kwargs, "nonline": "RELU"}
            else:
                op, args, params = get("fuse_add_relu"), mapped(first.inputs), {}
        elif fuse_conv_bias and node.op is add and first.op is conv and \
                node.inputs[1] in g.consts and \
                g.consts[node.inputs[1]].shape == (1, node.outputs[0].type.shape[1], 1, 1):
            op, args = get("conv_bias"), mapped(first.inputs) + [ins[1]]
            params = {**first.kwargs, "nonline": "IDENTITY"}
        elif node.op is add and first.op is mul and \
                node.inputs[1].type.shape in [v.type.shape for v in first.inputs]:
            # MegEngine's ArithFusePass: the bias term has the shape of a factor
            op, args, params = get("fuse_mul_add3"), mapped(first.inputs) + [ins[1]], {}
        else:
            return None
        return new.add_node(op, args, params, node.outputs[0].name_hint)

    return g.rewrite(rule)


def _fold_global_pooling(g: Graph) -> Graph:
    """fuse_grain: a mean over H and W of an NCHW tensor is global average pooling."""
    reduce = get("reduce")

    def rule(node, ins, new, remap):
        p = node.kwargs
        if node.op is not reduce or p["mode"] != "mean" or node.inputs[0].type.ndim != 4 or \
                p["axis"] not in ((2, 3), (-2, -1)):
            return None
        (out,) = new.add_node(get("adaptive_pool2d"), ins, {"mode": "average", "out": (1, 1)},
                              node.outputs[0].name_hint)
        if not p["keepdims"]:
            (out,) = new.add_node(get("squeeze"), [out], {"axis": (2, 3)})
        return (out,)

    return g.rewrite(rule)


def optimize_for_inference(graph: Graph, *, fuse_conv_bias_nonlinearity: bool = False,
                           fuse_grain: bool = True, f16_io_f32_comp: bool = False,
                           f16_io_comp: bool = False, fuse_conv_bias_with_z: bool = False,
                           fuse_preprocess: bool = False,
                           layout: str | None = None) -> tuple[Graph, int]:
    """The optimized graph and its MegEngine optimize_options bits. Float16 (f16_io_*)
    comes after the fusions, as in MegEngine; with both float16 options MegEngine's
    second pass leaves float32 compute (io16xc32) in place. A layout (a LAYOUTS key)
    brings MegEngine's conv-bias fusion with it and is applied last; so does
    fuse_conv_bias_with_z (whose z fusion MegEngine's CPU passes leave out for float
    graphs). fuse_preprocess fuses a uint8 WarpPerspective with the TypeCvt to float32
    after it (preprocess.py); on other graphs it is the Metadata bit alone, as in
    MegEngine."""
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"optimize_for_inference: layout must be one of {sorted(LAYOUTS)}; "
                         f"got {layout!r}")
    if any(v.type.quant is not None for n in graph.nodes for v in n.outputs):
        # MegEngine's quantized dtypes: written as traced (TVM's float passes do not know
        # them; MegEngine's own optimize_for_inference leaves such a graph's oprs as they
        # are: tests/data/make_megengine_quantized_dumps.py)
        return graph, 0
    bias_fusion = fuse_conv_bias_nonlinearity or fuse_conv_bias_with_z or layout is not None
    t = tvm()
    rx = relax()
    graph, shape_cut = split_shape_arithmetic(fold_batchnorm_into_conv(graph))
    kept: dict = {}
    mod, names = to_relax_for_inference(graph, kept)
    mod = _bias_before_bn(mod)
    passes = t.transform.Sequential([
        rx.transform.FoldBatchnormToConv2D(), rx.transform.DecomposeOpsForInference(),
        rx.transform.FoldConstant(), rx.transform.CanonicalizeBindings(),
        rx.transform.EliminateCommonSubexpr(), rx.transform.FoldConstant(),
        rx.transform.DeadCodeElimination()])
    with t.transform.PassContext(opt_level=3):
        mod = passes(mod)
    lifted = lift(mod, list(graph.input_names), list(graph.output_names), names, kept)
    fused = _arith_fusion(redistribute_params(lifted), bias_fusion)
    if fuse_grain:
        fused = _fold_global_pooling(fused)
    if shape_cut is not None:
        fused = shape_cut.stitch(fused)
    if fuse_preprocess:
        fused = fuse_warp_typecvt(fused)
    if f16_io_f32_comp or f16_io_comp:
        fused = convert_f32_to_f16(fused, f32_compute=f16_io_f32_comp)
    if layout in ("nchw88", "nchw44", "nchw44_dot"):
        pack = 8 if layout == "nchw88" else 4
        fused = convert_to_nchwxx(pad_channels(fused, pack), pack)
    elif layout == "nhwcd4":
        fused = convert_to_nhwcd4(fused)     # (MegEngine's PaddingChannelPass pads nothing)
    elif layout == "nchw64":
        _check_nchw64(fused)
    options = (FUSE_CONV_BIAS_NONLINEARITY if fuse_conv_bias_nonlinearity else 0) | \
        (FUSE_GRAIN if fuse_grain else 0) | (F16_IO_F32_COMP if f16_io_f32_comp else 0) | \
        (F16_IO_COMP if f16_io_comp else 0) | \
        (FUSE_CONV_BIAS_WITH_Z if fuse_conv_bias_with_z else 0) | \
        (FUSE_PREPROCESS if fuse_preprocess else 0) | (LAYOUTS[layout] << 32 if layout else 0)
    return fused, options


def _check_nchw64(g: Graph) -> None:
    """MegEngine's PaddingChannelPass for NCHW64 refuses grouped convolutions."""
    for node in g.nodes:
        if node.op.name in ("conv2d", "conv_bias") and node.inputs[1].type.ndim == 5:
            raise NotImplementedError(
                f"enable_nchw64: {node.outputs[0].name_hint or node.op.name}: nchw64 format "
                "only support padding channel in dense convolution (MegEngine 1.13)")
