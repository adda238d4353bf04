"""`megtrace run MODEL`: run a .mge file or an exported library the way MegEngine's
load_and_run does (inputs from files, images or #rand specs, warm-up and timed
iterations, thread count, per-kernel profile, output dumps), and verify testcases."""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np
from rich.table import Table

from ..errors import MegtraceError
from .common import UserError, console, existing_file, input_types, load_model, set_threads


def add_arguments(p) -> None:
    p.add_argument("model", help="a .mge file (ours or MegEngine's) or an exported .so")
    p.add_argument("--input", action="append", default=[], metavar="NAME:SPEC",
                   help="an input: NAME:file.npy, NAME:image.jpg, NAME:#rand(min,max[,dims]) "
                        "(several separated by ';' or given again); missing inputs get "
                        "#rand(0,1) at the model's shape")
    p.add_argument("--batch_size", type=int, help="run with this batch (first dimension)")
    p.add_argument("--iter", type=int, default=10, help="timed runs (default 10)")
    p.add_argument("--warmup_iter", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--thread", type=int, help="CPU threads for TVM's kernels")
    p.add_argument("--target", help="TVM target: 'host', a preset (x86-avx2, ...) or JSON")
    p.add_argument("--seed", type=int, default=0, help="seed of #rand inputs")
    p.add_argument("--profile", nargs="?", const="-", metavar="FILE",
                   help="per-kernel timings of one run; JSON to FILE if given")
    p.add_argument("--io_dump", metavar="FILE", help="write input/output statistics as text")
    p.add_argument("--bin_out_dump", metavar="DIR", help="write each output as DIR/NAME.npy")
    p.add_argument("--model_info", action="store_true", help="print the model's summary first")
    p.add_argument("--save", metavar="FILE", help="write the outputs to FILE (.npz, or .npy "
                                                   "for a one-output model)")
    p.add_argument("--testcases", action="store_true",
                   help="verify the testcases embedded in an mgbtest0 file (exit 1 on failure)")


def run(args) -> int:
    path = existing_file(args.model)
    set_threads(args.thread)
    for name in ("iter", "warmup_iter"):
        if getattr(args, name) < 0:
            raise UserError(f"--{name}: expected a count >= 0")
    if args.model_info:
        from . import info
        if path.suffix == ".so":
            raise UserError("--model_info reads .mge files; an exported library's manifest "
                            "is its .json")
        info.run(args)
    model = load_model(path, _target(args.target))
    if args.testcases:
        return _testcases(model, path)
    np.random.seed(args.seed)
    feeds = _feeds(model, args.input, args.batch_size)
    outputs, times = _timed(model, feeds, args.warmup_iter, max(args.iter, 1))
    _print_outputs(outputs)
    console.print(f"{len(times)} run(s) after {args.warmup_iter} warm-up: min "
                  f"{min(times):.3f} ms, median {statistics.median(times):.3f} ms, max "
                  f"{max(times):.3f} ms")
    if args.profile:
        _profile(model, feeds, args.profile)
    if args.io_dump:
        _io_dump(Path(args.io_dump), feeds, outputs)
    if args.bin_out_dump:
        folder = Path(args.bin_out_dump)
        folder.mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            np.save(folder / f"{_safe(name)}.npy", value)
    if args.save:
        _save(Path(args.save), outputs)
    return 0


def _target(spec: str | None):
    if spec is None or spec in ("host", "llvm", "cpu"):
        return None
    if spec.startswith("{"):
        try:
            return json.loads(spec)
        except ValueError as e:
            raise UserError(f"--target: not a JSON target ({e})") from None
    return spec


def _testcases(model, path: Path) -> int:
    if not getattr(model, "testcases", None):
        raise UserError(f"{path.name} has no testcases (dump with input_data=... to embed "
                        "them)", status=1)
    try:
        report = model.run_testcases()
    except AssertionError as e:
        raise UserError(f"testcase failed: {e}", status=1) from None
    table = Table(title="testcases", title_justify="left")
    for col in ("#", "check", "max error"):
        table.add_column(col)
    for i, errors in enumerate(report):
        for name, err in (errors or {"(no checks: it ran)": float("nan")}).items():
            table.add_row(str(i), name, f"{err:.3g}")
    console.print(table)
    console.print(f"{len(report)} testcase(s) passed")
    return 0


def _feeds(model, specs: list[str], batch: int | None) -> dict[str, np.ndarray]:
    from ..ir import TensorType
    from ..jit.testcases import feeds_for
    types = input_types(model)
    if batch is not None:
        if batch < 1:
            raise UserError(f"--batch_size: expected a positive batch, got {batch}")
        if hasattr(model, "manifest"):
            raise UserError("--batch_size: an exported library runs the shapes it was built "
                            "for; export again for another batch")
        types = {n: TensorType((batch,) + t.shape[1:], t.dtype) if t.ndim else t
                 for n, t in types.items()}
    given: dict[str, str] = {}
    for part in (p for spec in specs for p in spec.split(";") if p):
        name, sep, value = part.partition(":")
        if not sep and "=" in part:
            name, sep, value = part.partition("=")
        if not sep or name not in types:
            if len(types) != 1 or (sep and name.isidentifier()):
                raise UserError(f"--input {part!r}: name one of the inputs {list(types)} "
                                "(NAME:SPEC)")
            name, value = next(iter(types)), part
        if not value.startswith("#") and not Path(value).is_file():
            raise UserError(f"--input {name}:{value}: no such file")
        given[name] = value
    feeds = {}
    for name, t in types.items():
        spec = given.get(name, "#rand(0,1)")
        try:
            feeds.update(feeds_for(f"{name}:{spec}", {name: t}))
        except (ValueError, MegtraceError, OSError) as e:
            raise UserError(f"--input {name}:{spec}: {e}") from None
    return feeds


def _timed(model, feeds, warmup: int, iters: int):
    outputs = None
    for _ in range(warmup):
        outputs = model.run(**feeds)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        outputs = model.run(**feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return outputs, times


def _print_outputs(outputs: dict[str, np.ndarray]) -> None:
    table = Table(title="outputs", title_justify="left")
    for col in ("name", "dtype", "shape", "min", "max", "mean"):
        table.add_column(col, justify="right" if col in ("min", "max", "mean") else "left")
    for name, value in outputs.items():
        stats = _stats(value)
        table.add_row(name, str(value.dtype), str(list(value.shape)), *stats)
    console.print(table)


def _stats(value: np.ndarray) -> tuple[str, str, str]:
    if value.size == 0:
        return ("-", "-", "-")
    v = value.astype(np.float64)
    return (f"{v.min():.6g}", f"{v.max():.6g}", f"{v.mean():.6g}")


def _profile(model, feeds, target: str) -> None:
    if not hasattr(model, "compiled_for"):
        raise UserError("--profile needs a .mge model (an exported library has no kernel "
                        "names to report)")
    from megtrace.relay_bridge.profile import profile_run
    arrays = model._feed((), feeds)
    # a model's random oprs take their keys after the inputs (graph_io.LoadedGraph.run)
    _, report = profile_run(model.compiled_for(arrays), arrays + model._next_keys())
    records = [r for per in report["profiler"]["device"].values() for r in per.values()]
    totals: dict[str, float] = {}
    for r in records:
        totals[r["name"]] = totals.get(r["name"], 0.0) + (r["end"] - r["start"]) * 1e3
    whole = sum(totals.values()) or 1.0
    table = Table(title="kernels (one run)", title_justify="left")
    for col in ("kernel", "ms", "%"):
        table.add_column(col, justify="left" if col == "kernel" else "right")
    for name, ms in sorted(totals.items(), key=lambda kv: -kv[1])[:15]:
        table.add_row(name, f"{ms:.3f}", f"{100 * ms / whole:.1f}")
    console.print(table)
    if target != "-":
        Path(target).write_text(json.dumps(report, indent=1))


def _io_dump(path: Path, feeds, outputs) -> None:
    lines = []
    for kind, values in (("input", feeds), ("output", outputs)):
        for name, v in values.items():
            lo, hi, mean = _stats(np.asarray(v))
            lines.append(f"{kind} {name}: {np.asarray(v).dtype}{list(np.shape(v))} min={lo} "
                         f"max={hi} mean={mean}")
    path.write_text("\n".join(lines) + "\n")


def _save(path: Path, outputs: dict[str, np.ndarray]) -> None:
    if path.suffix == ".npy":
        if len(outputs) != 1:
            raise UserError(f"--save {path}: the model has {len(outputs)} outputs; use .npz")
        np.save(path, next(iter(outputs.values())))
    elif path.suffix == ".npz":
        with open(path, "wb") as f:           # np.savez(path) would append .npz again
            np.savez(f, **outputs)
    else:
        raise UserError(f"--save {path}: expected a .npz (or .npy for one output) file name")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
