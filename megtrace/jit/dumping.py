"""`trace.dump`: MegEngine's dump of a traced function (the method's body lives here to
keep tracing.py about tracing). Options, defaults and errors follow MegEngine 1.13."""
from __future__ import annotations

import os
from typing import Any

from .. import atomic_io
from ..errors import TraceError
from ..ir import Graph

_OPTIMIZE_FLAGS = ("enable_io16xc32", "enable_ioc16", "enable_hwcd4", "enable_nchw4",
                   "enable_nchw88", "enable_nchw32", "enable_nchw44", "enable_nchw44_dot",
                   "enable_chwn4", "enable_nchw64", "enable_fuse_conv_bias_nonlinearity",
                   "enable_fuse_conv_bias_with_z", "enable_fuse_preprocess",
                   "enable_fuse_grain", "enable_weight_preprocess")


# optimize_for_inference's layout options in MegEngine's order: when several are given,
# the last one set wins (megbrain_graph.optimize_for_inference).
_LAYOUT_FLAGS = {"enable_hwcd4": "nhwcd4", "enable_nchw4": "nchw4", "enable_nchw88": "nchw88",
                 "enable_nchw32": "nchw32", "enable_nchw44": "nchw44",
                 "enable_nchw44_dot": "nchw44_dot", "enable_chwn4": "chwn4",
                 "enable_nchw64": "nchw64"}
_UNSUPPORTED = ("enable_weight_preprocess",)


def _layout(kwargs: dict) -> str | None:
    chosen = None
    for flag, layout in _LAYOUT_FLAGS.items():
        if kwargs.get(flag):
            chosen = layout
    return chosen


def dump_trace(self, file, *, arg_names=None, output_names=None, append: bool = False,
               keep_var_name: int = 1, keep_opr_name: bool = False,
               keep_param_name: bool = False, keep_opr_priority: bool = False,
               no_change_graph: bool = False, strip_info_file=None, append_json: bool = False,
               optimize_for_inference: bool = True, user_info: Any = None,
               enable_metadata: bool = True, input_data=None, repeat: int = 1,
               silent: bool = False, no_assert: bool = False, maxerr: float = 1e-4,
               resize_input: bool = False, input_transform=None,
               dump_format: str | None = None, model_version: int = 2,
               compat_older_version: str | None = None, **kwargs):
    """Write the traced graph as a MegEngine model that MegEngine Lite runs, with
    MegEngine 1.13's parameters and defaults.

    `optimize_for_inference` (default True) runs the graph through TVM's inference
    passes (BatchNorm folded into convolutions, constants folded) and MegEngine's
    arithmetic fusions (FUSE_ADD_RELU, FUSE_MUL_ADD3, global pooling; ConvBias with
    enable_fuse_conv_bias_nonlinearity=True); Metadata.optimize_options records them.
    """
    from ..dump import Metadata, VarNode, dump_graph
    from ..serialization import dumps

    unknown = sorted(set(kwargs) - set(_OPTIMIZE_FLAGS))
    if unknown:
        raise ValueError(f"unknown options: {unknown}")
    if input_data is not None and dump_format not in (None, "FBS_V2"):
        raise ValueError("input_data needs dump_format='FBS_V2': load_and_run reads "
                         "testcases in the main model's format")
    flags = sorted(k for k, v in kwargs.items() if v and k in _UNSUPPORTED)
    if optimize_for_inference and flags:
        raise NotImplementedError(f"dump: optimize_for_inference options {flags} are not "
                                  "supported yet")
    if compat_older_version is not None and (no_change_graph or dump_format != "FBS"):
        raise ValueError("compat_older_version='8.14' requires no_change_graph=False and "
                         "dump_format='FBS'")
    if not self._capture_as_const:
        raise ValueError("you must specify capture_as_const=True at __init__ to use dump")
    if not self._entries:
        raise TraceError("trace: call the traced function once before dump()")
    entry = next(iter(self._entries.values()))
    if entry.undumpable:
        raise RuntimeError("dump: " + "; ".join(entry.undumpable))
    graph = entry.graph
    graph = _freeze_random_keys(graph, entry)
    if not graph.outputs:
        raise ValueError("the traced function without return values cannot be dumped, the "
                         "traced function should return List[Tensor] or Dict[str, Tensor]")
    if isinstance(entry.out_tree, tuple) and entry.out_tree[0] is dict and output_names:
        raise TypeError("output_names is not supported when the traced function returns "
                        "a dict; its keys name the outputs")
    in_names = _input_names(arg_names, [n for n, _ in entry.args])
    default_out = list(entry.out_tree[1]) if isinstance(entry.out_tree, tuple) and \
        entry.out_tree[0] is dict else graph.output_names
    out_names = _names("output_names", output_names, default_out)
    optimize_options = 0
    if optimize_for_inference and any(n.op.name.startswith("rng_") for n in graph.nodes):
        import warnings

        from ..errors import OptimizationSkippedWarning
        warnings.warn("dump: optimize_for_inference skipped: the graph has megtrace.random "
                      "ops, which constant folding would freeze into constants",
                      OptimizationSkippedWarning, stacklevel=2)
    elif optimize_for_inference:
        graph, optimize_options = _optimized(graph, kwargs)
    meta = Metadata(is_valid=bool(enable_metadata),
                    user_info=dumps(user_info) if enable_metadata else None,
                    optimize_options=optimize_options)
    if len(set(out_names)) != len(out_names):
        raise ValueError(f"output_names must be unique; got {out_names}")
    cases = []
    if input_data is not None:
        from .testcases import make_testcases, with_assertions
        cases = make_testcases(graph, in_names, out_names, input_data, repeat,
                               resize_input, input_transform, no_assert)
        if not no_assert:
            graph, in_names, out_names = with_assertions(graph, in_names, out_names,
                                                         maxerr, not silent)
    outputs = {name: VarNode(graph, var, name) for name, var in zip(out_names, graph.outputs)}
    data, result = dump_graph(outputs, keep_var_name=keep_var_name,
                              keep_opr_name=keep_opr_name, keep_param_name=keep_param_name,
                              keep_opr_priority=keep_opr_priority,
                              no_change_graph=no_change_graph,
                              strip_info_file=strip_info_file, append_json=append_json,
                              metadata=meta, dump_format=dump_format,
                              model_version=model_version,
                              compat_older_version=compat_older_version,
                              input_names=in_names)
    if input_data is not None:
        # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
        from megtrace.fbs.testcases import write_container
        data = write_container(data, cases, in_names)
    _write_atomic(file, data, append)
    return result


def _freeze_random_keys(graph: Graph, entry) -> Graph:
    """megtrace.random keys are graph inputs so that compiled runs draw new numbers; the
    .mge writes MegEngine's RNG oprs (which draw their own) and keeps no key input, so
    each key becomes the constant drawn while tracing."""
    keys = {v: entry.sources[v].value for v in graph.inputs
            if v in entry.sources and entry.sources[v].kind == "rng"}
    if not keys:
        return graph
    names = [n for v, n in zip(graph.inputs, graph.input_names) if v not in keys]
    frozen = Graph([v for v in graph.inputs if v not in keys], {**graph.consts, **keys},
                   list(graph.nodes), [], names)
    frozen.set_outputs(graph.outputs, graph.output_names)
    return frozen


def _optimized(graph: Graph, kwargs: dict) -> tuple[Graph, int]:
    """optimize_for_inference through TVM (megtrace.relay_bridge.optimize); a graph it cannot bring
    back from Relax is written unoptimized, with a warning and no optimize_options."""
    import warnings

    # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
    from megtrace.relay_bridge.optimize import optimize_for_inference
    from ..errors import OptimizationSkippedWarning, UnsupportedOpError
    try:
        return optimize_for_inference(
            graph, fuse_conv_bias_nonlinearity=bool(kwargs.get("enable_fuse_conv_bias_nonlinearity")),
            fuse_grain=bool(kwargs.get("enable_fuse_grain", True)),
            f16_io_f32_comp=bool(kwargs.get("enable_io16xc32")),
            f16_io_comp=bool(kwargs.get("enable_ioc16")),
            fuse_conv_bias_with_z=bool(kwargs.get("enable_fuse_conv_bias_with_z")),
            fuse_preprocess=bool(kwargs.get("enable_fuse_preprocess")), layout=_layout(kwargs))
    except UnsupportedOpError as e:
        warnings.warn(f"dump: optimize_for_inference skipped ({e}); the graph is written as "
                      "traced", OptimizationSkippedWarning, stacklevel=3)
        return graph, 0


def _input_names(arg_names, bound: list[str]) -> list[str]:
    """MegEngine's names of a dump's inputs, from the trace's bindings (`arg_<i>` for the
    positional tensors, `kwarg_<k>` for the keyword ones): arg_names covers only the
    positional ones (None or "" leaves one to MegEngine's `h2d[<var id>]`), keyword inputs
    are named after their keyword, and a name several inputs share becomes name[0],
    name[1], ... in argument order (tests/data/show_megengine_dump_arg_names.py)."""
    positional = [n for n in bound if n.startswith("arg_")]
    keywords = [n[len("kwarg_"):] for n in bound if n.startswith("kwarg_")]
    if arg_names is None:
        names = positional
    else:
        names = [arg_names] if isinstance(arg_names, str) else list(arg_names)
        if len(names) != len(positional):  # MegEngine 1.13 crashes on an empty list
            raise ValueError(f"wrong number of arg_names, should be {len(positional)} values")
        # an input's var id in MegEngine's dump graph: each input is an opr and a var
        names = [n if n else f"h2d[{2 * i}]" for i, n in enumerate(names)]
    names = names + keywords
    shared = {n for n in names if names.count(n) > 1}
    seen: dict[str, int] = {}
    renamed = []
    for n in names:
        if n in shared:
            seen[n] = seen.get(n, -1) + 1
            n = f"{n}[{seen[n]}]"
        renamed.append(n)
    return renamed


def _names(what: str, given, default: list[str]) -> list[str]:
    if given is None:
        return list(default)
    names = [given] if isinstance(given, str) else list(given)
    if len(names) != len(default):
        raise ValueError(f"{what}: expected {len(default)} names, got {len(names)}: {names}")
    return [n if n is not None else d for n, d in zip(names, default)]


def _write_atomic(file, data: bytes, append: bool) -> None:
    """Write all or nothing (megtrace.atomic_io): a file object gets the bytes, a path a
    synced temp file renamed into place; `append` keeps the old file's bytes first."""
    if hasattr(file, "write"):
        file.write(data)
        return
    path = atomic_io.resolve_target(file)
    old = path.read_bytes() if append and path.is_file() else b""
    atomic_io.write_bytes(path, old + data)
