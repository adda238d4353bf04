"""`megtrace info MODEL`: what a model file holds, read without running or unpickling it."""
from __future__ import annotations

from collections import Counter

import numpy as np
from rich.table import Table

from .common import console, existing_file

# Metadata.optimize_options (MegEngine's GraphOptimizer::InferenceOptions::serialize).
_FLAGS = ("f16_io_f32_comp", "f16_io_comp", "fuse_conv_bias_nonlinearity",
          "fuse_conv_bias_with_z", "weight_preprocess", "fuse_preprocess", "fuse_grain")
_LAYOUTS = ("default", "nchw4", "nhwcd4", "nchw88", "nchw44", "nchw44_dot", "nchw32",
            "chwn4", "nchw64")


def decode_optimize_options(value: int) -> list[str]:
    names = [name for bit, name in enumerate(_FLAGS) if value >> bit & 1]
    layout = value >> 32
    if layout:
        names.append(_LAYOUTS[layout] if layout < len(_LAYOUTS) else f"layout {layout}")
    return names


def run(args) -> int:
    from megtrace.fbs.reader import detect_format, read_model
    path = existing_file(args.model)
    data = path.read_bytes()
    kind = detect_format(data)
    cases = []
    if kind == "mgbtest0":
        from megtrace.fbs.testcases import read_container
        model, cases = read_container(data)
    else:
        model = read_model(data)
    console.print(f"[bold]{path.name}[/]: format {kind}"
                  + (f" with {len(cases)} testcase(s)" if kind == "mgbtest0" else ""))
    io = Table(title="inputs and outputs", title_justify="left")
    for col in ("", "name", "dtype", "shape"):
        io.add_column(col)
    for t in model.inputs:
        io.add_row("input", t.name, t.dtype, str(list(t.shape)))
    for name in model.output_names():
        io.add_row("output", name, "", "")
    console.print(io)
    ops = Table(title="operators", title_justify="left")
    ops.add_column("opr")
    ops.add_column("count", justify="right")
    for name, n in sorted(Counter(o.type for o in model.oprs).items()):
        ops.add_row(name, str(n))
    console.print(ops)
    weights = sum(t.data.nbytes for o in model.oprs for t in o.tensors if t.data is not None)
    meta = model.metadata
    console.print(f"weights: {weights / 1024:.1f} KiB in "
                  f"{sum(1 for o in model.oprs for t in o.tensors if t.data is not None)} tensors")
    console.print(f"mge_version {model.mge_version}, model_version {model.model_version}")
    flags = decode_optimize_options(meta.optimize_options)
    console.print(f"metadata: valid={meta.is_valid}, graph_modified={meta.graph_modified}, "
                  f"optimize_options={meta.optimize_options}"
                  + (f" ({', '.join(flags)})" if flags else "")
                  + f", user_info {len(meta.user_info_bytes)} bytes (not unpickled)")
    if cases:
        for i, case in enumerate(cases):
            shown = ", ".join(f"{k}: {np.asarray(v).dtype}{list(np.shape(v))}"
                              for k, v in case.items())
            console.print(f"testcase {i}: {shown}")
    return 0
