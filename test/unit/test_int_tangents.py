"""Forward mode gives an integer or boolean result a zero tangent of the
result's own dtype and shape, in GRAPH and PYNATIVE mode alike (JAX gives
`float0` zeros, which no msir tensor type can hold; the compiled path once
returned the primal value in the tangent's slot).
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import pynative

import msir

X = np.array([0.5, 1.0, 4.0])
OFFSET = 3


def mixed(x):
    return x * 2.0, np.argmax(x) + OFFSET, x > 1.0, np.sum(x).astype(np.int32), x.astype(np.int64)


def _check(primals, tangents):
    assert len(primals) == len(tangents)
    for p, t in zip(primals, tangents):
        p, t = np.asarray(p), np.asarray(t)
        assert t.shape == p.shape and t.dtype == p.dtype
        if p.dtype.kind != "f":
            assert not np.any(t), f"integer tangent {t!r} is not zero"


@pytest.mark.parametrize("pynative_mode", [False, True], ids=["graph", "pynative"])
def test_integer_results_have_zero_tangents_of_their_dtype(pynative_mode):
    run = lambda: msir.jvp(mixed, (X,), (np.ones(3),))  # noqa: E731
    primals, tangents = pynative(run) if pynative_mode else run()
    for got, expected in zip(primals, mixed(X), strict=True):
        np.testing.assert_array_equal(got, expected)
    _check(primals, tangents)
    np.testing.assert_array_equal(tangents[0], np.full(3, 2.0))


def test_both_modes_agree_and_a_jvp_inside_compiled_code_too():
    graph = msir.jvp(mixed, (X,), (np.ones(3),))[1]
    eager = pynative(lambda: msir.jvp(mixed, (X,), (np.ones(3),)))[1]

    @msir.jit
    def inside(x):
        return msir.jvp(mixed, (x,), (np.ones(3),))[1]

    for tangents in (eager, inside(X)):
        for a, b in zip(graph, tangents, strict=True):
            assert np.asarray(a).dtype == np.asarray(b).dtype
            np.testing.assert_array_equal(a, b)
