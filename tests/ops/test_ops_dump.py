"""Every op survives the trip to a .mge file: each sample of tests/ops (and a few chains
of ops real models have) is dumped with the default options, with
optimize_for_inference=False and with enable_fuse_conv_bias_nonlinearity=True, read
back by megtrace and run in the real MegEngine Lite 1.13, all equal to eager.

All files run in one Lite process (module fixture), so the whole registry takes one
subprocess. An op that cannot be written is listed in NOT_DUMPABLE with the reason; the
list is checked both ways (a listed op that dumps fine fails the test too).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import lite_runtime
from conftest import rel_err

from megtrace import interpreter
from megtrace.errors import UnsupportedOpError
from megtrace.ir import Graph
from megtrace.ops import all_ops
from megtrace.ops.random import RNG_KEY_PREFIX

from .dump_cases import Case, chains, sample_case, sample_graph
from .samples import SAMPLES

OPTIONS = {
    "default": {"optimize": True, "fuse_conv_bias_nonlinearity": False},
    "unoptimized": {"optimize": False},
    "fuse-conv-bias": {"optimize": True, "fuse_conv_bias_nonlinearity": True},
}

# op -> why no .mge file can hold it (tests/ops checks the writer still refuses it)
_COMPLEX = ("complex64 is eager only: MegEngine 1.13's CreateComplex/GetReal/GetImag have "
            "no serializable opr and TVM no complex dtype, so traces refuse complex values")
NOT_DUMPABLE = {
    "create_complex": _COMPLEX,
    "get_real": _COMPLEX,
    "get_imag": _COMPLEX,
    "batch_norm_train": "training-mode BatchNorm updates running statistics; a dump holds "
                        "an inference graph (MegEngine writes BatchNorm with fwd_mode "
                        "INFERENCE after module.eval())",
}

# samples (by name) no .mge file can hold, with why (checked: the writer still refuses them)
NOT_DUMPABLE_SAMPLES = {
    "svd-full": "MegEngine 1.13's CPU SVD computes the reduced factors only (megdnn: "
                "\"Computing full singular vectors is not supported in naive "
                "implementation.\"), so Lite could not run full_matrices=True",
}

# ops whose outputs are unique only up to sign: SVD's U column k and Vh row k may both
# flip, so the file's factors are compared after matching their signs to eager's
SIGN_AMBIGUOUS = {"svd"}

# random ops: the file draws with MegEngine's generator from the opr's seed; the sample's
# key input is not part of the file, so values differ by design (shape and dtype are
# compared)
RANDOM = {"rng_uniform", "rng_normal", "rng_gamma", "rng_beta", "rng_poisson", "rng_permutation",
          "rng_shuffle", "rng_dropout"}

# ops (or samples, by name) megtrace writes but cannot read back (checked: reading them
# still fails); none at present
_SHAPE_INPUT = ("the target shape is a run-time tensor input: the reader folds shape "
                "arithmetic to constants for given input shapes, a shape read from an "
                "input's values is unknown until run time")
_BOUND_INPUT = ("the slice bounds are run-time tensor inputs: the reader folds index "
                "arithmetic to constants for given input shapes, a bound read from an input's "
                "values is unknown until run time")
NOT_READABLE = {
}

# ops without a Relax lowering: what MegEngine computes for them is still checked above
NO_LOWERING = {
    "create_complex": _COMPLEX,
    "get_real": _COMPLEX,
    "get_imag": _COMPLEX,
    "get_shape": "folded from input types while tracing; never reaches TVM",
    "batch_norm_train": "training only (see NOT_DUMPABLE)",
    "matinv": "TVM 0.27 has no matrix inverse; compiled graphs run it through NumPy",
    "deformable_conv2d": "no Relax lowering yet; compiled graphs interpret it",
    "svd": "TVM 0.27 has no SVD",
    "rng_gamma": "drawn eagerly (TVM has no gamma sampler)",
    "rng_beta": "drawn eagerly (TVM has no beta sampler)",
    "rng_poisson": "drawn eagerly (TVM has no Poisson sampler)",
    "roi_pooling": "per-RoI bin extents depend on the RoI values; compiled graphs interpret it",
    "nms_keep": "greedy suppression is a sequential loop over the boxes; compiled graphs "
                "interpret it",
    "deformable_psroi_pooling": "which samples count depends on the offsets; compiled graphs "
                                "interpret it",
    "cond_take": "its output length depends on the mask's values; compiled graphs run it "
                 "on the NumPy interpreter (ops/dynamic_shape.py)",
}


NOT_DUMPABLE_CHAINS: dict[str, str] = {}


def _write(graph: Graph, option: dict) -> tuple[bytes, int]:
    from megtrace.fbs.writer import DumpOptions, dump_graph
    if option["optimize"]:
        from megtrace.relay_bridge.optimize import optimize_for_inference
        graph, _ = optimize_for_inference(
            graph, fuse_conv_bias_nonlinearity=option["fuse_conv_bias_nonlinearity"])
    data, result = dump_graph(graph, list(graph.input_names), list(graph.output_names),
                              DumpOptions())
    return data, result.nr_opr


def _cases() -> dict[str, Callable[[np.random.Generator], Case]]:
    cases = {}
    for i, sample in enumerate(SAMPLES):
        if sample.op not in NOT_DUMPABLE and str(sample) not in NOT_DUMPABLE_SAMPLES:
            cases[f"{sample}#{i}"] = (lambda rng, s=sample: sample_case(s, rng))
    for name, chain in chains().items():
        if name not in NOT_DUMPABLE_CHAINS:
            cases[f"chain:{name}"] = chain.case
    return cases


_BUILT: dict[str, Case] = {}


def _built() -> dict[str, Case]:
    """Every case's graph and inputs, made once (collection needs to know which cases
    have a batch axis)."""
    if not _BUILT:
        rng = np.random.default_rng(0)
        for name, make in _cases().items():
            _BUILT[name] = make(rng)
    return _BUILT


@dataclass
class Dumped:
    case: Case
    data: bytes = b""
    nr_opr: int = 0
    got: dict | str | None = None   # Lite's outputs by name, or why there are none
    got_other: dict | str | None = None    # the same at the other batch

    @property
    def want(self) -> list[np.ndarray]:
        return self.case.want

    @property
    def feeds(self) -> dict[str, np.ndarray]:
        return self.case.feeds


@pytest.fixture(scope="module")
def dumped(tmp_path_factory, lite) -> dict[str, dict[str, Dumped]]:
    """case id -> option name -> Dumped; every file runs, at both batches, in one Lite
    process."""
    folder = tmp_path_factory.mktemp("registry_dumps")
    table: dict[str, dict[str, Dumped]] = {}
    jobs, slots = [], []
    for name, case in _built().items():
        for option_name, option in OPTIONS.items():
            entry = table.setdefault(name, {})[option_name] = Dumped(case)
            try:
                entry.data, entry.nr_opr = _write(case.graph, option)
            except Exception as e:  # noqa: BLE001 -- reported by the test of this case
                entry.got = entry.got_other = f"dump failed: {e!r}"
                continue
            path = folder / f"{len(jobs)}.mge"
            path.write_bytes(entry.data)
            jobs.append((path, case.feeds))
            slots.append((entry, "got"))
            if case.other is not None:
                jobs.append((path, case.other[0]))
                slots.append((entry, "got_other"))
    for (entry, field), result in zip(slots, lite.run_models(jobs), strict=True):
        setattr(entry, field, result)
    return table


def pytest_generate_tests(metafunc):     # one test per case, known at collection time
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", list(_cases()))
    if "batched_case" in metafunc.fixturenames:
        metafunc.parametrize("batched_case", [n for n, c in _built().items()
                                              if c.other is not None])


pytestmark = pytest.mark.lite


# single samples (by their name) megtrace writes but cannot read back
NOT_READABLE_SAMPLES = {
    "reshape-shape-input": _SHAPE_INPUT,
    "linspace-shape-input": _SHAPE_INPUT,
    "broadcast_to-shape-input": _SHAPE_INPUT,
    "subtensor-bound-inputs": _BOUND_INPUT,
    "subtensor-bound-inputs-idx": _BOUND_INPUT,
    "set_subtensor-bound-inputs": _BOUND_INPUT,
    "indexing_multi_axis_vec-bound-inputs": _BOUND_INPUT,
    "indexing_set_multi_axis_vec-bound-inputs": _BOUND_INPUT,
}

# ops (or samples) whose file cannot run at another batch than the traced one, with why
# (checked: they still fail there)
NOT_BATCH_POLYMORPHIC = {
    "get_shape": "the shape of a value is folded into a constant from its traced type (as "
                 "MegEngine's static shape inference does); traced code that reads x.shape "
                 "gets shape_of expressions, which the file computes at run time",
}

# samples MegEngine Lite itself refuses to run (checked: it still does)
LITE_REFUSES = {
    "local_conv2d-stride-dilation": "MegEngine's Local/GroupLocal kernels require dilation 1 "
                                    "(megdnn assertion dilate_h == 1 && dilate_w == 1)",
}
# RelayoutFormat NHWCD4I_NCHW needs an Image2DPack4 input (a Host2DeviceCopy has the
# default format); Lite's x86 kernels have no plain Convolution in NHWCD4 ("invalid conv
# format 2", real MegEngine's own dumps too: tests/modelfile/test_optimize_hwcd4.py)
LITE_REFUSES.update({s: "MegEngine Lite refuses it on x86" for s in (
    "relayout_format-out", "conv2d_nhwcd4-dense", "conv2d_nhwcd4-channel", "conv2d_nhwcd4-group")})


def _listed(case: str, ops: dict, samples: dict | None = None) -> bool:
    """Whether the case's op is in `ops` or the sample itself in `samples`."""
    sample = case.split("#")[0]
    return sample.split("-")[0] in ops or sample in (samples or {})


def _batch(feeds: dict[str, np.ndarray]) -> int:
    return next(iter(feeds.values())).shape[0]


def _equal(got: list[np.ndarray], want: list[np.ndarray], what: str) -> bool:
    try:
        _assert_equal(got, want, what)
    except AssertionError:
        return False
    return True


def _matched_svd_signs(got: list[np.ndarray], want: list[np.ndarray]) -> list[np.ndarray]:
    """U, S, Vh with each singular pair flipped to point the way eager's does."""
    u, s, vh = (np.asarray(g) for g in got)
    if u.shape != want[0].shape or vh.shape != want[2].shape:
        return [u, s, vh]
    sign = np.where(np.sum(u * want[0], axis=-2, keepdims=True) < 0, -1, 1).astype(u.dtype)
    return [u * sign, s, vh * np.swapaxes(sign, -1, -2)]


def _assert_equal(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    op = what.split("#")[0].split("-")[0]
    values = op not in RANDOM
    if op in SIGN_AMBIGUOUS:
        got = _matched_svd_signs(got, want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g)
        if g.shape != w.shape and g.size == w.size:      # MegEngine has no 0-d values
            g = g.reshape(w.shape)
        assert g.dtype == w.dtype or g.dtype.kind == w.dtype.kind, f"{what} output {i}"
        assert g.shape == w.shape, f"{what} output {i}"
        assert not values or rel_err(g, w) <= 1e-5, f"{what} output {i}"


@pytest.mark.parametrize("option", list(OPTIONS))
def test_dump_runs_in_lite_equal_to_eager(dumped, case, option):
    entry = dumped[case][option]
    if _listed(case, {}, LITE_REFUSES):
        assert isinstance(entry.got, str) and entry.data, f"{case}: Lite runs it now"
        return
    lite_runtime.xfail_if_hung_in_its_jit(entry.got)
    assert not isinstance(entry.got, str), f"{case} ({option}): {entry.got}"
    _assert_equal(list(entry.got.values()), entry.want, f"{case} ({option}) in Lite")


@pytest.mark.parametrize("option", list(OPTIONS))
def test_dump_runs_in_lite_at_another_batch(dumped, batched_case, option):
    """Dumped at the traced batch, run at another: shapes are computed in the file."""
    case = batched_case
    entry = dumped[case][option]
    feeds, want = entry.case.other
    if _listed(case, NOT_BATCH_POLYMORPHIC, NOT_BATCH_POLYMORPHIC):
        assert isinstance(entry.got_other, str) or not _equal(
            list(entry.got_other.values()), want, case), f"{case} ({option}): runs now"
        return
    if _listed(case, {}, LITE_REFUSES):
        assert isinstance(entry.got_other, str) and entry.data, f"{case}: Lite runs it now"
        return
    lite_runtime.xfail_if_hung_in_its_jit(entry.got_other)
    assert not isinstance(entry.got_other, str), f"{case} ({option}): {entry.got_other}"
    _assert_equal(list(entry.got_other.values()), want,
                  f"{case} ({option}) in Lite at batch {_batch(feeds)}")


@pytest.mark.parametrize("option", list(OPTIONS))
def test_dump_reads_back_equal_to_eager(dumped, case, option):
    """megtrace's own reader (which refuses what Lite refuses) computes the same."""
    from megtrace.fbs.reader import read_model
    from megtrace.fbs.to_graph import build_graph
    entry = dumped[case][option]
    assert entry.data, f"{case} ({option}): {entry.got}"
    if _listed(case, NOT_READABLE, NOT_READABLE_SAMPLES):
        with pytest.raises(Exception):     # noqa: B017 -- any refusal; listed until read
            build_graph(read_model(entry.data))
        return
    graph = build_graph(read_model(entry.data))
    # a 0-d input is (1,) in a file; a random opr's key (values not compared) any key
    feeds = [np.zeros(2, np.int32) if n.startswith(RNG_KEY_PREFIX) else
             entry.feeds[n].reshape(v.type.shape)
             for n, v in zip(graph.input_names, graph.inputs)]
    got = interpreter.run(graph, *feeds)
    _assert_equal(got, entry.want, f"{case} ({option}) read back")


def test_optimized_dump_is_never_bigger(dumped, case):
    counts = {name: entry.nr_opr for name, entry in dumped[case].items()}
    assert counts["default"] <= counts["unoptimized"], counts
    assert counts["fuse-conv-bias"] <= counts["unoptimized"], counts


@pytest.mark.parametrize("op", sorted(NOT_DUMPABLE))
def test_not_dumpable_ops_are_still_refused(op, rng):
    """The list stays honest: once an op can be written, it must leave NOT_DUMPABLE."""
    samples = [s for s in SAMPLES if s.op == op]
    if op not in {o.name for o in all_ops()}:
        pytest.fail(f"{op} is listed in NOT_DUMPABLE but not registered")
    assert samples, f"{op} has no samples"
    graph, _ = sample_graph(samples[0], samples[0].make(rng))
    with pytest.raises(UnsupportedOpError):
        _write(graph, OPTIONS["unoptimized"])


@pytest.mark.parametrize("name", sorted(NOT_DUMPABLE_SAMPLES))
def test_not_dumpable_samples_are_still_refused(name, rng):
    """As NOT_DUMPABLE, for single samples."""
    samples = [s for s in SAMPLES if str(s) == name]
    assert samples, f"{name} is listed in NOT_DUMPABLE_SAMPLES but is no sample"
    graph, _ = sample_graph(samples[0], samples[0].make(rng))
    for option in OPTIONS.values():
        with pytest.raises(UnsupportedOpError):
            _write(graph, option)


def test_every_op_declares_every_direction():
    """eager and shape rule (required by OpDef), Relax lowering, MegEngine writer; the
    lift back from Relax is universal (an op TVM cannot give back passes as an opaque
    call: relay_bridge/optimize.py), reading back is checked per sample above."""
    missing = []
    for op in all_ops():
        if op.lower is None and op.name not in NO_LOWERING:
            missing.append(f"{op.name}: no Relax lowering")
        if op.mge is None and op.name not in NOT_DUMPABLE:
            missing.append(f"{op.name}: no MegEngine writer")
    assert not missing, missing
    stale = sorted(n for n in set(NO_LOWERING) | set(NOT_DUMPABLE)
                   if n not in {op.name for op in all_ops()})
    assert not stale, f"exemptions for ops that do not exist: {stale}"
