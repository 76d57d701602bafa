"""The differentiation rules (`passes/grad_rules.py`) against finite differences.

Every rule in `VJP` and `JVP` is run on `NumpyBuilder` in float64 and compared,
element by element, with central differences of the op computed in plain NumPy
(`gradcheck.check_grads`: eps 1e-6, rtol 1e-6, atol 1e-8). The parameters a rule
sees are read by `op_params` off a real, verified msir op, so the rules are
checked with exactly what `msir-grad` and `msir-jvp` hand them.

Also here: `NumpyBuilder` against NumPy (values and dtypes, float32 kept), the
coverage of the rule tables (an op added to the dialect without rules fails),
and the native lowering of the adjoint ops `scatter_slice`, `scatter_add` and
`stop_gradient` against NumPy.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from gradcheck import check_grads
from xdsl.ir import Block, Operation
from xdsl.parser import Parser

from msir.compiler import compile_module, make_context
from msir.dialects import msir as M
from msir.eager import NumpyBuilder
from msir.errors import MsirIndexError
from msir.passes.ad_ir import op_params
from msir.passes.grad_rules import JVP, NON_DIFFERENTIABLE, VJP

B = NumpyBuilder()

# ---------------------------------------------------------------------------
# Cases: an msir op, its inputs, and the same op in plain NumPy
# ---------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    op: Callable[..., Operation]
    """Builds the msir op from SSA values of the inputs' types."""
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    ref: Callable[..., np.ndarray]
    """The op in plain NumPy, on the inputs."""
    check: dict = field(default_factory=dict)
    """Overrides of check_grads' eps/rtol/atol."""
    xfail: str | None = None
    """Why the rules fail on this case (the finite-difference tests are xfail)."""
    modes: tuple = ("vjp", "jvp")

    def params(self, xs: list[np.ndarray]) -> tuple[str, dict]:
        block = Block(arg_types=[M.tensor_type(x.shape, x.dtype.name) for x in xs])
        op = self.op(*block.args)
        op.verify()
        return op_params(op)

    def forward(self, xs: list[np.ndarray]) -> np.ndarray:
        return np.asarray(self.ref(*xs))


def normal(*shape):
    return lambda rng: rng.standard_normal(shape)


def uniform(lo, hi, *shape):
    return lambda rng: rng.uniform(lo, hi, shape)


def away_from_zero(*shape):
    return lambda rng: rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 2.0, shape)


def distinct(*shape):
    """Values at least 0.1 apart, so that max/min have no ties."""
    n = int(np.prod(shape))
    return lambda rng: rng.permutation(np.arange(n)).reshape(shape) * 0.1 + rng.uniform(0, 0.05, shape)


def inputs(*makers):
    return lambda rng: [m(rng) if callable(m) else np.asarray(m) for m in makers]


def _rem_operands(rng, shape):
    """a % b with a / b at least 0.2 away from an integer (where rem jumps)."""
    b = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)
    q = rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.8, shape)
    return [b * q, b]


UNARY_DOMAIN = {
    "neg": normal, "exp": normal, "expm1": normal, "sin": normal, "cos": normal, "tanh": normal,
    "log": lambda *s: uniform(0.5, 2.0, *s), "sqrt": lambda *s: uniform(0.5, 2.0, *s),
    "log1p": lambda *s: uniform(-0.5, 2.0, *s), "abs": away_from_zero, "arctan": normal,
}
UNARY_REF = {
    "neg": np.negative, "exp": np.exp, "expm1": np.expm1, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "log": np.log, "sqrt": np.sqrt, "log1p": np.log1p, "abs": np.abs, "arctan": np.arctan,
}
BINARY_REF = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "rem": np.remainder, "arctan2": np.arctan2,
}
BINARY_DOMAIN = {
    "add": (normal, normal), "sub": (normal, normal), "mul": (normal, normal),
    "div": (normal, away_from_zero), "pow": (lambda *s: uniform(0.5, 2.0, *s), normal),
    "maximum": (normal, normal), "minimum": (normal, normal), "arctan2": (normal, normal),
}
OP_CLASS = {op.name.removeprefix("msir."): op for op in M.Msir.operations}


def _elementwise_cases() -> list[Case]:
    cases = []
    for shape in [(3,), (2, 3)]:
        tag = "x".join(map(str, shape))
        for name, ref in UNARY_REF.items():
            cases.append(Case(f"{name}-{tag}", OP_CLASS[name], inputs(UNARY_DOMAIN[name](*shape)), ref))
        for name, ref in BINARY_REF.items():
            if name == "rem":
                make = lambda rng, shape=shape: _rem_operands(rng, shape)  # noqa: E731
            else:
                da, db = BINARY_DOMAIN[name]
                make = inputs(da(*shape), db(*shape))
            cases.append(Case(f"{name}-{tag}", OP_CLASS[name], make, ref))
        cases.append(Case(
            f"select-{tag}", M.SelectOp,
            lambda rng, shape=shape: [rng.random(shape) < 0.5, rng.standard_normal(shape), rng.standard_normal(shape)],
            np.where,
        ))
    cases += [
        Case("mul-rank0", M.MulOp, inputs(normal(), normal()), np.multiply),
        Case("exp-rank0", M.ExpOp, inputs(normal()), np.exp),
        # 0 ** b: both partials are 0 (d/db uses log(a) := 0 at a == 0, as JAX does).
        # Reverse mode only: a forward direction moving a and b at once leaves
        # the domain ((-eps) ** 2.000001 is NaN).
        Case("pow-zero-base", M.PowOp, inputs([0.0, 0.0, 1.5, 0.7], [2.0, 3.0, 2.5, -1.5]), np.power,
             modes=("vjp",)),
    ]
    return cases


def _cast_case(id, src, dst):
    # float32 on either side: eps 1e-2 (the op is linear, so the difference is
    # exact up to float32 rounding, ~1e-5 relative).
    loose = {"eps": 1e-2, "rtol": 1e-4, "atol": 1e-4}
    return Case(
        id, lambda x: M.CastOp(x, dst), lambda rng: [rng.standard_normal((2, 3)).astype(src)],
        lambda x: x.astype(dst), loose if "float32" in (src, dst) else {},
    )


def _shape_cases() -> list[Case]:
    return [
        _cast_case("cast-f64-f64", "float64", "float64"),
        _cast_case("cast-f64-f32", "float64", "float32"),
        _cast_case("cast-f32-f64", "float32", "float64"),
        Case("broadcast_to-row", lambda x: M.BroadcastToOp(x, (2, 3)), inputs(normal(3)),
             lambda x: np.broadcast_to(x, (2, 3))),
        Case("broadcast_to-column", lambda x: M.BroadcastToOp(x, (2, 3)), inputs(normal(2, 1)),
             lambda x: np.broadcast_to(x, (2, 3))),
        Case("broadcast_to-rank0", lambda x: M.BroadcastToOp(x, (2, 3)), inputs(normal()),
             lambda x: np.broadcast_to(x, (2, 3))),
        Case("broadcast_to-lead-and-inner", lambda x: M.BroadcastToOp(x, (4, 2, 3)), inputs(normal(2, 1)),
             lambda x: np.broadcast_to(x, (4, 2, 3))),
        Case("reshape-2x3-3x2", lambda x: M.ReshapeOp(x, (3, 2)), inputs(normal(2, 3)), lambda x: x.reshape(3, 2)),
        Case("reshape-6-2x1x3", lambda x: M.ReshapeOp(x, (2, 1, 3)), inputs(normal(6)), lambda x: x.reshape(2, 1, 3)),
        Case("transpose-2d", lambda x: M.TransposeOp(x, (1, 0)), inputs(normal(2, 3)), lambda x: x.T),
        Case("transpose-3d", lambda x: M.TransposeOp(x, (2, 0, 1)), inputs(normal(2, 3, 4)),
             lambda x: np.transpose(x, (2, 0, 1))),
        Case("slice-strided", lambda x: M.SliceOp(x, (1,), (2,), (2,)), inputs(normal(5)), lambda x: x[1:5:2]),
        Case("slice-reversed-to-0", lambda x: M.SliceOp(x, (4,), (5,), (-1,)), inputs(normal(5)), lambda x: x[::-1]),
        Case("slice-2d-negative-step", lambda x: M.SliceOp(x, (3, 0), (2, 3), (-2, 2)), inputs(normal(4, 5)),
             lambda x: x[3::-2, 0:6:2]),
        Case("scatter_slice-strided", lambda x: M.ScatterSliceOp(x, (1,), (2,), (5,)), inputs(normal(2)),
             lambda x: _np_scatter_slice(x, np.s_[1:5:2], (5,))),
        Case("scatter_slice-2d-negative-step", lambda x: M.ScatterSliceOp(x, (3, 0), (-2, 2), (4, 5)),
             inputs(normal(2, 3)), lambda x: _np_scatter_slice(x, np.s_[3::-2, 0:6:2], (4, 5))),
        Case("take-repeated-negative", lambda x, i: M.TakeOp(x, i, 0),
             inputs(normal(5), np.array([0, -1, 2, 2], np.int64)), lambda x, i: np.take(x, i, 0)),
        Case("take-2d-indices-axis1", lambda x, i: M.TakeOp(x, i, 1),
             inputs(normal(2, 3), np.array([[2, 0], [1, -3]], np.int32)), lambda x, i: np.take(x, i, 1)),
        Case("scatter_add-repeated-negative", lambda u, i: M.ScatterAddOp(u, i, 0, (5,)),
             inputs(normal(4), np.array([0, -1, 2, 2], np.int64)), lambda u, i: _np_scatter_add(u, i, 0, (5,))),
        Case("scatter_add-2d-indices-axis1", lambda u, i: M.ScatterAddOp(u, i, 1, (2, 3)),
             inputs(normal(2, 2, 2), np.array([[2, 0], [1, -3]], np.int32)),
             lambda u, i: _np_scatter_add(u, i, 1, (2, 3))),
        Case("compress-whole-shape", lambda x, m: M.CompressOp(x, m),
             inputs(normal(2, 3), np.array([[True, False, True], [False, True, True]])), lambda x, m: x[m]),
        Case("compress-leading-dim", lambda x, m: M.CompressOp(x, m),
             inputs(normal(4, 2), np.array([False, True, True, False])), lambda x, m: x[m]),
        Case("expand-leading-dim", lambda u, m: M.ExpandOp(u, m, (4, 2)),
             inputs(normal(2, 2), np.array([False, True, True, False])), lambda u, m: _np_expand(u, m, (4, 2))),
        Case("expand-whole-shape", lambda u, m: M.ExpandOp(u, m, (2, 3)),
             inputs(normal(4), np.array([[True, False, True], [False, True, True]])),
             lambda u, m: _np_expand(u, m, (2, 3))),
        Case("ramp-scalar", lambda a, d, n: M.RampOp(a, d, n), inputs(normal(), normal(), np.array(4, np.int64)),
             lambda a, d, n: a + np.arange(n, dtype=a.dtype) * d),
        Case("ramp-rows", lambda a, d, n: M.RampOp(a, d, n), inputs(normal(3), normal(3), np.array(2, np.int64)),
             lambda a, d, n: a + np.arange(n, dtype=a.dtype)[:, None] * d),
        Case("concatenate-axis0", lambda a, b: M.ConcatenateOp([a, b], 0), inputs(normal(2, 3), normal(1, 3)),
             lambda a, b: np.concatenate([a, b], 0)),
        Case("concatenate-three-1d", lambda a, b, c: M.ConcatenateOp([a, b, c], 0),
             inputs(normal(3), normal(2), normal(1)), lambda *xs: np.concatenate(xs, 0)),
        Case("concatenate-axis1", lambda a, b: M.ConcatenateOp([a, b], 1), inputs(normal(2, 1), normal(2, 2)),
             lambda a, b: np.concatenate([a, b], 1)),
        Case("stack-axis0", lambda a, b: M.StackOp([a, b], 0), inputs(normal(3), normal(3)),
             lambda *xs: np.stack(xs, 0)),
        Case("stack-axis1", lambda a, b, c: M.StackOp([a, b, c], 1), inputs(normal(2, 3), normal(2, 3), normal(2, 3)),
             lambda *xs: np.stack(xs, 1)),
        Case("stack-last-axis", lambda a, b: M.StackOp([a, b], 2), inputs(normal(2, 3), normal(2, 3)),
             lambda *xs: np.stack(xs, 2)),
    ]


def _np_scatter_slice(x, index, shape):
    out = np.zeros(shape, x.dtype)
    out[index] = x
    return out


def _np_expand(u, m, shape):
    out = np.zeros(shape, u.dtype)
    out[m] = u
    return out


def _np_scatter_add(u, i, axis, shape):
    out = np.zeros(shape, u.dtype)
    np.add.at(out, (slice(None),) * axis + (i,), u)
    return out


REDUCE_REF = {
    "reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min,
    "reduce_prod": np.prod,
}


def _reduce_cases() -> list[Case]:
    cases = []
    for name, ref in REDUCE_REF.items():
        make = (
            distinct if name in ("reduce_max", "reduce_min")
            else (lambda *s: uniform(0.5, 1.5, *s)) if name == "reduce_prod" else normal
        )
        for shape, axes, keep in [((3,), (0,), False), ((2, 3), (1,), False), ((2, 3), (0,), True),
                                  ((2, 3), (0, 1), False), ((2, 3, 4), (0, 2), True)]:
            tag = f"{'x'.join(map(str, shape))}-axes{''.join(map(str, axes))}{'-keep' if keep else ''}"
            cases.append(Case(
                f"{name}-{tag}", lambda x, name=name, axes=axes, keep=keep: OP_CLASS[name](x, axes, keep),
                inputs(make(*shape)), lambda x, ref=ref, axes=axes, keep=keep: ref(x, axis=axes, keepdims=keep),
            ))
    cases.append(Case(
        "reduce_prod-one-zero", lambda x: M.ReduceProdOp(x, (1,), False),
        inputs([[0.0, 1.5, -0.7], [1.2, 0.8, 2.0]]), lambda x: np.prod(x, axis=1),
    ))
    return cases


def _matmul_cases() -> list[Case]:
    shapes = [
        ((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)), ((2, 2, 3), (3, 4)),
        ((2, 1, 2, 3), (3, 3, 4)),
    ]
    return [
        Case(f"matmul-{'x'.join(map(str, sa))}-{'x'.join(map(str, sb))}", M.MatmulOp,
             inputs(normal(*sa), normal(*sb)), np.matmul)
        for sa, sb in shapes
    ]


EINSUM_SHAPES = {
    "ij,jk->ik": [(2, 3), (3, 4)], "bij,bjk->bik": [(2, 2, 3), (2, 3, 4)], "ij,kj->ik": [(2, 3), (4, 3)],
    "ij,jk->ki": [(2, 3), (3, 4)], "ji,jk->ik": [(3, 2), (3, 4)], "ijk,jkl->il": [(2, 3, 2), (3, 2, 4)],
    "i,j->ij": [(3,), (4,)], "ij,jk->k": [(2, 3), (3, 4)], "i,i->": [(5,), (5,)], "bi,bi->b": [(3, 4), (3, 4)],
    "bi,bj->bij": [(2, 3), (2, 4)], "ij,ij->ij": [(2, 3), (2, 3)], "iij,jk->ki": [(3, 3, 2), (2, 4)],
    "ij,kl->jk": [(2, 3), (4, 2)], ",i->i": [(), (3,)], "ij->ji": [(2, 3)], "ii->i": [(3, 3)],
    "ii->": [(3, 3)], "iji->j": [(2, 3, 2)], "ijk->": [(2, 3, 2)],
}
"""Specs with the shapes of their operands: products of matrices, batches, transposed
operands and results, two contracted subscripts, outer and elementwise products, a
subscript summed from one operand only, dots, diagonals (also of a two-operand spec)."""


def _einsum_cases() -> list[Case]:
    # The reference takes NumPy's BLAS contraction path, as NumpyBuilder does, so
    # that float64 agrees to the last bit (the plain loop sums in another order);
    # test_einsum.py checks both against the plain loop with a tolerance.
    return [
        Case(f"einsum-{spec.replace(',', '_').replace('->', '-to-')}",
             lambda *vs, spec=spec: M.EinsumOp(spec, vs), inputs(*(normal(*s) for s in shapes)),
             lambda *xs, spec=spec: np.einsum(spec, *xs, optimize=True))
        for spec, shapes in EINSUM_SHAPES.items()
    ]


def _windows(xp: np.ndarray, kernel, stride, dilation=(1, 1)) -> np.ndarray:
    """The windows of a padded NCHW array: (N, C, OH, OW, KH, KW)."""
    span = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    v = np.lib.stride_tricks.sliding_window_view(xp, span, axis=(2, 3))
    return v[:, :, ::stride[0], ::stride[1], ::dilation[0], ::dilation[1]]


def conv2d_reference(x, w, stride, padding, dilation, groups):
    """conv2d by NumPy's sliding windows and one matmul per group (the BLAS, as
    NumpyBuilder's im2col calls it, so that float64 agrees to the last bit)."""
    t, b, l, r = padding
    win = _windows(np.pad(x, ((0, 0), (0, 0), (t, b), (l, r))), w.shape[2:], stride, dilation)
    n, c, oh, ow, kh, kw = win.shape
    o, cg = w.shape[:2]
    cols = win.reshape(n, groups, cg, oh * ow, kh * kw).transpose(0, 1, 2, 4, 3).reshape(n, groups, cg * kh * kw, -1)
    y = np.matmul(w.reshape(groups, o // groups, cg * kh * kw), cols) if groups > 1 else \
        np.matmul(w.reshape(o, -1), cols[:, 0])
    return y.reshape(n, o, oh, ow)


def pool2d_reference(x, kind, kernel, stride, padding, count_include_pad=True):
    """Max or mean of each window; the taps added in row-major order (as the decomposition does)."""
    t, b, l, r = padding
    fill = -np.inf if kind == "max" else 0.0
    win = _windows(np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=fill), kernel, stride)
    if kind == "max":
        return win.max(axis=(4, 5))
    total = sum(win[..., i, j] for i in range(kernel[0]) for j in range(kernel[1]))
    if count_include_pad:
        return total / (kernel[0] * kernel[1])
    ones = _windows(np.pad(np.ones((1, 1) + x.shape[2:], x.dtype), ((0, 0), (0, 0), (t, b), (l, r))), kernel, stride)
    return total / sum(ones[..., i, j] for i in range(kernel[0]) for j in range(kernel[1]))


def _window_cases() -> list[Case]:
    conv = [  # (id, x shape, w shape, stride, padding, dilation, groups)
        ("grouped-strided", (2, 4, 7, 6), (6, 2, 3, 3), (2, 2), (1, 1, 0, 1), (1, 1), 2),
        ("dilated", (1, 2, 7, 7), (3, 2, 3, 3), (1, 1), (0, 0, 0, 0), (2, 2), 1),
        ("asymmetric", (2, 3, 6, 5), (2, 3, 2, 3), (2, 1), (2, 0, 1, 2), (1, 2), 1),
        ("kernel-larger-than-output", (1, 1, 6, 6), (2, 1, 5, 5), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ]
    cases = [
        Case(f"conv2d-{tag}", lambda x, w, st=st, pd=pd, dl=dl, g=g: M.Conv2dOp(x, w, st, pd, dl, g),
             inputs(normal(*xs), normal(*ws)),
             lambda x, w, st=st, pd=pd, dl=dl, g=g: conv2d_reference(x, w, st, pd, dl, g))
        for tag, xs, ws, st, pd, dl, g in conv
    ]
    pools = [  # (id, x shape, kernel, stride, padding)
        ("2x2", (2, 3, 4, 6), (2, 2), (2, 2), (0, 0, 0, 0)),
        ("3x3-padded", (1, 2, 5, 5), (3, 3), (2, 2), (1, 1, 1, 1)),
        ("overlapping-same", (1, 2, 5, 4), (2, 3), (1, 2), (0, 1, 1, 1)),
    ]
    for tag, xs, k, st, pd in pools:
        cases.append(Case(f"max_pool2d-{tag}", lambda x, k=k, st=st, pd=pd: M.MaxPool2dOp(x, k, st, pd),
                          inputs(distinct(*xs)), lambda x, k=k, st=st, pd=pd: pool2d_reference(x, "max", k, st, pd)))
        for include in (True, False):
            cases.append(Case(
                f"avg_pool2d-{tag}-{'include' if include else 'exclude'}-pad",
                lambda x, k=k, st=st, pd=pd, inc=include: M.AvgPool2dOp(x, k, st, pd, inc),
                inputs(normal(*xs)), lambda x, k=k, st=st, pd=pd, inc=include: pool2d_reference(x, "avg", k, st, pd, inc)))
    return cases

def _stop_gradient_case() -> Case:
    # For differentiation stop_gradient is a constant function: its value is x0 at
    # every x, so finite differences give zero.
    x0 = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    return Case("stop_gradient", M.StopGradientOp, inputs(x0), lambda x: x0.astype(x.dtype))


CASES = (_elementwise_cases() + _shape_cases() + _reduce_cases() + _matmul_cases() + _einsum_cases()
         + _window_cases() + [_stop_gradient_case()])


def _params(case: Case, rules: bool = False):
    """The cases `case` selects; with `rules`, those the rules fail on are xfail."""
    return [
        pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if rules and c.xfail else [])
        for c in CASES if case(c)
    ]


def _rng(case: Case) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case.id.encode()))


# ---------------------------------------------------------------------------
# The rule tables
# ---------------------------------------------------------------------------

NOT_PRIMITIVES = {
    "make_tuple", "get_tuple", "fusion", "yield", "closure", "apply", "grad", "value_and_grad", "vjp", "jvp",
    "constant", "iota",
    # Control flow is differentiated structurally (passes/grad_control.py), not by a rule.
    "if", "for", "while", "condition",
    # Appends only in loop bodies msir-grad generates; its reverse is structural
    # there (grad_control `_push_rows`: its row follows from the iteration).
    "tape_push",
}


def test_non_differentiable_ops():
    assert {"compare", "argmax", "argmin"} <= NON_DIFFERENTIABLE


def test_every_differentiable_op_has_both_rules():
    ops = {name for name in OP_CLASS if name not in NON_DIFFERENTIABLE | NOT_PRIMITIVES}
    assert ops, "no msir ops found"
    assert ops - VJP.keys() == set(), "ops without a VJP rule"
    assert ops - JVP.keys() == set(), "ops without a JVP rule"


def test_every_rule_is_checked_here():
    checked = {c.params(c.inputs(_rng(c)))[0] for c in CASES}
    # Tape rules act on loop tapes only (IRBuilder, no NumPy counterpart); they are
    # checked end to end by the forward-over-reverse Hessian and the
    # reverse-over-reverse tests through loops (test_control_flow_grad.py).
    tape_rules = {"tape_set", "tape_get", "tape_add", "tape_push"}
    assert (VJP.keys() | JVP.keys()) - checked - tape_rules == set(), "rules without a finite-difference case"


# ---------------------------------------------------------------------------
# Every rule against finite differences (float64)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", _params(lambda c: "vjp" in c.modes, rules=True))
def test_vjp(case: Case):
    xs = case.inputs(_rng(case))
    name, p = case.params(xs)
    rule = VJP[name]
    check_grads(case.forward, xs, vjp=lambda xs, y, ct: rule(B, p, xs, y, ct), rng=_rng(case), **case.check)


@pytest.mark.parametrize("case", _params(lambda c: "jvp" in c.modes, rules=True))
def test_jvp(case: Case):
    xs = case.inputs(_rng(case))
    name, p = case.params(xs)
    rule = JVP[name]
    check_grads(case.forward, xs, jvp=lambda xs, y, ts: rule(B, p, xs, y, ts), rng=_rng(case), **case.check)


def test_vjp_and_jvp_are_transposes():
    """<ct, jvp(t)> == <vjp(ct), t> for every case (no finite differences: exact
    up to rounding), which ties the two tables to each other."""
    failures = []
    for case in CASES:
        if case.xfail:
            continue
        rng = _rng(case)
        xs = case.inputs(rng)
        name, p = case.params(xs)
        y = case.forward(xs)
        ts = [rng.standard_normal(x.shape).astype(x.dtype) if x.dtype.kind == "f" else None for x in xs]
        ct = rng.standard_normal(y.shape).astype(y.dtype)
        lhs = np.sum(ct * JVP[name](B, p, xs, y, ts))
        cts = VJP[name](B, p, xs, y, ct)
        rhs = sum(np.sum(c * t) for c, t in zip(cts, ts) if c is not None and t is not None)
        if not np.isclose(lhs, rhs, rtol=1e-6, atol=1e-8):
            failures.append(f"{case.id}: <ct, jvp(t)> = {lhs}, <vjp(ct), t> = {rhs}")
    assert not failures, "\n".join(failures)


def test_maximum_tie_splits_the_cotangent():
    x = np.array([1.0, 2.0, 3.0])
    ct = np.array([1.0, 2.0, 4.0])
    ga, gb = VJP["maximum"](B, {}, [x, x], x, ct)
    np.testing.assert_array_equal(ga, ct / 2)
    np.testing.assert_array_equal(gb, ct / 2)


def test_reduce_max_tie_splits_the_cotangent():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    y = x.max(axis=1)
    (g,) = VJP["reduce_max"](B, {"axes": (1,), "keepdims": False}, [x], y, np.array([1.0, 5.0]))
    np.testing.assert_array_equal(g, [[0.0, 0.5, 0.5], [5.0, 0.0, 0.0]])


# ---------------------------------------------------------------------------
# NumpyBuilder: values and dtypes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", _params(lambda c: True))
def test_numpy_builder_apply_matches_numpy(case: Case, dtype: str):
    xs = [x.astype(dtype) if x.dtype.kind == "f" else x for x in case.inputs(_rng(case))]
    name, p = case.params(xs)
    got = B.apply(name, p, xs)
    expected = case.forward(xs)
    assert isinstance(got, np.ndarray)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6 if dtype == "float32" else 1e-15)


@pytest.mark.parametrize("case", _params(lambda c: not c.id.startswith("cast")))
def test_rules_keep_float32(case: Case):
    """Rules run on float32 give float32 arrays (0-d arrays, not scalars)."""
    rng = _rng(case)
    xs = [x.astype("float32") if x.dtype.kind == "f" else x for x in case.inputs(rng)]
    name, p = case.params(xs)
    y = B.apply(name, p, xs)
    ct = rng.standard_normal(y.shape).astype("float32")
    for x, c in zip(xs, VJP[name](B, p, xs, y, ct)):
        if c is not None:
            assert isinstance(c, np.ndarray) and c.dtype == np.float32 and c.shape == x.shape
    ts = [rng.standard_normal(x.shape).astype("float32") if x.dtype.kind == "f" else None for x in xs]
    t = JVP[name](B, p, xs, y, ts)
    assert isinstance(t, np.ndarray) and t.dtype == np.float32 and t.shape == y.shape


def test_numpy_builder_rank0_results_are_arrays():
    x = np.array(0.5, np.float32)
    for out in (B.unary("exp", x), B.binary("add", x, x), B.reduce("sum", np.ones(3, np.float32), [0], False),
                B.matmul(np.ones(3, np.float32), np.ones(3, np.float32)), B.constant(2.0, "float32")):
        assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32


def test_numpy_builder_semantics():
    a = np.array([-7, 7, -7, 7], np.int64)
    b = np.array([2, -2, -2, 2], np.int64)
    np.testing.assert_array_equal(B.binary("floordiv", a, b), [-4, -4, 3, 3])
    np.testing.assert_array_equal(B.binary("rem", a, b), [1, -1, -1, 1])
    np.testing.assert_array_equal(B.binary("rem", a.astype("float64"), b.astype("float64")), [1.0, -1.0, -1.0, 1.0])
    nan = np.array([np.nan, 1.0])
    assert np.isnan(B.binary("maximum", nan, np.array([0.0, 0.0]))[0])
    assert np.isnan(B.binary("minimum", np.array([0.0, 0.0]), nan)[0])
    assert B.reduce("sum", np.ones(3, np.int32), [0], False).dtype == np.int32
    np.testing.assert_array_equal(
        B.binary("pow", np.array([2, 1, -1, -1, 3], np.int64), np.array([3, -2, -3, -2, -1], np.int64)),
        [8, 1, -1, 1, 0],
    )
    np.testing.assert_array_equal(B.compare("ne", nan, nan), [True, False])
    np.testing.assert_array_equal(B.cast(np.array([0.0, 0.5, -2.0]), "bool"), [False, True, True])
    np.testing.assert_array_equal(B.take(np.arange(5.0), np.array([-1, 0]), 0), [4.0, 0.0])
    np.testing.assert_array_equal(B.slice(np.arange(5.0), [4], [5], [-1]), [4.0, 3.0, 2.0, 1.0, 0.0])
    np.testing.assert_array_equal(B.scatter_slice(np.array([1.0, 2.0]), [3], [-3], [5]), [2.0, 0, 0, 1.0, 0])
    np.testing.assert_array_equal(B.scatter_add(np.ones(3), np.array([1, 1, -1]), 0, [3]), [0.0, 2.0, 1.0])


# ---------------------------------------------------------------------------
# The adjoint ops through the native pipeline
# ---------------------------------------------------------------------------


def _native(src: str):
    return compile_module(Parser(make_context(), src).parse_module(), "f").native


def test_native_scatter_slice():
    f = _native("""
    func.func @f(%a: tensor<2x3xf32>) -> tensor<4x5xf32> {
      %r = msir.scatter_slice %a starts array<i64: 3, 0> steps array<i64: -2, 2> : tensor<2x3xf32> to tensor<4x5xf32>
      func.return %r : tensor<4x5xf32>
    }""")
    a = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    (got,) = f(a)
    expected = np.zeros((4, 5), np.float32)
    expected[3::-2, 0:6:2] = a
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, B.scatter_slice(a, [3, 0], [-2, 2], [4, 5]))


def test_native_scatter_slice_is_the_adjoint_of_slice():
    f = _native("""
    func.func @f(%a: tensor<7xf64>) -> tensor<7xf64> {
      %s = msir.slice %a starts array<i64: 5> steps array<i64: -2> : tensor<7xf64> to tensor<3xf64>
      %r = msir.scatter_slice %s starts array<i64: 5> steps array<i64: -2> : tensor<3xf64> to tensor<7xf64>
      func.return %r : tensor<7xf64>
    }""")
    a = np.arange(1.0, 8.0)
    (got,) = f(a)
    np.testing.assert_array_equal(got, np.where(np.isin(np.arange(7), [5, 3, 1]), a, 0.0))


def test_native_scatter_add_accumulates_and_wraps():
    f = _native("""
    func.func @f(%u: tensor<5x4xf64>, %i: tensor<5xi32>) -> tensor<3x4xf64> {
      %r = msir.scatter_add %u[%i] axis 0 : tensor<5x4xf64>, tensor<5xi32> to tensor<3x4xf64>
      func.return %r : tensor<3x4xf64>
    }""")
    rng = np.random.default_rng(0)
    u = rng.standard_normal((5, 4))
    i = np.array([1, -1, 1, 0, -3], np.int32)
    expected = np.zeros((3, 4))
    np.add.at(expected, i, u)
    (got,) = f(u, i)
    np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_native_scatter_add_inner_axis_2d_indices_int64():
    f = _native("""
    func.func @f(%u: tensor<2x2x3xi64>, %i: tensor<2x3xi64>) -> tensor<2x4xi64> {
      %r = msir.scatter_add %u[%i] axis 1 : tensor<2x2x3xi64>, tensor<2x3xi64> to tensor<2x4xi64>
      func.return %r : tensor<2x4xi64>
    }""")
    u = np.arange(12, dtype=np.int64).reshape(2, 2, 3) + 1
    i = np.array([[3, 0, 3], [-1, 2, -4]], np.int64)
    expected = np.zeros((2, 4), np.int64)
    np.add.at(expected, (slice(None), i), u)
    (got,) = f(u, i)
    np.testing.assert_array_equal(got, expected)


def test_native_scatter_add_dynamic_leading_dim():
    f = _native("""
    func.func @f(%u: tensor<?x3xf32>, %i: tensor<3xi64>) -> tensor<?x2xf32> {
      %r = msir.scatter_add %u[%i] axis 1 : tensor<?x3xf32>, tensor<3xi64> to tensor<?x2xf32>
      func.return %r : tensor<?x2xf32>
    }""")
    u = np.arange(15, dtype=np.float32).reshape(5, 3)
    i = np.array([1, 0, 1], np.int64)
    expected = np.zeros((5, 2), np.float32)
    np.add.at(expected, (slice(None), i), u)
    (got,) = f(u, i)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("bad", [3, -4, 1000, -(2**31)])
def test_native_scatter_add_out_of_range_raises(bad: int):
    f = _native("""
    func.func @f(%u: tensor<3xf64>, %i: tensor<3xi32>) -> tensor<3xf64> {
      %r = msir.scatter_add %u[%i] axis 0 : tensor<3xf64>, tensor<3xi32> to tensor<3xf64> loc("model.py":7:5)
      func.return %r : tensor<3xf64>
    }""")
    with pytest.raises(MsirIndexError, match="index out of range") as e:
        f(np.ones(3), np.array([0, bad, 2], np.int32))
    assert "model.py:7:5" in str(e.value)
    (good,) = f(np.ones(3), np.array([0, -1, 2], np.int32))  # the function is still usable
    np.testing.assert_array_equal(good, [1.0, 0.0, 2.0])


def test_native_stop_gradient_is_the_identity():
    f = _native("""
    func.func @f(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
      %s = msir.stop_gradient %a : tensor<2x3xf32>
      %m = msir.mul %s, %a : tensor<2x3xf32>
      func.return %s, %m : tensor<2x3xf32>, tensor<2x3xf32>
    }""")
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    s, m = f(a)
    np.testing.assert_array_equal(s, a)
    np.testing.assert_array_equal(m, a * a)
    assert not np.shares_memory(s, a)
