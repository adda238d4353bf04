"""`megtrace bench MODEL`: the same inputs through megtrace (TVM) and, where its
runtime is prepared, MegEngine Lite 1.13; latency of both and how far apart the outputs
are. Lite is looked for where `tests/lite_runtime.py --prepare` (run by `make test`)
puts it: $MEGTRACE_LITE_CACHE, else ~/.cache/megtrace/megengine-lite-1.13.0."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.table import Table

from .common import UserError, console, existing_file, load_model, set_threads

LITE_VERSION = "1.13.0"


def add_arguments(p) -> None:
    p.add_argument("model", help="a .mge file (ours or MegEngine's)")
    p.add_argument("--input", action="append", default=[], metavar="NAME:SPEC",
                   help="as for `megtrace run` (default: #rand(0,1) at the model's shape)")
    p.add_argument("--iter", type=int, default=20, help="timed runs of each (default 20)")
    p.add_argument("--warmup_iter", type=int, default=2, help="untimed runs first")
    p.add_argument("--thread", type=int, default=1, help="CPU threads of both (default 1)")
    p.add_argument("--lite-dir", help="a prepared MegEngine Lite folder (default: the cache)")


def lite_dir(given: str | None) -> Path | None:
    """The prepared Lite runtime folder, or None."""
    if given is not None:
        path = Path(given)
        if not (path / "megenginelite").is_dir():
            raise UserError(f"--lite-dir {given}: no megenginelite/ in it")
        return path
    path = Path(os.environ.get("MEGTRACE_LITE_CACHE", Path.home() / ".cache" / "megtrace"
                               / f"megengine-lite-{LITE_VERSION}"))
    return path if (path / ".complete").exists() else None


def run(args) -> int:
    from .run import _feeds, _timed
    path = existing_file(args.model)
    if path.suffix == ".so":
        raise UserError("bench compares a .mge file with MegEngine Lite; time an exported "
                        "library with `megtrace run`")
    for name in ("iter", "warmup_iter"):
        if getattr(args, name) < (1 if name == "iter" else 0):
            raise UserError(f"--{name}: expected a count >= {1 if name == 'iter' else 0}")
    set_threads(args.thread)
    lite = lite_dir(args.lite_dir)
    model = load_model(path)
    np.random.seed(0)
    feeds = _feeds(model, args.input, None)
    ours, times = _timed(model, feeds, args.warmup_iter, args.iter)
    rows = [("megtrace (TVM)", times)]
    error = None
    if lite is not None:
        theirs, lite_times = time_in_lite(path, feeds, lite, args.thread, args.warmup_iter,
                                          args.iter)
        rows.append((f"MegEngine Lite {LITE_VERSION}", lite_times))
        error = max((float(np.abs(ours[n].astype(np.float64) - theirs[n]).max())
                     for n in ours if n in theirs and ours[n].size), default=None)
    table = Table(title=f"{path.name}, {args.iter} runs, {args.thread} thread(s)",
                  title_justify="left")
    for col in ("runtime", "min ms", "median ms", "max ms"):
        table.add_column(col, justify="left" if col == "runtime" else "right")
    for name, ts in rows:
        table.add_row(name, f"{min(ts):.3f}", f"{statistics.median(ts):.3f}", f"{max(ts):.3f}")
    console.print(table)
    if lite is None:
        console.print("MegEngine Lite: not prepared, so megtrace is timed alone (prepare it "
                      "with `python tests/lite_runtime.py --prepare`, or give --lite-dir)")
    else:
        console.print(f"speed-up over Lite: "
                      f"{statistics.median(rows[1][1]) / statistics.median(times):.2f}x; max "
                      f"|megtrace - Lite|: {'-' if error is None else f'{error:.3g}'}")
    return 0


def time_in_lite(model: str | Path, feeds: dict[str, np.ndarray], lite: Path | None = None,
                 threads: int = 1, warmup: int = 2, iters: int = 20
                 ) -> tuple[dict[str, np.ndarray], list[float]]:
    """Run `model` (a .mge file) in MegEngine Lite 1.13 on `feeds` (name -> array):
    its outputs by name and the milliseconds of each of `iters` timed runs. Lite runs in
    a subprocess of its own (it is a Python 3.10 build loaded through ctypes); `lite`
    defaults to the prepared cache (`lite_dir`)."""
    model = Path(model)
    lite = lite if lite is not None else lite_dir(None)
    if lite is None:
        raise UserError("MegEngine Lite is not prepared (run `python tests/lite_runtime.py "
                        "--prepare`, or give its folder)")
    with tempfile.TemporaryDirectory() as tmp:
        inputs, out = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(inputs, **feeds)
        timer = Path(__file__).with_name("lite_timer.py")
        done = subprocess.run([sys.executable, str(timer), str(lite), str(model), str(inputs),
                               str(threads), str(warmup), str(iters), str(out)],
                              capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            last = (done.stderr.strip().splitlines() or ["it exited without output"])[-1]
            raise UserError(f"MegEngine Lite could not run {model.name}: {last}")
        with np.load(out) as f:
            values = {k: f[k] for k in f.files}
    return values, list(values.pop("__times_ms__"))
