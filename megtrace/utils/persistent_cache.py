"""`PersistentCacheOnServer`: MegEngine's persistent key-value cache, with its settings.

MegEngine keeps its fastrun algorithm choices there; megtrace code (and user code written
for MegEngine) can keep any (category, key) -> bytes there, and it behaves as MegEngine's:
- the store is chosen on first use from `MGE_FASTRUN_CACHE_TYPE`: "MEMORY" (this object
  only), "FILE" (`cache.bin` in `MGE_FASTRUN_CACHE_DIR`, default `<hub home>/
  persistent_cache`), else a redis server at `MGE_FASTRUN_CACHE_URL` when one is given and
  reachable, falling back to the file; `config` is None until then;
- a file cache is read when first used and written back (merged with what other
  processes wrote, under a lock) by `flush()` and when the object goes away, only if this
  object changed something.
The file holds length-prefixed records (no pickle: reading it runs nothing).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import getpass
import os
import struct
import sys
import urllib.parse
from dataclasses import dataclass, field
from typing import Optional

from ..atomic_io import write_bytes as atomic_write_bytes
from ..hub.hub import _get_megengine_home
from ..logger import get_logger
from ..version import __version__

__all__ = ["PersistentCacheOnServer"]

_MAGIC = b"MTPC1\n"
_Key = tuple[bytes, bytes]


@dataclass
class CacheConfig:
    """The store in use: `type` is "redis", "in-file" or "in-memory"."""

    type: str
    args: dict = field(default_factory=dict)


def _as_bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _read_file(path: str) -> dict[_Key, bytes]:
    """The records of a cache file; an empty, foreign or torn file reads as empty."""
    try:
        data = open(path, "rb").read()
    except OSError:
        return {}
    if not data.startswith(_MAGIC):
        return {}
    out, pos = {}, len(_MAGIC)
    try:
        while pos < len(data):
            parts = []
            for _ in range(3):
                (n,) = struct.unpack_from("<I", data, pos)
                pos += 4
                if pos + n > len(data):
                    raise ValueError("truncated record")
                parts.append(data[pos:pos + n])
                pos += n
            out[(parts[0], parts[1])] = parts[2]
    except (struct.error, ValueError):
        pass            # keep the whole records before a torn tail
    return out


def _encode(records: dict[_Key, bytes]) -> bytes:
    chunks = [_MAGIC]
    for (category, key), value in records.items():
        for part in (category, key, value):
            chunks.append(struct.pack("<I", len(part)) + part)
    return b"".join(chunks)


class PersistentCacheOnServer:
    """MegEngine's `PersistentCacheOnServer` (see the module docstring)."""

    def __init__(self):
        self._candidates: list[CacheConfig] = []
        self._config: Optional[CacheConfig] = None
        self._records: dict[_Key, bytes] = {}
        self._dirty = False
        cache_type = os.getenv("MGE_FASTRUN_CACHE_TYPE")
        if cache_type not in ("FILE", "MEMORY"):
            try:
                redis = self.get_redis_config()
            except Exception as exc:     # MegEngine logs and falls back to the file
                get_logger().error(f"failed to connect to cache server {exc!r}; try "
                                   "fallback to in-file cache")
            else:
                if redis is not None:
                    self._candidates.append(CacheConfig("redis", redis))
        if cache_type != "MEMORY":
            path = self.get_cache_file(self.get_cache_dir())
            self._candidates.append(CacheConfig("in-file", {"path": path}))
        self._candidates.append(CacheConfig("in-memory"))

    # -- MegEngine's settings --------------------------------------------------------------
    def get_cache_dir(self) -> str:
        cache_dir = os.getenv("MGE_FASTRUN_CACHE_DIR") or os.path.join(
            _get_megengine_home(), "persistent_cache")
        cache_dir = os.path.expanduser(str(cache_dir))
        os.makedirs(cache_dir, exist_ok=True)
        return cache_dir

    def get_cache_file(self, cache_dir: str) -> str:
        path = os.path.join(cache_dir, "cache.bin")
        with open(path, "a"):
            pass
        return path

    @contextlib.contextmanager
    def lock_cache_file(self, cache_dir: str):
        with open(os.path.join(cache_dir, "cache.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def get_redis_config(self) -> Optional[dict]:
        """The redis server named by MGE_FASTRUN_CACHE_URL (redis://host:port or
        redis+socket:///path), or None when it names none."""
        url = os.getenv("MGE_FASTRUN_CACHE_URL")
        if url is None:
            return None
        parsed = urllib.parse.urlparse(url)
        assert not parsed.username, "redis conn with username unsupported"
        if parsed.scheme == "redis":
            assert parsed.hostname and parsed.port, "invalid url"
            assert not parsed.path
            config = {"hostname": parsed.hostname, "port": str(parsed.port)}
        elif parsed.scheme == "redis+socket":
            assert not (parsed.hostname or parsed.port)
            assert parsed.path
            config = {"unixsocket": parsed.path}
        else:
            raise AssertionError("unsupported scheme")
        if parsed.password is not None:
            config["password"] = parsed.password
        config["prefix"] = f"mgbcache:{getpass.getuser()}:MGB{__version__}::"
        return config

    # -- the store -------------------------------------------------------------------------
    @property
    def config(self) -> Optional[CacheConfig]:
        """The store in use; None until the cache is first used."""
        return self._config

    def _open(self) -> CacheConfig:
        if self._config is None:
            for candidate in self._candidates:
                if candidate.type == "redis" and not self._connect_redis(candidate):
                    continue
                if candidate.type == "in-file":
                    self._records = _read_file(candidate.args["path"])
                self._config = candidate
                break
        return self._config

    def _connect_redis(self, config: CacheConfig) -> bool:
        try:
            import redis
            args = config.args
            client = redis.Redis(host=args.get("hostname"), port=int(args.get("port", 0))
                                 or 6379, unix_socket_path=args.get("unixsocket"),
                                 password=args.get("password"))
            if not client.exists("mgb-cache-flag"):
                return False
            config.args["client"] = client
            return True
        except Exception as exc:
            get_logger().error(f"failed to connect to cache server {exc!r}")
            return False

    def put(self, category: str, key, value) -> None:
        config = self._open()
        category, key, value = _as_bytes(category), _as_bytes(key), _as_bytes(value)
        if config.type == "redis":
            config.args["client"].set(config.args["prefix"].encode() + category + b"@" + key,
                                      value)
            return
        self._records[(category, key)] = value
        self._dirty = True

    def get(self, category: str, key) -> Optional[bytes]:
        config = self._open()
        category, key = _as_bytes(category), _as_bytes(key)
        if config.type == "redis":
            return config.args["client"].get(config.args["prefix"].encode() + category
                                             + b"@" + key)
        return self._records.get((category, key))

    def clean(self) -> Optional[int]:
        """Delete every entry of this store; returns how many were deleted."""
        config = self._open()
        if config.type == "in-file":
            with self.lock_cache_file(os.path.dirname(config.args["path"])):
                count = len(_read_file(config.args["path"]))
                atomic_write_bytes(config.args["path"], _MAGIC)
        else:
            count = len(self._records)
        self._records, self._dirty = {}, False
        return count

    def flush(self) -> None:
        """Write this object's entries to the cache file, merged with the file's."""
        config = self._config
        if config is None or config.type != "in-file" or not self._dirty:
            return
        path = config.args["path"]
        with self.lock_cache_file(os.path.dirname(path)):
            merged = _read_file(path) if os.path.exists(path) else {}
            merged.update(self._records)
            atomic_write_bytes(path, _encode(merged))
        self._dirty = False

    def __del__(self):
        try:
            self.flush()
        except Exception:       # interpreter shutdown or a vanished folder: nothing to keep
            pass


def main(argv=None) -> int:
    """`python -m megtrace.utils.persistent_cache clean`: empty the current cache."""
    parser = argparse.ArgumentParser(description="manage persistent cache")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("clean", help="clean all the cache of current user")
    parser.parse_args(argv)
    deleted = PersistentCacheOnServer().clean()
    if deleted is not None:
        print(f"{deleted} cache entries deleted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
