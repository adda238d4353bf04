"""Random number ops: counter-based generators, so that a traced graph draws new numbers
on every run exactly as MegEngine's UniformRNG/GaussianRNG do.

Each op takes a `key` input, int32[2] = (seed, counter), that megtrace.random draws from
its generator on every call (eagerly, and by the trace on every compiled run). Element i
of the output hashes (key, i) with a 32-bit integer mixer (xor-shift-multiply, the
"lowbias32" constants), computed identically by the NumPy reference and by the Relax
lowering, so eager and compiled results agree bit for bit for the same key.

uniform: (bits >> 8) * 2^-24 in [0, 1). normal: Box-Muller on two such draws.
A .mge holds them as MegEngine does: UniformRNG / GaussianRNG oprs with the generator's
`seed` (a param here too, as in MegEngine's ops) fed an ImmutableTensor of the output
shape; the runtime then draws its own numbers, new on every run. The key becomes an
unused constant there. Such models are not read back (the key has no MegEngine form).

gamma, beta and poisson need rejection sampling, which has no fixed-size Relax form
here: they are drawn by NumPy's Philox generator seeded by the key (a compiled trace
runs them on the NumPy interpreter), and written as GammaRNG/BetaRNG/PoissonRNG with
the seed, their parameters as inputs, as MegEngine writes them.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, FormatError, ShapeError, UnsupportedOpError
from ..ir import TensorType
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, register
from .registry import get as get_op

_GOLDEN = 0x9E3779B9
_MUL1, _MUL2 = 0x7FEB352D, 0x846CA68B
_SCALE = 1.0 / (1 << 24)


def _key_type(name: str, key: TensorType) -> None:
    if key.shape != (2,) or key.dtype != "int32":
        raise DTypeError(f"{name}: the key must be int32[2] (seed, counter); got {key}")


def _shape(name: str, shape) -> tuple[int, ...]:
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"{name}: negative size in {shape}")
    return shape


# -- the mixer, in NumPy and in Relax -----------------------------------------------------
def _mix_np(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(_MUL1)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(_MUL2)
    return x ^ (x >> np.uint32(16))


def _bits_np(key: np.ndarray, index: np.ndarray) -> np.ndarray:
    k = np.asarray(key, np.int32).view(np.uint32).reshape(2, 1)
    base = _mix_np(k[0] ^ _mix_np(k[1] ^ np.uint32(_GOLDEN)))
    return _mix_np((index.astype(np.uint32) * np.uint32(_GOLDEN)) ^ base)


def _mix_rx(L, x):
    R = L.R

    def u32(v):
        return L.const(v, "uint32")
    x = R.bitwise_xor(x, R.right_shift(x, u32(16)))
    x = R.multiply(x, u32(_MUL1))
    x = R.bitwise_xor(x, R.right_shift(x, u32(15)))
    x = R.multiply(x, u32(_MUL2))
    return R.bitwise_xor(x, R.right_shift(x, u32(16)))


def _bits_rx(L, key, index):
    R = L.R
    k = R.astype(key, "uint32")
    k0, k1 = (R.reshape(R.strided_slice(k, axes=[0], begin=[i], end=[i + 1]), ())
              for i in (0, 1))
    base = _mix_rx(L, R.bitwise_xor(k0, _mix_rx(L, R.bitwise_xor(k1, L.const(_GOLDEN, "uint32")))))
    return _mix_rx(L, R.bitwise_xor(R.multiply(index, L.const(_GOLDEN, "uint32")), base))


def _count(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


# -- uniform ---------------------------------------------------------------------------------
def _uniform_infer(key, *, shape, seed):
    _key_type("rng_uniform", key)
    return TensorType(_shape("rng_uniform", shape), "float32")


def _uniform_np(key, *, shape, seed):
    bits = _bits_np(key, np.arange(_count(shape), dtype=np.uint32))
    return ((bits >> np.uint32(8)).astype(np.float32) * np.float32(_SCALE)).reshape(shape)


def _uniform_rx(L, key, *, shape, seed):
    R = L.R
    index = R.arange(0, _count(shape), 1, dtype="uint32")
    bits = R.right_shift(_bits_rx(L, key, index), L.const(8, "uint32"))
    u = R.multiply(R.astype(bits, "float32"), L.const(_SCALE, "float32"))
    return R.reshape(u, shape)


# -- normal (Box-Muller) -----------------------------------------------------------------
def _normal_infer(key, *, shape, mean, std, seed):
    _key_type("rng_normal", key)
    return TensorType(_shape("rng_normal", shape), "float32")


def _normal_np(key, *, shape, mean, std, seed):
    j = np.arange(_count(shape), dtype=np.uint32)
    b1 = _bits_np(key, j * np.uint32(2)) >> np.uint32(8)
    b2 = _bits_np(key, j * np.uint32(2) + np.uint32(1)) >> np.uint32(8)
    u1 = (b1.astype(np.float32) + np.float32(1)) * np.float32(_SCALE)      # (0, 1]
    u2 = b2.astype(np.float32) * np.float32(_SCALE)
    z = np.sqrt(np.float32(-2) * np.log(u1)) * np.cos(np.float32(2 * np.pi) * u2)
    return (np.float32(mean) + np.float32(std) * z).astype(np.float32).reshape(shape)


def _normal_rx(L, key, *, shape, mean, std, seed):
    R = L.R
    f32 = lambda v: L.const(v, "float32")          # noqa: E731
    j = R.multiply(R.arange(0, _count(shape), 1, dtype="uint32"), L.const(2, "uint32"))
    eight = L.const(8, "uint32")
    b1 = R.right_shift(_bits_rx(L, key, j), eight)
    b2 = R.right_shift(_bits_rx(L, key, R.add(j, L.const(1, "uint32"))), eight)
    u1 = R.multiply(R.add(R.astype(b1, "float32"), f32(1.0)), f32(_SCALE))
    u2 = R.multiply(R.astype(b2, "float32"), f32(_SCALE))
    z = R.multiply(R.sqrt(R.multiply(f32(-2.0), R.log(u1))),
                   R.cos(R.multiply(f32(2 * np.pi), u2)))
    return R.reshape(R.add(f32(mean), R.multiply(f32(std), z)), shape)


# -- gamma / beta / poisson: eager only (rejection sampling) ------------------------------
def _philox(key: np.ndarray) -> np.random.Generator:
    k = np.asarray(key, np.int32).view(np.uint32).astype(np.uint64)
    return np.random.Generator(np.random.Philox(key=np.array([k[0], k[1]], np.uint64)))


def _params_check(name, key, *params) -> TensorType:
    _key_type(name, key)
    shape = params[0].shape
    for p in params:
        if p.shape != shape or p.dtype != "float32":
            raise ShapeError(f"{name}: parameters must be float32 of one shape (broadcast "
                             f"by megtrace.random); got {[str(q) for q in params]}")
    return TensorType(shape, "float32")


def _gamma_infer(key, shape, scale, *, seed):
    return _params_check("rng_gamma", key, shape, scale)


def _beta_infer(key, alpha, beta, *, seed):
    return _params_check("rng_beta", key, alpha, beta)


def _poisson_infer(key, lam, *, seed):
    return _params_check("rng_poisson", key, lam)


def _gamma_np(key, shape, scale, *, seed):
    return _philox(key).gamma(shape, scale).astype(np.float32)


def _beta_np(key, alpha, beta, *, seed):
    return _philox(key).beta(alpha, beta).astype(np.float32)


def _poisson_np(key, lam, *, seed):
    return _philox(key).poisson(lam).astype(np.float32)


# -- read back from MegEngine's RNG oprs ---------------------------------------------------
RNG_KEY_PREFIX = "megtrace.rng_key:"

# the generator kind (random/stream.py) of each op: whose stream its keys come from
KIND_OF = {"rng_uniform": "uniform", "rng_normal": "normal", "rng_gamma": "gamma",
           "rng_beta": "beta", "rng_poisson": "poisson", "rng_permutation": "permutation",
           "rng_shuffle": "shuffle",      # ops/random_perm.py
           "rng_dropout": "dropout"}      # ops/random_dropout.py


def _key_input(g, opr):
    """A graph input for the opr's key: compiled graphs must not fold the draw."""
    if hasattr(g, "input_values"):     # fbs/to_graph.py's _EvaluatingGraph (CondTake models)
        raise UnsupportedOpError(f"{opr.type}: random oprs in a model whose shapes depend "
                                 "on its values are not supported")
    index = sum(n.startswith(RNG_KEY_PREFIX) for n in g.input_names)
    return g.add_input(TensorType((2,), "int32"),
                       f"{RNG_KEY_PREFIX}{index}:{opr.name or opr.type}")


def _fields(opr) -> dict:
    return opr.params[0][1] if opr.params else {}


def _sized_read(op_name: str, *names: str):
    """UniformRNG/GaussianRNG: the output shape is the opr's (constant) input."""
    def read(g, opr, ins, _shapes):
        f = _fields(opr)
        if f.get("dtype", "Float32") not in ("Float32", 0):
            raise UnsupportedOpError(f"{opr.type}: dtype {f['dtype']} is not supported "
                                     "(megtrace draws float32)")
        shape = g.consts.get(ins[0]) if len(ins) == 1 else None
        if shape is None:
            raise FormatError(f"{opr.type}: the output shape must be one constant input")
        params = {"shape": tuple(int(d) for d in np.asarray(shape).reshape(-1)),
                  "seed": int(f.get("seed", 0))}
        params.update({n: float(f.get(n, 0.0 if n == "mean" else 1.0)) for n in names})
        return list(g.add_node(get_op(op_name), [_key_input(g, opr)], params,
                               name_hint=opr.name or opr.type))
    return read


def _params_read(op_name: str, arity: int):
    """GammaRNG/BetaRNG/PoissonRNG: the (broadcast) parameters are the inputs."""
    def read(g, opr, ins, _shapes):
        if len(ins) != arity:
            raise FormatError(f"{opr.type}: expected {arity} inputs, got {len(ins)}")
        shapes = {v.type.shape for v in ins}
        if len(shapes) != 1:
            raise UnsupportedOpError(f"{opr.type}: parameters of different shapes "
                                     f"{sorted(shapes)} are not supported")
        ins = [v if v.type.dtype == "float32" else
               g.add_node(get_op("astype"), [v], {"dtype": "float32"})[0] for v in ins]
        return list(g.add_node(get_op(op_name), [_key_input(g, opr), *ins],
                               {"seed": int(_fields(opr).get("seed", 0))},
                               name_hint=opr.name or opr.type))
    return read


# -- written as MegEngine's RNG oprs -------------------------------------------------------
_UNIFORM_RNG = MgeOpr("UniformRNGV1", "UniformRNG")
_GAUSSIAN_RNG = MgeOpr("GaussianRNGV1", "GaussianRNG")


def _uniform_emit(em, types, p, inputs):
    shape = em.const(np.array(p["shape"] or (1,), np.int32))
    return em.opr(_UNIFORM_RNG, {"seed": p["seed"], "dtype": "Float32"}, [shape])


def _normal_emit(em, types, p, inputs):
    shape = em.const(np.array(p["shape"] or (1,), np.int32))
    return em.opr(_GAUSSIAN_RNG, {"seed": p["seed"], "mean": p["mean"], "std": p["std"],
                                  "dtype": "Float32"}, [shape])


register(OpDef("rng_uniform", eager=_uniform_np, infer=_uniform_infer, lower=_uniform_rx,
               mge=MgeComposite(_uniform_emit), params={"shape": (), "seed": 0},
               mge_read={"UniformRNGV1": _sized_read("rng_uniform"),
                         "UniformRNG": _sized_read("rng_uniform")},
               vjp=NOT_DIFFERENTIABLE, random=True))
register(OpDef("rng_normal", eager=_normal_np, infer=_normal_infer, lower=_normal_rx,
               mge=MgeComposite(_normal_emit),
               mge_read={"GaussianRNGV1": _sized_read("rng_normal", "mean", "std"),
                         "GaussianRNG": _sized_read("rng_normal", "mean", "std")},
               params={"shape": (), "mean": 0.0, "std": 1.0, "seed": 0},
               vjp=NOT_DIFFERENTIABLE, random=True))
def _params_emit(opr: MgeOpr):
    """GammaRNG/BetaRNG/PoissonRNG take the (broadcast) parameters as inputs."""
    def emit(em, types, p, inputs):
        return em.opr(opr, {"seed": p["seed"]}, inputs[1:])
    return MgeComposite(emit)


register(OpDef("rng_gamma", eager=_gamma_np, infer=_gamma_infer, params={"seed": 0},
               interpreted=True, mge=_params_emit(MgeOpr("GammaRNG", "GammaRNG")),
               mge_read={"GammaRNG": _params_read("rng_gamma", 2)},
               vjp=NOT_DIFFERENTIABLE, random=True))
register(OpDef("rng_beta", eager=_beta_np, infer=_beta_infer, params={"seed": 0},
               interpreted=True, mge=_params_emit(MgeOpr("BetaRNG", "BetaRNG")),
               mge_read={"BetaRNG": _params_read("rng_beta", 2)},
               vjp=NOT_DIFFERENTIABLE, random=True))
register(OpDef("rng_poisson", eager=_poisson_np, infer=_poisson_infer, params={"seed": 0},
               interpreted=True, mge=_params_emit(MgeOpr("PoissonRNG", "PoissonRNG")),
               mge_read={"PoissonRNG": _params_read("rng_poisson", 1)},
               vjp=NOT_DIFFERENTIABLE, random=True))
