"""`megtrace.save` / `megtrace.load`: checkpoints (state dicts, tensors) with pickle,
as `megengine.save` / `megengine.load` do. Model files for deployment are `trace.dump`."""
from __future__ import annotations

import os
import pickle
from typing import Any


def save(obj: Any, f, pickle_protocol: int = pickle.DEFAULT_PROTOCOL) -> None:
    if hasattr(f, "write"):
        pickle.dump(obj, f, protocol=pickle_protocol)
        return
    with open(os.fspath(f), "wb") as fh:
        pickle.dump(obj, fh, protocol=pickle_protocol)


def load(f) -> Any:
    """Unpickle a checkpoint. Pickle runs code: load only files you trust."""
    if hasattr(f, "read"):
        return pickle.load(f)
    with open(os.fspath(f), "rb") as fh:
        return pickle.load(fh)
