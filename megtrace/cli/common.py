"""What every `megtrace` subcommand shares: the console, user errors, model loading."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

# OpenCV (image inputs) logs to stderr when a file is not an image; errors are ours.
os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class UserError(Exception):
    """A mistake in the command line or its files: one line on stderr, exit status 2
    (1 for a failed check), never a traceback."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


class OneLineParser(argparse.ArgumentParser):
    """argparse with its mistakes on one line (no usage block): `--help` shows usage."""

    def error(self, message: str):
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def existing_file(path: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{path}: no such file")
    return p


def is_exported_library(path: Path) -> bool:
    return path.suffix in (".so", ".tar") or path.name.endswith(".so.json")


def load_model(path: Path, target: Any = None):
    """A loaded .mge (LoadedGraph) or an exported library (DeployedModel)."""
    if is_exported_library(path):
        from megtrace.relay_bridge.export import load_exported
        return load_exported(path)
    import megtrace as mge
    return mge.load_graph(path, target=target)


def input_types(model) -> dict:
    """Input name -> TensorType for either kind of model."""
    from ..ir import TensorType
    if hasattr(model, "manifest"):
        return {i["name"]: TensorType(tuple(i["shape"]), i["dtype"]) for i in model.inputs}
    return {i.name: TensorType(tuple(i.shape), i.dtype) for i in model.inputs}


def set_threads(threads: int | None) -> None:
    """TVM sizes its thread pool when it is first loaded: set the count before that."""
    if threads is not None:
        if threads < 1:
            raise UserError(f"--thread: expected a positive count, got {threads}")
        os.environ["TVM_NUM_THREADS"] = str(threads)
