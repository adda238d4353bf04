"""`module_stats`: a model's parameters, FLOPs and activations, counted per module.

MegEngine 1.13's `megengine.utils.module_stats` with its names, arguments, FLOP formulas
and results: forward hooks on the module types in `hook_modules` record each call's
shapes; weights and biases are counted once per Parameter (shared ones once), including
those a forward reads without calling their module (`self.conv.calc_conv(x,
self.conv.weight, ...)`), in the order first used. Tables are logged as plain text, as
MegEngine logs its tabulate tables: full names and numbers in a log file or CI output.
"""
from __future__ import annotations

import collections.abc
import contextlib
import functools
from collections import namedtuple
from typing import Callable, Iterable, Optional

import numpy as np
import tabulate

from .. import functional as F
from .. import module as M
from ..logger import get_logger
from ..module.activation import AdaptiveAvgPool2d, AdaptiveMaxPool2d
from ..module.batchnorm import _BatchNorm
from ..module.conv import _ConvNd
from ..module.layers import _PoolNd
from ..tensor import Tensor
from .module_utils import set_module_mode_safe

__all__ = ["module_stats", "register_flops", "register_hook_module", "hook_modules",
           "sizeof_fmt", "get_op_stats"]

logger = get_logger(__name__)
logger.setLevel("INFO")                 # as MegEngine's: the tables show at any default level

total_stats = namedtuple("total_stats",
                         ["param_size", "param_dims", "flops", "act_size", "act_dims"])
stats_details = namedtuple("module_stats", ["params", "flops", "activations"])

_flops_rules: dict[type, Callable] = {}


def register_flops(*modules: type):
    """Decorator: `fn(module, inputs, outputs) -> flops` counts calls of `modules`."""
    def add(fn):
        for m in modules:
            _flops_rules[m] = fn
        return fn
    return add


@register_flops(M.Conv1d, M.Conv2d, M.Conv3d, M.LocalConv2d, M.DeformableConv2d)
def flops_conv(module, inputs, outputs):
    """One multiply-add per kernel tap and input channel of a group, per output element."""
    bias = 1 if module.bias is not None else 0
    taps = float(module.in_channels // module.groups) * np.prod(module.kernel_size)
    return np.prod(outputs[0].shape) * (taps + bias)


@register_flops(M.ConvTranspose2d, M.ConvTranspose3d)
def flops_conv_transpose(module, inputs, outputs):
    bias = 1 if module.bias is not None else 0
    return (np.prod(inputs[0].shape) * (module.out_channels // module.groups
                                        * np.prod(module.kernel_size))
            + np.prod(outputs[0].shape) * bias)


@register_flops(_BatchNorm, M.SyncBatchNorm, M.GroupNorm, M.LayerNorm, M.InstanceNorm)
def flops_norm(module, inputs, outputs):
    return np.prod(inputs[0].shape) * 7


@register_flops(M.AvgPool2d, M.MaxPool2d)
def flops_pool(module, inputs, outputs):
    k = module.kernel_size
    taps = np.prod(k) if isinstance(k, tuple) and len(k) == 2 else k ** 2
    return np.prod(outputs[0].shape) * taps


@register_flops(AdaptiveAvgPool2d, AdaptiveMaxPool2d)
def flops_adaptive_pool(module, inputs, outputs):
    """MegEngine's estimate of the window an adaptive pooling uses."""
    h, w = inputs[0].shape[2], inputs[0].shape[3]
    with np.errstate(divide="ignore", invalid="ignore"):
        stride_h, stride_w = np.floor(h / (h - 1)), np.floor(w / (w - 1))
    kernel_h, kernel_w = h - (h - 1) * stride_h, w - (w - 1) * stride_w
    return np.prod(outputs[0].shape) * kernel_h * kernel_w


@register_flops(M.Linear)
def flops_linear(module, inputs, outputs):
    bias = module.out_features if module.bias is not None else 0
    return np.prod(outputs[0].shape) * module.in_features + bias


# modules whose calls are counted (subclasses included); extend with register_hook_module
hook_modules: list[type] = [_ConvNd, M.Linear, _BatchNorm, M.LayerNorm, M.GroupNorm,
                            M.InstanceNorm, _PoolNd, AdaptiveAvgPool2d, AdaptiveMaxPool2d]


def register_hook_module(module) -> None:
    """Count calls of another Module class (or a list/tuple of them) too."""
    if isinstance(module, (tuple, list)):
        for m in module:
            register_hook_module(m)
    elif isinstance(module, type) and issubclass(module, M.Module):
        hook_modules.append(module)
    else:
        raise TypeError("the param type should in [list,tuple,M.Module]")


def sizeof_fmt(num, suffix: str = "B") -> str:
    """MegEngine's human-readable sizes: binary prefixes for bytes, decimal otherwise."""
    scale, units = (1024.0, ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"]) \
        if suffix == "B" else (1000.0, ["", "K", "M", "G", "T", "P", "E", "Z", "Y"])
    for unit in units:
        if abs(num) < scale or unit == units[-1]:
            return "{:3.3f} {}{}".format(num, unit, suffix)
        num /= scale


def _nbits(dtype) -> int:
    return np.dtype(dtype).itemsize * 8


def _summary(x: Tensor) -> tuple[str, str]:
    v = np.asarray(x.numpy() if isinstance(x, Tensor) else x, np.float32)
    return "{:.3g}".format(v.mean()), "{:.3g}".format(v.std())


def _param_stats(name: str, p: Tensor) -> dict:
    mean, std = _summary(p)
    dims = int(np.prod(p.shape))
    nbits = _nbits(p.dtype)
    return {"name": name, "dtype": np.dtype(p.dtype), "shape": tuple(p.shape), "mean": mean,
            "std": std, "param_dim": dims, "nbits": nbits, "size": dims * nbits // 8}


def _activation_stats(name: str, class_name: str, out: Tensor, with_values: bool) -> dict:
    dims = int(np.prod(out.shape))
    nbits = _nbits(out.dtype)
    d = {"name": name, "class_name": class_name, "dtype": np.dtype(out.dtype),
         "shape": tuple(out.shape), "act_dim": dims, "nbits": nbits,
         "size": dims * nbits // 8}
    if with_values:
        d["mean"], d["std"] = _summary(out)
    return d


def get_op_stats(module, inputs, outputs) -> Optional[dict]:
    """Shapes and FLOPs of one call of `module` (or of a Network OpNode, whose FLOPs
    rules megtrace.utils.network_node registers); None without a FLOPs rule."""
    if not isinstance(outputs, (tuple, list)):
        outputs = (outputs,)
    rule = next((fn for cls, fn in _flops_rules.items() if isinstance(module, cls)), None)
    if rule is None:
        return None
    return {"input_shapes": [i.shape for i in inputs],
            "output_shapes": [o.shape for o in outputs],
            "flops_num": rule(module, inputs, outputs)}


def _op_stats(name: str, class_name: str, module, inputs, outputs) -> Optional[dict]:
    rule = next((fn for cls, fn in _flops_rules.items() if isinstance(module, cls)), None)
    if rule is None:
        return None
    return {"name": name, "class_name": class_name,
            "input_shapes": [tuple(i.shape) for i in inputs],
            "output_shapes": [tuple(o.shape) for o in outputs],
            "flops_num": rule(module, inputs, outputs)}


def _shares(rows: list[dict], key: str, bar_length_max: int, fmt) -> None:
    """Add the cumulative, percentage and bar columns MegEngine's tables show."""
    total = sum(int(d[key]) for d in rows)
    top = max([d[key] for d in rows] + [0])
    running = 0
    for d in rows:
        running += int(d[key])
        d["size_cum" if key == "size" else "flops_cum"] = fmt(running)
    for d in rows:
        d["ratio"] = d[key] / total if total else 0.0
        d["percentage"] = "{:.2f}%".format(d["ratio"] * 100)
        bar = "#" * int(d[key] / top * bar_length_max) if top else ""
        d["size_bar" if key == "size" else "bar"] = bar


def _sized_totals(rows: list[dict], dim_key: str, bar_length_max: int) -> tuple[int, int]:
    """Total elements and bytes of parameter or activation rows; formats the rows' sizes
    with their share columns and appends MegEngine's "total" row."""
    dims = sum(int(d[dim_key]) for d in rows)
    size = sum(int(d["size"]) for d in rows)
    _shares(rows, "size", bar_length_max, sizeof_fmt)
    for d in rows:
        d["size"] = sizeof_fmt(d["size"])
    rows.append({"name": "total", dim_key: dims, "size": sizeof_fmt(size)})
    return dims, size


def _table(title: str, rows: list[dict], header: list[str]) -> None:
    """Log `rows` under `title` as MegEngine does: a tabulate table whose first row is
    the header."""
    cells = [header] + [["" if d.get(h) is None else str(d.get(h)) for h in header]
                        for d in rows]
    logger.info(f"{title}\n" + tabulate.tabulate(cells))


def _load_inputs(x):
    """User inputs as Tensors, keeping lists, dicts and named tuples (as MegEngine)."""
    if isinstance(x, np.ndarray):
        return Tensor(x)
    if isinstance(x, Tensor):
        return x
    if isinstance(x, collections.abc.Mapping):
        return {k: _load_inputs(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_load_inputs(v) for v in x))
    if isinstance(x, collections.abc.Sequence):
        return [_load_inputs(v) for v in x]
    return Tensor(x, dtype=np.float32)


@contextlib.contextmanager
def _record_parameter_reads(on_read: Callable[[M.Module, str, Tensor], None]):
    """Report every `weight`/`bias` read from a Module while active: a forward may use a
    submodule's parameters without calling it, and MegEngine counts those too."""
    original = M.Module.__getattribute__

    def reading(module, item):
        member = original(module, item)
        if item in ("weight", "bias") and member is not None:
            on_read(module, item, member)
        return member

    M.Module.__getattribute__ = reading
    try:
        yield
    finally:
        M.Module.__getattribute__ = original


def module_stats(model: M.Module, inputs: Iterable[np.ndarray] = None,
                 input_shapes: list = None, cal_params: bool = True, cal_flops: bool = True,
                 cal_activations: bool = True, logging_to_stdout: bool = True,
                 bar_length_max: int = 20):
    """Run `model` once (in eval mode) on `inputs` or on zeros of `input_shapes`, and
    return (total_stats, stats_details) as MegEngine does: totals of parameter bytes and
    elements, FLOPs and activation bytes and elements, and the per-module rows."""
    has_inputs = inputs is not None
    if has_inputs:
        inputs = _load_inputs(inputs if isinstance(inputs, (tuple, list)) else [inputs])
    elif input_shapes:
        if not isinstance(input_shapes[0], tuple):
            input_shapes = [input_shapes]
        inputs = [F.zeros(shape, dtype=np.float32) for shape in input_shapes]
    else:
        logger.error("Inputs or input_shapes is required for running model and calculating "
                     "stats.")
        return None

    params: list[dict] = []
    flops: list[dict] = []
    activations: list[dict] = []
    seen: set[int] = set()
    names = {m: n for n, m in model.named_modules() if isinstance(m, tuple(hook_modules))}

    def count_parameter(module, item, p):
        if cal_params and id(p) not in seen and module in names:
            seen.add(id(p))
            params.append(_param_stats(names[module] + ("-w" if item == "weight" else "-b"),
                                       p))

    def hook(module, ins, outs, name=""):
        class_name = type(module).__name__
        outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
        if cal_flops:
            row = _op_stats(name, class_name, module, ins, outs)
            if row is not None:
                flops.append(row)
        for item in ("weight", "bias"):
            member = getattr(module, item, None)
            if member is not None:
                count_parameter(module, item, member)
        if cal_activations:
            activations.append(_activation_stats(name, class_name, outs[0], has_inputs))

    handles = [m.register_forward_hook(functools.partial(hook, name=n))
               for m, n in names.items()]
    try:
        with set_module_mode_safe(model, training=False), \
                _record_parameter_reads(count_parameter):
            model(*inputs)
    finally:
        for h in handles:
            h.remove()

    summary = {"#params": len(params)}
    total_flops = param_dims = param_size = act_dims = act_size = 0
    if cal_params:
        param_dims, param_size = _sized_totals(params, "param_dim", bar_length_max)
        summary["total_param_dims"] = sizeof_fmt(param_dims, suffix="")
        summary["total_param_size"] = sizeof_fmt(param_size)
        if logging_to_stdout:
            _table("param stats: ", params, ["name", "dtype", "shape", "mean", "std",
                                             "param_dim", "nbits", "size", "size_cum",
                                             "percentage", "size_bar"])
    if cal_flops:
        total_flops = sum(int(d["flops_num"]) for d in flops)
        _shares(flops, "flops_num", bar_length_max,
                functools.partial(sizeof_fmt, suffix="OPs"))
        for d in flops:
            d["flops"] = sizeof_fmt(d["flops_num"], suffix="OPs")
        out_elems = sum(sum(s[1] if len(s) > 1 else 0 for s in d["output_shapes"])
                        for d in flops)
        flops.append({"name": "total", "flops": sizeof_fmt(total_flops, suffix="OPs"),
                      "output_shapes": out_elems})
        summary["total_flops"] = sizeof_fmt(total_flops, suffix="OPs")
        if logging_to_stdout:
            _table("flops stats: ", flops, ["name", "class_name", "input_shapes",
                                            "output_shapes", "flops", "flops_cum",
                                            "percentage", "bar"])
    if cal_activations:
        act_dims, act_size = _sized_totals(activations, "act_dim", bar_length_max)
        summary["total_act_dims"] = sizeof_fmt(act_dims, suffix="")
        summary["total_act_size"] = sizeof_fmt(act_size)
        if logging_to_stdout:
            header = ["name", "class_name", "dtype", "shape", "nbits", "act_dim", "size",
                      "size_cum", "percentage", "size_bar"]
            if has_inputs:
                header[4:4] = ["mean", "std"]
            _table("activations stats: ", activations, header)
    if cal_flops and cal_params and param_size:
        summary["flops/param_size"] = "{:3.3f}".format(total_flops / param_size)
    # MegEngine logs the summary even with logging_to_stdout=False
    _table("summary", [{"item": k, "value": v} for k, v in summary.items()],
           ["item", "value"])
    return (total_stats(param_size=param_size, param_dims=param_dims, flops=total_flops,
                        act_size=act_size, act_dims=act_dims),
            stats_details(params=params, flops=flops, activations=activations))
