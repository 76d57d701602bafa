"""Python lists and tuples in arithmetic follow Python, as plain Python with
NumPy runs them: `+` of two of one type concatenates, `*` by a Python int
repeats, what Python refuses raises its TypeError at the user's line; an
array operand makes NumPy convert the sequence (elementwise). A rank-0 NumPy
value times a sequence, which Python and NumPy treat differently for a NumPy
scalar and a 0-d array, is refused clearly.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import pynative

import msir
from msir.errors import UnsupportedSyntaxError

SEQ = [1.0, 2.0]


def repeat(a):
    return a * 2


def repeat_left(a):
    return 3 * a


def repeat_by(a, n):
    return a * n


def concatenate(a):
    return a + a


def append_literal(a):
    return a + [3.0]


def literal_repeat():
    return [1.0, 2.0] * 2


def length_of_repeat(a):
    return len(a * 2)


def with_array(a, x):
    return a * x + a


def augmented(a):
    a += [4.0]
    a *= 2
    return a


MATCHING = [
    (repeat, (SEQ,)), (repeat, (tuple(SEQ),)), (repeat_left, (SEQ,)), (repeat_by, (SEQ, 3)), (repeat_by, (SEQ, 0)),
    (concatenate, (SEQ,)), (concatenate, ((1.0, 2.0),)), (append_literal, (SEQ,)), (literal_repeat, ()),
    (length_of_repeat, (SEQ,)), (with_array, (SEQ, np.array([2.0, 3.0]))), (augmented, (list(SEQ),)),
]


@pytest.mark.parametrize("fn,args", MATCHING, ids=lambda v: getattr(v, "__name__", ""))
def test_sequences_follow_python(fn, args):
    expected = fn(*[list(a) if isinstance(a, list) else a for a in args])
    got = msir.jit(fn)(*args)
    assert type(got) is type(expected)
    if isinstance(expected, (list, tuple)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert np.asarray(g).dtype == np.asarray(e).dtype
            np.testing.assert_array_equal(g, e)
    else:
        np.testing.assert_array_equal(got, expected)


def test_repeating_by_an_int_argument_specialises_on_it():
    f = msir.jit(repeat_by)
    assert f(SEQ, 2) == SEQ * 2
    assert f(SEQ, 3) == SEQ * 3


def times_float(a):
    return a * 1.5


def minus(a):
    return a - a


def plus_number(a):
    return a + 1


def negate(a):
    return -a


def list_plus_tuple(a):
    return a + (1.0,)


@pytest.mark.parametrize("fn", [times_float, minus, plus_number, negate, list_plus_tuple])
def test_what_python_refuses_is_its_type_error_at_the_line(fn):
    with pytest.raises(TypeError) as python:
        fn(list(SEQ))
    with pytest.raises(TypeError) as compiled:
        msir.jit(fn)(SEQ)
    err = compiled.value
    assert str(python.value) in err.message
    assert err.loc is not None and err.loc.line == fn.__code__.co_firstlineno + 1


def times_rank0(a, s):
    return a * s


@pytest.mark.parametrize("s", [np.int64(2), np.float64(2.0), np.array(2.0)])
def test_a_sequence_times_a_rank0_numpy_value_is_refused(s):
    with pytest.raises(UnsupportedSyntaxError) as info:
        msir.jit(times_rank0)(SEQ, s)
    assert "np.asarray" in info.value.message and info.value.loc.line == times_rank0.__code__.co_firstlineno + 1


def test_pynative_runs_python_itself():
    assert pynative(lambda: msir.jit(repeat)(SEQ)) == SEQ * 2
