"""`OpDef`: the one declaration of an operator that every layer reads.

An OpDef carries the NumPy reference (`eager`), the shape/dtype rule (`infer`), the
Relax lowering (`lower`, given `tvm.relax.op` as `R` by relay_bridge, so op files never
import TVM), how the op is written to and read from a MegEngine model (`mge`) and its
vector-Jacobian product (`vjp`, see OpDef).
"""
from __future__ import annotations

import functools

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import UnsupportedOpError
from . import quantized_eager, quantized_types

_REGISTRY: dict[str, "OpDef"] = {}


class _NotDifferentiable:
    """`OpDef.vjp` of an op no gradient flows through (comparisons, integer results,
    random numbers, shapes): its outputs never join a gradient tape."""

    def __repr__(self) -> str:
        return "NOT_DIFFERENTIABLE"


NOT_DIFFERENTIABLE = _NotDifferentiable()


@dataclass(frozen=True)
class MgeOpr:
    """One MegEngine operator that an op is written as (and read back from).

    `type` is MegEngine's serialized registry name ("Elemwise", "MatrixMulV2"); `param`
    the OperatorParam member; `fields(params)` the param table's fields, spelled as in
    MegEngine's schema (enum values by name); `match` the fields that identify this op
    among others sharing `type` (the Elemwise mode); `decode(fields)` recovers our
    params; `extra` lists additional params (name, fields) written after the first.
    """

    type: str
    param: str | None = None
    fields: Callable[[dict], dict] | None = None
    match: Mapping[str, Any] = field(default_factory=dict)
    decode: Callable[[dict], dict] | None = None
    extra: tuple[tuple[str, dict], ...] = ()
    outputs: int = 1        # non-volatile outputs of the MegEngine opr
    result: int = 0         # which of them is the op's result (BatchNorm: the last)
    results: tuple[int, ...] | None = None   # for ops with several results (TopK)

    def fields_for(self, params: dict) -> dict:
        out = dict(self.match)
        if self.fields is not None:
            out.update(self.fields(params))
        return out


@dataclass(frozen=True)
class MgeComposite:
    """An op written as several MegEngine oprs (flatten: GetVarShape, Subtensor, Concat,
    Reshape, exactly as MegEngine dumps it). `emit(em, types, params, inputs)` gets the
    writer's emitter (`em.opr(MgeOpr, fields, inputs)`, `em.const(array)`) and returns
    the id of the result."""

    emit: Callable[..., int]


@dataclass(frozen=True)
class MgeChoice:
    """Several MegEngine oprs for one op, picked by the input types (dense vs grouped
    convolution, MatrixMul vs BatchedMatrixMul); `choose` returns None when no opr fits."""

    choose: Callable[[Sequence[Any]], MgeOpr | None]
    specs: tuple[MgeOpr, ...]


@dataclass(frozen=True, eq=False)
class OpDef:
    """One operator, declared once for every layer.

    `vjp` (reverse-mode autodiff, megtrace/autodiff) is one of
      - `NOT_DIFFERENTIABLE`: no gradient flows through the op (its outputs are never
        tracked by a GradManager);
      - a function `vjp(V, inputs, outputs, grads, **params) -> tuple` where `inputs` and
        `outputs` are the op's Tensors of the forward call, `grads` holds one entry per
        output (a Tensor of that output's shape and dtype, or None where no gradient
        reached that output; at least one is a Tensor) and `params` are all the op's
        params (defaults filled). It returns one entry per input: that input's gradient,
        a Tensor of exactly the input's shape, or None (no gradient, e.g. integer inputs,
        the optional shape input, or MegEngine's "no gradient" for floor/ceil/round).
        It must compute with Tensor operations only (`V.apply(op_name, *tensors, **params)`,
        `V.F` = megtrace.functional, Tensor operators), never NumPy on values: then the
        backward pass is itself recorded by `trace`, compiled and higher-order
        differentiable; and a replayed trace applies the ops a rule applied once again
        without running it (megtrace/autodiff/recipes.py), so they may depend on shapes,
        dtypes, params and `V.needs_grad` only. `V.sum_to(g, shape)` reduces a broadcast gradient to `shape`;
        `V.needs_grad(i)` says whether input i's gradient is wanted (skip the others);
        `V.select(cond, g)`, `V.const(value, like)`, `V.zeros_like(x)` help too
        (megtrace/autodiff/context.py). tests/autodiff/test_vjp_registry.py checks every
        rule against finite differences of `eager` on the op's samples.
      - None: not declared yet; a gradient reaching the op raises at backward time
        (tests/autodiff/test_vjp_registry.py lists the ops still pending).
    """

    name: str
    eager: Callable[..., Any]
    infer: Callable[..., Any]
    lower: Callable[..., Any] | None = None
    mge: MgeOpr | MgeComposite | MgeChoice | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    fold_from_types: bool = False   # value depends only on input types (get_shape)
    # May take one more input than its rule needs: an int32 vector that computes the
    # `shape` param at run time (a traced shape expression, see megtrace/symbolic.py).
    # The param stays the truth for the type rule and TVM; the writer writes the input.
    shape_input: bool = False
    # the param that shape input computes (resize's is `size`)
    shape_param: str = "shape"
    # May take trailing 0-d int32 inputs that compute int params at run time (a slice
    # bound from a traced dim, `x[:x.shape[0] - 1]`): given the params, the values those
    # inputs stand for, in input order. As with shape_input, the params stay the truth
    # for the type rule, eager and TVM; the writer writes the inputs.
    int_inputs: Callable[[Mapping[str, Any]], list] | None = None
    # how many tensor inputs come before those int inputs, where the shape rule's arity
    # does not say (indexing_multi_axis_vec: x and one index tensor per indexed axis)
    fixed_inputs: Callable[[Mapping[str, Any]], int] | None = None
    # optimize_for_inference passes the op through TVM's passes as an opaque call, for
    # lowerings (scatter, flat gathers) that would not come back as the op they were.
    opaque_in_optimize: bool = False
    # no Relax form exists (matinv, svd): compiled graphs holding it run on the NumPy
    # interpreter instead of failing
    interpreted: bool = False
    # the output shapes depend on the input values (cond_take): `infer` gives the
    # largest possible shapes, a trace records the shapes the values had (see
    # TraceRecorder.record); always `interpreted` too, as compiled graphs are static
    value_shaped: bool = False
    # how the reader builds the op back from oprs its composite writer emits that the
    # generic 1:1 decode of `mge` cannot read: opr type -> rule(graph, opr, inputs,
    # input_types) returning one value per opr output (fbs/to_graph.py collects them)
    mge_read: Mapping[str, Callable[..., list]] = field(default_factory=dict)
    # reverse-mode derivative (see the class docstring): a function or NOT_DIFFERENTIABLE
    vjp: Callable[..., tuple] | _NotDifferentiable | None = None
    # draws random numbers (ops/random.py): never folded to a constant, even when its
    # inputs are (a loaded model's first-draw key), since each run draws anew
    random: bool = False
    # takes MegEngine's quantized dtypes itself (megtrace/ops/quantized.py): its shape
    # rule gives the results' quantization; for every other op, quantized inputs go
    # through megtrace/ops/quantized_types.py's rule
    quantized: bool = False

    def __post_init__(self):
        if self.value_shaped and not self.interpreted:
            raise ValueError(f"{self.name}: a value_shaped op must be interpreted (compiled "
                             "graphs have static shapes)")

    def bind(self, params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        unknown = set(params) - set(self.params)
        if unknown:
            raise TypeError(f"{self.name}: unexpected parameter(s) {sorted(unknown)}; "
                            f"expected {sorted(self.params)}")
        merged = {**self.params, **params}
        return tuple((k, _freeze(merged[k])) for k in self.params)

    def infer_types(self, types: Sequence[Any], kwargs: dict) -> tuple:
        lo, hi = _arity(self.infer)
        if not lo <= len(types) <= hi:
            want = f"{lo}" if lo == hi else f"at least {lo}" if hi == float("inf") else \
                f"{lo} to {hi}"
            raise TypeError(f"{self.name}: expected {want} tensor input(s), got {len(types)}")
        out = self.infer(*types, **kwargs)
        out = out if isinstance(out, tuple) else (out,)
        if not self.quantized:
            for t in types:
                if getattr(t, "quant", None) is not None:
                    return quantized_types.propagate(self.name, types, kwargs, out)
        return out

    def has_shape_input(self, n_inputs: int, params: Mapping[str, Any]) -> bool:
        """Whether a node of this op with `n_inputs` inputs carries run-time shape inputs."""
        return self.run_time_inputs(n_inputs, params) > 0

    def run_time_inputs(self, n_inputs: int, params: Mapping[str, Any]) -> int:
        """How many trailing inputs of a node of this op with `n_inputs` inputs and these
        params compute its params at run time (shape_input: the shape vector; int_inputs:
        every input past the fixed ones)."""
        fixed = self.fixed_inputs(params) if self.fixed_inputs is not None else \
            _arity(self.infer)[0]
        extra = max(n_inputs - fixed, 0)
        if self.shape_input:
            return min(extra, 1)
        return extra if self.int_inputs is not None else 0

    def run_eager(self, arrays: Sequence[np.ndarray], kwargs: dict) -> tuple[np.ndarray, ...]:
        if not self.quantized:
            for a in arrays:       # MegEngine's quantized dtypes: their own arithmetic
                dt = getattr(a, "dtype", None)
                if dt is not None and dt.metadata:
                    return quantized_eager.run(self, arrays, kwargs)
        out = self.eager(*arrays, **kwargs)
        return out if isinstance(out, tuple) else (out,)

    def __repr__(self) -> str:
        return f"OpDef({self.name})"


@functools.lru_cache(maxsize=None)     # eager calls ask once per op, not per call
def _arity(fn) -> tuple[int, float]:
    """(min, max) positional tensor inputs a shape rule takes."""
    import inspect
    params = inspect.signature(fn).parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(1 for p in positional if p.default is p.empty)
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return max(required, 1), float("inf")
    return required, len(positional)


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def register(op: OpDef) -> OpDef:
    if op.name in _REGISTRY:
        raise ValueError(f"register: operator {op.name!r} is declared twice")
    _REGISTRY[op.name] = op
    return op


def get(name: str) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnsupportedOpError(f"{name}: no such operator in megtrace") from None


def all_ops() -> list[OpDef]:
    return list(_REGISTRY.values())
