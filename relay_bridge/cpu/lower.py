"""megtrace Graph -> Relax IRModule for llvm targets, with the CPU rules and NCHW16c.

Each value may exist in two forms: plain (the graph's own layout) and blocked
(NCHW16c). Conv and depthwise groups produce blocked values; pooling, global reductions
and elementwise ops on blocked values stay blocked; every other op gets the plain form,
and an unpack is emitted once per value the first time a plain consumer asks for it
(and a pack when a blocked consumer meets a plain value). So a chain of convs,
elementwise ops and pools converts layout only at its ends.

A rule that cannot build its kernel falls back to the op's own Relax lowering (the
default path) for that group; the reason is logged.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from megtrace.errors import UnsupportedOpError
from megtrace.ir import Graph, Node, TensorType, Var

from .._tvm import relax, tvm
from ..lower import _safe_names, emit_node
from . import layout as L
from .conv import ConvShape, conv2d_nchwc, flattened
from .dense import DenseShape, dense_packed
from .depthwise import DepthwiseShape, depthwise_nchwc
from .matmul import MatmulShape, batch_matmul
from .epilogue import Epilogue, blocked_output
from .plan import F32, AttentionMatch, Group, elementwise_steps, find_attention, find_groups
from .pointwise_depthwise import PairShape, applies as pair_applies, expand_depthwise
from .pool import POOL_MODES, REDUCE_MODES, pool_nchwc, spatial_reduce_nchwc
from .pool_grad import MaxPoolGrad, find_max_pool_grads, max_pool_grad_nchwc
from .primfunc import plain_func, vector_lanes
from . import amx as amx_rule, amx_conv, attention as att, huge_pages, winograd
from .views import trace_view

log = logging.getLogger(__name__)


class NotApplicable(Exception):
    """A rule declines a node it could compute, because the default path is faster."""


def to_relax_cpu(graph: Graph, func_name: str = "main", amx: bool = False,
                 on_kernel: Callable[[str, Any], None] | None = None
                 ) -> tuple[Any, list[str]]:
    """The IRModule, and the names of the rules used (one entry per kernel); `amx`: the
    target may use AMX tiles (dense GEMMs then take amx.py's rule); `on_kernel(name,
    func)`: told of each TIR function as it is added (early_build.py builds the rules'
    kernels while the lowering goes on)."""
    missing = sorted({n.op.name for n in graph.nodes if n.op.lower is None})
    if missing:
        raise UnsupportedOpError(f"to_relax: no Relax lowering for {', '.join(missing)}")
    return _CpuLowering(graph, amx, on_kernel).build(func_name)


def _tap_window(node: Node, graph: Graph, users: dict) -> tuple[Var, tuple[int, int]] | None:
    """(whole weight, tap offset) when `node` slices a runtime float32 4-D value along its
    two spatial axes only, with step 1, and only the conv2d's (weight operand) read it."""
    if node.op.name != "subtensor" or len(node.inputs) != 1:
        return None
    src, out = node.inputs[0], node.outputs[0]
    if src in graph.consts or src.type.ndim != 4 or src.type.dtype != "float32":
        return None
    offset = [0, 0]
    for axis, begin, end, step, idx in node.kwargs["index"]:
        if axis not in (2, 3) or idx is not None or step not in (None, 1) or \
                (begin is not None and begin < 0) or (end is not None and end < 0):
            return None
        offset[axis - 2] = begin or 0
    readers = users.get(out, [])
    if not readers or out in graph.outputs or any(
            r.op.name != "conv2d" or r.inputs[1] is not out or r.inputs[0] is out
            for r in readers):
        return None
    return src, (offset[0], offset[1])


class _CpuLowering:
    def __init__(self, graph: Graph, amx: bool = False,
                 on_kernel: Callable[[str, Any], None] | None = None):
        self.graph = graph
        self.amx = amx
        self.on_kernel = on_kernel
        self.rx = relax()
        self.bb = self.rx.BlockBuilder()
        self.plain: dict[Var, Any] = {}
        self.blocked: dict[Var, Any] = {}
        self.packed: dict[tuple[Var, int], Any] = {}      # runtime conv weights, packed
        self.used: list[str] = []
        self.weights = huge_pages.Filler()   # huge-page weights, copied on a worker
        # scheduled kernels by what makes them differ: a network repeats layers of one
        # shape (ResNet-18: 20 convolutions, 15 kernels), each made and scheduled once
        self.kernels: dict[tuple, Any] = {}
        self.consts: dict[tuple, Any] = {}
        groups = find_groups(graph)
        self.group_at = {g.nodes[-1]: g for g in groups}
        self.absorbed = {n for g in groups for n in g.nodes[:-1]}
        self.anchored = {g.anchor: g for g in groups}
        # max-pool VJPs (nodes not in any group): computed at their last node
        self.pool_grad_at: dict[Node, MaxPoolGrad] = {}
        for m in find_max_pool_grads(graph):
            if not any(n in self.absorbed or n in self.group_at for n in m.nodes):
                self.pool_grad_at[m.nodes[-1]] = m
                self.absorbed.update(m.nodes[:-1])
        self.users = graph.users()
        # runtime conv weights that are a tap window of another weight (one output
        # position's conv: dead_taps.split_positions): the conv reads the whole weight,
        # packed once, at an offset, and the window is never made
        # (only when the windows of a weight hold more taps than it: one dead-tap crop's
        # window, the centre tap of a 3x3 weight, is cheaper packed alone)
        self.tap_windows: dict[Var, tuple[Var, tuple[int, int]]] = {}
        windows: dict[Var, list[tuple[Node, tuple]]] = {}
        for node in graph.nodes:
            window = _tap_window(node, graph, self.users)
            if window is not None:
                windows.setdefault(window[0], []).append((node, window))
        for whole, found in windows.items():
            if sum(n.outputs[0].type.size for n, _ in found) < whole.type.size:
                continue
            for node, window in found:
                self.tap_windows[node.outputs[0]] = window
                self.absorbed.add(node)
        self.fused: set[Node] = set()        # groups computed inside an earlier kernel
        # scores group -> (match, shape, bases, kernel, heads transpose) of a fused attention
        self.attention: dict[Group, tuple[AttentionMatch, att.AttentionShape, list[Var],
                                          Any, Node | None]] = {}
        self._plan_attention(groups)

    # -- driver -------------------------------------------------------------------------
    def build(self, func_name: str):
        rx, g = self.rx, self.graph
        params = [rx.Var(name, rx.TensorType(v.type.shape, v.type.dtype))
                  for v, name in zip(g.inputs, _safe_names(g.input_names))]
        self.plain.update(zip(g.inputs, params))
        try:
            with self.bb.function(func_name, params):
                with self.bb.dataflow():
                    for node in g.nodes:
                        if node in self.absorbed:
                            continue
                        self._visit(node)
                    out = self.bb.emit_output(rx.Tuple([self.get_plain(v)
                                                        for v in g.outputs]))
                self.bb.emit_func_output(out)
        finally:
            self.weights.wait()        # the module's constants are read after this
        return self.bb.get(), self.used

    def _visit(self, node: Node) -> None:
        if node in self.fused:
            return
        grad = self.pool_grad_at.get(node)
        if grad is not None:
            if not self._try("max_pool_grad_nchw16c", lambda: self._max_pool_grad(grad)):
                for n in grad.nodes:
                    self._default(n)
            return
        group = self.group_at.get(node)
        if group in self.attention:
            self._attention(group)
            return
        if group is not None:
            pair = self._depthwise_after(group)
            if pair is not None and self._try("expand_depthwise",
                                              lambda: self._expand_depthwise(group, pair)):
                return
            if self._try(group.kind, lambda: self._group(group)):
                return
            for n in group.nodes:
                self._default(n)
            return
        for kind, applies, emit in self._blocked_ops:
            if applies(self, node) and self._try(kind, lambda e=emit: e(self, node)):
                return
        self._default(node)

    def _try(self, kind: str, emit: Callable[[], None]) -> bool:
        try:
            emit()
        except NotApplicable:
            return False
        except Exception as e:          # fall back to the default path, never guess
            first = (str(e).strip().splitlines() or [""])[0]   # ScheduleErrors carry the IR
            log.warning("CPU rule %s not applied (%s: %s); using the default path",
                        kind, type(e).__name__, first)
            log.debug("CPU rule %s failure", kind, exc_info=True)
            return False
        return True

    # -- values in either layout --------------------------------------------------------
    def get_plain(self, var: Var):
        if var not in self.plain:
            if var in self.graph.consts:
                self.plain[var] = self.rx.const(self.graph.consts[var], var.type.dtype)
            elif var in self.blocked:
                c = var.type.shape[1]
                x = tvm().te.placeholder(L.i64(self._shape(self.blocked[var])), F32, name="x")
                self.plain[var] = self._call(plain_func([x, L.te_unpack(x, c)]),
                                             [self.blocked[var]], var.type.shape, "unpack")
            else:
                raise KeyError(f"value {var} is used before it is defined")
        return self.plain[var]

    def get_blocked(self, var: Var):
        if var not in self.blocked:
            t = var.type
            if t.ndim != 4 or t.dtype != F32:
                raise ValueError(f"cannot block {t}: NCHW16c needs a 4-d float32 tensor")
            if var in self.graph.consts:
                self.blocked[var] = self.rx.const(L.pack_activation(self.graph.consts[var]))
            else:
                x = tvm().te.placeholder(L.i64(t.shape), F32, name="x")
                n, c, h, w = t.shape
                self.blocked[var] = self._call(
                    plain_func([x, L.te_pack(x, c)]), [self.get_plain(var)],
                    (n, L.blocks(c), h, w, L.BLOCK), "pack")
        return self.blocked[var]

    def _shape(self, expr) -> tuple[int, ...]:
        return tuple(int(d) for d in expr.ty.shape)

    def _call(self, func, args, shape, name: str):
        gv = self.bb.add_func(func, name)
        if self.on_kernel is not None:
            self.on_kernel(gv.name_hint, func)
        ty = self.rx.TensorType(tuple(int(d) for d in shape), F32)
        return self.bb.emit(self.rx.call_tir(gv, list(args), ty))

    def _default(self, node: Node) -> None:
        args = [self.get_plain(v) for v in node.inputs]
        self.plain.update(zip(node.outputs, emit_node(self.bb, node, args)))

    # -- anchors ------------------------------------------------------------------------
    def _group(self, group: Group) -> None:
        rule = {"conv": self._conv, "depthwise": self._conv, "dense": self._dense,
                "matmul": self._matmul}[group.kind](group)
        self.used.append(rule or group.kind)

    def _conv(self, group: Group) -> str | None:
        """Emits the conv; returns "winograd" when that rule computes it."""
        node, consts = group.anchor, self.graph.consts
        x, w = node.inputs[:2]                   # conv_bias's bias is in the epilogue
        n, c, h, wd = x.type.shape
        p = node.kwargs
        kh, kw = w.type.shape[-2:]
        blocked_in = x in self.blocked
        geometry = dict(n=n, c=c, h=h, w=wd, kh=kh, kw=kw, stride=tuple(p["stride"]),
                        padding=tuple(p["padding"]), blocked_input=blocked_in)
        te, rule = tvm().te, None
        if group.kind == "conv":
            shape = ConvShape(oc=w.type.shape[0], **geometry)
            if w not in self.tap_windows and self._amx_conv(shape, w):
                rule = "conv_amx"
                func = self._kernel(amx_conv.conv2d_amx, shape, group.epilogue)
                weights = [self._const(("conv_amx", w), lambda: self.weights.constant(
                    amx_conv.pack_conv_weight(consts[w]))),
                    self._const(("amx_config",), amx_rule.tile_config)]
            elif w not in self.tap_windows and self._winograd(shape, w):
                rule, blocked_in = "winograd", True
                shape = replace(shape, blocked_input=True)
                self.get_blocked(x)          # a plain (training BatchNorm's) input: packed
                func = self._kernel(winograd.winograd_conv2d, shape, group.epilogue)
                if w in consts:
                    # weights >= 2 MB in huge pages: at batch 1 each call streams them
                    # from memory, and 4 KB pages stop the hardware prefetcher at every
                    # boundary (ResNet-18's 256-channel Winograd convs 4.1 -> 3.2 ms)
                    weights = [self._const(("winograd", w), lambda: self.weights.constant(
                        winograd.transform_weight(consts[w])))]
                else:
                    weights = [self._winograd_weight(w, shape)]
            elif w in consts:
                weights = [self._const(("conv", w, shape.icb), lambda: self.weights.constant(
                    L.pack_conv_weight(consts[w], shape.icb)))]
                flat = flattened(shape, vector_lanes())
                if flat is not None:
                    self._flat_conv(group, flat, shape, weights)
                    return None
                func = self._kernel(conv2d_nchwc, shape, group.epilogue)
            elif w in self.tap_windows:
                whole, offset = self.tap_windows[w]
                shape = replace(shape, taps=tuple(whole.type.shape[2:]), tap_offset=offset)
                func = self._kernel(conv2d_nchwc, shape, group.epilogue)
                weights = [self._packed_weight(whole, shape)]
            else:
                func = self._kernel(conv2d_nchwc, shape, group.epilogue)
                weights = [self._packed_weight(w, shape)]
        else:
            if not blocked_in:      # a lone NCHW depthwise: TVM's own loop is faster
                raise NotApplicable("depthwise input is not NCHW16c")
            shape = DepthwiseShape(oc=c, **geometry)
            func = self._kernel(depthwise_nchwc, shape, group.epilogue)
            if w in consts:
                weights = [self._const(("depthwise", w),
                                       lambda: L.pack_depthwise_weight(consts[w]))]
            else:
                wp = te.placeholder(L.i64(w.type.shape), F32, name="w")
                weights = [self._call(plain_func([wp, L.te_pack_depthwise_weight(wp)]),
                                      [self.get_plain(w)], shape.weight_shape, "pack_weight")]
        xin = self.blocked[x] if blocked_in else self.get_plain(x)
        args = [xin, *weights, *self._epilogue_args(group.epilogue, blocked=True)]
        self.blocked[group.out] = self._call(func, args, shape.out_shape, rule or group.kind)
        return rule

    def _flat_conv(self, group: Group, flat: ConvShape, shape: ConvShape, weights: list
                   ) -> None:
        """The 1x1 conv `shape` computed as `flat` (conv.flattened): its input and
        epilogue tensors reshaped to one row of pixels, its output back to the map."""
        rx, x = self.rx, group.anchor.inputs[0]
        func = self._kernel(conv2d_nchwc, flat, group.epilogue)
        epilogue = self._epilogue_args(group.epilogue, blocked=True)
        vectors = len(group.epilogue.vectors())
        xin = self.blocked[x] if shape.blocked_input else self.get_plain(x)
        args = [self.bb.emit(rx.op.reshape(xin, flat.in_shape)),
                *weights, *epilogue[:vectors],
                *(self.bb.emit(rx.op.reshape(t, flat.out_shape)) for t in epilogue[vectors:])]
        out = self._call(func, args, flat.out_shape, group.kind)
        self.blocked[group.out] = self.bb.emit(rx.op.reshape(out, shape.out_shape))

    def _packed_weight(self, w: Var, shape: ConvShape, icb: int | None = None):
        """A runtime conv weight packed for `shape` (with `icb` input channels per block:
        default the shape's), once per weight and input block (a strided weight
        gradient's phases all take the same output gradient)."""
        icb = shape.icb if icb is None else icb
        key = (w, icb)
        if key not in self.packed:
            wp = tvm().te.placeholder(L.i64(w.type.shape), F32, name="w")
            packed = L.te_pack_conv_weight(wp, icb)
            self.packed[key] = self._call(plain_func([wp, packed]), [self.get_plain(w)],
                                          packed.shape, "pack_weight")
        return self.packed[key]

    def _winograd_weight(self, w: Var, shape: ConvShape):
        """A runtime conv weight transformed for the Winograd rule, once per weight."""
        key = (w, "winograd")
        if key not in self.packed:
            oc, ic = w.type.shape[:2]
            self.packed[key] = self._call(winograd.weight_transform_func(oc, ic),
                                          [self._packed_weight(w, shape, L.BLOCK)],
                                          winograd.WinogradShape(shape).weight_shape,
                                          "winograd_weight")
        return self.packed[key]

    def _depthwise_after(self, group: Group) -> Group | None:
        """The depthwise group a 1x1 conv group feeds alone, when the pair can be one
        expand_depthwise kernel (constant weights, no tensor operands, 3x3 pad 1)."""
        node, consts = group.anchor, self.graph.consts
        if group.kind != "conv" or group.epilogue.tensors() or group.out in self.graph.outputs:
            return None
        x, w = node.inputs[:2]
        p = node.kwargs
        if x not in self.blocked or w not in consts or w.type.shape[-2:] != (1, 1) \
                or tuple(p["stride"]) != (1, 1) or tuple(p["padding"]) != (0, 0):
            return None
        users = self.users.get(group.out, [])
        nxt = self.anchored.get(users[0]) if len(users) == 1 else None
        if nxt is None or nxt.kind != "depthwise" or nxt.epilogue.tensors():
            return None
        q, wd = nxt.anchor.kwargs, nxt.anchor.inputs[1]
        s = tuple(q["stride"])
        if wd not in consts or wd.type.shape[-2:] != (3, 3) or tuple(q["padding"]) != (1, 1) \
                or s[0] != s[1] or nxt.anchor.inputs[0] is not group.out:
            return None
        n, c, h, wdt = x.type.shape
        shape = PairShape(n, c, h, wdt, w.type.shape[0], s[0])
        return nxt if pair_applies(shape) else None

    def _expand_depthwise(self, group: Group, nxt: Group) -> None:
        x, w = group.anchor.inputs[:2]
        n, c, h, wdt = x.type.shape
        shape = PairShape(n, c, h, wdt, w.type.shape[0], int(nxt.anchor.kwargs["stride"][0]))
        key = (expand_depthwise, shape, _epilogue_key(group.epilogue),
               _epilogue_key(nxt.epilogue))
        func = self._cached_kernel(key, lambda: expand_depthwise(shape, group.epilogue,
                                                                 nxt.epilogue))
        consts, wd = self.graph.consts, nxt.anchor.inputs[1]
        args = [self.blocked[x],
                self._const(("conv", w, shape.icb),
                            lambda: L.pack_conv_weight(consts[w], shape.icb)),
                *self._epilogue_args(group.epilogue, blocked=True),
                self._const(("depthwise", wd), lambda: L.pack_depthwise_weight(consts[wd])),
                *self._epilogue_args(nxt.epilogue, blocked=True)]
        self.blocked[nxt.out] = self._call(func, args, shape.out_shape, "expand_depthwise")
        self.fused.add(nxt.nodes[-1])
        self.fused.update(nxt.nodes[:-1])
        self.used.append("expand_depthwise")

    def _plan_attention(self, groups: list[Group]) -> None:
        """Decides the fused attentions before any node is emitted: their kernels are
        built here (one that fails leaves its nodes to the other rules), and the view
        nodes (transpose, slices) only they read are never emitted."""
        if att.mode() == "off":
            return
        graph = self.graph
        producer = {v: n for n in graph.nodes for v in n.outputs}
        for match in find_attention(graph, groups):
            traced = [trace_view(x, graph, producer) for x in match.operands]
            bases: list[Var] = []
            for base, _, _ in traced:
                if base not in bases:
                    bases.append(base)
            q, k, v = (x.type.shape for x in match.operands)
            if not len(q) == len(k) == len(v) or not q[:-2] == k[:-2] == v[:-2]:
                continue                    # broadcast batch axes: the matmul rule
            shape = att.AttentionShape(
                tuple(q[:-2]), *(view for _, view, _ in traced),
                tuple(b.type.size for b in bases), *(bases.index(b) for b, _, _ in traced))
            if not att.applies(shape):
                continue
            swap = self._heads_swap(match.output.out)
            key = (att.attention, shape, _epilogue_key(match.scores.epilogue),
                   _epilogue_key(match.output.epilogue), swap is not None)
            try:
                func = self.kernels.get(key) or att.attention(
                    shape, match.scores.epilogue, match.output.epilogue, swap is not None)
            except Exception as e:      # the three-kernel path, never a guess
                log.warning("CPU rule attention not applied (%s: %s)", type(e).__name__,
                            (str(e).strip().splitlines() or [""])[0])
                continue
            self.kernels[key] = func
            self.attention[match.scores] = (match, shape, bases, func, swap)
            self.fused.update([match.softmax, *match.output.nodes, *([swap] if swap else [])])
        inside = {n for m, _, _, _, swap in self.attention.values()
                  for n in (*m.scores.nodes, m.softmax, *m.output.nodes, *([swap] if swap else []))}
        read = {b for _, _, bases, _, _ in self.attention.values() for b in bases}
        read.update(graph.outputs)
        dead: set[Node] = set()
        for n in reversed(graph.nodes):   # what only the fused kernels' views needed
            used = [u for o in n.outputs for u in self.users.get(o, [])]
            if used and n not in inside and all(u in inside or u in dead for u in used) \
                    and not any(o in read for o in n.outputs):
                dead.add(n)
        self.fused.update(dead)

    def _heads_swap(self, out: Var) -> Node | None:
        """The transpose (..., h, s, dv) -> (..., s, h, dv) that alone reads an attention's
        output (multi-head attention merging its heads): the kernel writes that order."""
        users = self.users.get(out, [])
        if len(users) != 1 or out in self.graph.outputs or out.type.ndim < 3:
            return None
        node, n = users[0], out.type.ndim
        swapped = (*range(n - 3), n - 2, n - 3, n - 1)
        if node.op.name != "transpose" or tuple(node.kwargs["pattern"]) != swapped:
            return None
        return node

    def _attention(self, group: Group) -> None:
        match, shape, bases, func, swap = self.attention[group]
        rx = self.rx
        args = [self.bb.emit(rx.op.reshape(self.get_plain(b), (b.type.size,))) for b in bases]
        args += [rx.const(np.ascontiguousarray(v, np.float32))
                 for v in match.output.epilogue.vectors()]
        s, _, _, dv = shape.sizes
        result = swap.outputs[0] if swap else match.output.out
        h = shape.batch[-1] if swap else 1
        out = self._call(func, args, (shape.nb // h, s, h, dv) if swap else (shape.nb, s, dv),
                         "attention")
        self.plain[result] = self.bb.emit(rx.op.reshape(out, result.type.shape))
        self.used.append("attention")

    def _winograd(self, shape: ConvShape, w: Var) -> bool:
        """Whether a conv takes the Winograd rule: 3x3 stride 1 where the cost rule says
        it pays (MEGTRACE_WINOGRAD=0 turns it off, =all takes every such conv). A
        constant weight is transformed at build time and needs a blocked input; a
        runtime one (a training step's) is transformed by a kernel on each call, and a
        plain input is packed first: on a training step's maps (ResNet-18 at 64x64,
        64-256 channels at 16x16-4x4, batch 32) the rule ran 2.3-3.5x faster than the
        direct one, which already packs a plain input inside its kernel."""
        mode = winograd.mode()
        runtime = w not in self.graph.consts
        if runtime:
            shape = replace(shape, blocked_input=True)
        if mode == "off" or not winograd.applies(shape):
            return False
        return mode == "all" or winograd.worth_it(shape)

    def _amx_conv(self, shape: ConvShape, w: Var) -> bool:
        """Whether a conv takes amx_conv.py's rule: AMX granted, a constant weight, a shape
        it covers, and MEGTRACE_AMX_CONV asking for it (off by default: amx_conv.mode)."""
        mode = amx_conv.mode()
        if mode == "off" or not self.amx or w not in self.graph.consts \
                or not amx_conv.applies(shape):
            return False
        return mode == "all" or not self._winograd(shape, w)

    def _const(self, key: tuple, make: Callable[[], np.ndarray]):
        """One Relax constant per packed weight or vector (`key`: what it is made from):
        batch_split.py repeats a net's early layers once per image."""
        if key not in self.consts:
            self.consts[key] = self.rx.const(make())
        return self.consts[key]

    def _kernel(self, make: Callable, shape: Any, epilogue: Epilogue | None):
        """make(shape, epilogue), made once per shape and epilogue structure (its vector
        and tensor operands are kernel arguments; scalars are in the code)."""
        return self._cached_kernel((make, shape, _epilogue_key(epilogue)),
                                   lambda: make(shape, epilogue))

    def _cached_kernel(self, key: tuple, make: Callable[[], Any]):
        """make(), made once per `key` (what the kernel's code depends on)."""
        func = self.kernels.get(key)
        if func is None:
            func = self.kernels[key] = make()
        return func

    def _dense(self, group: Group) -> None:
        node = group.anchor
        a, b = node.inputs
        k = a.type.shape[-1]
        m = a.type.size // k
        n = group.out.type.shape[-1]
        transpose_b = node.kwargs["transpose_b"]
        if self.amx and amx_rule.applies(m, k, n):
            func = amx_rule.dense_amx(amx_rule.AmxShape(m, k, n), group.epilogue)
            weights = [self.rx.const(self.weights.constant(amx_rule.pack_weight(
                self.graph.consts[b], transpose_b))), self.rx.const(amx_rule.tile_config())]
        else:
            shape = DenseShape(m, k, n)
            func = dense_packed(shape, group.epilogue)
            weights = [self.rx.const(self.weights.constant(L.pack_dense_weight(
                self.graph.consts[b], transpose_b, shape.tile[1])))]
        args = [self._as_2d(self.get_plain(a), a.type, (m, k)), *weights,
                *self._epilogue_args(group.epilogue, blocked=False, rows=(m, n))]
        out = self._call(func, args, (m, n), "dense")
        if group.out.type.ndim != 2:
            out = self.bb.emit(self.rx.op.reshape(out, group.out.type.shape))
        self.plain[group.out] = out

    def _matmul(self, group: Group) -> None:
        node = group.anchor
        a, b = node.inputs
        p = node.kwargs
        shape = MatmulShape(a.type.shape, b.type.shape, bool(p["transpose_a"]),
                            bool(p["transpose_b"]))
        func = batch_matmul(shape, group.epilogue)
        vectors = [self.rx.const(np.ascontiguousarray(v, np.float32))
                   for v in group.epilogue.vectors()]
        tensors = [self.get_plain(v) for v in group.epilogue.tensors()]
        args = [self.get_plain(a), self.get_plain(b), *vectors, *tensors]
        self.plain[group.out] = self._call(func, args, shape.out, "matmul")

    def _as_2d(self, expr, t: TensorType, shape: tuple[int, int]):
        return expr if t.ndim == 2 else self.bb.emit(self.rx.op.reshape(expr, shape))

    def _epilogue_args(self, epilogue: Epilogue, blocked: bool, rows=None) -> list:
        rx = self.rx
        if blocked:
            vectors = [self._const(("vector", v.tobytes()),
                                   lambda v=v: L.pack_channel_vector(v))
                       for v in epilogue.vectors()]
            tensors = [self.get_blocked(v) for v in epilogue.tensors()]
        else:
            vectors = [rx.const(np.ascontiguousarray(v, np.float32))
                       for v in epilogue.vectors()]
            tensors = [self._as_2d(self.get_plain(v), v.type, rows) for v in epilogue.tensors()]
        return vectors + tensors

    # -- ops that keep NCHW16c ----------------------------------------------------------
    def _blocked_input(self, node: Node) -> bool:
        if not node.inputs:          # a source (linspace of a traced length)
            return False
        x = node.inputs[0]
        return x in self.blocked and x.type.dtype == F32 and x.type.ndim == 4

    def _elementwise_applies(self, node: Node) -> bool:
        return self._elementwise_value(node) is not None

    def _elementwise_value(self, node: Node) -> Var | None:
        """The blocked input an elementwise op can run on, if it can stay blocked."""
        for v in node.inputs:
            if v in self.blocked and v.type.ndim == 4:
                if elementwise_steps(node, v, self.graph, 1) is not None:
                    return v
        return None

    def _elementwise(self, node: Node) -> None:
        te = tvm().te
        value = self._elementwise_value(node)
        epilogue = Epilogue(elementwise_steps(node, value, self.graph, 1))
        t = value.type
        shape = (t.shape[0], L.blocks(t.shape[1]), t.shape[2], t.shape[3], L.BLOCK)
        x = te.placeholder(L.i64(shape), F32, name="x")
        vectors, tensors = epilogue.placeholders(L.i64((L.blocks(t.shape[1]), L.BLOCK)),
                                                 L.i64(shape))
        out = blocked_output(x, L.i64(shape), t.shape[1], epilogue, vectors, tensors,
                             name="ewise")
        func = plain_func([x, *vectors, *tensors, out])
        args = [self.blocked[value], *self._epilogue_args(epilogue, blocked=True)]
        self.blocked[node.outputs[0]] = self._call(func, args, shape, node.op.name)
        self.used.append("elementwise_nchw16c")

    def _pool_applies(self, node: Node) -> bool:
        return node.op.name == "pool2d" and self._blocked_input(node) and \
            node.kwargs["mode"] in POOL_MODES

    def _pool(self, node: Node) -> None:
        p, x, out = node.kwargs, node.inputs[0], node.outputs[0]
        func = pool_nchwc(x.type.shape, p["mode"], tuple(p["kernel"]), tuple(p["stride"]),
                          tuple(p["padding"]))
        n, c, oh, ow = out.type.shape
        self.blocked[out] = self._call(func, [self.blocked[x]],
                                       (n, L.blocks(c), oh, ow, L.BLOCK), "pool")
        self.used.append("pool_nchw16c")

    def _max_pool_grad(self, m: MaxPoolGrad) -> None:
        if m.x.type.ndim != 4:
            raise NotApplicable
        key = ("max_pool_grad", m.x.type.shape, m.kernel, m.stride, m.padding, m.relu)
        func = self._cached_kernel(key, lambda: max_pool_grad_nchwc(
            m.x.type.shape, m.kernel, m.stride, m.padding, m.relu))
        n, c, h, w = m.x.type.shape
        self.blocked[m.nodes[-1].outputs[0]] = self._call(
            func, [self.get_blocked(v) for v in (m.x, m.y, m.g)],
            (n, L.blocks(c), h, w, L.BLOCK), "max_pool_grad")
        self.used.append("max_pool_grad_nchw16c")

    def _reduce_applies(self, node: Node) -> bool:
        if not self._blocked_input(node):
            return False
        if node.op.name == "adaptive_pool2d":        # global pooling: out (1, 1)
            p = node.kwargs
            return tuple(p["out"]) == (1, 1) and p["mode"] in ("max", "average")
        if node.op.name != "reduce":
            return False
        axis = node.kwargs["axis"]
        if axis is None:
            return False
        axes = axis if isinstance(axis, tuple) else (axis,)
        return node.kwargs["mode"] in REDUCE_MODES and sorted(a % 4 for a in axes) == [2, 3]

    def _reduce(self, node: Node) -> None:
        p, x, out = node.kwargs, node.inputs[0], node.outputs[0]
        if node.op.name == "adaptive_pool2d":
            mode, keepdims = {"max": "max", "average": "mean"}[p["mode"]], True
        else:
            mode, keepdims = p["mode"], bool(p["keepdims"])
        func = spatial_reduce_nchwc(x.type.shape, mode, keepdims)
        self.plain[out] = self._call(func, [self.blocked[x]], out.type.shape, "reduce")
        self.used.append("spatial_reduce_nchw16c")

    _blocked_ops = (("pool_nchw16c", _pool_applies, _pool),
                    ("spatial_reduce_nchw16c", _reduce_applies, _reduce),
                    ("elementwise_nchw16c", _elementwise_applies, _elementwise))


def _epilogue_key(epilogue: Epilogue | None) -> tuple:
    """What an epilogue's code depends on: each step's op, operand kind and side, and
    scalar operands' values."""
    if not epilogue:
        return ()
    return tuple((s.op, s.value_on_left, None if s.operand is None else
                  (s.operand.kind, repr(s.operand.scalar) if s.operand.kind == "scalar" else None))
                 for s in epilogue.steps)
