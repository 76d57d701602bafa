"""`msir.einsum` end to end: its shape inference against NumPy, the
decomposition of `msir-lower-einsum` (on NumPy arrays, and compiled through
`convert-msir-to-loops` and the BLAS) against `np.einsum` in float32, float64
and integers, and its derivatives compiled (reverse mode, forward over reverse)
and eager (PyNative, reverse over reverse) against finite differences.

The rules themselves are checked against finite differences with every other
rule in test_grad_rules.py; the IR the pass emits is pinned in
test/filecheck/passes/msir-lower-einsum.mlir.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp, pynative
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import msir
from msir.compiler import compile_module, make_context
from msir.dialects import msir as M
from msir.eager import NumpyBuilder
from msir.eager.tracer import bind
from msir.passes.einsum_algebra import decompose_einsum
from msir.passes.grad_rules import VJP
from msir.passes.jvp import differentiate_all
from msir.passes.lower_einsum import lower_all_einsums

NB = NumpyBuilder()

SPECS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(40, 50), (50, 30)]),  # m*n*k above the BLAS threshold
    ("ij,jk->ik", [(2, 0), (0, 3)]),  # an empty contraction: zeros
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
    ("bij,bjk->bik", [(3, 40, 32), (3, 32, 30)]),
    ("ij,kj->ik", [(40, 50), (30, 50)]),
    ("ji,jk->ik", [(50, 40), (50, 30)]),
    ("ij,jk->ki", [(40, 50), (50, 30)]),
    ("ijk,jkl->il", [(2, 3, 4), (3, 4, 5)]),
    ("ibj,jbk->kib", [(2, 3, 4), (4, 3, 5)]),
    ("bij,bj->bi", [(2, 3, 4), (2, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bi,bj->jbi", [(2, 3), (2, 4)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij,jk->k", [(2, 3), (3, 4)]),
    ("ij,kl->jk", [(2, 3), (4, 2)]),
    ("i,i->", [(5,), (5,)]),
    ("bi,bi->b", [(3, 4), (3, 4)]),
    ("iij,jk->ki", [(3, 3, 2), (2, 4)]),
    (",i->i", [(), (3,)]),
    ("ij->ji", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii->", [(3, 3)]),
    ("iji->j", [(2, 3, 2)]),
    ("ijk->", [(2, 3, 2)]),
    ("->", [()]),
]
"""Specs and operand shapes: the matrix product (small, BLAS-sized, empty),
batches, transposed operands and results, two contracted subscripts, a batch
subscript not in front, a batched matrix-vector product, outer and elementwise
products, subscripts summed from one operand only, dots, diagonals and traces."""

_IDS = [f"{spec}-{'-'.join('x'.join(map(str, s)) for s in shapes)}" for spec, shapes in SPECS]


def _operands(spec: str, shapes, dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(spec.encode()))
    if dtype.startswith("int"):
        return [rng.integers(-5, 6, s).astype(dtype) for s in shapes]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _reference(spec: str, xs: list[np.ndarray]) -> np.ndarray:
    """np.einsum's plain loop in float64 (exact for the small integers)."""
    return np.einsum(spec, *(x.astype(np.float64) for x in xs))


def _tolerances(dtype: str) -> dict:
    return {"float32": {"rtol": 1e-4, "atol": 1e-4}, "float64": {"rtol": 1e-12, "atol": 1e-12}}.get(
        dtype, {"rtol": 0, "atol": 0})


def _type(shape, dtype: str) -> str:
    return str(M.tensor_type(shape, dtype))


# ---------------------------------------------------------------------------
# Shape inference and the decomposition on NumPy arrays
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec,shapes", SPECS, ids=_IDS)
def test_infer_einsum_matches_numpy(spec, shapes):
    assert M.infer_einsum(spec, shapes) == np.einsum(spec, *(np.zeros(s) for s in shapes)).shape


def test_infer_einsum_refuses_numpy_only_forms():
    for spec, shapes, message in [
        ("ij,jk", [(2, 3), (3, 4)], "needs an explicit output"),
        ("...i->...", [(2, 3)], "invalid subscript '.'"),
        ("ij, jk->ik", [(2, 3), (3, 4)], "invalid subscript ' '"),
        ("ij,jk->ik", [(2, 1), (3, 4)], "subscript 'j' has size 1 at operand #0 axis 1 but 3"),
        ("i,i,i->", [(2,), (2,), (2,)], "one or two operands, got 3"),
    ]:
        with pytest.raises(M.ShapeOrTypeError, match=message):
            M.infer_einsum(spec, shapes)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("spec,shapes", SPECS, ids=_IDS)
def test_decomposition_on_numpy_matches_einsum(spec, shapes, dtype):
    xs = _operands(spec, shapes, dtype)
    got = decompose_einsum(NB, spec, xs)
    assert got.dtype == np.dtype(dtype) and got.shape == M.infer_einsum(spec, shapes)
    np.testing.assert_allclose(got, _reference(spec, xs), **_tolerances(dtype))


@pytest.mark.parametrize("spec,shapes", SPECS, ids=_IDS)
def test_numpy_builder_einsum_is_a_fresh_array(spec, shapes):
    xs = _operands(spec, shapes, "float64")
    got = NB.einsum(spec, xs)
    np.testing.assert_allclose(got, _reference(spec, xs), rtol=1e-12, atol=1e-12)
    assert isinstance(got, np.ndarray) and not any(np.may_share_memory(got, x) for x in xs)


# ---------------------------------------------------------------------------
# Compiled: msir-lower-einsum, then the CPU pipeline
# ---------------------------------------------------------------------------


def _compile(src: str, entry: str, also: tuple[str, ...] = ()):
    """Parse, differentiate, lower the einsums (compile_module does not run
    msir-lower-einsum yet), verify, compile."""
    module: ModuleOp = Parser(make_context(), src).parse_module()
    differentiate_all(module)
    lower_all_einsums(module)
    module.verify()
    assert not any(isinstance(op, M.EinsumOp) for op in module.walk())
    return compile_module(module, entry, also)


def _all_specs_function(specs, dtype: str) -> str:
    """One function taking every spec's operands and returning every einsum."""
    params, body, results = [], [], []
    for k, (spec, shapes) in enumerate(specs):
        names = [f"%x{k}_{i}" for i in range(len(shapes))]
        params += [f"{n}: {_type(s, dtype)}" for n, s in zip(names, shapes)]
        out = _type(M.infer_einsum(spec, shapes), dtype)
        body.append(f'  %r{k} = msir.einsum "{spec}" {", ".join(names)} : '
                    f'{", ".join(_type(s, dtype) for s in shapes)} to {out}')
        results.append((f"%r{k}", out))
    types = ", ".join(t for _, t in results)
    return (f"func.func @f({', '.join(params)}) -> ({types}) {{\n" + "\n".join(body)
            + f"\n  func.return {', '.join(r for r, _ in results)} : {types}\n}}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_compiled_einsums_match_numpy(dtype):
    specs = SPECS if dtype.startswith("float") else [(s, sh) for s, sh in SPECS if max(map(np.prod, sh)) < 1000]
    f = _compile(_all_specs_function(specs, dtype), "f").native
    operands = [_operands(spec, shapes, dtype) for spec, shapes in specs]
    results = f(*(x for xs in operands for x in xs))
    for (spec, shapes), xs, got in zip(specs, operands, results):
        assert got.dtype == np.dtype(dtype) and got.shape == M.infer_einsum(spec, shapes), spec
        np.testing.assert_allclose(got, _reference(spec, xs), err_msg=spec, **_tolerances(dtype))


def _loss_and_grad(k: int, spec: str, shapes) -> str:
    """@loss_k = sum(einsum(spec, xs) * c) and @grad_k, its gradient w.r.t. every operand."""
    ts = [_type(s, "float64") for s in shapes]
    out_shape = M.infer_einsum(spec, shapes)
    out = _type(out_shape, "float64")
    xs = [f"%x{i}" for i in range(len(shapes))]
    sig = ", ".join(f"{x}: {t}" for x, t in zip(xs, ts)) + f", %c: {out}"
    fn_type = f"({', '.join(ts)}, {out}) -> tensor<f64>"
    grads = f"({', '.join(ts)})"
    total = (f"  %s = msir.reduce_sum %m axes array<i64: {', '.join(map(str, range(len(out_shape))))}> : "
             f"{out} to tensor<f64>\n  func.return %s : tensor<f64>") if out_shape else "  func.return %m : tensor<f64>"
    gs = [f"%g{i}" for i in range(len(shapes))]
    return f"""
func.func @loss{k}({sig}) -> tensor<f64> {{
  %e = msir.einsum "{spec}" {", ".join(xs)} : {", ".join(ts)} to {out}
  %m = msir.mul %e, %c : {out}
{total}
}}
func.func @grad{k}({sig}) -> {grads} {{
  %f = msir.closure @loss{k}() : {fn_type}
  %g = msir.grad %f argnums array<i64: {", ".join(map(str, range(len(shapes))))}> : {fn_type} to {fn_type.replace(" -> tensor<f64>", " -> " + grads)}
  {", ".join(gs)} = msir.apply %g({", ".join(xs)}, %c) : {fn_type.replace(" -> tensor<f64>", " -> " + grads)}
  func.return {", ".join(gs)} : {", ".join(ts)}
}}"""


GRAD_SPECS = [(spec, shapes) for spec, shapes in SPECS if max(map(np.prod, shapes)) <= 2000 and spec != "->"]


def test_compiled_gradients_match_finite_differences():
    src = "\n".join(_loss_and_grad(k, spec, shapes) for k, (spec, shapes) in enumerate(GRAD_SPECS))
    compiled = _compile(src, "grad0", tuple(f"grad{k}" for k in range(1, len(GRAD_SPECS))))
    for k, (spec, shapes) in enumerate(GRAD_SPECS):
        xs = _operands(spec, shapes, "float64")
        ct = np.random.default_rng(k).standard_normal(M.infer_einsum(spec, shapes))
        fn = compiled.native if k == 0 else compiled.functions[f"grad{k}"]
        grads = fn(*xs, ct)
        for i, g in enumerate(grads):
            expected = numerical_vjp(lambda xs: np.einsum(spec, *xs), xs, ct, i)
            np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8, err_msg=f"{spec} operand {i}")


def _numpy_gradient(spec: str):
    """The gradient of sum(einsum(spec, a, b) ** 2) from the (separately checked)
    reverse rule on NumPy arrays: the reference for second derivatives."""
    def grad(xs):
        y = np.einsum(spec, *xs)
        return VJP["einsum"](NB, {"spec": spec}, list(xs), y, 2 * y)
    return grad


@pytest.mark.parametrize("spec,shapes", [("ij,jk->ki", [(2, 3), (3, 4)]), ("iij,jk->k", [(3, 3, 2), (2, 4)]),
                                         ("bi,bj->bij", [(2, 3), (2, 4)])])
def test_compiled_hessian_vector_products(spec, shapes):
    """Forward over reverse: the tangent of the gradient of sum(einsum ** 2)
    differentiates the einsums the reverse rules emitted."""
    ta, tb = (_type(s, "float64") for s in shapes)
    out = _type(M.infer_einsum(spec, shapes), "float64")
    rank = len(M.infer_einsum(spec, shapes))
    loss_t, grad_t = f"({ta}, {tb}) -> tensor<f64>", f"({ta}, {tb}) -> ({ta}, {tb})"
    hvp_t = f"({ta}, {tb}, {ta}, {tb}) -> ({ta}, {tb}, {ta}, {tb})"
    src = f"""
func.func @loss(%a: {ta}, %b: {tb}) -> tensor<f64> {{
  %e = msir.einsum "{spec}" %a, %b : {ta}, {tb} to {out}
  %m = msir.mul %e, %e : {out}
  %s = msir.reduce_sum %m axes array<i64: {", ".join(map(str, range(rank)))}> : {out} to tensor<f64>
  func.return %s : tensor<f64>
}}
func.func @grad(%a: {ta}, %b: {tb}) -> ({ta}, {tb}) {{
  %f = msir.closure @loss() : {loss_t}
  %g = msir.grad %f argnums array<i64: 0, 1> : {loss_t} to {grad_t}
  %ga, %gb = msir.apply %g(%a, %b) : {grad_t}
  func.return %ga, %gb : {ta}, {tb}
}}
func.func @hvp(%a: {ta}, %b: {tb}, %va: {ta}, %vb: {tb}) -> ({ta}, {tb}, {ta}, {tb}) {{
  %f = msir.closure @grad() : {grad_t}
  %j = msir.jvp %f argnums array<i64: 0, 1> : {grad_t} to {hvp_t}
  %ga, %gb, %ha, %hb = msir.apply %j(%a, %b, %va, %vb) : {hvp_t}
  func.return %ga, %gb, %ha, %hb : {ta}, {tb}, {ta}, {tb}
}}"""
    hvp = _compile(src, "hvp").native
    rng = np.random.default_rng(zlib.crc32(spec.encode()))
    xs = [rng.standard_normal(s) for s in shapes]
    vs = [rng.standard_normal(s) for s in shapes]
    ga, gb, ha, hb = hvp(*xs, *vs)
    grad = _numpy_gradient(spec)
    for got, expected in zip((ga, gb), grad(xs)):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    for i, got in enumerate((ha, hb)):
        expected = numerical_jvp(lambda xs: grad(xs)[i], xs, vs)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8, err_msg=f"{spec} H v, operand {i}")


# ---------------------------------------------------------------------------
# Eager (PyNative): the same rules through the tracer
# ---------------------------------------------------------------------------


def _einsum(spec: str, *xs):
    return bind("einsum", {"spec": spec}, list(xs))


@pytest.mark.parametrize("spec,shapes", [s for s in GRAD_SPECS if len(s[1]) == 2][:8])
def test_eager_gradients_match_finite_differences(spec, shapes):
    xs = _operands(spec, shapes, "float64")
    ct = np.random.default_rng(3).standard_normal(M.infer_einsum(spec, shapes))

    def loss(a, b):
        return np.sum(_einsum(spec, a, b) * ct)

    grads = pynative(lambda: msir.grad(loss, argnums=(0, 1))(*xs))
    for i, g in enumerate(grads):
        expected = numerical_vjp(lambda xs: np.einsum(spec, *xs), xs, ct, i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8, err_msg=f"{spec} operand {i}")


def test_eager_reverse_over_reverse():
    """grad(<grad(f), v>) = H v for f(x) = x . (m x), H = m + m^T: the outer
    trace differentiates the einsums the inner rules recorded."""
    m = np.arange(9.0).reshape(3, 3) - 4.0
    x, v = np.array([1.0, -2.0, 0.5]), np.array([0.5, 1.0, -1.0])

    def f(x):
        return _einsum("i,i->", x, _einsum("ij,j->i", m, x))

    hv = pynative(lambda: msir.grad(lambda x: np.sum(msir.grad(f)(x) * v))(x))
    np.testing.assert_allclose(hv, (m + m.T) @ v, rtol=1e-12)
