"""Derives the coefficients of forge_gelu_erf (compiler/codegen/cuda_expr.cc's kernel prelude).

GELU(x) = x * Phi(x), with Phi(x) = 1 - h(|x|) for x >= 0 and h(|x|) below 0, where
h(t) = erfc(t / sqrt 2) / 2 = 2^(Q(t) - t^2 log2(e) / 2). Q(t) = log2(erfcx(t / sqrt 2) / 2) is
smooth and small on [0, 6] (-1 to about -4.2): a polynomial fit by least squares on Chebyshev
nodes and evaluated in t by Horner's rule in float32 gives h with a relative error of a few 1e-6
at degree 8 (forge_gelu_erf, for float32 and float64 results) and below 5e-5 at degree 6
(forge_gelu_erf_16bit, for float16 and bfloat16 results, whose rounding is 10 to 40 times
coarser). Past t = 6 the kernel keeps Q(6) and t: h is below 1e-9 there and the t^2 term carries
it.

Run with numpy and mpmath (both come with the project's Python environment):
  $(scripts/pyenv-path)/bin/python compiler/codegen/tools/fit_gelu_erf.py
For each degree it prints the coefficients (highest degree first) and the float32 evaluation's
errors, of h and of the whole GELU as the kernel computes it.
"""

import mpmath
import numpy as np
from numpy.polynomial import chebyshev, polynomial

RANGE = 6.0
DEGREES = (8, 6)
mpmath.mp.dps = 40


def log2_half_erfcx(t: float) -> float:
    u = mpmath.mpf(float(t)) / mpmath.sqrt(2)
    return float(mpmath.log(mpmath.erfc(u) * mpmath.exp(u * u) / 2, 2))


def half_erfc(t: float) -> float:
    return float(mpmath.erfc(mpmath.mpf(float(t)) / mpmath.sqrt(2)) / 2)


def fit(degree: int) -> np.ndarray:
    """Q's float32 coefficients in t, highest degree first."""
    nodes = np.cos(np.pi * (np.arange(4 * degree) + 0.5) / (4 * degree))  # Chebyshev, in [-1, 1]
    s = (nodes + 1) / 2
    in_u = chebyshev.cheb2poly(  # a polynomial in u = 2 s - 1
        chebyshev.chebfit(nodes, [log2_half_erfcx(RANGE * x) for x in s], degree))
    in_t = np.zeros(1)
    for k, a in enumerate(in_u):  # u = 2 t / RANGE - 1
        in_t = polynomial.polyadd(in_t, a * polynomial.polypow([-1.0, 2.0 / RANGE], k))
    return in_t.astype(np.float32)[::-1]


def kernel_h(coefficients: np.ndarray, x: np.ndarray) -> np.ndarray:
    """h(|x|) as the kernel computes it in float32: Horner's rule (one rounding per FMA) in
    t = min(|x|, 6), the exponent's t^2 term in |x|."""
    t = np.minimum(np.abs(x), np.float32(RANGE))
    q = np.full_like(t, coefficients[0])
    for c in coefficients[1:]:
        q = (q.astype(np.float64) * t + c).astype(np.float32)
    square = (np.abs(x) * np.abs(x)).astype(np.float32)
    argument = (square.astype(np.float64) * np.float32(-0.5 * np.log2(np.e)) + q).astype(np.float32)
    return np.exp2(argument.astype(np.float64)).astype(np.float32)


def main() -> None:
    for degree in DEGREES:
        coefficients = fit(degree)
        print(f"degree {degree}, coefficients, highest degree first:")
        for c in coefficients:
            print(f"  {float(c):.9e}f")
        t = np.linspace(0, RANGE, 20001).astype(np.float32)
        exact_h = np.array([half_erfc(v) for v in t])
        relative = np.abs(kernel_h(coefficients, t) / exact_h - 1)
        print(f"  max relative error of h: {np.max(relative):.2e}")

        # The kernel's whole GELU, max(x, 0) - t h(|x|), in float32 down to where h underflows
        # (|x| = 13), against x Phi(x).
        x = np.linspace(-13, 13, 52001).astype(np.float32)
        t = np.minimum(np.abs(x), np.float32(RANGE))
        h = kernel_h(coefficients, x)
        gelu = (np.maximum(x, 0).astype(np.float64) - t.astype(np.float64) * h).astype(np.float32)
        exact = np.array([v * (1 - half_erfc(v)) if v >= 0 else v * half_erfc(-v)
                          for v in map(float, x)])
        near = np.abs(x) <= RANGE
        error = np.abs(gelu - exact)
        print(f"  max relative error of GELU, |x| <= {RANGE:g}: "
              f"{np.max(error[near] / np.maximum(np.abs(exact[near]), 1e-30)):.2e}")
        print(f"  max absolute error of GELU, |x| > {RANGE:g}: {np.max(error[~near]):.2e}")


if __name__ == "__main__":
    main()
