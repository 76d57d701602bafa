"""Fit the polynomial coefficients of msir.lowering.vector_math (run by hand).

    python scripts/fit_vector_math.py

For each kernel it fits a near-minimax polynomial (Chebyshev interpolation in
mpmath at 60 digits), rounds the coefficients to the target float type, and
reports the maximum relative error of the *kernel* (the approximated function,
not the polynomial part) over a dense grid, evaluated in mpmath with the rounded
coefficients: this is the approximation error only; the floating-point
evaluation adds a few half-ulps on top (the unit tests measure the total).
The printed `COEFFS` block is what vector_math.py holds (hex floats, highest
degree first, as Horner's rule uses them).

Kernels (r, f, z the reduced arguments of vector_math.py):
* exp:  e**r = 1 + r + r**2 * P(r),  |r| <= ln2/2 (fitted on a 2 % wider interval,
  so a rounding of k off by one without FMA stays accurate).
* log32: log1p(f) = f - f**2/2 + f**3 * P(f),  f in [sqrt(1/2)-1, sqrt(2)-1].
* log64: log((1+s)/(1-s)) = 2s + s*z*P(z),  z = s**2 <= ((sqrt2-1)/(sqrt2+1))**2.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

mp.mp.dps = 60

LN2_HALF = mp.log(2) / 2
S_MAX = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)


def _exp_p(r):
    if abs(r) < mp.mpf("1e-20"):
        return mp.mpf(1) / 2 + r / 6
    return (mp.exp(r) - 1 - r) / r**2


def _log32_p(f):
    if abs(f) < mp.mpf("1e-20"):
        return mp.mpf(1) / 3 - f / 4
    return (mp.log1p(f) - f + f**2 / 2) / f**3


def _log64_p(z):
    if z < mp.mpf("1e-40"):
        return mp.mpf(2) / 3 + 2 * z / 5
    s = mp.sqrt(z)
    return (mp.log((1 + s) / (1 - s)) - 2 * s) / (s * z)


KERNELS = {
    # name: (P, interval, kernel(x, P(x)) -> approximated value, exact kernel)
    "exp": (_exp_p, (-LN2_HALF * 1.02, LN2_HALF * 1.02), lambda r, p: 1 + r + r**2 * p, mp.exp),
    "log32": (
        _log32_p,
        (mp.sqrt(0.5) - 1, mp.sqrt(2) - 1),
        lambda f, p: f - f**2 / 2 + f**3 * p,
        mp.log1p,
    ),
    "log64": (
        _log64_p,
        (mp.mpf(0), S_MAX**2 * 1.02),
        lambda z, p: 2 * mp.sqrt(z) + mp.sqrt(z) * z * p,
        lambda z: mp.log((1 + mp.sqrt(z)) / (1 - mp.sqrt(z))),
    ),
}


def fit(name: str, n_coeffs: int, dtype) -> tuple[list[float], float]:
    p, (a, b), kernel, exact = KERNELS[name]
    coeffs, _ = mp.chebyfit(p, [a, b], n_coeffs, error=True)
    rounded = [float(np.array(float(c), dtype)) for c in coeffs]
    worst = mp.mpf(0)
    for x in mp.linspace(a, b, 4001):
        if x == 0:
            continue
        got = kernel(x, mp.polyval([mp.mpf(c) for c in rounded], x))
        want = exact(x)
        worst = max(worst, abs((got - want) / want))
    return rounded, float(worst)


CHOICES = [
    ("exp", np.float32, 5),
    ("exp", np.float64, 10),
    ("log32", np.float32, 8),
    ("log64", np.float64, 7),
]


def main() -> None:
    print("COEFFS = {")
    for name, dtype, n in CHOICES:
        coeffs, err = fit(name, n, dtype)
        eps = float(np.finfo(dtype).eps)
        tag = "f32" if dtype == np.float32 else "f64"
        print(f"    # {name} {tag}: {n} coefficients, kernel error {err:.3g} = {err / eps:.3g} eps")
        body = ", ".join(f'float.fromhex("{c.hex()}")' for c in coeffs)
        print(f'    ("{name}", "{tag}"): ({body}),')
    print("}")


if __name__ == "__main__":
    main()
