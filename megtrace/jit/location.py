"""Where in the user's code an op was applied (torch.fx records the same per node), so
that a trace error can point at the traced line and at the replayed one."""
from __future__ import annotations

import os
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_location() -> str:
    """`file:line` of the innermost caller outside the megtrace package."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"
