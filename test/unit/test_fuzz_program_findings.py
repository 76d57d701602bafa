"""Deviations from NumPy and Python that the generated-program fuzzer
(`test/fuzz/programs.py`) found, each fixed at its mechanism and checked in
GRAPH_MODE and PYNATIVE_MODE against the plain Python function: the dtype of
float functions of bool and integer operands (NumPy's own, float16 for bool),
`math` functions converting their argument to a float first.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import pynative

import msir


def _same(got, want):
    assert isinstance(got, type(want))
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-3)


def float_functions_of_bools(b, s):
    return np.cos(True), np.exp(b), np.sqrt(b), np.exp(s > 1.0), np.log1p(b), np.tanh(b.astype(np.int64))


def math_functions_of_bools_and_ints(s, k):
    return math.exp(s > 1.0), math.sqrt(k), math.cos(s)


@pytest.mark.parametrize("fn, args", [
    (float_functions_of_bools, (np.array([True, False]), 2.0)),
    (math_functions_of_bools_and_ints, (2.0, 3)),
])
def test_float_functions_of_bool_and_integer_operands_have_numpys_dtype(fn, args):
    want = fn(*args)
    for got in (msir.jit(fn)(*args), pynative(lambda: msir.jit(fn)(*args))):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
