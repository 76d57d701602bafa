"""`msir-specialize`: turn calls of known function values into direct calls.

Contract
--------
Rewrites `msir.apply %f(args)` where `%f = msir.closure @g(captures)` into
`func.call @g(args..., captures...)`, and removes closures left without uses.

Expects: differentiation ops already expanded (`msir-grad`, `msir-jvp`), so that
function values come from `msir.closure`.

Guarantees: every `msir.apply` of a closure is gone. A function value that is
still used afterwards (passed to an unknown place, returned) is left for the
lowering to refuse with an error at its location.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from msir.dialects import msir as M


def specialize(module: ModuleOp) -> None:
    applies = [op for op in module.walk() if isinstance(op, M.ApplyOp)]
    for op in applies:
        closure = op.fn.owner
        if not isinstance(closure, M.ClosureOp):
            continue
        call = func.CallOp(
            closure.callee.string_value(),
            [*op.args, *closure.captures],
            [r.type for r in op.res],
        )
        call.location = op.location
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(call, op)
        for old, new in zip(op.res, call.results):
            old.replace_all_uses_with(new)
        block.erase_op(op)
    for op in list(module.walk()):
        if isinstance(op, M.ClosureOp) and not op.result.uses:
            parent = op.parent_block()
            assert parent is not None
            parent.erase_op(op)


@dataclass(frozen=True)
class MsirSpecialize(ModulePass):
    """Direct calls for applications of known closures (see the module docstring)."""

    name = "msir-specialize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        specialize(op)

