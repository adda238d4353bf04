"""megtrace tune: tune a MegEngine model file with MetaSchedule, optionally export it.

    megtrace tune model.mge --trials 32 --work-dir tuning [--target aarch64]
                  [--threads 2] [--rpc-tracker HOST:PORT --rpc-key KEY] [--export m.so]

The records go to WORK_DIR (one folder per target and thread count); running again
continues from them. `--export` writes a library built with the kept records.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import OneLineParser


def _parser(prog: str = "megtrace tune") -> argparse.ArgumentParser:
    p = OneLineParser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("model", help="a MegEngine .mge model file")
    p.add_argument("--trials", type=int, default=32, help="trials per task (default 32)")
    p.add_argument("--work-dir", required=True, help="folder of the tuning database")
    p.add_argument("--target", default=None,
                   help="'host' (default), a preset (aarch64, x86-avx512, ...) or a TVM "
                        "target as JSON")
    p.add_argument("--threads", type=int, default=None,
                   help="deployment thread count (default: every core)")
    p.add_argument("--base", choices=("auto", "rules", "default"), default="auto",
                   help="lowering to tune: the CPU rules' (only what they leave "
                        "generic) or TVM's plain one (every kernel)")
    p.add_argument("--rpc-tracker", metavar="HOST:PORT", default=None,
                   help="measure on a device registered with this RPC tracker")
    p.add_argument("--rpc-key", default=None, help="the device key at the tracker")
    p.add_argument("--no-keep-check", action="store_true",
                   help="apply every best record, without re-measuring it against the "
                        "untuned kernel")
    p.add_argument("--no-compare", action="store_true",
                   help="skip timing the whole model tuned vs untuned")
    p.add_argument("--export", metavar="LIB", default=None,
                   help="write the tuned model as a library (.so) plus manifest")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar or lines (the summary still prints)")
    return p


def _target(text: str | None) -> Any:
    if text is None or not text.lstrip().startswith("{"):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--target: not valid JSON ({e})") from e


def _remote(tracker: str | None, key: str | None):
    if tracker is None and key is None:
        return None
    if tracker is None or key is None:
        raise ValueError("--rpc-tracker and --rpc-key go together")
    host, _, port = tracker.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--rpc-tracker: expected HOST:PORT; got {tracker!r}")
    from megtrace.relay_bridge.ms_env import RemoteDevice
    return RemoteDevice(host, int(port), key)


def main(argv: list[str] | None = None, prog: str = "megtrace tune") -> int:
    args = _parser(prog).parse_args(argv)
    try:
        from megtrace import load_graph

        from megtrace.relay_bridge.tuning import tune
        target = _target(args.target)
        remote = _remote(args.rpc_tracker, args.rpc_key)
        model = load_graph(args.model)
        summary = tune(model, target, work_dir=args.work_dir, trials=args.trials,
                       num_threads=args.threads, progress=not args.quiet, base=args.base,
                       remote=remote, keep_only_faster=not args.no_keep_check,
                       compare=not args.no_compare)
        if args.quiet:                  # else tune printed it as a table
            print(summary)
        if args.export:
            from megtrace.relay_bridge.export import export
            tuned = args.work_dir if summary.tasks else None    # nothing tuned: plain
            done = export(model, args.export, target, tuning_dir=tuned,
                          num_threads=args.threads)
            print(f"exported {done.library} and {done.manifest.name}")
    except (ValueError, TypeError, FileNotFoundError, RuntimeError, ImportError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
