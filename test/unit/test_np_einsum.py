"""`np.einsum` in user code: compiled (GRAPH_MODE, through `msir.jit` and
`msir.grad`) and eager (PYNATIVE_MODE, through the tracer), against
`np.einsum` and finite differences; NumPy's subscript forms (implicit output,
`...`, spaces, size-1 stretching, three operands) and dtype promotion; errors
at the user's line.

The `msir.einsum` op, its rules and `msir-lower-einsum` are tested on IR in
test_einsum.py.
"""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest
from gradcheck import numerical_vjp, pynative

import msir
from msir.errors import DTypeError, ShapeError, UnsupportedSyntaxError
from msir.frontend.einsum_subscripts import contract, plan_einsum

SPECS = [
    ("bij,bjk->bik", [(3, 2, 4), (3, 4, 5)]),  # batch
    ("ij,kj->ik", [(2, 3), (4, 3)]),  # a transposed operand
    ("ij,jk->ki", [(2, 3), (3, 4)]),  # a transposed result
    ("ijk,jkl->il", [(2, 3, 4), (3, 4, 5)]),  # contraction over two letters
    ("i,j->ij", [(3,), (4,)]),  # outer product
    ("ij,jk->k", [(2, 3), (3, 4)]),  # a summed letter
    ("i,i->", [(5,), (5,)]),  # dot
]
_IDS = [spec for spec, _ in SPECS]


def _operands(spec: str, shapes, dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(spec.encode()))
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _einsum_of(spec: str):
    def f(a, b):
        return np.einsum(spec, a, b)

    return f


def _loss_of(spec: str):
    def loss(a, b, ct):
        return np.sum(np.einsum(spec, a, b) * ct)

    return loss


# ---------------------------------------------------------------------------
# GRAPH_MODE
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec,shapes", SPECS, ids=_IDS)
def test_compiled_einsum_matches_numpy(spec, shapes, dtype):
    a, b = _operands(spec, shapes, dtype)
    got = msir.jit(_einsum_of(spec))(a, b)
    expected = np.einsum(spec, a, b)
    assert np.asarray(got).dtype == expected.dtype and np.shape(got) == expected.shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("spec,shapes", SPECS, ids=_IDS)
def test_compiled_einsum_gradient_matches_finite_differences(spec, shapes):
    a, b = _operands(spec, shapes, "float64")
    ct = np.random.default_rng(1).standard_normal(np.einsum(spec, a, b).shape)
    ga, gb = msir.grad(_loss_of(spec), argnums=(0, 1))(a, b, ct)
    for i, g in enumerate((ga, gb)):
        expected = numerical_vjp(lambda xs: np.einsum(spec, *xs), [a, b], ct, i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8, err_msg=f"{spec} operand {i}")


def numpy_forms(m, c, t, s):
    return (
        np.einsum("ij,jk", m, m.T),  # implicit output: the letters seen once, sorted
        np.einsum("ba,ab", m, m.T),  # ... in ASCII order, not in order of appearance
        np.einsum(" i j , j k -> i k ", m, m.T),  # spaces
        np.einsum("...ij,...jk->...ik", t, m.T),  # ellipsis, right-aligned broadcast axes
        np.einsum("i...->...", t),  # an ellipsis kept, the named axis summed
        np.einsum("ij,jk->ik", c, m),  # c's size-1 axis stretched to m's 2
        np.einsum("ij,jk,kl->il", m, m.T, m),  # three operands, pairwise
        np.einsum("ii", m @ m.T),  # a trace
        np.einsum("ij->ji", m),
        np.einsum(",i->i", s, m[0]),  # a rank-0 operand
        np.einsum("ij,jk", m, m.T, optimize=True),
    )


def _forms_arguments():
    rng = np.random.default_rng(0)
    return rng.standard_normal((2, 3)), rng.standard_normal((4, 1)), rng.standard_normal((4, 2, 3)), 2.5


def test_compiled_numpy_subscript_forms():
    args = _forms_arguments()
    got = msir.jit(numpy_forms)(*args)
    for i, (g, e) in enumerate(zip(got, numpy_forms(*args))):
        assert np.shape(g) == np.shape(e), i
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12, err_msg=f"form {i}")


def promotions(f32, i32, i64):
    return (
        np.einsum("i,i->i", f32, i32),  # int32 and float32: float64
        np.einsum("i,i->", i32, i64),  # integers stay integers
        np.einsum("i->", i32),
        np.einsum(",i->i", 2.0, f32),  # a Python float is a float64 array to einsum, not weak
        np.einsum(",i->i", np.float32(2.0), f32),
    )


def test_compiled_dtype_promotion_follows_numpy():
    f32 = np.arange(3, dtype=np.float32) + 0.5
    i32, i64 = np.arange(3, dtype=np.int32) - 1, np.arange(3, dtype=np.int64) + 2
    got = msir.jit(promotions)(f32, i32, i64)
    for i, (g, e) in enumerate(zip(got, promotions(f32, i32, i64))):
        assert np.asarray(g).dtype == np.asarray(e).dtype, (i, np.asarray(g).dtype, np.asarray(e).dtype)
        np.testing.assert_allclose(g, e, rtol=1e-6, err_msg=f"case {i}")


def test_compiled_three_operand_gradient():
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(s) for s in [(2, 3), (3, 4), (4, 2)]]

    def loss(a, b, c):
        return np.einsum("ij,jk,ki->", a, b, c)

    grads = msir.grad(loss, argnums=(0, 1, 2))(*xs)
    for i, g in enumerate(grads):
        expected = numerical_vjp(lambda xs: np.einsum("ij,jk,ki->", *xs), xs, np.array(1.0), i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)


def bool_einsum(a):
    return np.einsum("ij->ji", a > 0)


def mismatched_einsum(a):
    return np.einsum("ij,jk", a, a)


def sublist_einsum(a):
    return np.einsum(a, [0, 1])


def test_compiled_errors_point_at_the_call():
    a = np.ones((2, 3))
    with pytest.raises(DTypeError, match="np.einsum of boolean arrays is not supported") as e:
        msir.jit(bool_einsum)(a)
    assert e.value.loc is not None and e.value.loc.line == bool_einsum.__code__.co_firstlineno + 1
    with pytest.raises(ShapeError, match="subscript 'j' has size 3 in operand 0 but 2 in operand 1") as e:
        msir.jit(mismatched_einsum)(a)
    assert e.value.loc.line == mismatched_einsum.__code__.co_firstlineno + 1
    with pytest.raises(UnsupportedSyntaxError, match="needs its subscripts as a string"):
        msir.jit(sublist_einsum)(a)


# ---------------------------------------------------------------------------
# PYNATIVE_MODE
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec,shapes", SPECS, ids=_IDS)
def test_eager_einsum_gradient_matches_finite_differences(spec, shapes):
    a, b = _operands(spec, shapes, "float64")
    ct = np.random.default_rng(1).standard_normal(np.einsum(spec, a, b).shape)
    ga, gb = pynative(lambda: msir.grad(_loss_of(spec), argnums=(0, 1))(a, b, ct))
    for i, g in enumerate((ga, gb)):
        expected = numerical_vjp(lambda xs: np.einsum(spec, *xs), [a, b], ct, i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8, err_msg=f"{spec} operand {i}")


def _total(m, c, t, s):
    return sum(np.sum(form) for form in numpy_forms(m, c, t, s))


def test_eager_numpy_forms_match_numpy():
    """Every array operand traced, so every form goes through the tracer's einsum."""
    m, c, t, s = _forms_arguments()
    value, grads = pynative(lambda: msir.value_and_grad(_total, argnums=(0, 1, 2))(m, c, t, s))
    np.testing.assert_allclose(value, _total(m, c, t, s), rtol=1e-12)
    for i, g in enumerate(grads):
        expected = numerical_vjp(lambda xs: _total(*xs, s), [m, c, t], np.array(1.0), i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8, err_msg=f"operand {i}")


def test_eager_dtype_promotion_follows_numpy():
    i32 = np.arange(3, dtype=np.int32)
    f32 = np.arange(3, dtype=np.float32) + 0.5
    out, _ = pynative(lambda: msir.vjp(lambda x: np.einsum("i,i->i", x, i32), f32))
    expected = np.einsum("i,i->i", f32, i32)
    assert out.dtype == expected.dtype == np.float64
    np.testing.assert_allclose(out, expected)


def test_eager_errors():
    # (booleans never carry a trace, so a boolean einsum runs in NumPy itself)
    a = np.ones((2, 3))
    with pytest.raises(ShapeError, match="subscript 'j'"):
        pynative(lambda: msir.grad(lambda x: np.sum(np.einsum("ij,jk", x, x)))(a))


# ---------------------------------------------------------------------------
# The subscript plan itself
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk", [(2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(5, 1, 2, 3), (4, 3, 2)]),
    ("i...,...->...", [(2, 3), (4, 1)]),
    ("ab,bc,cd,de", [(2, 3), (3, 4), (4, 5), (5, 6)]),
    ("i,i,i->i", [(3,), (3,), (3,)]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),
    ("Ba,aB", [(2, 3), (3, 2)]),
    ("...", [(2, 3)]),
])
def test_plan_computes_what_numpy_computes(subscripts, shapes):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in shapes]
    plan = plan_einsum(subscripts, shapes, ["float64"] * len(shapes))
    for step in plan.steps:
        terms, _, out = step.partition("->")
        assert len(terms.split(",")) <= 2 and "." not in step and len(set(out)) == len(out), step
    stretched = [np.broadcast_to(x, s) for x, s in zip(xs, plan.shapes)]
    got = contract(plan, stretched, lambda spec, vs: np.einsum(spec, *vs))
    np.testing.assert_allclose(got, np.einsum(subscripts, *xs), rtol=1e-12)


@pytest.mark.parametrize("subscripts,shapes,message", [
    ("...i->i", [(2, 3)], "the output has no '...'"),
    ("ij->k", [(2, 3)], "output subscript 'k' appears in no operand"),
    ("ij->ii", [(2, 3)], "output subscript 'i' appears more than once"),
    ("i.j", [(2, 3)], "'.' that is not part of '...'"),
    ("i,j", [(2,)], "name 2 operands, but 1 were given"),
    ("i1", [(2, 3)], "invalid subscript '1'"),
    ("ii->i", [(1, 3)], "repeats subscript 'i' on axes of sizes 1 and 3"),
    ("i", [(2, 3)], "has 2 dimensions, but its subscripts 'i' name 1"),
    ("i->i->i", [(2,)], "more than one '->'"),
])
def test_plan_refuses_what_numpy_refuses(subscripts, shapes, message):
    with pytest.raises(ShapeError, match=re.escape(message)):
        plan_einsum(subscripts, shapes, ["float64"] * len(shapes))
    with pytest.raises(ValueError):
        np.einsum(subscripts, *(np.ones(s) for s in shapes))
