"""The graphs tests/ops/test_ops_dump.py writes to .mge files: every op sample alone, and
small chains of ops real models have, each with its inputs at the traced batch and (when
it has a batch axis) at another batch with the eager result there.

A sample has a batch axis when growing the leading axis of its inputs that share the
first input's leading size (by rows of a second draw, so values stay in the op's domain)
still makes a valid call with the same params: then a file dumped at the traced batch
must run at the grown one too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from megtrace import interpreter
from megtrace.ir import Graph, TensorType
from megtrace.ops import get, quantized_eager
from megtrace.ops.quantized import spec as quantized_spec

LITE_IO_MAX_NDIM = 7       # Lite's input/output tensors have fewer axes than this
GROW_BY = 1                # the other batch is the traced one plus this

# dtypes Lite 1.13's I/O tensors lack: what they enter and leave the file as
_LITE_IO = {np.dtype(np.bool_): np.uint8, np.dtype(np.float16): np.float32}
_LITE_OUT = {"bool": "int32", "float16": "float32"}

# Lite checks AssertEqual when it runs (eager passes `get` through): feed a passing check
LITE_INPUTS = {"assert_equal": lambda e, g, err: [g, g, np.zeros_like(err)]}


@dataclass
class Case:
    graph: Graph
    feeds: dict[str, np.ndarray]
    want: list[np.ndarray]                                   # eager at the traced batch
    other: tuple[dict[str, np.ndarray], list[np.ndarray]] | None = None  # at another batch


def sample_graph(sample, inputs: list[np.ndarray]) -> tuple[Graph, list[np.ndarray]]:
    """The op alone on `inputs`. Lite's I/O has no bool, float16 or quantized tensors, so
    bool operands come in as uint8, float16 and quantized ones as float32, and such
    results leave as int32 / float32 (TypeCvt both ways; the samples' quantized values
    are exact in float32)."""
    op = get(sample.op)
    inputs = LITE_INPUTS.get(sample.op, lambda *a: list(a))(*inputs)
    g = Graph()
    ins = []
    for i, a in enumerate(inputs):
        if a.ndim >= LITE_IO_MAX_NDIM:      # a weight (local conv): a constant in the file
            ins.append(g.add_const(a))
            continue
        if a.dtype.metadata:        # quantized: Lite's I/O has none; in as float32, TypeCvt
            q = a.dtype
            inputs[i] = a = quantized_eager.dequantize(a)
            (var,) = g.add_node(get("quantized_astype"),
                                [g.add_input(TensorType.of(a), f"x{i}")],
                                {"dtype": quantized_spec(q)})
        elif a.dtype in _LITE_IO:
            dtype = a.dtype.name
            inputs[i] = a = a.astype(_LITE_IO[a.dtype])
            (var,) = g.add_node(get("astype"), [g.add_input(TensorType.of(a), f"x{i}")],
                                {"dtype": dtype})
        else:
            var = g.add_input(TensorType.of(a), f"x{i}")
        ins.append(var)
    outs = [g.add_node(get("quantized_astype"), [v], {"dtype": "float32"})[0]
            if v.type.quant is not None else
            g.add_node(get("astype"), [v], {"dtype": _LITE_OUT[v.type.dtype]})[0]
            if v.type.dtype in _LITE_OUT else v for v in g.add_node(op, ins, sample.params)]
    g.set_outputs(outs, [f"y{i}" for i in range(len(outs))])
    return g, [a for a in inputs if a.ndim < LITE_IO_MAX_NDIM]


def _grow(arrays: list[np.ndarray], extra: list[np.ndarray],
          first_only: bool) -> list[np.ndarray] | None:
    """`arrays` with the leading axis of those sharing the first one's leading size grown
    by GROW_BY rows of `extra` (a second draw), or of the first one only; None when there
    is no such axis."""
    if not arrays or arrays[0].ndim == 0 or arrays[0].ndim >= LITE_IO_MAX_NDIM:
        return None
    batch = arrays[0].shape[0]
    if batch == 0:
        return None
    grown = []
    for i, (a, b) in enumerate(zip(arrays, extra, strict=True)):
        if (i == 0 or not first_only) and a.ndim and a.ndim < LITE_IO_MAX_NDIM and \
                a.shape[0] == batch:
            rows = np.resize(b, (GROW_BY,) + b.shape[1:]).astype(a.dtype)
            a = np.concatenate([a, rows]).view(a.dtype)     # (keeps quantized dtypes)
        grown.append(a)
    return grown


def sample_case(sample, rng: np.random.Generator) -> Case:
    np.random.seed(0)
    arrays = sample.make(rng)
    graph, feeds = sample_graph(sample, list(arrays))
    case = Case(graph, dict(zip(graph.input_names, feeds)), interpreter.run(graph, *feeds))
    extra = sample.make(np.random.default_rng(1))
    # A leading size of 1 is as likely a broadcast axis (a bias) as a batch: then the
    # first input grows alone if the op takes that, else all inputs sharing it grow.
    for first_only in ((True, False) if arrays and arrays[0].shape[:1] == (1,) else (False,)):
        grown = _grow(arrays, extra, first_only)
        if grown is None:
            return case
        try:
            other_graph, other_feeds = sample_graph(sample, grown)
            other_want = interpreter.run(other_graph, *other_feeds)
        except Exception:  # noqa: BLE001 -- the op's params tie it to the traced shapes
            continue
        case.other = dict(zip(other_graph.input_names, other_feeds)), other_want
        return case
    return case


@dataclass
class Chain:
    """`build()` gives the function, traced (symbolic) at `shapes`; `batched`: axis 0 of
    every input is a batch axis (the model code reads it from x.shape)."""
    build: Callable[[], Callable]
    shapes: tuple[tuple[int, ...], ...]
    batched: bool = True

    def case(self, rng: np.random.Generator) -> Case:
        import megtrace as mge
        from megtrace.jit import trace
        np.random.seed(0)
        fn = self.build()
        arrays = [rng.uniform(-1, 1, size=s).astype(np.float32) for s in self.shapes]
        traced = trace(fn, symbolic=True, capture_as_const=True)
        traced(*[mge.tensor(a) for a in arrays])
        graph = traced.graph
        case = Case(graph, dict(zip(graph.input_names, arrays)),
                    interpreter.run(graph, *arrays))
        if self.batched:
            grown = [rng.uniform(-1, 1, size=(s[0] + GROW_BY,) + s[1:]).astype(np.float32)
                     for s in self.shapes]
            out = fn(*[mge.tensor(a) for a in grown])
            outs = out if isinstance(out, (tuple, list)) else (out,)
            case.other = (dict(zip(graph.input_names, grown)),
                          [o.numpy() if isinstance(o, mge.Tensor) else np.asarray(o, np.int32)
                           for o in outs])     # an eager x.shape is a tuple
        return case


def chains() -> dict[str, Chain]:
    import megtrace.functional as F
    from megtrace import tensor as mge_tensor
    return {
        "concat": Chain(lambda: lambda x: F.concat([F.relu(x), x * 2], axis=1),
                        ((2, 3, 4, 4),)),
        "reshape-chain": Chain(lambda: lambda x: (x.reshape(6, 4) * 2).reshape(6, 4)
                               .reshape(3, 8), ((24,),), batched=False),
        "batched-reshape-chain": Chain(lambda: lambda x: (x.reshape(x.shape[0], 3, -1) * 2)
                                       .transpose(0, 2, 1).reshape(x.shape[0], -1),
                                       ((2, 3, 4, 2),)),
        "flatten-linear": Chain(_flatten_linear, ((2, 3, 2, 2),)),
        "transpose-batched-matmul": Chain(lambda: lambda x: F.matmul(x, x.transpose(0, 2, 1)),
                                          ((2, 3, 4),)),
        "attention-scores": Chain(lambda: lambda q, k: F.softmax(
            F.matmul(q, k.transpose(0, 1, 3, 2)) * 0.5, axis=-1), ((2, 2, 5, 4), (2, 2, 5, 4))),
        "conv-bn-relu-flatten": Chain(_conv_net, ((2, 3, 6, 6),)),
        "deconv-bn-relu": Chain(lambda: _deconv_net(groups=1), ((2, 4, 3, 3),)),
        "grouped-deconv-bn": Chain(lambda: _deconv_net(groups=2, output_padding=1),
                                   ((2, 4, 3, 3),)),
        "interpolate": Chain(lambda: lambda x: F.nn.interpolate(x, scale_factor=2),
                             ((1, 2, 3, 3),)),
        "interpolate-bilinear": Chain(lambda: lambda x: F.nn.interpolate(
            x, size=(5, 7), mode="bilinear", align_corners=False), ((2, 2, 3, 3),)),
        "vit-block": Chain(_vit_block, ((2, 4, 8),)),
        "arange-batch": Chain(lambda: lambda x: x * F.arange(x.shape[0]).reshape(-1, 1),
                              ((3, 4),)),
        "linspace-batch": Chain(lambda: lambda x: x + F.linspace(0, 1, x.shape[0])
                                .reshape(-1, 1), ((3, 4),)),
        "zeros-batch": Chain(lambda: lambda x: F.concat([x, F.zeros((x.shape[0], 2))], 1),
                             ((3, 4),)),
        "batch-slice": Chain(lambda: lambda x: x[:x.shape[0] - 1] * x[1:], ((3, 4),)),
        "batch-halves": Chain(lambda: lambda x: x[:x.shape[0] // 2] * x[x.shape[0] -
                                                                      x.shape[0] // 2:],
                              ((4, 3),)),
        "shape-output": Chain(lambda: lambda x: (x * 2, x.shape), ((2, 3),)),
        "shape-as-tensor": Chain(lambda: lambda x: (x + 1, mge_tensor(x.shape) * 2), ((2, 3),)),
        "broadcast-to-shape": Chain(lambda: lambda x: F.broadcast_to(
            mge_tensor([1.0, 2.0, 3.0]), x.shape) * x, ((2, 3),)),
        "channel-half": Chain(lambda: lambda x: x[:, : x.shape[1] // 2] * 2, ((2, 6, 4),)),
        "index-from-shape": Chain(lambda: lambda x: x[:, x.shape[1] - 1].reshape(-1, 1) +
                                  x[x.shape[0] - 1], ((3, 3),)),
        "open-slices": Chain(lambda: lambda x: F.relu(x[1:] * 2) + x[:-1] - x[::2][:1],
                             ((3, 4),)),
        "interpolate-size-from-shape": Chain(lambda: lambda x: F.nn.interpolate(
            x, size=(x.shape[2] * 2, x.shape[3] + 1), mode="bilinear"), ((2, 2, 3, 3),)),
        "gather-argsort": Chain(lambda: lambda x: F.gather(x, 1, F.argsort(x, descending=True)),
                                ((3, 4),)),
        "topk-batch": Chain(lambda: lambda x: F.topk(x, 2)[0] * 2, ((3, 5),)),
        "one-hot": Chain(lambda: lambda x: F.one_hot(F.argmax(x, axis=1), 4).astype("float32")
                         + x, ((3, 4),)),
        "expand-squeeze-mean": Chain(lambda: lambda x: F.mean(F.expand_dims(x, 1), axis=(1, 2)),
                                     ((3, 4, 2),)),
        "setitem-batch": Chain(_setitem, ((3, 4),)),
        "setitem-bound-from-shape": Chain(_setitem_bound, ((3, 4),)),
        "pad-batch": Chain(lambda: lambda x: F.nn.pad(x, ((0, 0), (0, 0), (1, 1), (2, 0))),
                           ((2, 2, 3, 3),)),
        "indexing-vector": Chain(lambda: lambda x: x[:, [0, 2]] + x[:, 1:2], ((3, 4),)),
        "indexing-vector-bound-from-shape": Chain(_vector_bound, ((3, 4),)),
    }


def _setitem():
    def fn(x):
        y = x * 1
        y[:, 1] = 0.5
        return y
    return fn


def _vector_bound():
    def fn(x):
        y = x * 1
        y[1:, [0, 3]] = x[: x.shape[0] - 1, [1, 2]] * 2
        return y[: y.shape[0] - 1, [0, 2]] + x[1:, [1, 3]]
    return fn


def _setitem_bound():
    def fn(x):
        y = x * 1
        y[: y.shape[0] - 1, 1:] = x[1:, : x.shape[1] - 1] * 2
        return y
    return fn


def _flatten_linear():
    import megtrace.functional as F
    import megtrace.module as M
    fc = M.Linear(12, 5)
    return lambda x: F.relu(fc(F.flatten(x, 1)))


def _vit_block():
    """A class token concatenated to the patches, then pre-norm self-attention: constants
    TVM inlines at every use must come back as one."""
    import megtrace as mge
    import megtrace.functional as F
    import megtrace.module as M
    token = mge.Parameter(np.random.rand(1, 1, 8).astype(np.float32))
    norm, qkv, proj = M.LayerNorm(8), M.Linear(8, 24), M.Linear(8, 8)

    def fn(x):
        b, n, c = x.shape
        x = F.concat([F.broadcast_to(token, (b, 1, c)), x], axis=1)
        q, k, v = F.split(qkv(norm(x)).reshape(b, n + 1, 3, c).transpose(2, 0, 1, 3), 3)
        attn = F.softmax(F.matmul(q[0], k[0].transpose(0, 2, 1)) * c ** -0.5, axis=-1)
        return x + proj(F.matmul(attn, v[0]))
    return fn


def _deconv_net(groups: int, output_padding: int = 0):
    """A transposed convolution, BatchNorm with non-trivial statistics (folded into the
    deconvolution's weights when optimized), ReLU: a DCGAN generator's stage."""
    import megtrace.module as M
    bn = M.BatchNorm2d(6)
    bn.running_mean._set_value(np.random.normal(size=(1, 6, 1, 1)).astype(np.float32))
    bn.running_var._set_value(np.random.uniform(0.5, 1.5, (1, 6, 1, 1)).astype(np.float32))
    bn.weight._set_value(np.random.uniform(0.5, 1.5, (1, 6, 1, 1)).astype(np.float32))
    net = M.Sequential(M.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=groups,
                                         output_padding=output_padding), bn, M.ReLU())
    return net.eval()


def _conv_net():
    import megtrace.module as M
    net = M.Sequential(M.Conv2d(3, 4, 3, padding=1), M.BatchNorm2d(4), M.ReLU())
    net.eval()

    def fn(x):
        return net(x).reshape(x.shape[0], -1)
    return fn
