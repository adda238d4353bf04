"""`megtrace.random`: MegEngine 1.13's megengine.random (seed, uniform, normal, gamma,
beta, poisson, permutation, shuffle, RNG) on megtrace's counter-based generators.

Results are deterministic given the seed (not MegEngine's own number stream), with
MegEngine's stream structure: eagerly one stream per kind of op for each seed; inside a
trace each call is an op with a generator of its own, fresh from the seed, advanced on
every run of the compiled graph (stream.py).
"""
from .rng import RNG, beta, gamma, normal, permutation, poisson, seed, shuffle, uniform

__all__ = ["RNG", "beta", "gamma", "normal", "permutation", "poisson", "seed", "uniform",
           "shuffle"]
