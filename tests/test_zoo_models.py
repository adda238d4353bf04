"""MegEngine model-zoo families (tests/zoo_models, written with MegEngine's API) run eager
and traced at batch 1 and 8 with equal results, and their default dump (traced at batch 1)
runs in the real MegEngine Lite 1.13 at batch 1 and 4 with the eager outputs. Some families
are also compared with real MegEngine 1.13 on the same weights (golden data made by
tests/data/make_zoo_golden.py)."""
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err
from zoo_models import FAMILIES

import megtrace as mge
import megtrace.module as M
from megtrace.jit import trace
from megtrace.relay_bridge.targets import amx_wanted

DATA = Path(__file__).resolve().parent / "data" / "zoo_golden"
# Traced against eager: float32 FMA kernels agree within ~2e-6; where dense GEMMs run on
# AMX tiles (relay_bridge/cpu/amx.py: each operand as bf16 hi + lo, 16 of float32's 24
# mantissa bits) a transformer's stacked layers reach ~1e-5 (CLIP at batch 8: 0.8-1.7e-5).
TRACED_TOL = 3e-5 if amx_wanted() else 1e-5
GOLDEN = ["resnet", "shufflenet_v2", "deeplabv3plus", "bert", "dcgan_generator", "shufflenet_v1"]

# Families that need a piece still missing from megtrace: strict xfail, so each turns into
# an error the day the piece lands (then delete its line). MISSING applies to every test,
# MISSING_IN_LITE to the MegEngine Lite one only.
MISSING: dict[str, str] = {}
MISSING_IN_LITE: dict[str, str] = {}
# Families whose optimized dump still has more oprs than the unoptimized one (strict
# xfail: delete the line when fixed).
BIGGER_WHEN_OPTIMIZED: dict[str, str] = {}


def _params(names, *missing):
    params = []
    for name in names:
        reasons = [m[name] for m in missing if name in m]
        marks = [pytest.mark.xfail(strict=True, reason="; ".join(reasons))] if reasons else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def _family(name):
    return FAMILIES[name]


def _randomize_bn(net, rng):
    """Non-trivial BatchNorm statistics, so that folding them into convolutions matters."""
    for m in net.modules():
        if isinstance(m, M.BatchNorm2d):
            shape = m.running_mean.shape
            m.running_mean._set_value(rng.normal(size=shape).astype(np.float32) * 0.1)
            m.running_var._set_value(rng.uniform(0.5, 1.5, size=shape).astype(np.float32))
    return net


def _build(name, rng):
    build, make_inputs = _family(name)
    return _randomize_bn(build(), rng).eval(), make_inputs


def _as_list(out):
    return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]


def _eager(net, inputs):
    return _as_list(net(*[mge.tensor(v) for v in inputs.values()]))


def _traced(net):
    @trace(symbolic=True, capture_as_const=True)
    def infer(*args):
        return net(*args)
    return infer


_AT_BATCH_1: dict = {}     # name -> (net, input maker, trace called at batch 1, its inputs)


def _traced_at_batch_1(name, rng):
    """Each family is built and traced at batch 1 once: both tests below use it, so TVM
    compiles it once."""
    if name not in _AT_BATCH_1:
        net, make_inputs = _build(name, rng)
        inputs = make_inputs(1, rng)
        infer = _traced(net)
        infer(*[mge.tensor(v) for v in inputs.values()])
        _AT_BATCH_1[name] = net, make_inputs, infer, inputs
    return _AT_BATCH_1[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", _params(sorted(FAMILIES), MISSING))
def test_eager_and_traced_agree_at_batch_1_and_8(name, rng):
    net, make_inputs, infer_b1, inputs_b1 = _traced_at_batch_1(name, rng)
    for batch, infer, inputs in ((1, infer_b1, inputs_b1),
                                 (8, _traced(net), make_inputs(8, rng))):
        want = _eager(net, inputs)
        assert all(w.shape[0] == batch for w in want), name
        assert all(np.isfinite(w).all() for w in want), name
        got = _as_list(infer(*[mge.tensor(v) for v in inputs.values()]))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert rel_err(g, w) <= TRACED_TOL, (name, batch)


@pytest.mark.slow
@pytest.mark.lite
@pytest.mark.parametrize("name", _params(sorted(FAMILIES), MISSING, MISSING_IN_LITE))
def test_default_dump_runs_in_megengine_lite_at_batch_1_and_4(name, rng, lite, tmp_path):
    net, make_inputs, infer, first = _traced_at_batch_1(name, rng)
    n_outputs = len(_eager(net, first))
    path = tmp_path / f"{name}.mge"
    out_names = [f"out{i}" for i in range(n_outputs)]
    infer.dump(path, arg_names=list(first), output_names=out_names)
    for batch in (1, 4):
        inputs = first if batch == 1 else make_inputs(batch, rng)
        want = _eager(net, inputs)
        got = lite.run_model(path, inputs)
        for out_name, w in zip(out_names, want):
            assert rel_err(got[out_name], w) <= 1e-4, (name, batch, out_name)


@pytest.mark.slow
@pytest.mark.parametrize("name", _params(sorted(FAMILIES), MISSING, BIGGER_WHEN_OPTIMIZED))
def test_optimized_dump_has_no_more_oprs_than_unoptimized(name, rng, tmp_path):
    from megtrace.fbs.reader import read_model
    _, _, infer, first = _traced_at_batch_1(name, rng)
    counts = {}
    for optimize in (False, True):
        path = tmp_path / f"{name}-{optimize}.mge"
        infer.dump(path, arg_names=list(first), optimize_for_inference=optimize)
        counts[optimize] = len(read_model(path.read_bytes()).oprs)
    assert counts[True] <= counts[False], (name, counts)


@pytest.mark.parametrize("name", _params(GOLDEN, MISSING))
def test_outputs_match_real_megengine(name):
    """Same weights (MegEngine's state dict, loaded with megtrace.load) and inputs as real
    MegEngine 1.13 used: outputs agree."""
    build, _ = _family(name)
    net = build()
    net.load_state_dict(mge.load(str(DATA / f"{name}_state.pkl")))
    net.eval()
    golden = np.load(DATA / f"{name}_io.npz")
    inputs = {k[3:]: golden[k] for k in golden.files if k.startswith("in_")}
    wants = [golden[k] for k in sorted(golden.files) if k.startswith("out")]
    got = _eager(net, inputs)
    assert len(got) == len(wants)
    for g, w in zip(got, wants):
        assert rel_err(g, w) <= 1e-5, name
