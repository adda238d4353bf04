"""`megtrace` command line (also `python -m megtrace`):

    megtrace info MODEL                      what a .mge file holds
    megtrace run MODEL [load_and_run options] run a .mge file or an exported .so
    megtrace tune MODEL --trials N ...       MetaSchedule tuning (see megtrace tune --help)
    megtrace export MODEL LIB.so             a TVM library + manifest, as megtrace.export
    megtrace convert IN.mge OUT.mge          write again with other dump options / format
    megtrace bench MODEL                     megtrace vs MegEngine Lite (when prepared)
    megtrace demo                            trace, compile, dump and reload a small net
    megtrace --version
"""
from __future__ import annotations

import argparse
import sys

from ..errors import MegtraceError
from . import bench as _bench
from . import convert as _convert
from . import export as _export
from . import info as _info
from . import run as _run
from . import tune as _tune
from .common import OneLineParser, UserError


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    from .. import __version__
    try:
        tvm = version("apache-tvm")
    except PackageNotFoundError:
        tvm = "not installed"
    return f"megtrace {__version__} (TVM {tvm}, MegEngine format 1.13)"


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="megtrace", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("info", help="list a model's inputs, outputs, operators and metadata")
    p.add_argument("model")
    _run.add_arguments(sub.add_parser("run", help="run a model (load_and_run's options)"))
    _export.add_arguments(sub.add_parser(
        "export", help="build a model file into a TVM library (.so) plus manifest"))
    _convert.add_arguments(sub.add_parser(
        "convert", help="write a .mge again with other options (format, optimization, ...)"))
    _bench.add_arguments(sub.add_parser(
        "bench", help="time a model in megtrace and in MegEngine Lite (when prepared)"))
    sub.add_parser("demo", help="trace, compile, dump and reload a small conv net")
    sub.add_parser("tune", help="MetaSchedule-tune a model file (see megtrace tune --help)",
                   add_help=False)
    return parser


def main(argv=None) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.cmd == "demo":
        from ..demo import main as demo
        return demo(rest)
    if args.cmd == "tune":
        return _tune.main(rest, prog="megtrace tune")
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return {"info": _info.run, "run": _run.run, "export": _export.run,
                "convert": _convert.run, "bench": _bench.run}[args.cmd](args)
    except UserError as e:
        _fail(e)
        return e.status
    except (MegtraceError, OSError, ValueError, AssertionError) as e:
        _fail(e)
        return 2


def _fail(error: Exception) -> None:
    """One line on stderr (the first line of the message), never a traceback."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    print(f"megtrace: error: {first}", file=sys.stderr)
