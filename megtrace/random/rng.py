"""MegEngine's random functions and `RNG` class, with its signatures and defaults."""
from __future__ import annotations

import time
from typing import Iterable, Optional, Union

import numpy as np

from ..device import as_device, get_default_device
from ..dispatch import active_recorder, apply
from ..tensor import Tensor
from .stream import KeyStream

__all__ = ["RNG", "beta", "gamma", "normal", "permutation", "poisson", "seed", "shuffle",
           "uniform"]

_global = KeyStream(int(time.time()))     # MegEngine seeds with the time at import too


def seed(seed: int) -> None:
    """Reset the global generator (used by the module functions and by RNG(seed=None))."""
    _global.reset(seed)


def _key(stream: KeyStream, kind: str, device=None) -> Tensor:
    """The key of this draw, on `device` (results live where their inputs do, so the
    numbers come out on the generator's device: MegEngine's RNG(device=...)). Eagerly the
    next of `stream`'s `kind`; inside a trace the recorder gives the op its own generator
    (MegEngine's compiled oprs each draw from a fresh one seeded with the op's seed)."""
    device = as_device(device)
    rec = active_recorder()
    if rec is not None:
        key = rec.random_key(stream.seed, kind, device)
        if key is not None:
            return key
    return Tensor._wrap(stream.next_key(kind), device=device)


def global_key(kind: str, device=None) -> Tensor:
    """The key of the next draw of the global generator's `kind` (F.nn.dropout's:
    "dropout", a stream of its own as in MegEngine), with `_key`'s trace rule."""
    return _key(_global, kind, device)


def global_seed() -> int:
    return _global.seed


def _size(size) -> tuple[int, ...]:
    if size is None:
        return (1,)
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    if isinstance(size, (Tensor, np.ndarray)):   # `uniform(size=mask.sum())` (a count)
        value = size.numpy() if isinstance(size, Tensor) else size
        return tuple(int(d) for d in np.atleast_1d(value))
    return tuple(int(d) for d in size)


def _as_param(value, name: str) -> Tensor:
    if isinstance(value, Tensor):
        return value if value.dtype == np.float32 else value.astype("float32")
    return Tensor(np.asarray(value, np.float32))


def _broadcast_with_size(params: list[Tensor], size) -> list[Tensor]:
    """MegEngine's rule: the parameters broadcast together, and `size` goes in front."""
    from .. import functional as F
    shape = np.broadcast_shapes(*(p.shape for p in params))
    if size is not None:
        shape = _size(size) + tuple(shape)
    return [p if p.shape == shape else
            F.broadcast_to(p.reshape((1,) * (len(shape) - p.ndim) + p.shape), shape)
            for p in params]


class RNG:
    """A generator with its own seed (None: the global one, as in MegEngine)."""

    def __init__(self, seed: int = None, device: str = None):
        self._device = device if device else get_default_device()
        self._stream = _global if seed is None else KeyStream(seed)

    def uniform(self, low: float = 0, high: float = 1,
                size: Optional[Iterable[int]] = None) -> Tensor:
        """Uniform on [low, high); shape `size` (default (1,))."""
        assert low < high, "Uniform is not defined when low >= high"
        out = apply("rng_uniform", _key(self._stream, "uniform", self._device),
                    shape=_size(size), seed=self._stream.seed)
        if low == 0 and high == 1:
            return out
        return out * (high - low) + low     # `out` first: the result stays on its device

    def normal(self, mean: float = 0, std: float = 1,
               size: Optional[Iterable[int]] = None) -> Tensor:
        """Gaussian with `mean` and `std`; shape `size` (default (1,))."""
        return apply("rng_normal", _key(self._stream, "normal", self._device),
                     shape=_size(size), mean=float(mean), std=float(std), seed=self._stream.seed)

    def gamma(self, shape: Union[Tensor, float], scale: Union[Tensor, float] = 1,
              size: Optional[Iterable[int]] = None) -> Tensor:
        """Gamma(shape, scale); output shape `size` + the parameters' broadcast shape."""
        k, theta = _broadcast_with_size([_as_param(shape, "shape"),
                                         _as_param(scale, "scale")], size)
        return apply("rng_gamma", _key(self._stream, "gamma", self._device), k, theta,
                     seed=self._stream.seed)

    def beta(self, alpha: Union[Tensor, float], beta: Union[Tensor, float],
             size: Optional[Iterable[int]] = None) -> Tensor:
        """Beta(alpha, beta); output shape `size` + the parameters' broadcast shape."""
        a, b = _broadcast_with_size([_as_param(alpha, "alpha"), _as_param(beta, "beta")],
                                    size)
        return apply("rng_beta", _key(self._stream, "beta", self._device), a, b,
                     seed=self._stream.seed)

    def poisson(self, lam: Union[float, Tensor],
                size: Optional[Iterable[int]] = None) -> Tensor:
        """Poisson(lam) as float32; output shape `size` + lam's shape."""
        (lam,) = _broadcast_with_size([_as_param(lam, "lam")], size)
        return apply("rng_poisson", _key(self._stream, "poisson", self._device), lam,
                     seed=self._stream.seed)

    def permutation(self, n: Union[int, Tensor], *, dtype: str = "int32") -> Tensor:
        """A permutation of range(n) (int32, int16 or float32; MegEngine's PermutationRNG),
        or a copy of tensor `n` shuffled along its first axis (its ShuffleRNG)."""
        if isinstance(n, Tensor):
            return self._shuffled(n)
        assert isinstance(n, int)
        assert n >= 0, "Permutation is not defined when n < 0"
        dtype = np.dtype(dtype).name if isinstance(dtype, (type, np.dtype)) else dtype
        if dtype not in ("int32", "int16", "float32"):
            raise TypeError(f"permutation: dtype must be int32, int16 or float32; got {dtype}")
        if n == 0:
            return Tensor(np.zeros(0, dtype))
        return apply("rng_permutation", _key(self._stream, "permutation", self._device),
                     n=n, dtype=dtype, seed=self._stream.seed)

    def shuffle(self, inp: Tensor) -> None:
        """Shuffle `inp` in place along its first axis."""
        out = self._shuffled(inp)
        inp._value, inp._var, inp._owner = out._value, out._var, out._owner
        inp._version += 1

    def _shuffled(self, inp: Tensor) -> Tensor:
        assert inp.size > 0, "size needs to be greater than 0"
        if inp.ndim == 0:       # MegEngine's ShuffleRNG sees a scalar as one element
            inp = inp.reshape((1,))
        return apply("rng_shuffle", _key(self._stream, "shuffle", self._device), inp,
                     seed=self._stream.seed)[0]


_default = RNG()

uniform = _default.uniform
normal = _default.normal
gamma = _default.gamma
beta = _default.beta
poisson = _default.poisson
permutation = _default.permutation
shuffle = _default.shuffle
