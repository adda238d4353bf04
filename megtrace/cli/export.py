"""`megtrace export MODEL LIB.so`: a model file as a TVM library plus manifest, as
`megtrace.export` writes it (`megtrace run LIB.so` and relay_bridge/deploy.py run it)."""
from __future__ import annotations

import json

from .common import UserError, console, existing_file


def add_arguments(p) -> None:
    p.add_argument("model", help="a .mge file (ours or MegEngine's)")
    p.add_argument("library", help="the library to write (.so, or .tar of object files); "
                                   "its manifest goes to LIBRARY.json")
    p.add_argument("--target", help="'host' (default), a preset (x86-avx2, aarch64, ...) or "
                                    "a TVM target as JSON")
    p.add_argument("--threads", type=int, help="the runner's thread count (default: every "
                                               "core)")
    p.add_argument("--tuning-dir", help="build with the records `megtrace tune` left here")


def run(args) -> int:
    import megtrace as mge
    path = existing_file(args.model)
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads: expected a positive count, got {args.threads}")
    target = args.target
    if target in (None, "host"):
        target = None
    elif target.lstrip().startswith("{"):
        try:
            target = json.loads(target)
        except ValueError as e:
            raise UserError(f"--target: not a JSON target ({e})") from None
    if args.tuning_dir is not None:
        existing_dir(args.tuning_dir)
    model = mge.load_graph(path)
    done = mge.export(model, args.library, target, tuning_dir=args.tuning_dir,
                      num_threads=args.threads)
    console.print(f"exported {done.library} and {done.manifest.name} ({done.pipeline} "
                  f"build, {done.seconds:.1f} s)")
    return 0


def existing_dir(path: str) -> None:
    from pathlib import Path
    if not Path(path).is_dir():
        raise UserError(f"--tuning-dir {path}: no such folder")
