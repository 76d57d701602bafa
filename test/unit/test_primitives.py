"""The table of elementwise primitives and what every layer derives from it."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import pynative

import msir
from msir.dialects import msir as M
from msir.dialects import primitives as P
from msir.eager.numpy_builder import NumpyBuilder
from msir.errors import DTypeError
from msir.frontend.elementwise import binary_typing, unary_typing
from msir.passes.grad_rules import JVP, NON_DIFFERENTIABLE, VJP


@pytest.mark.parametrize("row", P.ELEMENTWISE, ids=lambda r: r.name)
def test_each_row_has_its_op_class(row):
    cls = M.ELEMENTWISE_OPS[row.name]
    assert cls.name == f"msir.{row.name}"
    assert cls.__name__ == row.class_name and getattr(M, row.class_name) is cls
    assert tuple(cls.ALLOWED) == row.dtypes
    assert f"msir.{row.name} %a" in cls.__doc__
    assert cls in M.Msir.operations


def test_class_names_read_as_the_op_names():
    assert M.Log1pOp.__name__ == "Log1pOp" and M.FloorDivOp.__name__ == "FloorDivOp"
    assert M.Expm1Op.__name__ == "Expm1Op" and M.AddOp.__name__ == "AddOp"


@pytest.mark.parametrize("row", P.ELEMENTWISE, ids=lambda r: r.name)
def test_each_row_is_differentiated_or_declared_not(row):
    if row.differentiable:
        assert row.name in VJP and row.name in JVP
    else:
        assert row.name in NON_DIFFERENTIABLE


@pytest.mark.parametrize("row", [r for r in P.ELEMENTWISE if r.numpy is not None], ids=lambda r: r.name)
def test_numpy_builder_computes_the_rows_numpy_function(row):
    dtype = row.dtypes[-1]
    rng = np.random.default_rng(0)
    xs = [np.asarray(rng.uniform(0.5, 2.0, 5)).astype(dtype) for _ in range(row.arity)]
    if dtype == "int64":
        xs = [x + 1 for x in xs]
    B = NumpyBuilder()
    got = B.unary(row.name, xs[0]) if row.arity == 1 else B.binary(row.name, *xs)
    np.testing.assert_array_equal(got, row.numpy(*xs))


def test_binary_typing_follows_numpy():
    assert binary_typing("div", "int64", False, "int64", False) == ("div", "float64", False)
    assert binary_typing("add", "float32", False, "float64", True) == ("add", "float32", False)
    assert binary_typing("add", "bool", False, "bool", False) == ("or", "bool", False)
    assert binary_typing("add", "bool", True, "bool", True) == ("add", "int64", True)  # True + True == 2
    assert binary_typing("pow", "bool", False, "bool", False) == ("pow", "int64", False)
    with pytest.raises(DTypeError, match="boolean subtract"):
        binary_typing("sub", "bool", False, "bool", False)
    with pytest.raises(DTypeError, match=r"operator & is not supported for float32 and int64"):
        binary_typing("and", "float32", False, "int64", False)


def test_unary_typing_follows_numpy():
    assert unary_typing("exp", "int32", False) == ("exp", "float64", False)
    assert unary_typing("exp", "float32", False) == ("exp", "float32", False)
    assert unary_typing("floor", "int64", False) == (None, "int64", False)
    assert unary_typing("floor", "bool", False) == (None, "float64", False)
    assert unary_typing("abs", "bool", False) == (None, "bool", False)
    assert unary_typing("neg", "int32", True) == ("neg", "int32", True)
    with pytest.raises(DTypeError, match="boolean negative"):
        unary_typing("neg", "bool", False)


def _item_times_x(x):
    return x.sum().item() * x


def test_item_of_an_eager_tracer():
    x = np.array([1.0, 2.0])
    g = pynative(lambda: msir.grad(lambda x: _item_times_x(x).sum())(x))
    np.testing.assert_allclose(g, msir.grad(lambda x: _item_times_x(x).sum())(x))


@pytest.mark.parametrize("row", P.ELEMENTWISE, ids=lambda r: r.name)
def test_each_row_has_its_scalar_lowering(row):
    from msir.lowering.to_loops import SCALAR

    assert M.ELEMENTWISE_OPS[row.name] in SCALAR
