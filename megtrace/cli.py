"""`megtrace` command line: inspect and run MegEngine model files.

    megtrace info model.mge
    megtrace run model.mge --input data=x.npy [--save out.npz]
    megtrace tune model.mge --trials N --work-dir D [--target T] [--export lib.so]
    megtrace demo
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np


def _info(args) -> int:
    from fbs.reader import detect_format, read_model
    with open(args.model, "rb") as f:
        data = f.read()
    kind = detect_format(data)
    cases = []
    if kind == "mgbtest0":
        from fbs.testcases import read_container
        model, cases = read_container(data)
    else:
        model = read_model(data)
    print(f"format {kind}" + (f" with {len(cases)} testcase(s)" if kind == "mgbtest0" else ""))
    for t in model.inputs:
        print(f"input  {t.name}: {t.dtype}{list(t.shape)}")
    for name in model.output_names():
        print(f"output {name}")
    for kind, n in sorted(Counter(o.type for o in model.oprs).items()):
        print(f"  {n:4d} x {kind}")
    print(f"mge_version={model.mge_version} model_version={model.model_version} "
          f"metadata.is_valid={model.metadata.is_valid} "
          f"optimize_options={model.metadata.optimize_options}")
    return 0


def _run(args) -> int:
    import megtrace as mge
    if args.testcases:
        report = mge.load_graph(args.model).run_testcases()
        for i, errors in enumerate(report):
            print(f"testcase {i}: " + (", ".join(f"{k} err={v:.3g}" for k, v in errors.items())
                                       or "ran (no checks)"))
        return 0
    feed = {}
    for item in args.input:
        name, _, path = item.partition("=")
        if not path:
            raise SystemExit(f"--input expects NAME=FILE.npy, got {item!r}")
        feed[name] = np.load(path)
    outs = mge.load_graph(args.model).run(**feed)
    for name, value in outs.items():
        print(f"{name}: {value.dtype}{list(value.shape)}\n{value}")
    if args.save:
        np.savez(args.save, **outs)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="megtrace", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("info", help="list a model's inputs, outputs and operators")
    p.add_argument("model")
    p = sub.add_parser("run", help="run a model with TVM on .npy inputs")
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--save", help="write the outputs to this .npz")
    p.add_argument("--testcases", action="store_true",
                   help="run and verify the testcases embedded in an mgbtest0 file")
    sub.add_parser("demo", help="trace, compile, dump and reload a small conv net")
    sub.add_parser("tune", help="MetaSchedule-tune a model file (see megtrace tune --help)",
                   add_help=False)
    args, rest = parser.parse_known_args(argv)
    if args.cmd == "demo":
        from .demo import main as demo
        return demo(rest)
    if args.cmd == "tune":
        from relay_bridge.cli_tune import main as tune_main
        return tune_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {rest}")
    from .errors import MegtraceError
    try:
        return {"info": _info, "run": _run}[args.cmd](args)
    except (MegtraceError, OSError, AssertionError) as e:
        print(f"megtrace: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
