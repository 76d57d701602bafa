"""`np.einsum` in compiled code: NumPy's subscripts (`msir.frontend.einsum_subscripts`)
built as `msir.einsum` ops.

Each operand is cast to the promoted dtype and broadcast to its stretched
shape, then every contraction of the plan is one `msir.einsum` at the call's
location (three or more operands: one per pair, left to right). A problem
with the subscripts, shapes or dtypes is an error at the user's line.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from msir.dialects import msir as M
from msir.errors import MsirError, ShapeError, UnsupportedSyntaxError
from msir.frontend.einsum_subscripts import contract, plan_einsum
from msir.frontend.values import Tensor


def build_einsum(tr, subscripts: Any, operands: Sequence[Any], node: ast.AST, fname: str = "np.einsum") -> Tensor:
    """`np.einsum(subscripts, *operands)` on frontend values."""
    if not isinstance(subscripts, str):
        raise tr.error(
            UnsupportedSyntaxError,
            f"{fname} needs its subscripts as a string first, got {tr.describe(subscripts)} "
            "(the interleaved operand/sublist form is not supported)",
            node,
        )
    if not operands:
        raise tr.error(ShapeError, f"{fname} needs at least one operand", node)
    ts = [tr.as_tensor(x, node) for x in operands]
    try:
        plan = plan_einsum(subscripts, [t.shape for t in ts], [t.dtype for t in ts], fname)
    except MsirError as e:
        raise tr.error(type(e), e.message, node) from None
    values = [tr.broadcast(tr.cast(t, plan.dtype, False), shape) for t, shape in zip(ts, plan.shapes)]
    return contract(plan, values, lambda spec, xs: _einsum_op(tr, spec, xs, node))


def _einsum_op(tr, spec: str, xs: list[Tensor], node: ast.AST) -> Tensor:
    try:
        M.infer_einsum(spec, [x.shape for x in xs])
    except M.ShapeOrTypeError as e:
        raise tr.error(ShapeError, str(e), node) from None
    return tr.tensor(M.EinsumOp(spec, [x.ssa for x in xs]), False)
