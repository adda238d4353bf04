"""Every registered op: eager vs an independent reference, shape rule vs eager, TVM vs
eager, and clear errors on bad arguments."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace.errors as errors
from megtrace.ir import Graph, TensorType
from megtrace.ops import all_ops, get
from megtrace.ops.registry import _arity

from .samples import BAD, SAMPLES


def test_every_op_has_samples():
    covered = {s.op for s in SAMPLES}
    missing = sorted(op.name for op in all_ops() if op.name not in covered)
    assert not missing, f"ops without samples in tests/ops/samples.py: {missing}"


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_eager_matches_reference(sample, rng):
    op = get(sample.op)
    inputs = sample.make(rng)
    kwargs = dict(op.bind(sample.params))
    got = op.run_eager(inputs, kwargs)
    want = sample.ref(*inputs, **sample.params)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        assert rel_err(g, w) <= 1e-6, sample


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_shape_rule_matches_eager(sample, rng):
    op = get(sample.op)
    inputs = sample.make(rng)
    kwargs = dict(op.bind(sample.params))
    types = op.infer_types([TensorType.of(a) for a in inputs], kwargs)
    outs = op.run_eager(inputs, kwargs)
    if op.value_shaped:      # the rule bounds the shapes; the values decide them
        assert len(types) == len(outs)
        for t, o in zip(types, outs):
            assert t.dtype == TensorType.of(o).dtype and t.ndim == o.ndim
            assert all(d <= b for d, b in zip(o.shape, t.shape))
        return
    assert [str(t) for t in types] == [str(TensorType.of(o)) for o in outs]


@pytest.mark.parametrize("sample", [s for s in SAMPLES if get(s.op).lower is not None], ids=str)
def test_compiled_matches_eager(sample, rng):
    from megtrace.relay_bridge import compile_graph
    op = get(sample.op)
    inputs = sample.make(rng)
    g = Graph()
    in_vars = [g.add_input(TensorType.of(a), f"x{i}") for i, a in enumerate(inputs)]
    outs = g.add_node(op, in_vars, sample.params)
    g.set_outputs(outs, [f"y{i}" for i in range(len(outs))])
    got = compile_graph(g)(*inputs)
    want = op.run_eager(inputs, dict(op.bind(sample.params)))
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert rel_err(a, b) <= 1e-5, sample


@pytest.mark.parametrize("op_name,shapes,params,error,words", BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_raise_clear_errors(op_name, shapes, params, error, words):
    op = get(op_name)
    types = [TensorType(s, "float32") for s in shapes]
    with pytest.raises(getattr(errors, error)) as info:
        op.infer_types(types, dict(op.bind(params)))
    assert op_name in str(info.value) and words in str(info.value)


def test_unknown_parameter_is_rejected():
    with pytest.raises(TypeError, match="unexpected parameter"):
        get("conv2d").bind({"strides": 2})


@pytest.mark.parametrize("op", all_ops(), ids=lambda op: op.name)
def test_every_op_names_itself_in_argument_errors(op):
    """Wrong input counts and unknown parameters name the op and what it expected."""
    variadic = _arity(op.infer)[1] == float("inf")    # concat, make_shape: none is wrong
    wrong = [] if variadic else [TensorType((2, 2), "float32")] * 8
    with pytest.raises(TypeError, match=rf"^{op.name}: expected .* tensor input\(s\), "
                                        rf"got {len(wrong)}"):
        op.infer_types(wrong, dict(op.bind({})))
    with pytest.raises(TypeError, match=rf"^{op.name}: unexpected parameter"):
        op.bind({"no_such_parameter": 1})
