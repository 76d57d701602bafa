"""User code's own errors (issue 17): `assert`, `raise E(msg)` and f-string messages.

Compiled, each becomes an `msir.check` that native code evaluates; a failure
is raised by msir's runtime as the user's exception (an msir error deriving
from it) at the user's line, with the message Python would format. PYNATIVE
mode runs the Python itself. Values and gradients of the calls that pass are
checked against NumPy and finite differences in both modes; the messages
against what plain Python prints for the same call.

PYTEST_DONT_REWRITE: the programs' own `assert`s must keep Python's messages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp, pynative

import msir
from msir.errors import MsirAssertionError, MsirError, MsirIndexError, MsirValueError, UnsupportedSyntaxError


def _positive_sum(x):
    s = x.sum()
    assert s > 0, f"the sum must be positive, got {s:.3f} ({s!r}) {{braces}}"
    return np.sum(np.tanh(x) * s)


def _bounded(x, limit):
    m = np.max(x)
    if m > limit:
        raise ValueError(f"max {m} exceeds {limit} for {x.shape[0]} items")
    else:
        y = np.exp(x)
    return np.sum(y * x)


def _sorted_rows(x):
    total = 0.0
    for i in range(x.shape[0] - 1):
        if x[i] > x[i + 1]:
            raise IndexError(f"not sorted at {i}")
        total = total + x[i] * x[i + 1]
    return total


def _plain_assert(x):
    assert np.min(x) >= 0
    return np.sum(np.sqrt(x))


def _python_message(fn, *args) -> tuple[type, str]:
    """The exception and message plain NumPy code raises."""
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.type, str(info.value)


def _line_of(fn, text: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


GOOD = np.array([0.5, 1.0, 1.5])


@pytest.mark.parametrize("fn, args", [
    (_positive_sum, (GOOD,)),
    (_bounded, (GOOD, 2.0)),
    (_sorted_rows, (GOOD,)),
    (_plain_assert, (GOOD,)),
])
def test_passing_checks_compute_and_differentiate(fn, args):
    expected = fn(*args)
    np.testing.assert_allclose(msir.jit(fn)(*args), expected, rtol=1e-12)
    np.testing.assert_allclose(pynative(lambda: msir.jit(fn)(*args)), expected, rtol=1e-12)
    fd = numerical_vjp(lambda xs: fn(xs[0], *args[1:]), [args[0]], np.float64(1.0), 0)
    np.testing.assert_allclose(msir.grad(fn)(*args), fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(pynative(lambda: msir.grad(fn)(*args)), fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("fn, args, cls, line_text", [
    (_positive_sum, (-GOOD,), MsirAssertionError, "assert s > 0"),
    (_bounded, (GOOD, 1.2), MsirValueError, "raise ValueError"),
    (_sorted_rows, (GOOD[[0, 2, 1]],), MsirIndexError, "raise IndexError"),
    (_plain_assert, (GOOD - 1.0,), MsirAssertionError, "assert np.min(x)"),
])
def test_a_failed_check_raises_the_users_error_at_the_users_line(fn, args, cls, line_text):
    py_type, py_message = _python_message(fn, *args)
    with pytest.raises(cls) as info:
        msir.jit(fn)(*args)
    assert isinstance(info.value, py_type) and isinstance(info.value, MsirError)
    assert info.value.message == py_message
    assert info.value.loc.line == _line_of(fn, line_text)
    assert line_text in str(info.value)  # the source line is shown
    with pytest.raises(py_type) as in_pynative:
        pynative(lambda: msir.jit(fn)(*args))
    assert getattr(in_pynative.value, "message", str(in_pynative.value)) == py_message
    with pytest.raises(cls) as in_grad:
        msir.grad(fn)(*args)  # the forward pass of the gradient checks too
    assert in_grad.value.message == py_message
    with pytest.raises(py_type) as eager_grad:
        pynative(lambda: msir.grad(fn)(*args))  # Python runs the check on traced values
    if "!r" not in py_message and "np.float64(" not in py_message:  # repr of a traced value shows the tracer
        assert str(eager_grad.value) == py_message


def test_eager_messages_format_traced_values():
    """PYNATIVE mode: an f-string formats a traced value as NumPy formats the array."""
    def f(x):
        s = x.sum()
        if s > 1:
            raise ValueError(f"sum {s:.2f} of {s}")
        return s

    with pytest.raises(ValueError, match=r"^sum 3\.00 of 3\.0$"):
        pynative(lambda: msir.grad(f)(GOOD))


def test_python_numbers_format_as_python_numbers():
    def f(x, n, scale):
        if x[0] > n:
            raise ValueError(f"{n!r} {scale!r} {x[0]!r} {x[0] > n}")
        return x * scale

    with pytest.raises(MsirValueError) as info:
        msir.jit(f)(np.array([9.0, 1.0]), np.int64(3), 0.5)
    assert info.value.message == _python_message(f, np.array([9.0, 1.0]), np.int64(3), 0.5)[1]
    assert info.value.message == "np.int64(3) 0.5 np.float64(9.0) True"


def test_the_first_failed_check_is_reported():
    def f(x):
        for i in range(x.shape[0]):
            assert x[i] > 0, f"item {i} is {x[i]}"
        return x

    with pytest.raises(MsirAssertionError, match="item 1 is -2.0"):
        msir.jit(f)(np.array([1.0, -2.0, -3.0]))


def test_static_f_strings_and_a_raise_in_both_branches():
    def f(x, kind):
        label = f"kind={kind:>3}"
        if kind == 1:
            raise ValueError(f"{label}: unsupported")
        return x

    np.testing.assert_array_equal(msir.jit(f)(GOOD, 2), GOOD)
    with pytest.raises(MsirValueError, match="kind=  1: unsupported"):
        msir.jit(f)(GOOD, 1)

    def always(x):
        if x[0] > 0:
            raise ValueError("positive")
        else:
            raise TypeError(f"not positive: {x[0]}")
        return x  # never reached

    with pytest.raises(MsirValueError, match="positive"):
        msir.jit(always)(GOOD)
    with pytest.raises(TypeError, match="not positive: -0.5"):
        msir.jit(always)(-GOOD)


def test_refused_forms_are_located_errors():
    def runtime_string(x):
        label = f"{x.sum()}"
        return x, label

    def array_in_message(x):
        assert x.sum() > 0, f"bad {x}"
        return x

    def custom_exception(x):
        raise KeyError("k")

    for fn, text in ((runtime_string, "only as the message of raise or assert"),
                     (array_in_message, r"not an array of shape \(3,\)"),
                     (custom_exception, "raising 'KeyError' is not supported")):
        with pytest.raises(UnsupportedSyntaxError, match=text) as info:
            msir.jit(fn)(GOOD)
        assert info.value.loc is not None and info.value.loc.file == __file__


CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import msir
    from msir import cache
    sys.path.insert(0, sys.argv[1])
    from checked import f
    try:
        msir.jit(f)(np.array([1.0, -2.0]))
    except AssertionError as e:
        print(json.dumps({"stats": cache.stats, "message": e.message, "line": e.loc.line}))
""")


def test_the_message_survives_the_persistent_cache(tmp_path):
    """A second process loads the object code from the disk cache: the message
    lives in it (a constant global), with the values it formats."""
    (tmp_path / "checked.py").write_text(textwrap.dedent("""
        import numpy as np

        def f(x):
            assert np.all(x > 0), f"min {np.min(x)} at {np.argmin(x)}"
            return x
    """))
    env = dict(os.environ, MSIR_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert runs[0]["stats"]["writes"] == 1 and runs[1]["stats"]["hits"] == 1
    assert [r["message"] for r in runs] == ["min -2.0 at 1"] * 2
    assert [r["line"] for r in runs] == [5, 5]


def _checked_sine(x):
    s = x.sum()
    assert s > 0, f"bad {s}"
    return np.sum(np.sin(x) * s)


def test_forward_mode_and_gradients_in_compiled_code_check_too():
    direction = np.array([0.3, -0.7, 1.1])
    _, t = msir.jvp(_checked_sine, (GOOD,), (direction,))
    np.testing.assert_allclose(t, numerical_jvp(lambda xs: _checked_sine(xs[0]), [GOOD], [direction]), rtol=1e-6)
    with pytest.raises(MsirAssertionError, match="bad -3.0"):
        msir.jvp(_checked_sine, (-GOOD,), (direction,))
    grad_in_jit = msir.jit(msir.grad(_checked_sine))
    fd = numerical_vjp(lambda xs: _checked_sine(xs[0]), [GOOD], np.float64(1.0), 0)
    np.testing.assert_allclose(grad_in_jit(GOOD), fd, rtol=1e-6)
    with pytest.raises(MsirAssertionError, match="bad -3.0"):
        grad_in_jit(-GOOD)
