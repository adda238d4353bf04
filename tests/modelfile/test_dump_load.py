"""Our dump: what it writes, that we read it back, and how bad input is refused."""
import os

import numpy as np
import pytest
from conftest import rel_err
from models import MLP, ConvNet, randomize_bn

import megtrace as mge
from megtrace.jit import trace


def _traced(net, shape, rng, **kw):
    @trace(symbolic=True, capture_as_const=True, **kw)
    def infer(data):
        return net(data)
    x = mge.tensor(rng.uniform(-1, 1, size=shape).astype(np.float32))
    infer(x)
    return infer, x


@pytest.mark.parametrize("model,shape", [(MLP, (1, 64)), (ConvNet, (1, 3, 32, 32))],
                         ids=["mlp", "convnet"])
def test_dump_then_load_round_trip(model, shape, rng, tmp_path):
    net = randomize_bn(model(), rng).eval()
    infer, x = _traced(net, shape, rng)
    result = infer.dump(tmp_path / "m.mge", arg_names=["data"], output_names=["out"])
    data = (tmp_path / "m.mge").read_bytes()
    assert result.tot_bytes == len(data) and result.inputs == ["data"]
    assert result.outputs == ["out"] and result.content_hash == 0
    assert int.from_bytes(data[:4], "little") == len(data) - 4 and data[8:12] == b"mgv2"
    loaded = mge.load_graph(tmp_path / "m.mge")
    assert rel_err(loaded(x).numpy(), net(x).numpy()) <= 1e-5
    x8 = mge.tensor(rng.uniform(-1, 1, size=(8,) + shape[1:]).astype(np.float32))
    assert rel_err(loaded(data=x8).numpy(), net(x8).numpy()) <= 1e-5
    # dump -> load -> dump: the loaded graph writes a file that loads identically
    from megtrace.fbs.writer import dump_graph
    again, _ = dump_graph(loaded.graph, ["data"], ["out"])
    reloaded = mge.load_graph(__import__("io").BytesIO(again))
    assert reloaded.output_names == ["out"]
    assert np.array_equal(reloaded(x).numpy(), loaded(x).numpy())


def test_flatten_is_written_with_symbolic_batch(rng, tmp_path):
    from megtrace.fbs.reader import read_model
    infer, _ = _traced(ConvNet().eval(), (1, 3, 32, 32), rng)
    infer.dump(tmp_path / "m.mge", arg_names=["data"], optimize_for_inference=False)
    types = [o.type for o in read_model((tmp_path / "m.mge").read_bytes()).oprs]
    for t in ("GetVarShapeV1", "Subtensor", "Concat", "ReshapeV1", "BatchNormV1",
              "Convolution", "PoolingV1", "MatrixMulV2", "Host2DeviceCopy"):
        assert t in types


def test_dump_options_names_and_metadata(rng, tmp_path):
    from megtrace.fbs.reader import read_model
    infer, _ = _traced(MLP().eval(), (1, 64), rng)
    infer.dump(tmp_path / "a.mge", arg_names="data", keep_opr_name=True,
               user_info={"author": "megtrace"})
    model = read_model((tmp_path / "a.mge").read_bytes())
    assert model.output_names() == ["output_0"]
    assert any(o.name and "fc1" in o.name for o in model.oprs)
    assert model.metadata.user_info() == {"author": "megtrace"}
    assert model.metadata.user_info_bytes.startswith(b"\x80\x04")   # protocol 4, as MegEngine
    result = infer.dump(tmp_path / "b.mge", arg_names=["data"], keep_var_name=0,
                        enable_metadata=False)
    model = read_model((tmp_path / "b.mge").read_bytes())
    assert result.outputs == ["unnamed0"] and not model.names
    assert not model.metadata.is_valid


def test_dump_requires_capture_as_const(rng, tmp_path):
    @trace(symbolic=True)
    def f(x):
        return x * 2

    f(mge.tensor(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="capture_as_const=True"):
        f.dump(tmp_path / "x.mge")
    assert not (tmp_path / "x.mge").exists()


def test_dump_rejects_bad_options_without_writing(rng, tmp_path):
    infer, _ = _traced(MLP().eval(), (1, 64), rng)
    target = tmp_path / "m.mge"
    with pytest.raises(ValueError, match="unknown options"):
        infer.dump(target, enable_everything=True)
    with pytest.raises(ValueError, match="wrong number of arg_names, should be 1 values"):
        infer.dump(target, arg_names=["a", "b"])
    with pytest.raises(ValueError, match="input_data needs dump_format='FBS_V2'"):
        infer.dump(target, input_data=["#rand(0,1)"], dump_format="FBS")
    assert not target.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".megtrace")]


def test_failed_dump_keeps_old_file(rng, tmp_path, monkeypatch):
    import megtrace.fbs.writer
    infer, _ = _traced(MLP().eval(), (1, 64), rng)
    target = tmp_path / "m.mge"
    target.write_bytes(b"old content")

    def boom(*a, **k):
        raise RuntimeError("disk full")
    monkeypatch.setattr(megtrace.fbs.writer, "dump_graph", boom)
    with pytest.raises(RuntimeError):
        infer.dump(target)
    assert target.read_bytes() == b"old content"


@pytest.mark.parametrize("mutate,words", [
    (lambda d: d[: len(d) // 2], "size prefix"),
    (lambda d: b"", "not a MegEngine model"),
    (lambda d: b"hello world, this is not a model", "not a MegEngine model"),
    (lambda d: b"MGBC" + bytes(28), "FBS model"),
    (lambda d: d[:4] + b"\xff\xff\xff\x7f" + d[8:], "corrupt model"),
], ids=["truncated", "empty", "text", "fbs-v1", "bad-root-offset"])
def test_bad_files_raise_format_error(mutate, words, rng, tmp_path):
    infer, _ = _traced(MLP().eval(), (1, 64), rng)
    good = tmp_path / "good.mge"
    infer.dump(good, arg_names=["data"])
    bad = tmp_path / "bad.mge"
    bad.write_bytes(mutate(good.read_bytes()))
    with pytest.raises(mge.FormatError, match=words):
        mge.load_graph(bad)


def test_random_corruption_only_raises_format_error(rng, tmp_path):
    infer, _ = _traced(MLP().eval(), (1, 64), rng)
    good = tmp_path / "good.mge"
    infer.dump(good, arg_names=["data"])
    data = bytearray(good.read_bytes())
    from megtrace.fbs.reader import read_model
    for i in range(300):
        bad = bytearray(data)
        for pos in rng.integers(4, min(len(bad), 4096), size=4):
            bad[pos] = int(rng.integers(0, 256))
        try:
            read_model(bytes(bad))
        except mge.FormatError:
            pass
