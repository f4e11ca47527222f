"""Derives the coefficients of forge_gelu_erf (compiler/codegen/cuda_expr.cc's kernel prelude).

GELU(x) = x * Phi(x), with Phi(x) = 1 - h(|x|) for x >= 0 and h(|x|) below 0, where
h(t) = erfc(t / sqrt 2) / 2 = 2^(Q(t) - t^2 log2(e) / 2). Q(t) = log2(erfcx(t / sqrt 2) / 2) is
smooth and small on [0, 6] (-1 to about -4.2): a degree-8 polynomial, fit by least squares on
Chebyshev nodes and evaluated in t by Horner's rule in float32, gives h with a relative error of a
few 1e-6. Past t = 6 the kernel keeps Q(6): h is below 1e-9 there and the t^2 term carries it.

Run with numpy and mpmath (both come with the project's Python environment):
  $(scripts/pyenv-path)/bin/python compiler/codegen/tools/fit_gelu_erf.py
It prints the coefficients (highest degree first) and the float32 evaluation's errors.
"""

import mpmath
import numpy as np
from numpy.polynomial import chebyshev, polynomial

RANGE = 6.0
DEGREE = 8
mpmath.mp.dps = 40


def log2_half_erfcx(t: float) -> float:
    u = mpmath.mpf(float(t)) / mpmath.sqrt(2)
    return float(mpmath.log(mpmath.erfc(u) * mpmath.exp(u * u) / 2, 2))


def half_erfc(t: float) -> float:
    return float(mpmath.erfc(mpmath.mpf(float(t)) / mpmath.sqrt(2)) / 2)


def main() -> None:
    nodes = np.cos(np.pi * (np.arange(4 * DEGREE) + 0.5) / (4 * DEGREE))  # Chebyshev, in [-1, 1]
    s = (nodes + 1) / 2
    fit = chebyshev.chebfit(nodes, [log2_half_erfcx(RANGE * x) for x in s], DEGREE)
    in_u = chebyshev.cheb2poly(fit)  # a polynomial in u = 2 s - 1
    in_t = np.zeros(1)
    for k, a in enumerate(in_u):  # u = 2 t / RANGE - 1
        in_t = polynomial.polyadd(in_t, a * polynomial.polypow([-1.0, 2.0 / RANGE], k))
    coefficients = in_t.astype(np.float32)[::-1]  # highest degree first

    t = np.linspace(0, RANGE, 20001).astype(np.float32)
    q = np.full_like(t, coefficients[0])
    for c in coefficients[1:]:
        q = (q.astype(np.float64) * t + c).astype(np.float32)  # one rounding, as an FMA
    argument = ((t.astype(np.float64) * t) * -0.5 * np.log2(np.e) + q).astype(np.float32)
    h = np.exp2(argument.astype(np.float64))
    exact = np.array([half_erfc(x) for x in t])
    print("coefficients, highest degree first:")
    for c in coefficients:
        print(f"  {float(c):.9e}f")
    print(f"max relative error of h: {np.max(np.abs(h / exact - 1)):.2e}")
    print(f"max relative error of Phi(x >= 0): {np.max(np.abs((exact - h) / (1 - exact))):.2e}")


if __name__ == "__main__":
    main()
