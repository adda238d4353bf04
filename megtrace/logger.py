"""MegEngine 1.13's logging helpers (get_logger, set_log_level, set_log_file,
enable_debug_log) on Python's logging module.

Loggers made here print "time message" lines to stderr and, after set_log_file, to that file
too; the level defaults to $MEGENGINE_LOGGING_LEVEL (INFO), as in MegEngine."""
from __future__ import annotations

import contextlib
import logging
import os
from typing import IO, Iterator

_all_loggers: list[logging.Logger] = []
_default_level = logging.getLevelName(os.getenv("MEGENGINE_LOGGING_LEVEL", "INFO").upper())


class MegEngineLogFormatter(logging.Formatter):
    """Formats records as "date message"; copies each line to `log_fout` when one is set."""

    log_fout: IO[str] | None = None

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if MegEngineLogFormatter.log_fout is not None:
            MegEngineLogFormatter.log_fout.write(text + "\n")
            MegEngineLogFormatter.log_fout.flush()
        return text


def set_log_file(fout, mode: str = "a") -> None:
    """Also write log lines to `fout` (a file name or a writable text stream)."""
    if isinstance(fout, str):
        fout = open(fout, mode)
    MegEngineLogFormatter.log_fout = fout


def get_logger(name: str | None = None, formatter=MegEngineLogFormatter) -> logging.Logger:
    """The logger `name`, set up once with megtrace's handler and the default level."""
    logger = logging.getLogger(name)
    if getattr(logger, "_init_done__", False):
        return logger
    logger._init_done__ = True
    logger.propagate = False
    logger.setLevel(_default_level)
    handler = logging.StreamHandler()
    handler.setFormatter(formatter("%(asctime)s %(message)s", datefmt="%d %H:%M:%S"))
    logger.handlers[:] = [handler]
    _all_loggers.append(logger)
    return logger


def set_log_level(level, update_existing: bool = True):
    """Set the default level (and, unless told not to, every existing logger's); returns
    the previous default."""
    global _default_level
    origin_level, _default_level = _default_level, level
    if update_existing:
        for logger in _all_loggers:
            logger.setLevel(level)
    return origin_level


def set_mgb_log_level(level):
    """MegEngine's C++ runtime log level: megtrace has no such runtime, so this sets the
    "megbrain" logger's level and returns the previous one."""
    logger = get_logger("megbrain")
    old = logger.level
    logger.setLevel(level)
    return old


@contextlib.contextmanager
def replace_mgb_log_level(level) -> Iterator[None]:
    """set_mgb_log_level(level) for the body of the with-block."""
    old = set_mgb_log_level(level)
    try:
        yield
    finally:
        set_mgb_log_level(old)


def enable_debug_log() -> None:
    """Log at DEBUG level everywhere."""
    set_log_level(logging.DEBUG)
    set_mgb_log_level(logging.DEBUG)
