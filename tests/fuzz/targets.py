"""Every byte reader of megtrace, as a fuzz target: a function of one input's bytes, the
exceptions it may answer with (anything else, or a crash, is a finding), and its seeds.

Readers: FBS_V2 / FBS (MGBC) / MGBS models and mgbtest0 testcase containers (all through
load_graph, which builds the graph too), strip-info JSON (append_json), tuning databases
and export manifests.
"""
from __future__ import annotations

import io
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURES = DATA / "megengine-1.13"


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], object]
    allowed: tuple[type[BaseException], ...]
    seeds: Callable[[], list[bytes]]


def _load_model(data: bytes) -> None:
    import megtrace as mge
    mge.load_graph(io.BytesIO(data))


def _model_errors() -> tuple:
    import megtrace as mge
    return (mge.FormatError,)       # UnsupportedModelError is a FormatError


def _fixture_seeds(*names: str) -> Callable[[], list[bytes]]:
    def seeds() -> list[bytes]:
        return [(FIXTURES / n).read_bytes() for n in names if (FIXTURES / n).is_file()]
    return seeds


def _tiny_dumps(**dump_options) -> list[bytes]:
    """Our own small dumps (a few hundred bytes each: fast to mutate) of graphs that
    reach many oprs: conv/bias/relu, pooling, reshape chains, concat, subtensor, matmul,
    reductions. record_only: nothing is compiled."""
    import numpy as np

    import megtrace as mge
    import megtrace.functional as F
    from megtrace.jit import trace
    rng = np.random.default_rng(0)
    w = mge.tensor(rng.standard_normal((4, 2, 3, 3)).astype(np.float32))
    m = mge.tensor(rng.standard_normal((8, 3)).astype(np.float32))
    graphs = [
        lambda x: F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2),
        lambda x: F.concat([x, x * 2], axis=1).reshape(1, -1)[:, 1:5].sum(axis=1),
        lambda x: F.matmul(x.reshape(2, 16), F.ones((16, 3))) + 1,
        lambda x: F.softmax(F.avg_pool2d(x, 2).flatten(1), axis=1) @ m,
    ]
    out = []
    for fn in graphs:
        f = trace(fn, symbolic=True, capture_as_const=True, record_only=True)
        f(mge.tensor(np.ones((1, 2, 4, 4), np.float32)))
        buf = io.BytesIO()
        f.dump(buf, arg_names=["x"], **dump_options)
        out.append(buf.getvalue())
    return out


def _seeds(*fixtures: str, **dump_options) -> Callable[[], list[bytes]]:
    def seeds() -> list[bytes]:
        return _fixture_seeds(*fixtures)() + _tiny_dumps(**dump_options)
    return seeds


def _strip_info(data: bytes) -> None:
    from megtrace.dump import _merge
    _merge(data.decode("utf-8", "replace"), {"opr_types": ["Elemwise"], "dtypes": ["Float32"]},
           append=True)


def _strip_info_seeds() -> list[bytes]:
    return [b'{"dtypes": ["Float32"], "elemwise_modes": ["RELU"], "opr_types": '
            b'["Elemwise", "Host2DeviceCopy"], "hash": 123}', b"{}"]


_SPLIT = b"\n--8<--\n"


def _tuning_db(data: bytes) -> None:
    """The bytes are the workload file, then (after _SPLIT) the records, then decisions."""
    from megtrace.relay_bridge.targets import resolve
    from megtrace.relay_bridge.tuning_store import Store
    parts = (data.split(_SPLIT) + [b"", b""])[:3]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = Store(tmp, resolve(None))
        store.dir.mkdir(parents=True)
        for name, part in zip(("database_workload.json", "database_tuning_record.json",
                               "decisions.json"), parts):
            (store.dir / name).write_bytes(part)
        store.decisions()
        store.read_meta()
        store.database()


def _tuning_seeds() -> list[bytes]:
    return [b'["0x1", "{}"]\n' + _SPLIT + b'[0, [1, 2, 3, 4]]\n' + _SPLIT + b'{"a": {"kept": true}}']


def _manifest(data: bytes) -> None:
    from megtrace.relay_bridge.deploy import parse_manifest
    parse_manifest(data)


def _manifest_seeds() -> list[bytes]:
    return [b'{"format": "megtrace-export", "format_version": 1, "library": "m.so", '
            b'"inputs": [{"name": "x", "shape": [1, 3], "dtype": "float32"}], '
            b'"outputs": [{"name": "y", "shape": [1, 3], "dtype": "float32"}], '
            b'"target": {"kind": "llvm"}, "device": "cpu", "num_threads": 2, '
            b'"library_size": 10, "library_sha256": "ab"}']


def targets() -> dict[str, Target]:
    model_errors = _model_errors()
    return {t.name: t for t in (
        Target("fbs_v2", _load_model, model_errors,
               _seeds("mlp_plain.mge", "convnet_opt.mge", optimize_for_inference=False)),
        Target("fbs_v1", _load_model, model_errors, _seeds("mlp_fbs1.mge", dump_format="FBS")),
        Target("mgbtest0", _load_model, model_errors,
               _seeds("convnet_testcase.mge", input_data=["#rand(0,1,1,2,4,4)"])),
        Target("strip_info", _strip_info, (ValueError,), _strip_info_seeds),
        Target("tuning_db", _tuning_db, (), _tuning_seeds),
        Target("manifest", _manifest, (ValueError,), _manifest_seeds),
    )}


def check_one(target: Target, data: bytes) -> None:
    """Run one input; re-raise only what the reader must never raise."""
    try:
        target.run(data)
    except target.allowed:
        pass


os.environ.setdefault("TVM_NUM_THREADS", "1")
