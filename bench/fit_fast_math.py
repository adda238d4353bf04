"""Refit relay_bridge/cpu/fast_math.py's odd rationals erf(x) ~ x P(x^2) / Q(x^2) and
tanh(x) ~ x P(x^2) / Q(x^2) (not a test; NumPy only).

    python bench/fit_fast_math.py erf 6 4      # name, P terms, Q terms after the 1
    python bench/fit_fast_math.py tanh 5 3

Linearized least squares for relative error on Chebyshev points of [0, clamp], then
Lawson-style reweighting towards the minimax solution; prints the fit's error, the error
of the coefficients evaluated in float32 on a dense grid, and the coefficients.
"""
import numpy as np, math, sys
def fit(f, clamp, np_, nq, iters=60):
    # Chebyshev-distributed points on [0, clamp]
    k = np.arange(4000)
    x = clamp * (0.5 - 0.5*np.cos(np.pi*(k+0.5)/len(k)))
    x = x[x > 1e-6]
    u = x*x
    g = np.array([f(v) for v in x]) / x
    q = np.ones_like(u); w = np.ones_like(u)
    for it in range(iters):
        A = np.concatenate([np.stack([u**i for i in range(np_)], 1),
                            -np.stack([g*u**i for i in range(1, nq+1)], 1)], 1)
        s = w / (g*q)
        c, *_ = np.linalg.lstsq(A*s[:,None], g*s, rcond=None)
        P = np.polyval(c[:np_][::-1], u); Q = 1 + u*np.polyval(c[np_:][::-1], u) if nq else np.ones_like(u)
        q = Q
        err = np.abs(P/Q/g - 1)
        w = w * (err/err.max())**0.3 + 1e-12 if it > 10 else w
    return c[:np_], c[np_:], err.max()
def check(f, clamp, p, qc):
    x = np.linspace(-clamp*1.3, clamp*1.3, 2000001).astype(np.float32)
    xc = np.clip(x, -clamp, clamp).astype(np.float32)
    u = (xc*xc).astype(np.float32)
    P = np.float32(0); 
    for a in p[::-1]: P = (P*u + np.float32(a)).astype(np.float32)
    Q = np.float32(0)
    for a in qc[::-1]: Q = (Q*u + np.float32(a)).astype(np.float32)
    Q = (Q*u + np.float32(1)).astype(np.float32)
    y = (xc*P/Q).astype(np.float32)
    ref = np.array([f(float(v)) for v in x[::10]])
    r = np.abs(y[::10].astype(np.float64)-ref)/np.maximum(np.abs(ref), 1e-30)
    return r.max(), np.abs(y[::10]-ref).max()
name = sys.argv[1]; np_, nq = int(sys.argv[2]), int(sys.argv[3])
f, clamp = {"erf": (math.erf, 3.92), "tanh": (math.tanh, 9.0)}[name]
p, qc, e = fit(f, clamp, np_, nq)
print(name, np_, nq, "fit err", e, "f32 check rel/abs", check(f, clamp, p, qc))
print("P =", [float(v) for v in p]); print("Q =", [1.0]+[float(v) for v in qc])
