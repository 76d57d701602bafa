"""Finite-difference checks of derivative rules, in the manner of JAX's
`check_grads`: a forward function and its reverse (VJP) and/or forward (JVP)
rule are compared with central differences, element by element.

    check_grads(f, xs, vjp=my_vjp, jvp=my_jvp)

* `f(xs) -> y`: the forward function on a list of arrays.
* `vjp(xs, y, ct) -> [ct_x or None, ...]`: one cotangent per operand.
* `jvp(xs, y, ts) -> t_y`: `ts` holds one tangent per operand, None for
  operands that are not differentiated.

Only floating-point operands are differentiated; integer and boolean operands
(indices, conditions) are held fixed, and a VJP must give them None; a None
cotangent for a float operand means zero. Compare in
float64: with `eps = 1e-6` the central difference is exact to about 1e-10 for the
smooth, O(1) functions these checks are meant for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

EPS = 1e-6
RTOL = 1e-6
ATOL = 1e-8

Forward = Callable[[list], np.ndarray]


def _is_float(x) -> bool:
    return np.asarray(x).dtype.kind == "f"


def _perturb(xs: Sequence[np.ndarray], i: int, delta: np.ndarray) -> list[np.ndarray]:
    out = list(xs)
    out[i] = xs[i] + delta
    return out


def numerical_jvp(f: Forward, xs: Sequence[np.ndarray], ts: Sequence[np.ndarray | None],
                  eps: float = EPS) -> np.ndarray:
    """(f(x + eps*t) - f(x - eps*t)) / 2eps, None tangents held at zero."""
    plus = [x if t is None else x + eps * t for x, t in zip(xs, ts)]
    minus = [x if t is None else x - eps * t for x, t in zip(xs, ts)]
    return (np.asarray(f(plus), np.float64) - np.asarray(f(minus), np.float64)) / (2 * eps)


def numerical_vjp(f: Forward, xs: Sequence[np.ndarray], ct: np.ndarray, i: int, eps: float = EPS) -> np.ndarray:
    """d<ct, f(xs)>/d xs[i], one central difference per element of xs[i]."""
    x = np.asarray(xs[i])
    out = np.zeros(x.shape, np.float64)
    for j in np.ndindex(x.shape):
        e = np.zeros(x.shape, x.dtype)
        e[j] = eps
        diff = np.asarray(f(_perturb(xs, i, e)), np.float64) - np.asarray(f(_perturb(xs, i, -e)), np.float64)
        out[j] = np.sum(ct * diff) / (2 * eps)
    return out


def _close(what: str, got, expected, rtol: float, atol: float) -> None:
    got = np.asarray(got, np.float64)
    expected = np.asarray(expected, np.float64)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=what)


def check_vjp(f: Forward, vjp: Callable, xs: Sequence[np.ndarray], *, rng: np.random.Generator | None = None,
              eps: float = EPS, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Every float operand's cotangent against central differences of <ct, f>."""
    rng = rng if rng is not None else np.random.default_rng(0)
    xs = [np.asarray(x) for x in xs]
    y = np.asarray(f(xs))
    ct = rng.standard_normal(y.shape).astype(y.dtype)
    cts = vjp(xs, y, ct)
    assert len(cts) == len(xs), f"vjp gave {len(cts)} cotangents for {len(xs)} operands"
    for i, (x, got) in enumerate(zip(xs, cts)):
        if not _is_float(x):
            assert got is None, f"operand {i} ({x.dtype}) is not differentiable but got a cotangent"
            continue
        if got is None:  # "no cotangent" is a zero cotangent
            got = np.zeros(x.shape, x.dtype)
        assert np.asarray(got).dtype == x.dtype, f"cotangent {i}: dtype {np.asarray(got).dtype}, expected {x.dtype}"
        _close(f"vjp wrt operand {i}", got, numerical_vjp(f, xs, ct, i, eps), rtol, atol)


def check_jvp(f: Forward, jvp: Callable, xs: Sequence[np.ndarray], *, rng: np.random.Generator | None = None,
              eps: float = EPS, rtol: float = RTOL, atol: float = ATOL) -> None:
    """The tangent of a random direction (all float operands at once, then each
    alone, so a term lost for one operand cannot hide) against central differences."""
    rng = rng if rng is not None else np.random.default_rng(1)
    xs = [np.asarray(x) for x in xs]
    y = np.asarray(f(xs))
    floats = [i for i, x in enumerate(xs) if _is_float(x)]
    full = [rng.standard_normal(x.shape).astype(x.dtype) if i in floats else None for i, x in enumerate(xs)]
    directions = [full] if len(floats) <= 1 else [full] + [
        [t if k == i else None for k, t in enumerate(full)] for i in floats
    ]
    for ts in directions:
        got = jvp(xs, y, ts)
        assert np.asarray(got).dtype == y.dtype, f"tangent dtype {np.asarray(got).dtype}, expected {y.dtype}"
        which = [i for i, t in enumerate(ts) if t is not None]
        _close(f"jvp along operands {which}", got, numerical_jvp(f, xs, ts, eps), rtol, atol)


def check_grads(f: Forward, xs: Sequence[np.ndarray], *, vjp: Callable | None = None,
                jvp: Callable | None = None, rng: np.random.Generator | None = None,
                eps: float = EPS, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Check whichever of `vjp` and `jvp` are given against finite differences of `f`."""
    assert vjp is not None or jvp is not None, "check_grads needs a vjp or a jvp"
    if vjp is not None:
        check_vjp(f, vjp, xs, rng=rng, eps=eps, rtol=rtol, atol=atol)
    if jvp is not None:
        check_jvp(f, jvp, xs, rng=rng, eps=eps, rtol=rtol, atol=atol)


def pynative(thunk):
    """`thunk()` run in PYNATIVE_MODE (the eager engine), back in GRAPH_MODE after."""
    import msir

    msir.set_context(mode=msir.PYNATIVE_MODE)
    try:
        return thunk()
    finally:
        msir.set_context(mode=msir.GRAPH_MODE)
