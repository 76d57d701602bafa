"""`msir.ops`, the functional operators: every function against a NumPy
reference (float32 and float64) and its gradient against finite differences,
compiled (GRAPH_MODE: `msir.jit`, `msir.value_and_grad`), eager
(PYNATIVE_MODE: the tracer) and from plain Python; errors at the user's
line; `name=` on the ops, through `msir-grad`, `msir-jvp`, inlining, fusion
and `msir-lower-einsum`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr
from gradcheck import numerical_vjp, pynative

import msir
from msir import ops
from msir.dialects import msir as M
from msir.errors import MsirError, MsirIndexError, ShapeError, UnsupportedSyntaxError

# ---------------------------------------------------------------------------
# NumPy references (independent of msir.ops' own definitions)
# ---------------------------------------------------------------------------


def _softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    z = x - np.max(x, axis=axis, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _cross_entropy_indices(x, t):
    return -np.mean(_log_softmax(x, 1)[np.arange(x.shape[0]), t])


def _cross_entropy_ignoring(x, t):
    kept = t != 1
    return -np.sum(_log_softmax(x, 1)[np.arange(x.shape[0]), np.where(kept, t, 0)] * kept) / np.sum(kept)


# ---------------------------------------------------------------------------
# The functions under test, each call named
# ---------------------------------------------------------------------------


def add_(a, b): return ops.add(a, b, name="op")
def sub_(a, b): return ops.sub(a, b, name="op")
def mul_(a, b): return ops.mul(a, b, name="op")
def div_(a, b): return ops.div(a, b, name="op")
def maximum_(a, b): return ops.maximum(a, b, name="op")
def minimum_(a, b): return ops.minimum(a, b, name="op")
def pow_(a, b): return ops.pow(a, b, name="op")
def neg_(a): return ops.neg(a, name="op")
def abs_(a): return ops.abs(a, name="op")
def square_(a): return ops.square(a, name="op")
def exp_(a): return ops.exp(a, name="op")
def log_(a): return ops.log(a, name="op")
def sqrt_(a): return ops.sqrt(a, name="op")
def tanh_(a): return ops.tanh(a, name="op")
def matmul_(a, b): return ops.matmul(a, b, name="op")
def dense_(x, w, b): return ops.dense(x, w, b, name="op")
def dense_no_bias_(x, w): return ops.dense(x, w, name="op")
def einsum_(a, b): return ops.einsum("bij,bkj->bik", a, b, name="op")
def relu_(a): return ops.relu(a, name="op")
def sigmoid_(a): return ops.sigmoid(a, name="op")
def gelu_(a): return ops.gelu(a, approximate="tanh", name="op")
def softmax_(a): return ops.softmax(a, name="op")
def softmax_axis0_(a): return ops.softmax(a, axis=0, name="op")
def log_softmax_(a): return ops.log_softmax(a, name="op")
def layer_norm_(x, w, b): return ops.layer_norm(x, (x.shape[-1],), w, b, name="op")
def layer_norm_2d_(x): return ops.layer_norm(x, x.shape[1:], eps=1e-3, name="op")
def reduce_sum_(a): return ops.reduce_sum(a, 1, name="op")
def reduce_sum_all_(a): return ops.reduce_sum(a, (), True, name="op")
def reduce_mean_(a): return ops.reduce_mean(a, axis=(0, 1), keep_dims=True, name="op")
def reduce_max_(a): return ops.reduce_max(a, -1, name="op")
def reduce_min_(a): return ops.reduce_min(a, 0, keep_dims=True, name="op")
def reshape_(a): return ops.reshape(a, (4, -1), name="op")
def transpose_(a): return ops.transpose(a, (1, 0), name="op")
def concat_(a, b): return ops.concat((a, b), axis=1, name="op")
def cross_entropy_(x, t): return ops.cross_entropy(x, t, name="op")
def cross_entropy_sum_(x, t): return ops.cross_entropy(x, t, reduction="sum", name="op")
def cross_entropy_none_(x, t): return ops.cross_entropy(x, t, reduction="none", name="op")
def cross_entropy_ignore_(x, t): return ops.cross_entropy(x, t, ignore_index=1, name="op")
def cross_entropy_probabilities_(x, p): return ops.cross_entropy(x, p, name="op")
def mse_loss_(a, b): return ops.mse_loss(a, b, name="op")
def mse_loss_none_(a, b): return ops.mse_loss(a, b, reduction="none", name="op")


@dataclass(frozen=True)
class Case:
    fn: Callable
    reference: Callable
    shapes: tuple
    """Operand shapes; an `int:<n>` entry is an int64 array of class indices in [0, n)."""
    positive: bool = False
    """Draw the float operands from (0.5, 2) (log, sqrt, pow)."""
    probabilities: tuple[int, ...] = ()
    """Operands drawn as rows of probabilities (cross_entropy's soft targets)."""

    @property
    def id(self) -> str:
        return self.fn.__name__.rstrip("_")


CASES = [
    Case(add_, np.add, ((3, 4), (4,))),
    Case(sub_, np.subtract, ((3, 1), (3, 4))),
    Case(mul_, np.multiply, ((3, 4), (3, 4))),
    Case(div_, np.divide, ((3, 4), (3, 4)), positive=True),
    Case(maximum_, np.maximum, ((3, 4), (3, 4))),
    Case(minimum_, np.minimum, ((3, 4), (4,))),
    Case(pow_, np.power, ((3, 4), (3, 4)), positive=True),
    Case(neg_, np.negative, ((3, 4),)),
    Case(abs_, np.abs, ((3, 4),)),
    Case(square_, np.square, ((3, 4),)),
    Case(exp_, np.exp, ((3, 4),)),
    Case(log_, np.log, ((3, 4),), positive=True),
    Case(sqrt_, np.sqrt, ((3, 4),), positive=True),
    Case(tanh_, np.tanh, ((3, 4),)),
    Case(matmul_, np.matmul, ((3, 5), (5, 4))),
    Case(dense_, lambda x, w, b: x @ w.T + b, ((3, 5), (4, 5), (4,))),
    Case(dense_no_bias_, lambda x, w: x @ w.T, ((3, 5), (4, 5))),
    Case(einsum_, lambda a, b: np.einsum("bij,bkj->bik", a, b), ((2, 3, 4), (2, 5, 4))),
    Case(relu_, lambda a: np.maximum(a, 0), ((3, 4),)),
    Case(sigmoid_, lambda a: 1 / (1 + np.exp(-a)), ((3, 4),)),
    Case(gelu_, _gelu_tanh, ((3, 4),)),
    Case(softmax_, _softmax, ((3, 4),)),
    Case(softmax_axis0_, lambda a: _softmax(a, 0), ((3, 4),)),
    Case(log_softmax_, _log_softmax, ((3, 4),)),
    Case(layer_norm_, _layer_norm, ((3, 6), (6,), (6,))),
    Case(layer_norm_2d_, lambda x: (x - x.mean(axis=(1, 2), keepdims=True))
         / np.sqrt(x.var(axis=(1, 2), keepdims=True) + 1e-3), ((2, 3, 4),)),
    Case(reduce_sum_, lambda a: np.sum(a, axis=1), ((3, 4),)),
    Case(reduce_sum_all_, lambda a: np.sum(a, keepdims=True), ((3, 4),)),
    Case(reduce_mean_, lambda a: np.mean(a, axis=(0, 1), keepdims=True), ((2, 3, 4),)),
    Case(reduce_max_, lambda a: np.max(a, axis=-1), ((3, 4),)),
    Case(reduce_min_, lambda a: np.min(a, axis=0, keepdims=True), ((3, 4),)),
    Case(reshape_, lambda a: np.reshape(a, (4, -1)), ((2, 6),)),
    Case(transpose_, lambda a: np.transpose(a, (1, 0)), ((3, 4),)),
    Case(concat_, lambda a, b: np.concatenate((a, b), axis=1), ((3, 2), (3, 4))),
    Case(cross_entropy_, _cross_entropy_indices, ((5, 4), "int:4")),
    Case(cross_entropy_sum_, lambda x, t: _cross_entropy_indices(x, t) * x.shape[0], ((5, 4), "int:4")),
    Case(cross_entropy_none_, lambda x, t: -_log_softmax(x, 1)[np.arange(x.shape[0]), t], ((5, 4), "int:4")),
    Case(cross_entropy_ignore_, _cross_entropy_ignoring, ((6, 3), "int:3")),
    Case(cross_entropy_probabilities_, lambda x, p: -np.mean(np.sum(p * _log_softmax(x, 1), axis=1)),
         ((5, 4), (5, 4)), probabilities=(1,)),
    Case(mse_loss_, lambda a, b: np.mean((a - b) ** 2), ((3, 4), (4,))),
    Case(mse_loss_none_, lambda a, b: (a - b) ** 2, ((3, 4), (3, 4))),
]
_IDS = [c.id for c in CASES]


def _operands(case: Case, dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(len(case.id) * 7919 + sum(map(ord, case.id)))
    out = []
    for i, s in enumerate(case.shapes):
        if isinstance(s, str):
            n = int(s.split(":")[1])
            out.append(np.arange(case.shapes[0][0], dtype=np.int64) % n)
        elif i in case.probabilities:
            out.append(_softmax(rng.standard_normal(s)).astype(dtype))
        elif case.positive:
            out.append(rng.uniform(0.5, 2.0, s).astype(dtype))
        else:
            out.append(rng.standard_normal(s).astype(dtype))
    return out


def _floats(xs) -> tuple[int, ...]:
    return tuple(i for i, x in enumerate(xs) if x.dtype.kind == "f")


def _loss_with_value(fn: Callable, arity: int) -> Callable:
    """(sum(fn(...) * ct), fn(...)): value_and_grad with has_aux gives both the
    function's value and the gradient of <ct, fn>."""
    if arity == 1:
        def loss(a, ct):
            y = fn(a)
            return np.sum(y * ct), y
    elif arity == 2:
        def loss(a, b, ct):
            y = fn(a, b)
            return np.sum(y * ct), y
    else:
        def loss(a, b, c, ct):
            y = fn(a, b, c)
            return np.sum(y * ct), y
    return loss


def _cotangent(case: Case, xs, dtype: str) -> np.ndarray:
    shape = np.shape(case.reference(*xs))
    return np.random.default_rng(3).standard_normal(shape).astype(dtype)


_TOLERANCES = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-11, atol=1e-12)}


def _check_value(got, expected, dtype: str, what: str) -> None:
    assert np.asarray(got).dtype == np.dtype(dtype), f"{what}: dtype {np.asarray(got).dtype}, expected {dtype}"
    assert np.shape(got) == np.shape(expected), f"{what}: shape {np.shape(got)}, expected {np.shape(expected)}"
    np.testing.assert_allclose(got, expected, err_msg=what, **_TOLERANCES[dtype])


def _check_gradients(case: Case, xs, ct, grads) -> None:
    floats = _floats(xs)
    for k, i in enumerate(floats):
        expected = numerical_vjp(lambda vs: case.reference(*vs), xs, ct, i)
        np.testing.assert_allclose(grads[k], expected, rtol=1e-6, atol=1e-8, err_msg=f"{case.id}: operand {i}")


def _reference_in(dtype: str, case: Case, xs):
    """The reference computed in float64, returned in `dtype`."""
    wide = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in xs]
    return np.asarray(case.reference(*wide)).astype(dtype)


# ---------------------------------------------------------------------------
# GRAPH_MODE
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_compiled_float32_matches_numpy(case):
    xs = _operands(case, "float32")
    _check_value(msir.jit(case.fn)(*xs), _reference_in("float32", case, xs), "float32", case.id)


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_compiled_float64_value_and_gradient(case):
    xs = _operands(case, "float64")
    ct = _cotangent(case, xs, "float64")
    loss = _loss_with_value(case.fn, len(xs))
    (_, y), grads = msir.value_and_grad(loss, argnums=_floats(xs), has_aux=True)(*xs, ct)
    _check_value(y, case.reference(*xs), "float64", case.id)
    _check_gradients(case, xs, ct, grads)


# ---------------------------------------------------------------------------
# PYNATIVE_MODE and plain Python
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_eager_value_and_gradient(case, dtype):
    xs = _operands(case, dtype)
    ct = _cotangent(case, xs, dtype)
    loss = _loss_with_value(case.fn, len(xs))
    (_, y), grads = pynative(lambda: msir.value_and_grad(loss, argnums=_floats(xs), has_aux=True)(*xs, ct))
    _check_value(y, _reference_in(dtype, case, xs), dtype, case.id)
    for x, g in zip((xs[i] for i in _floats(xs)), grads):
        assert np.asarray(g).dtype == x.dtype and np.shape(g) == x.shape
    if dtype == "float64":
        _check_gradients(case, xs, ct, grads)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_plain_python_computes_with_numpy(case, dtype):
    xs = _operands(case, dtype)
    got = case.fn(*xs)
    _check_value(got, _reference_in(dtype, case, xs), dtype, case.id)
    if np.ndim(got) == 0:
        assert isinstance(got, np.generic), f"{case.id}: a 0-d result is a NumPy scalar, as NumPy returns it"


def integer_softmax(x):
    return ops.softmax(x)


def test_integer_input_computes_in_float64():
    x = np.arange(6).reshape(2, 3)
    got = msir.jit(integer_softmax)(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _softmax(x.astype(np.float64)), rtol=1e-12)
    np.testing.assert_allclose(integer_softmax(x), got, rtol=1e-12)


def weak_scalar_operand(x):
    return ops.add(x, 1.5), ops.mse_loss(x, 0.5), ops.layer_norm(x, 3, eps=0.1)


def test_python_numbers_are_weak_as_in_numpy():
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    for got, expected in zip(msir.jit(weak_scalar_operand)(x), weak_scalar_operand(x)):
        assert got.dtype == expected.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-6)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def bad_axis(x): return ops.softmax(x, axis=2)
def bad_name(x): return ops.softmax(x, name=3)
def bad_keyword(x): return ops.relu(x, inplace=True)
def exact_gelu(x): return ops.gelu(x)
def bad_normalized_shape(x): return ops.layer_norm(x, (4,))
def bad_reduction(x): return ops.mse_loss(x, x, reduction="avg")
def bad_target(x): return ops.cross_entropy(x, np.array([0, 1, 2]))
def bad_weight(x): return ops.dense(x, x[0])
def unsupported_weight(x): return ops.cross_entropy(x, np.array([0, 1]), weight=x[0])


@pytest.mark.parametrize("fn,error,message", [
    (bad_axis, MsirIndexError, "msir.ops.softmax: axis 2 is out of bounds for array of dimension 2"),
    (bad_name, TypeError, "msir.ops.softmax: name must be a string"),
    (bad_keyword, TypeError, "msir.ops.relu: got an unexpected keyword argument 'inplace'"),
    (exact_gelu, UnsupportedSyntaxError, "needs erf, which msir has no primitive for yet; use approximate='tanh'"),
    (bad_normalized_shape, ShapeError, "normalized_shape (4,) is not the trailing part of the input's shape (2, 3)"),
    (bad_reduction, ValueError, "msir.ops.mse_loss: reduction must be one of 'none', 'mean', 'sum', got 'avg'"),
    (bad_target, ShapeError, "a target of class indices for an input of shape (2, 3) must have shape (2,)"),
    (bad_weight, ShapeError, "msir.ops.dense: weight must be 2-D"),
    (unsupported_weight, UnsupportedSyntaxError, "weight= is not supported yet"),
])
def test_errors_point_at_the_call(fn, error, message):
    x = np.ones((2, 3))
    with pytest.raises(error) as compiled:
        msir.jit(fn)(x)
    assert message in str(compiled.value)
    assert isinstance(compiled.value, MsirError) and compiled.value.loc is not None
    assert compiled.value.loc.line == fn.__code__.co_firstlineno
    with pytest.raises(error) as eager:
        fn(x)
    assert message.split(": ", 1)[-1] in str(eager.value)


# ---------------------------------------------------------------------------
# name= through the passes
# ---------------------------------------------------------------------------


def named_model(x, w, b):
    h = ops.relu(ops.dense(x, w, b, name="fc1"), name="act")
    return ops.reduce_sum(ops.softmax(h, name="sm") * ops.einsum("ij,ij->ij", h, h, name="sq"), name="total")


def named_step(x, w, b):
    return msir.grad(named_model, argnums=(1, 2))(x, w, b)


def named_tangent(x, w, b, dw):
    return msir.jvp(lambda w: named_model(x, w, b), (w,), (dw,))


def _trace(fn, *args):
    from msir.frontend.driver import spec_of, trace

    return trace(fn, [spec_of(a) for a in args]).module


def _names(op) -> set[str]:
    out = set()
    for inner in op.walk():
        attr = inner.attributes.get(M.NAME_ATTR)
        if attr is not None:
            out.add(attr.data)
    return out


def _functions(module) -> dict:
    return {f.sym_name.data: f for f in module.ops if hasattr(f, "sym_name")}


_MODEL_ARGS = (np.ones((2, 3)), np.ones((4, 3)), np.ones(4))


def test_every_op_of_a_named_call_carries_the_name():
    module = _trace(named_model, *_MODEL_ARGS)
    (f,) = _functions(module).values()
    unnamed = [op.name for op in f.body.block.ops if M.NAME_ATTR not in op.attributes]
    assert unnamed == ["msir.mul", "func.return"]  # the `*` between the calls, and the return
    assert _names(f) == {"fc1", "act", "sm", "sq", "total"}
    assert 'msir.matmul %x, %0 {msir.name = "fc1"}' in str(f)


def test_names_survive_reverse_mode():
    from msir.passes.grad import differentiate

    module = _trace(named_step, *_MODEL_ARGS)
    differentiate(module)
    module.verify()
    funcs = _functions(module)
    fwd = next(f for n, f in funcs.items() if n.endswith("__fwd") and "matmul" in str(f))
    bwd = next(f for n, f in funcs.items() if n.endswith("__bwd") and "matmul" in str(f))
    assert {"fc1", "act", "sm", "sq", "total"} <= _names(fwd)
    assert {"fc1/grad", "act/grad", "sm/grad", "sq/grad", "total/grad"} <= _names(bwd)
    matmuls = [op for op in bwd.walk() if isinstance(op, M.MatmulOp)]
    assert matmuls and all(op.attributes[M.NAME_ATTR].data == "fc1/grad" for op in matmuls)


def test_names_survive_forward_mode():
    from msir.passes.jvp import differentiate_all

    module = _trace(named_tangent, *_MODEL_ARGS, np.ones((4, 3)))
    differentiate_all(module)
    module.verify()
    jvp = next(f for n, f in _functions(module).items() if "__jvp" in n and "matmul" in str(f))
    assert {"fc1", "sm"} <= _names(jvp) and {"fc1/jvp", "sm/jvp", "sq/jvp"} <= _names(jvp)


def _named_ops(f) -> Counter:
    """(op, msir.name) of every op of `f` but constants and broadcasts (which
    msir-fuse copies into the bodies that read them)."""
    return Counter(
        (op.name, op.attributes[M.NAME_ATTR].data if M.NAME_ATTR in op.attributes else None)
        for op in f.walk()
        if not isinstance(op, (M.ConstantOp, M.BroadcastToOp, M.FusionOp, M.YieldOp))
    )


def test_names_survive_inlining_einsum_lowering_and_fusion():
    from xdsl.context import Context

    from msir.passes.fuse import MsirFuse
    from msir.passes.grad import differentiate
    from msir.passes.inline import inline_functions
    from msir.passes.lower_einsum import lower_all_einsums
    from msir.passes.specialize import remove_unreachable_functions

    module = _trace(named_step, *_MODEL_ARGS)
    differentiate(module)
    remove_unreachable_functions(module)
    inline_functions(module)
    (step,) = _functions(module).values()  # everything inlined into the step
    assert {"fc1", "act", "sm", "sq", "sq/grad", "fc1/grad"} <= _names(step)
    einsum_names = {op.attributes[M.NAME_ATTR].data for op in step.walk() if isinstance(op, M.EinsumOp)}
    assert einsum_names == {"sq", "sq/grad"}
    lower_all_einsums(module)
    assert not any(isinstance(op, M.EinsumOp) for op in step.walk())
    sq = [op for op in step.walk() if op.attributes.get(M.NAME_ATTR) == StringAttr("sq")]
    assert [op.name for op in sq] == ["msir.mul"]  # "ij,ij->ij" decomposed, named after the einsum
    before = _named_ops(step)
    MsirFuse().apply(Context(), module)
    module.verify()
    assert any(isinstance(op, M.FusionOp) for op in step.walk())
    assert _named_ops(step) == before


def test_named_gradients_still_compute():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    gw, gb = msir.jit(named_step)(x, w, b)
    for i, (got, v) in enumerate(((gw, w), (gb, b))):
        expected = numerical_vjp(lambda vs: named_model(x, *vs), [w, b], np.array(1.0), i)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
    eager = pynative(lambda: named_step(x, w, b))
    np.testing.assert_allclose(eager[0], gw, rtol=1e-12)


def test_msir_ops_is_lazy():
    import subprocess
    import sys

    code = "import sys, msir; assert 'msir.ops' not in sys.modules; msir.ops; assert 'xdsl' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
