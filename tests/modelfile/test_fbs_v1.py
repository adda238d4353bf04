"""dump_format="FBS" (the V1 "MGBC" container) and compat_older_version="8.14" ("MGBS"):
written by us, read by us, and run by the real MegEngine Lite."""
import struct

import numpy as np
import pytest
from conftest import rel_err
from models import ConvNet, randomize_bn
from zoo import EncoderBlock

import megtrace as mge
from megtrace.jit import trace
from megtrace.fbs.reader import read_model


def _traced(net, shape, rng):
    f = trace(lambda d: net(d), symbolic=True, capture_as_const=True)
    x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    f(mge.tensor(x))
    return f, x, net(mge.tensor(x)).numpy()


@pytest.mark.lite
@pytest.mark.parametrize("kwargs,magic", [({"dump_format": "FBS"}, b"MGBC"),
                                          ({"dump_format": "FBS", "compat_older_version": "8.14"},
                                           b"MGBS")], ids=["fbs", "fbs-8.14"])
@pytest.mark.parametrize("model,shape", [(ConvNet, (1, 3, 32, 32)),
                                         (lambda: EncoderBlock(64, 4, 128), (1, 8, 64))],
                         ids=["convnet", "encoder"])
def test_fbs_v1_runs_in_lite(model, shape, kwargs, magic, lite, rng, tmp_path):
    f, x, want = _traced(randomize_bn(model(), rng).eval(), shape, rng)
    path = tmp_path / "m.mge"
    result = f.dump(path, arg_names=["data"], output_names=["out"], **kwargs)
    raw = path.read_bytes()
    assert raw[:4] == magic and result.content_hash != 0
    assert rel_err(mge.load_graph(path).run(data=x)["out"], want) <= 1e-5
    assert rel_err(lite.run_model(path, {"data": x})["out"], want) <= 1e-4


def test_fbs_v1_layout_and_var_names(rng, tmp_path):
    f, x, want = _traced(ConvNet().eval(), (1, 3, 32, 32), rng)
    for level, named in ((0, 0), (1, 1)):
        f.dump(tmp_path / "m.mge", arg_names=["data"], output_names=["out"], dump_format="FBS",
               keep_var_name=level)
        model = read_model((tmp_path / "m.mge").read_bytes())
        assert len(model.names) == named
    f.dump(tmp_path / "m.mge", arg_names=["data"], output_names=["out"], dump_format="FBS",
           keep_var_name=2)
    raw = (tmp_path / "m.mge").read_bytes()
    assert struct.unpack_from("<Q", raw, 4)[0] == 0          # feature bits
    n_data = struct.unpack_from("<Q", raw, 16)[0]
    assert raw[24 + n_data + 8:24 + n_data + 12] == b"mgb1"
    model = read_model(raw)
    assert model.output_names() == ["out"] and len(model.names) > 10
    assert model.model_version == 1


def test_compat_8_14_requires_fbs_and_change_graph(rng, tmp_path):
    f, _, _ = _traced(ConvNet().eval(), (1, 3, 32, 32), rng)
    with pytest.raises(ValueError, match="8.14"):
        f.dump(tmp_path / "m.mge", compat_older_version="8.14")
    with pytest.raises(ValueError, match="8.14"):
        f.dump(tmp_path / "m.mge", dump_format="FBS", compat_older_version="8.14",
               no_change_graph=True)
    assert not (tmp_path / "m.mge").exists()


def test_corrupt_fbs_v1_files(rng, tmp_path):
    f, _, _ = _traced(ConvNet().eval(), (1, 3, 32, 32), rng)
    f.dump(tmp_path / "m.mge", dump_format="FBS")
    raw = (tmp_path / "m.mge").read_bytes()
    bad = [raw[:30], raw[:16] + struct.pack("<Q", 10 ** 12) + raw[24:], raw[:-5]]
    for data in bad:
        with pytest.raises(mge.FormatError):
            read_model(data)
