"""Max-pooling's input gradient on NCHW16c, recognised in a traced backward pass.

megtrace/ops/nn.py writes the max-pool VJP with Tensor ops (pad x with -inf, per
window tap: where(patch == y, g, 0), shifted sums, interleave, crop), so that it stays
traced and differentiable. Lowered as it stands, that is one plain-layout kernel with a
materialised padded copy and per-element pad guards. `find_max_pool_grads` finds that
subgraph; `max_pool_grad_nchwc` computes the same values in gather form: each input
pixel sums g over the (at most ceil(k/s)^2) windows that cover it and whose maximum it
equals (every tied element receives, as the VJP and MegEngine's PoolingBackward do),
vectorised over the 16 channels of a block, without a padded copy.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from megtrace.ir import Graph, Node, Var

from .._tvm import tvm
from .layout import BLOCK
from .primfunc import parallel_if, scheduled_func

# ops the VJP's subgraph between (x, y, g) and the gradient is made of
_VJP_OPS = frozenset({"pad", "subtensor", "eq", "where", "add", "expand_dims", "concat",
                      "reshape", "broadcast_to"})


@dataclass(frozen=True)
class MaxPoolGrad:
    """One max-pool VJP: x, its pool output y, the incoming gradient g, the window, and
    the VJP's nodes (`nodes[-1]` computes the gradient, the others feed only it)."""
    x: Var
    y: Var
    g: Var
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    nodes: tuple[Node, ...]
    relu: bool = False      # the gradient goes on through x = relu(.)'s backward too


def _neg_inf_pad(node: Node, x: Var, padding: tuple[int, int]) -> bool:
    p = node.kwargs
    ph, pw = padding
    return node.op.name == "pad" and node.inputs[0] is x and p.get("mode") == "constant" \
        and p.get("value") == float("-inf") and \
        tuple(map(tuple, p["pad_width"])) == ((0, 0), (0, 0), (ph, ph), (pw, pw))


def find_max_pool_grads(graph: Graph) -> list[MaxPoolGrad]:
    """The max-pool VJPs of `graph`: for each max pool2d (x -> y), the nodes reachable
    from its `eq(., y)` taps (and x's -inf pad) through the VJP's ops, when they end in
    one node of x's shape, every other node feeds only that set, and its inputs from
    outside are x, y, one gradient g of y's shape and constants."""
    users = graph.users()
    order = {n: i for i, n in enumerate(graph.nodes)}
    found = []
    for pool in graph.nodes:
        p = pool.kwargs
        if pool.op.name != "pool2d" or p["mode"] != "max":
            continue
        x, y = pool.inputs[0], pool.outputs[0]
        kernel, stride, padding = (tuple(p[k]) for k in ("kernel", "stride", "padding"))
        taps = [n for n in users.get(y, ()) if n.op.name == "eq"]
        if len(taps) != kernel[0] * kernel[1]:
            continue
        source = x
        start = list(taps)
        if padding != (0, 0):
            pads = [n for n in users.get(x, ()) if _neg_inf_pad(n, x, padding)]
            if len(pads) != 1:
                continue
            start.append(pads[0])
            source = pads[0].outputs[0]
        # each tap compares a strided window patch of (padded) x with y
        start += [n for n in users.get(source, ()) if n.op.name == "subtensor"]
        match = _grow(graph, users, order, start, source, x, y, kernel, stride, padding)
        if match is not None:
            found.append(_with_relu_backward(graph, users, order, match))
    return found


def _is_zero(graph: Graph, v: Var) -> bool:
    value = graph.consts.get(v)
    return value is not None and not np.any(value != 0)


def _with_relu_backward(graph, users, order, m: MaxPoolGrad) -> MaxPoolGrad:
    """`m` extended by where(gt(x, 0), gradient, 0) when that is the gradient's only
    use: relu's backward (x = relu(.) in ResNet's stem), whose mask reads the x the
    kernel loads anyway, so the gradient is not unpacked and packed again for it."""
    out = m.nodes[-1].outputs[0]
    uses = users.get(out, ())
    if len(uses) != 1 or uses[0].op.name != "where" or out in graph.outputs:
        return m
    where = uses[0]
    cond, value, other = where.inputs
    gt = next((n for n in graph.nodes if cond in n.outputs), None)
    if value is not out or not _is_zero(graph, other) or gt is None or \
            gt.op.name != "gt" or gt.inputs[0] is not m.x or \
            not _is_zero(graph, gt.inputs[1]) or len(users.get(cond, ())) != 1:
        return m
    nodes = tuple(sorted(m.nodes + (gt, where), key=order.__getitem__))
    if nodes[-1] is not where:
        return m
    return replace(m, nodes=nodes, relu=True)


def _grow(graph, users, order, start, source, x, y, kernel, stride,
          padding) -> MaxPoolGrad | None:
    """The nodes reachable from `start` through the VJP's ops, up to the crop back to
    x's shape (a subtensor of x's type not reading `source`: the gradient; what uses it,
    e.g. relu's backward, is no part of the VJP)."""
    nodes, todo = set(start), list(start)
    while todo:
        node = todo.pop()
        if node.op.name == "subtensor" and node.outputs[0].type == x.type and \
                node.inputs[0] is not source:
            continue
        for out in node.outputs:
            for u in users.get(out, ()):
                if u not in nodes and u.op.name in _VJP_OPS:
                    nodes.add(u)
                    todo.append(u)
    ordered = sorted(nodes, key=order.__getitem__)
    made = {v for n in ordered for v in n.outputs}
    ends = [n for n in ordered if any(u not in nodes for v in n.outputs
                                      for u in users.get(v, ())) or
            any(v in graph.outputs for v in n.outputs)]
    if len(ends) != 1 or ends[0] is not ordered[-1]:
        return None
    end = ordered[-1]
    if len(end.outputs) != 1 or end.outputs[0].type != x.type:
        return None
    outside = {v for n in ordered for v in n.inputs if v not in made} - {x, y}
    grads = [v for v in outside if v not in graph.consts]
    if len(grads) != 1 or grads[0].type != y.type or x.type.dtype != "float32":
        return None
    # tap count sanity: one eq and one where per window tap, nothing else compares
    names = [n.op.name for n in ordered]
    taps = kernel[0] * kernel[1]
    if names.count("eq") != taps or names.count("where") != taps or \
            names.count("subtensor") not in (taps, taps + 1):
        return None
    g = grads[0]
    producer = {v: n for n in ordered for v in n.outputs}
    for n in ordered:           # eq(patch of (padded) x, y) and where(that, g, 0) only
        if n.op.name == "eq":
            patch = producer.get(n.inputs[0])
            if n.inputs[1] is not y or patch is None or patch.op.name != "subtensor" or \
                    patch.inputs[0] is not source:
                return None
        if n.op.name == "where":
            cond, value, other = n.inputs
            if value is not g or producer.get(cond) is None or \
                    producer[cond].op.name != "eq" or not _is_zero(graph, other):
                return None
    return MaxPoolGrad(x, y, g, kernel, stride, padding, tuple(ordered))


def max_pool_grad_nchwc(shape: tuple[int, int, int, int], kernel: tuple[int, int],
                        stride: tuple[int, int], padding: tuple[int, int],
                        relu: bool = False):
    """Scheduled PrimFunc (x, y, g blocked; gradient of x blocked, zero where x <= 0
    with `relu`). Input row h is
    covered by output rows q = (h + ph) // sh - a, a < ceil(kh / sh), where
    0 <= q < oh and h + ph - q * sh < kh; likewise for columns."""
    te, t = tvm().te, tvm().tirx
    n, c, h, w = shape
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    cb = -(-c // BLOCK)
    x = te.placeholder((n, cb, h, w, BLOCK), "float32", name="x")
    y = te.placeholder((n, cb, oh, ow, BLOCK), "float32", name="y")
    g = te.placeholder((n, cb, oh, ow, BLOCK), "float32", name="g")
    zero = t.const(0.0, "float32")

    def covering(pos, pad, s, k, size):
        """[(window index, it covers pos)] for each candidate window."""
        out = []
        for a in range(-(-k // s)):
            q = te.floordiv(pos + pad, s) - a
            out.append((q, t.all(q >= 0, q < size, pos + pad - q * s < k)))
        return out

    def grad(i, cc, yy, zz, ci):
        # the window test is per pixel (scalar), guarding loads: if_then_else evaluates
        # only the taken side; the max test is per channel (a vector select)
        v = x[i, cc, yy, zz, ci]
        total = zero
        for qy, oky in covering(yy, ph, sh, kh, oh):
            for qz, okz in covering(zz, pw, sw, kw, ow):
                hit = t.Select(v == y[i, cc, qy, qz, ci], g[i, cc, qy, qz, ci], zero)
                total = total + te.if_then_else(t.all(oky, okz), hit, zero)
        return t.Select(v > zero, total, zero) if relu else total
    out = te.compute((n, cb, h, w, BLOCK), grad, name="grad")

    def schedule(sch):
        b = sch.get_sblock("grad")
        i, cc, yy, zz, ci = sch.get_loops(b)
        # rows stay out of the fused loop: with yy fused in, the row's windows
        # ((fused % h + ph) // sh) came out wrong (TVM 0.27, values checked by the test)
        par = sch.fuse(i, cc)
        parallel_if(sch, par, n * cb * h * w * BLOCK * 4)
        sch.vectorize(ci)

    return scheduled_func([x, y, g, out], schedule, "max_pool_grad_nchw16c")
