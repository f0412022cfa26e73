#!/usr/bin/python3
# Fits the polynomial coefficients of fuse's inline f32 erf (lowering/llvm/
# math.c) and prints them, with the relative error of an f32 evaluation.
#   |x| <  XS: erf(x) = x * P(x*x)                      (P: degree DP)
#   |x| >= XS: erf(x) = 1 - exp(-x*x) * Q(1/(1 + |x|/2) - TS)
#              (Q: degree DQ; |x| clamped to XL). The same Q gives
#              1 + erf(x) = erfc(-x) = exp(-x*x) Q(...) for x <= -XS with
#              full relative accuracy (gelu's tail: emit-llvm computes
#              `1 + erf(z)` that way).
# gelu's 1 + erf(x) = erfc(-x) uses one branch for every x instead:
#   erfc(a) = exp(-a*a) * Q1(1/(1 + P1 a) - T1) for a = |x| in [0, X1]
#   (Q1: degree D1, minimax in relative terms on [0, R1], where gelu's
#   result is still a normal f32, merely bounded beyond), 2 - erfc(a)
#   for x > 0. T1 = 0: Q1 is a polynomial in t = 1/(1 + P1 a) itself,
#   exact where Q1 is small (large a: no cancellation of a shifted
#   variable), which measured 5.7 units of 2^-24 in the tail against 12
#   for t - 0.59 (and one subtraction fewer); P1 = 0.42 was the best of
#   0.38-0.50 for degree 8 in a simulation of the f32 code.
# The inline f32 exp's polynomial: e^r = 1 + r E(r) on [-ln2/2, ln2/2],
# minimax in relative terms, of degree 6 (exp) and 5 (inside gelu's
# erfc, where its 1.5 units of 2^-24 are within Q1's own error).
# Least squares on Chebyshev nodes in double (Python's math.erf as the
# reference; the minimax fits by Lawson's iteratively reweighted least
# squares); run: /usr/bin/python3 bench/cpu/fit_erf.py
import math
import numpy as np

XS, XL, TS = 0.875, 10.0, 0.43
DP, DQ = 7, 9
P1, X1, R1, D1 = 0.42, 10.2, 9.4, 8
T1 = 0.0


def cheb_nodes(lo, hi, n):
    return np.cos(np.linspace(0, np.pi, n)) * (hi - lo) / 2 + (hi + lo) / 2


def fit_power(x, y, deg):
    # Least squares in the power basis of x (well conditioned here:
    # |x| < 1), solved in double through the scaled Vandermonde matrix.
    v = np.vander(x, deg + 1, increasing=True)
    c, *_ = np.linalg.lstsq(v, y, rcond=None)
    return c


xs = cheb_nodes(0, XS, 4000)
p = fit_power(xs * xs, np.array([math.erf(x) / x if x else 2 / math.sqrt(math.pi) for x in xs]), DP)
xl = cheb_nodes(XS, XL, 4000)
q = fit_power(1 / (1 + 0.5 * xl) - TS,
              np.array([math.erfc(x) * math.exp(x * x) for x in xl]), DQ)


def lawson(v, y, w0, iters=300):
    # Minimax of |v c - y| w0: least squares reweighted by the error.
    w = np.ones_like(y) / len(y)
    best = None
    for _ in range(iters):
        s = np.sqrt(w) * w0
        c, *_ = np.linalg.lstsq(v * s[:, None], y * s, rcond=None)
        e = np.abs(v @ c - y) * w0
        if best is None or e.max() < best[0]:
            best = (e.max(), c)
        w = w * e
        w /= w.sum()
    return best


x1 = cheb_nodes(0, X1, 4000)
y1 = np.array([math.erfc(x) * math.exp(x * x) for x in x1])
v1 = np.vander(1 / (1 + P1 * x1) - T1, D1 + 1, increasing=True)
q1_err, q1 = lawson(v1, y1, np.where(x1 <= R1, 1, 1e-3) / y1)

rx = cheb_nodes(-math.log(2) / 2 - 2e-5, math.log(2) / 2 + 2e-5, 4000)
exp_fits = {}
for deg in (5, 6):
    ve = np.vander(rx, deg, increasing=True) * rx[:, None]
    exp_fits[deg] = lawson(ve, np.exp(rx) - 1, np.exp(-rx))


def horner32(c, t):
    r = np.float32(c[-1])
    for k in c[-2::-1]:
        r = np.float32(r * t + np.float32(k))
    return r


def erf32(x):
    x = np.float32(x)
    a = np.float32(min(abs(x), XL))
    if a < XS:
        r = float(np.float32(x * horner32(p, np.float32(x * x))))
        return r, r + 1
    t = np.float32(np.float32(1) / np.float32(1 + np.float32(0.5) * a)) - np.float32(TS)
    # x*x as hi + lo (lo = fma(a, a, -hi), exact), exp(-hi) * (1 - lo)
    hi = np.float32(a * a)
    lo = np.float32(float(a) * float(a) - float(hi))
    e = np.float32(np.float32(math.exp(-float(hi))) * np.float32(1 - lo))
    tail = np.float32(e * horner32(q, t))
    if x < 0:
        return -float(np.float32(1) - tail), float(tail)
    return float(np.float32(1) - tail), float(2 - tail)


def one_plus_erf32(x):
    x = np.float32(x)
    if abs(x) < XS:
        return float(np.float32(1) + np.float32(x * horner32(p, np.float32(x * x))))
    return erf32(x)[1]


worst_rel = worst_abs = worst_c = 0
for x in np.linspace(-12, 12, 400001):
    x32 = float(np.float32(x))
    exact = math.erf(x32)
    got = erf32(x32)[0]
    worst_abs = max(worst_abs, abs(got - exact))
    if exact:
        worst_rel = max(worst_rel, abs(got - exact) / abs(exact))
    ce = math.erfc(-x32)
    if ce > 1e-37:
        worst_c = max(worst_c, abs(one_plus_erf32(x32) - ce) / ce)
def one_plus_erf32_one_branch(x):
    x = np.float32(x)
    a = np.float32(min(abs(x), X1))
    t = np.float32(np.float32(1) / np.float32(1 + np.float32(P1) * a)) - np.float32(T1)
    hi = np.float32(a * a)
    lo = np.float32(float(a) * float(a) - float(hi))
    e = np.float32(np.float32(math.exp(-float(hi))) * np.float32(1 - lo))
    ec = float(np.float32(e * horner32(q1, t)))
    return ec if x < 0 else float(np.float32(2 - ec))


worst_1 = 0
for x in np.linspace(-12, 12, 100001):
    x32 = float(np.float32(x))
    ce = math.erfc(-x32)
    if ce > 1e-37:
        worst_1 = max(worst_1, abs(one_plus_erf32_one_branch(x32) - ce) / ce)
print("P =", ", ".join("%.9e" % c for c in p))
print("Q =", ", ".join("%.9e" % c for c in q))
print("f32 evaluation on [-12, 12]: erf max abs error %.3g, max rel error "
      "%.3g; 1 + erf max rel error %.3g" % (worst_abs, worst_rel, worst_c))
print("T1 = %.9e" % T1)
print("Q1 =", ", ".join("%.9e" % c for c in q1))
print("Q1 minimax relative error on [0, %g]: %.3g" % (R1, q1_err))
for deg, (err, c) in exp_fits.items():
    print("E%d = 1, %s (relative error %.3g)"
          % (deg, ", ".join("%.9e" % v for v in c), err))
print("f32 evaluation of 1 + erf in one branch (gelu): max rel error %.3g "
      "(python's f32 Horner without fma; the generated code uses fma)"
      % worst_1)
