"""`trace.dump(input_data=...)`: MegEngine's testcases (the `mgbtest0` container).

Specs follow MegEngine: "#rand(min,max[,d0,d1,...])", an image or .npy path,
"var:path;var:path", "@listfile" (one spec per line); `repeat`, `resize_input` and
`input_transform` apply to file data. Unlike MegEngine, paths may contain ':' (only a
prefix naming an input is taken as a variable name).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from ..errors import ShapeError
from ..interpreter import evaluate
from ..ir import Graph, TensorType, Var
from ..ops import get

_RAND = re.compile(r"^#rand\(([-0-9.]*)\s*,\s*([-0-9.]*)\s*(,[^\)]+)?\)$")


def expand_specs(input_data: Sequence[str]) -> list[str]:
    specs = []
    for item in ([input_data] if isinstance(input_data, str) else input_data):
        if item.startswith("@"):
            with open(item[1:]) as f:
                specs.extend(line.rstrip() for line in f if line.rstrip())
        else:
            specs.append(item)
    return specs


def feeds_for(spec: str, inputs: dict[str, TensorType], *, repeat: int = 1,
              resize_input: bool = False, input_transform: str | None = None
              ) -> dict[str, np.ndarray]:
    """One testcase: input name -> array."""
    parts = spec.split(";")
    if len(parts) != len(inputs) and len(parts) == 1 and parts[0].startswith("#"):
        parts = [f"{name}:{parts[0]}" for name in inputs]
    if len(parts) != len(inputs):
        raise ValueError(f"input_data: the model needs inputs {list(inputs)}; {spec!r} gives "
                         f"{len(parts)}")
    out = {}
    for part in parts:
        name, sep, path = part.partition(":")
        if not sep or name not in inputs:
            if len(inputs) != 1:
                raise ValueError(f"input_data: {part!r} does not name one of {list(inputs)}")
            name, path = next(iter(inputs)), part
        t = inputs[name]
        out[name] = _read(path, t, repeat, resize_input, input_transform)
    return out


def _read(path: str, t: TensorType, repeat: int, resize: bool, transform: str | None):
    if path.startswith("#"):
        if resize or transform:
            raise ValueError("input_data: #rand cannot be combined with resize_input or "
                             "input_transform")
        m = _RAND.match(path)
        if not m:
            raise ValueError(f"input_data: bad spec {path!r}; expected #rand(min,max[,shape])")
        shape = _dump_shape(t)
        if m.group(3):
            dims = [d.strip() for d in m.group(3)[1:].split(",")]
            if dims[-1] == "...":
                dims = dims[:-1] + [str(d) for d in t.shape[len(dims) - 1:]]
            shape = tuple(int(d) for d in dims)
        _check_shape(t, shape)
        data = np.random.uniform(float(m.group(1)), float(m.group(2)), shape)
        return _as_traced(t, data.astype(t.dtype))
    import cv2
    image = cv2.imread(path, cv2.IMREAD_COLOR)
    if image is None:
        if resize:
            raise ValueError(f"input_data: resize_input needs an image; {path!r} is not one")
        data = np.load(path)
        if not isinstance(data, np.ndarray):
            raise ValueError(f"input_data: {path!r} is neither an image nor a .npy array")
    else:
        data = _reformat_image(image, t.shape, resize, cv2)
    data = np.repeat(data, repeat, axis=0)
    _check_shape(t, data.shape)
    if transform:
        data = eval(transform, {"data": data, "np": np})   # MegEngine's documented behaviour
    return _as_traced(t, np.asarray(data).astype(t.dtype))


def _reformat_image(data, dst_shape, resize, cv2):
    """BGR HWC image -> the input's layout (NCHW or NHWC, with or without batch)."""
    dim3 = len(dst_shape) == 3
    shape = (1,) + tuple(dst_shape) if dim3 else tuple(dst_shape)
    if len(shape) != 4:
        raise ShapeError(f"input_data: cannot read an image into shape {dst_shape}")
    nchw = shape[1] in (1, 3)
    if not nchw and shape[3] not in (1, 3):
        raise ShapeError(f"input_data: cannot infer the image layout of shape {dst_shape}")
    n, h, w, c = (shape[0], shape[2], shape[3], shape[1]) if nchw else shape
    if resize:
        data = cv2.resize(data, (w, h))
    if c == 1:
        data = cv2.cvtColor(data, cv2.COLOR_BGR2GRAY)[:, :, None]
    data = data[None]
    if nchw:
        data = np.transpose(data, (0, 3, 1, 2))
    return data[0] if dim3 else data


def _dump_shape(t: TensorType) -> tuple[int, ...]:
    """MegEngine dumps a scalar argument as a (1,) input; its testcases use that shape."""
    return t.shape or (1,)


def _check_shape(t: TensorType, shape) -> None:
    if len(shape) != len(_dump_shape(t)):
        raise ShapeError(f"input_data: input/data shapes mismatch: {_dump_shape(t)} vs "
                         f"{tuple(shape)}")


def _as_traced(t: TensorType, data: np.ndarray) -> np.ndarray:
    """One-element data for a scalar argument takes the traced () shape."""
    return data.reshape(()) if t.shape == () and data.size == 1 else data


def expect_name(name: str) -> str:
    return f"{name}:expect"


def with_assertions(graph: Graph, input_names: list[str], output_names: list[str],
                    maxerr: float, verbose: bool) -> tuple[Graph, list[str], list[str]]:
    """A copy of `graph` whose outputs are AssertEqual(expect, out, err) with an extra
    "<out>:expect" input per output, as MegEngine writes testcase models."""
    g = Graph(list(graph.inputs), dict(graph.consts), list(graph.nodes), [],
              list(input_names))
    outs, names = [], []
    for var, name in zip(graph.outputs, output_names):
        expect = g.add_input(var.type, expect_name(name))
        err = _rel_err(g, expect, var)
        (checked,) = g.add_node(get("assert_equal"), [expect, var, err],
                                {"maxerr": float(maxerr), "verbose": bool(verbose)},
                                name_hint=f"assert_eq({expect_name(name)},{name})")
        outs.append(checked)
        names.append(f"assert_eq({expect_name(name)},{name})")
    g.set_outputs(outs, names)
    return g.prune(), list(g.input_names), names


def _rel_err(g: Graph, e: Var, x: Var) -> Var:
    def op(name, *ins, **params):
        return g.add_node(get(name), list(ins), params)[0]
    one = g.add_const(np.ones((1,), e.type.dtype))
    diff = op("abs", op("sub", e, x))
    denom = op("maximum", op("minimum", op("abs", e), op("abs", x)), one)
    ratio = op("div", diff, denom)
    flat = op("reshape", ratio, shape=(-1,))
    return op("reduce", flat, mode="max", axis=0, keepdims=True)


def ground_truth(graph: Graph, feeds: dict[str, np.ndarray], compiled=None) -> list[np.ndarray]:
    """The model's outputs for one testcase. Like MegEngine, which runs the graph it dumps,
    the compiled graph computes them (so a file verifies against the engine that made
    it); without one, the NumPy interpreter does."""
    arrays = [feeds[n] for n in graph.input_names]
    if compiled is not None:
        return compiled(*arrays)
    got = evaluate(graph, dict(zip(graph.inputs, arrays)), graph.outputs)
    return [got[v] for v in graph.outputs]


def make_testcases(graph: Graph, input_names: list[str], output_names: list[str],
                   input_data, repeat: int, resize_input: bool, input_transform,
                   no_assert: bool) -> list[dict[str, Any]]:
    named = Graph(list(graph.inputs), graph.consts, graph.nodes, list(graph.outputs),
                  list(input_names), list(output_names))
    types = {n: v.type for v, n in zip(graph.inputs, input_names)}
    cases = []
    compiled = {}
    for spec in expand_specs(input_data):
        feeds = feeds_for(spec, types, repeat=repeat, resize_input=resize_input,
                          input_transform=input_transform)
        if not no_assert:
            key = tuple(feeds[n].shape for n in input_names)
            if key not in compiled:
                compiled[key] = _compile_for(named, feeds)
            for name, value in zip(output_names, ground_truth(named, feeds, compiled[key])):
                feeds[expect_name(name)] = value
        cases.append(feeds)
    return cases


def _compile_for(graph: Graph, feeds: dict[str, np.ndarray]):
    """The graph compiled for these input shapes (None when they differ from the traced
    ones, e.g. with `repeat`: the interpreter handles those)."""
    if any(feeds[n].shape != v.type.shape for v, n in zip(graph.inputs, graph.input_names)):
        return None
    # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
    from megtrace.relay_bridge import compile_graph
    return compile_graph(graph)
