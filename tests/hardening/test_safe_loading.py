"""Loading a checkpoint or a model's user_info never runs code from the file unless the
caller says it trusts the file; real checkpoints (ours, MegEngine's) still load."""
import io
import os
import pickle
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest

import megtrace as mge
from megtrace.safe_pickle import UnsafePickleError


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _payload(marker) -> bytes:
    return pickle.dumps({"weight": np.ones(3, np.float32), "evil": _Exploit(marker)})


def test_a_malicious_checkpoint_runs_nothing_by_default(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "ckpt.pkl"
    path.write_bytes(_payload(marker))
    # In a fresh process, as a user would run it.
    code = textwrap.dedent(f"""
        import megtrace
        try:
            megtrace.load({str(path)!r})
        except Exception as e:
            print(type(e).__name__, e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120).stdout
    assert not marker.exists()
    assert "UnsafePickleError" in out and "posix.system" in out and "weights_only=False" in out


def test_trusting_the_file_unpickles_everything(tmp_path):
    marker = tmp_path / "ran"
    mge.load(io.BytesIO(_payload(marker)), weights_only=False)
    assert marker.exists()


def test_state_dicts_and_tensors_load_with_the_allow_list(tmp_path):
    state = OrderedDict(w=np.arange(6, dtype=np.float32).reshape(2, 3),
                        b=mge.Parameter(np.ones(3, np.float32)), step=7, names=["a", "b"],
                        nested={"lr": 0.1, "betas": (0.9, 0.999)},
                        scalar=np.float32(2.5), i64=np.int64(3))
    path = tmp_path / "s.pkl"
    mge.save(state, path)
    back = mge.load(path)
    assert list(back) == list(state)
    assert np.array_equal(back["w"], state["w"]) and back["w"].flags.writeable
    assert isinstance(back["b"], mge.Parameter) and np.array_equal(back["b"].numpy(), np.ones(3))
    assert back["step"] == 7 and back["names"] == ["a", "b"] and back["nested"]["betas"] == (0.9, 0.999)
    assert back["scalar"] == np.float32(2.5) and back["i64"] == 3
    # NumPy's own pickles (any protocol) of arrays and scalars are data too.
    for protocol in (2, 4, 5):
        blob = pickle.dumps({"a": np.eye(2), "s": np.float64(1.5)}, protocol=protocol)
        got = mge.load(io.BytesIO(blob))
        assert np.array_equal(got["a"], np.eye(2)) and got["s"] == 1.5


def test_megengine_checkpoint_loads_with_the_allow_list():
    from conftest import TESTS
    state = mge.load(TESTS / "data" / "megengine_convnet_state.pkl")
    assert state and all(isinstance(v, (np.ndarray, mge.Tensor)) for v in state.values())


def test_user_info_is_unpickled_safely(tmp_path):
    from megtrace.fbs.reader import Metadata
    meta = Metadata(user_info_bytes=pickle.dumps({"author": "x", "size": [1, 2]}))
    assert meta.user_info() == {"author": "x", "size": [1, 2]}
    evil = Metadata(user_info_bytes=_payload(tmp_path / "m"))
    with pytest.raises(UnsafePickleError, match="user_info"):
        evil.user_info()
    assert not (tmp_path / "m").exists()


class _Net(mge.module.Module):
    def __init__(self):
        super().__init__()
        self.fc = mge.module.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def test_a_pickled_module_of_imported_classes_loads_safely():
    buf = io.BytesIO()
    net = _Net()
    mge.save(net, buf)
    buf.seek(0)
    back = mge.load(buf)
    x = mge.tensor(np.ones((1, 3), np.float32))
    assert isinstance(back, _Net) and np.array_equal(back(x).numpy(), net(x).numpy())


def test_a_module_class_is_never_imported_by_the_file():
    blob = pickle.dumps(_Net()).replace(b"test_safe_loading", b"test_safe_loadinX")
    with pytest.raises(UnsafePickleError, match="test_safe_loadinX"):
        mge.load(io.BytesIO(blob))

