import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
# Files written by the real MegEngine 1.13 (see tests/data/megengine-1.13/README.md);
# MEGTRACE_FIXTURES points elsewhere (e.g. at a fuller set).
FIXTURES = Path(os.environ.get("MEGTRACE_FIXTURES", TESTS / "data" / "megengine-1.13"))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seeded_global_rng():
    """Module initialisers draw from NumPy's global RNG (as MegEngine's do): seed it so
    every test sees the same weights on every run."""
    np.random.seed(0)


@pytest.fixture(scope="session")
def fixtures_dir():
    if not FIXTURES.is_dir():
        pytest.fail(f"MegEngine fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture(scope="session")
def lite():
    """The real MegEngine Lite runtime. Missing -> a failure with the fix, never a skip."""
    import lite_runtime
    if not lite_runtime.is_prepared():
        pytest.fail(f"MegEngine Lite is not prepared in {lite_runtime.CACHE}; run "
                    "`python tests/lite_runtime.py --prepare` (make test does)")
    return lite_runtime


@pytest.fixture
def full_checks(monkeypatch) -> list[str]:
    """The names of the ops Replayer._check (the replay's full check) is called for from
    here on: those the inline check in Replayer.record declined."""
    from megtrace.jit.replay import Replayer
    calls: list[str] = []
    full = Replayer._check

    def counted(self, op, inputs, params):
        calls.append(op.name)
        return full(self, op, inputs, params)
    monkeypatch.setattr(Replayer, "_check", counted)
    return calls


def rel_err(got, want) -> float:
    dtype = np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(want) else np.float64
    got, want = np.asarray(got, dtype), np.asarray(want, dtype)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


# Builds in tests stay builds (a test may watch one happen, e.g. the CPU rules' fallback);
# tests/perf/test_compile_cache.py turns the persistent compile cache on where it wants it.
os.environ.setdefault("MEGTRACE_COMPILE_CACHE", "0")
