"""Donated arguments: `msir.jit(f, donate_argnums=...)`.

An output may be written into a donated argument's array when
convert-msir-to-loops proves the argument dead once the op computing that
output has read it (lowering/to_loops.py, "Donation"). Every test checks the
values against the same function without donation (or NumPy), and whether the
output *is* the donated array; refusals must come with a DonationWarning that
names the reason and the user's line.
"""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import msir
from msir.errors import DonationWarning


def _rng():
    return np.random.default_rng(0)


def loss(w, b, x):
    h = np.tanh(x @ w + b)
    return np.sum(h * h)


def sgd(w, b, x):
    value, (gw, gb) = msir.value_and_grad(loss, argnums=(0, 1))(w, b, x)
    return w - 0.1 * gw, b - 0.1 * gb, value


def _sgd_inputs(n=64, m=32, batch=16):
    rng = _rng()
    return (
        rng.standard_normal((n, m)).astype(np.float32) / 8,
        rng.standard_normal(m).astype(np.float32),
        rng.standard_normal((batch, n)).astype(np.float32),
    )


def _no_warnings():
    return warnings.catch_warnings(record=True)


def test_sgd_step_updates_the_donated_parameters_in_place():
    w, b, x = _sgd_inputs()
    expected = msir.jit(sgd)(w, b, x)
    step = msir.jit(sgd, donate_argnums=(0, 1))
    w2, b2 = w.copy(), b.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DonationWarning)
        nw, nb, value = step(w2, b2, x)
    assert nw is w2 and nb is b2
    np.testing.assert_array_equal(nw, expected[0])
    np.testing.assert_array_equal(nb, expected[1])
    assert value == expected[2]
    # a training loop feeds the outputs back in: every step stays in place
    p = (nw, nb)
    for _ in range(3):
        out = step(*p, x)
        assert out[0] is p[0] and out[1] is p[1]
        p = out[:2]


def test_a_tuple_parameter_donates_every_array_in_it():
    def step(params, x):
        w, b = params
        value, (gw, gb) = msir.value_and_grad(loss, argnums=(0, 1))(w, b, x)
        return (w - 0.1 * gw, b - 0.1 * gb), value

    w, b, x = _sgd_inputs()
    (ew, eb), ev = msir.jit(step)((w, b), x)
    params = (w.copy(), b.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("error", DonationWarning)
        (nw, nb), value = msir.jit(step, donate_argnums=0)(params, x)
    assert nw is params[0] and nb is params[1]
    np.testing.assert_array_equal(nw, ew)
    np.testing.assert_array_equal(nb, eb)


def read_after(w, g):
    new = w - g
    return new, w @ new  # the matmul reads w after the subtraction computed `new`


def test_an_argument_read_after_the_output_is_written_is_refused_with_its_reason():
    w = np.linspace(-1, 1, 50)
    g = np.full(50, 0.25)
    with pytest.warns(DonationWarning) as record:
        new, s = msir.jit(read_after, donate_argnums=0)(w, g)
    message = str(record[0].message)
    assert "argument 0 ('w')" in message and "reads it after" in message, message
    line = read_after.__code__.co_firstlineno + 1
    assert f"at line {line + 1}" in message and f"at line {line}" in message, message
    np.testing.assert_array_equal(new, w - g)
    assert new is not w
    np.testing.assert_allclose(s, w @ (w - g))
    np.testing.assert_array_equal(w, np.linspace(-1, 1, 50))  # not written


def test_no_output_of_the_same_type_is_refused():
    def f(w):
        return np.sum(w * w)

    w = np.ones((4, 4), np.float32)
    with pytest.warns(DonationWarning, match=r"no output of type tensor<4x4xf32>"):
        assert msir.jit(f, donate_argnums=0)(w) == 16


def test_an_output_computed_by_a_matmul_reading_it_is_refused():
    def f(w, v):
        return w @ v  # a matmul may not write over an operand

    w = _rng().standard_normal((8, 8))
    v = _rng().standard_normal((8, 8))
    with pytest.warns(DonationWarning, match=r"'msir.matmul' at line \d+ writes output 0 and reads it, but not elementwise"):
        out = msir.jit(f, donate_argnums=0)(w.copy(), v)
    np.testing.assert_allclose(out, w @ v)


@pytest.mark.parametrize("n", [8, 600])
def test_a_row_softmax_over_its_donated_input(n):
    """The reductions and fusions of a row softmax share one loop over rows
    (at 600 rows, split across threads): each reads row r of x only at row r,
    before the division writes it, so the output reuses x."""

    def softmax(x):
        z = np.exp(x - np.max(x, axis=1, keepdims=True))
        return z / np.sum(z, axis=1, keepdims=True)

    x = _rng().standard_normal((n, 64)).astype(np.float32)
    expected = np.exp(x - x.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    x2 = x.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DonationWarning)
        out = msir.jit(softmax, donate_argnums=0)(x2)
    assert out is x2
    np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_a_donated_array_read_across_rows_keeps_numpy_values():
    def f(x, v):
        y = x * 2.0
        return y - np.sum(x, axis=0) * v  # the column sums read every row of x

    x = _rng().standard_normal((64, 64))
    v = _rng().standard_normal((64, 64))
    expected = x * 2.0 - x.sum(axis=0) * v
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DonationWarning)
        out = msir.jit(f, donate_argnums=0)(x.copy(), v)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_donating_the_array_also_passed_as_another_argument_falls_back_with_a_warning():
    def f(w, v):
        return w + 2 * v

    w = np.arange(10.0)
    fn = msir.jit(f, donate_argnums=0)
    with pytest.warns(DonationWarning, match="overlaps input 1"):
        out = fn(w, w)
    np.testing.assert_array_equal(out, 3 * np.arange(10.0))
    np.testing.assert_array_equal(w, np.arange(10.0))
    # overlapping views of one buffer are caught too
    base = np.arange(20.0)
    with pytest.warns(DonationWarning, match="overlaps input 1"):
        out = fn(base[:10], base[5:15])
    np.testing.assert_array_equal(out, np.arange(10.0) + 2 * np.arange(5.0, 15.0))
    # disjoint views are fine
    with warnings.catch_warnings():
        warnings.simplefilter("error", DonationWarning)
        a, v = base[:10], base[10:]
        out = fn(a, v)
    assert out is a
    np.testing.assert_array_equal(out, np.arange(10.0) + 2 * np.arange(10.0, 20.0))


def test_a_read_only_array_is_not_written():
    def f(w, v):
        return w + v

    w = np.arange(6.0)
    w.flags.writeable = False
    with pytest.warns(DonationWarning, match="read-only"):
        out = msir.jit(f, donate_argnums=0)(w, np.ones(6))
    np.testing.assert_array_equal(out, np.arange(6.0) + 1)
    np.testing.assert_array_equal(w, np.arange(6.0))


def test_a_non_contiguous_donated_array_is_copied_and_the_copy_reused():
    def f(w, v):
        return w * v

    big = np.arange(24.0).reshape(4, 6)
    w = big[:, ::2]  # not contiguous: passed as a copy, which the output reuses
    with warnings.catch_warnings():
        warnings.simplefilter("error", DonationWarning)
        out = msir.jit(f, donate_argnums=0)(w, np.full((4, 3), 2.0))
    np.testing.assert_array_equal(out, big[:, ::2] * 2)
    np.testing.assert_array_equal(big, np.arange(24.0).reshape(4, 6))


def test_large_parallel_loops_write_in_place_correctly():
    msir.set_num_threads(2)
    n = 1 << 20

    def f(w, g):
        return w - 0.5 * np.tanh(g) * w

    rng = _rng()
    w, g = rng.standard_normal(n), rng.standard_normal(n)
    expected = msir.jit(f)(w, g)
    w2 = w.copy()
    out = msir.jit(f, donate_argnums=0)(w2, g)
    assert out is w2
    np.testing.assert_array_equal(out, expected)


def test_bad_donate_argnums():
    with pytest.raises(ValueError, match="donate_argnums has 2, not a parameter position"):
        msir.jit(lambda a, b: a + b, donate_argnums=2)
    with pytest.raises(ValueError, match="donate_argnums"):
        msir.jit(lambda a, b: a + b, donate_argnums=("a",))


def test_negative_positions_count_from_the_end():
    def f(v, w):
        return v + w

    w = np.zeros(4)
    out = msir.jit(f, donate_argnums=-1)(np.ones(4), w)
    assert out is w
    np.testing.assert_array_equal(w, np.ones(4))


CHILD = """
import json, sys, warnings
import numpy as np
import msir
from msir import cache
sys.path.insert(0, sys.argv[1])
from donation_mod import step, read_after
warnings.simplefilter("always")
w, g = np.linspace(0, 1, 32), np.full(32, 0.5)
with warnings.catch_warnings(record=True) as caught:
    out = msir.jit(step, donate_argnums=0)(w, g)
    msir.jit(read_after, donate_argnums=0)(np.ones(32), g)
print(json.dumps({"same": out is w, "out": out.tolist(), "stats": cache.stats,
                  "warnings": [str(c.message) for c in caught]}))
"""

MODULE = """
import numpy as np


def step(w, g):
    return w - 0.25 * g


def read_after(w, g):
    new = w - g
    return new, w @ new
"""


def test_donation_survives_the_persistent_caches(tmp_path):
    """A second process loads the code from the trace cache: the output still
    reuses the donated array, and the refusal is still reported."""
    (tmp_path / "donation_mod.py").write_text(MODULE)
    env = dict(os.environ, MSIR_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("MSIR_CACHE", None)
    env.pop("MSIR_TRACE_CACHE", None)
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert second["stats"].get("hits", 0) >= 1 and second["stats"].get("writes", 0) == 0
    for run in runs:
        assert run["same"]
        np.testing.assert_array_equal(run["out"], np.linspace(0, 1, 32) - 0.125)
        assert any("reads it after" in w for w in run["warnings"]), run["warnings"]


def test_the_caches_keep_donating_and_plain_versions_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("MSIR_CACHE_DIR", str(tmp_path))

    def f(w, g):
        return w + g

    w = np.zeros(8)
    out = msir.jit(f)(w, np.ones(8))
    assert out is not w
    out = msir.jit(f, donate_argnums=0)(w, np.ones(8))
    assert out is w
    w2 = np.zeros(8)
    assert msir.jit(f)(w2, np.ones(8)) is not w2
