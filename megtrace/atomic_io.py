"""Crash-safe file writes: a reader sees the old file or the new one, never a torn one.

Every writer (dumps, strip-info, exported libraries and manifests, tuning records) goes
through here: the data goes to a temp file in the target's own folder (so the rename
stays on one file system), is flushed and fsync'd, gets the permissions `open()` would
have given, and is renamed over the target. A symlink is written through (the link
stays, its target changes). A process killed mid-write leaves only its temp file, which
the next write to the same target removes. A leaf module: it imports nothing from
megtrace, so every layer may use it.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator

_TEMP = ".{name}.tmp-{pid}-"
_TEMP_RE = r"^\.{name}\.tmp-(\d+)-"


def resolve_target(path: str | os.PathLike) -> Path:
    """The file a write to `path` should replace: a symlink's target, else `path`."""
    path = Path(os.fspath(path))
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _umask() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777     # replacing a file keeps its mode
    except FileNotFoundError:
        return 0o666 & ~_umask()                  # what open(path, "w") would give


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(target: Path) -> None:
    """Delete temp files that killed writers of `target` left behind."""
    pattern = re.compile(_TEMP_RE.format(name=re.escape(target.name)))
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        m = pattern.match(entry.name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            with contextlib.suppress(OSError):
                entry.unlink()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path to write the new file at (for writers that want a path, such
    as a linker); on normal exit it replaces `path` atomically, on error it vanishes."""
    target = resolve_target(path)
    folder = target.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"{os.fspath(path)!r}: the folder {str(folder)!r} does not exist")
    remove_stale_temps(target)
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=_TEMP.format(name=target.name, pid=os.getpid()),
                               suffix=target.suffix)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp_path, mode)
        os.replace(tmp_path, target)
        _fsync_folder(folder)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace the file at `path` with `data`, all or nothing."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode())


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
