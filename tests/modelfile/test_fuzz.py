"""Thousands of mutated MegEngine files: the loader answers FormatError (or its
UnsupportedModelError subclass) and nothing else: no crash, hang or huge allocation."""
import io
import zlib
import resource

import numpy as np
import pytest

import megtrace as mge

FILES = ["mlp_plain.mge", "mlp_fbs1.mge", "convnet_plain.mge", "convnet_opt.mge",
         "convnet_testcase.mge"]


def _mutations(data: bytes, rng: np.random.Generator, count: int):
    n = len(data)
    for i in range(count):
        buf = bytearray(data)
        kind = i % 4
        if kind == 0:                                   # flip a few bytes in the header area
            for pos in rng.integers(0, min(n, 512), size=rng.integers(1, 4)):
                buf[pos] = int(rng.integers(0, 256))
        elif kind == 1:                                 # anywhere
            for pos in rng.integers(0, n, size=rng.integers(1, 8)):
                buf[pos] ^= 1 << int(rng.integers(0, 8))
        elif kind == 2:                                 # truncate
            del buf[int(rng.integers(0, n)):]
        else:                                           # splice in garbage
            pos = int(rng.integers(0, n))
            buf[pos:pos] = rng.integers(0, 256, size=int(rng.integers(1, 16))).astype(
                np.uint8).tobytes()
        yield bytes(buf)


@pytest.mark.parametrize("name", FILES)
def test_mutated_files_only_raise_format_errors(name, fixtures_dir):
    data = (fixtures_dir / name).read_bytes()
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    loaded = 0
    for mutated in _mutations(data, rng, 1000):
        try:
            mge.load_graph(io.BytesIO(mutated))
            loaded += 1
        except mge.FormatError:
            pass
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 512, f"loading mutated files grew memory by {grown_mb:.0f} MB"
    assert loaded < 1000         # the mutations did reach the checks
