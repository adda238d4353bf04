"""`megtrace.random`: MegEngine 1.13's megengine.random (seed, uniform, normal, gamma,
beta, poisson, permutation, shuffle, RNG) on megtrace's counter-based generators.

Results are deterministic given the seed (not MegEngine's own number stream). Inside a
trace every call is an op fed a fresh key on every run, so a compiled function draws
new numbers each time, as MegEngine's does.
"""
from .rng import RNG, beta, gamma, normal, permutation, poisson, seed, shuffle, uniform

__all__ = ["RNG", "beta", "gamma", "normal", "permutation", "poisson", "seed", "uniform",
           "shuffle"]
