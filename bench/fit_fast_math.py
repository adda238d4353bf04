"""Refit relay_bridge/cpu/fast_math.py's odd rationals erf(x) ~ x P(x^2) / Q(x^2) and
tanh(x) ~ x P(x^2) / Q(x^2) (not a test; NumPy only).

    python bench/fit_fast_math.py erf 6 4      # name, P terms, Q terms after the 1
    python bench/fit_fast_math.py tanh 5 3

Linearized least squares for relative error on Chebyshev points of [0, clamp], then
Lawson-style reweighting towards the minimax solution; prints the fit's error, the error
of the coefficients evaluated in float32 on a dense grid, and the coefficients.
"""
from __future__ import annotations

import math
import sys

import numpy as np

TARGETS = {"erf": (math.erf, 3.92), "tanh": (math.tanh, 9.0)}


def fit(f, clamp: float, n_p: int, n_q: int, iters: int = 60):
    """Coefficients of P (n_p terms) and Q (1 + n_q terms) and the fit's relative error."""
    k = np.arange(4000)
    x = clamp * (0.5 - 0.5 * np.cos(np.pi * (k + 0.5) / len(k)))
    x = x[x > 1e-6]
    u = x * x
    g = np.array([f(v) for v in x]) / x
    q, w = np.ones_like(u), np.ones_like(u)
    for it in range(iters):
        a = np.concatenate([np.stack([u ** i for i in range(n_p)], 1),
                            -np.stack([g * u ** i for i in range(1, n_q + 1)], 1)], 1)
        scale = w / (g * q)
        c, *_ = np.linalg.lstsq(a * scale[:, None], g * scale, rcond=None)
        p_val = np.polyval(c[:n_p][::-1], u)
        q = 1 + u * np.polyval(c[n_p:][::-1], u) if n_q else np.ones_like(u)
        err = np.abs(p_val / q / g - 1)
        if it > 10:
            w = w * (err / err.max()) ** 0.3 + 1e-12
    return c[:n_p], c[n_p:], err.max()


def check(f, clamp: float, p, q) -> tuple[float, float]:
    """(max relative, max absolute) error of the float32 evaluation over +-1.3 clamp."""
    x = np.linspace(-clamp * 1.3, clamp * 1.3, 200001).astype(np.float32)
    xc = np.clip(x, -clamp, clamp).astype(np.float32)
    u = xc * xc
    num = np.float32(0)
    for a in p[::-1]:
        num = (num * u + np.float32(a)).astype(np.float32)
    den = np.float32(0)
    for a in q[::-1]:
        den = (den * u + np.float32(a)).astype(np.float32)
    den = (den * u + np.float32(1)).astype(np.float32)
    y = (xc * num / den).astype(np.float64)
    ref = np.array([f(float(v)) for v in x])
    return (float((np.abs(y - ref) / np.maximum(np.abs(ref), 1e-30)).max()),
            float(np.abs(y - ref).max()))


def main() -> None:
    name, n_p, n_q = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    f, clamp = TARGETS[name]
    p, q, e = fit(f, clamp, n_p, n_q)
    print(name, n_p, n_q, "fit error", e, "float32 (relative, absolute)", check(f, clamp, p, q))
    print("P =", [float(v) for v in p])
    print("Q =", [1.0] + [float(v) for v in q])


if __name__ == "__main__":
    main()
