"""`msir-specialize`: turn calls of known function values into direct calls.

Contract
--------
Rewrites `msir.apply %f(args)` where `%f = msir.closure @g(captures)` into
`func.call @g(args..., captures...)`, and removes closures left without uses.
Calls of functions that return function values are inlined first, so that the
closures they build become visible to the caller.

Expects: differentiation ops already expanded (`msir-grad`, `msir-jvp`), so that
function values come from `msir.closure`.

Guarantees: every `msir.apply` of a closure is gone; inlined ops keep their
attributes (their `msir.name`). A function value that is still used
afterwards (passed to an unknown place, returned) is left for the lowering to
refuse with an error at its location.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.passes import ModulePass

from msir.dialects import msir as M


def inline_call(call: func.CallOp, callee: func.FuncOp) -> None:
    """Replace `call` by a copy of `callee`'s body."""
    block = call.parent_block()
    assert block is not None
    mapping = dict(zip(callee.body.block.args, call.arguments))
    for op in callee.body.block.ops:
        if isinstance(op, func.ReturnOp):
            for old, new in zip(call.results, op.operands):
                old.replace_all_uses_with(mapping.get(new, new))
            continue
        clone = op.clone(value_mapper=mapping)
        block.insert_op_before(clone, call)
        for r, cr in zip(op.results, clone.results):
            mapping[r] = cr
    block.erase_op(call)


def _inline_function_value_producers(module: ModuleOp) -> None:
    """Inline calls that return function values, so their closures become visible."""
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, func.FuncOp)}
    changed = True
    while changed:
        changed = False
        for call in [op for op in module.walk() if isinstance(op, func.CallOp)]:
            if any(isinstance(r.type, FunctionType) for r in call.results):
                callee = funcs.get(call.callee.string_value())
                if callee is not None and callee.body.blocks and callee is not call.parent_op():
                    inline_call(call, callee)
                    changed = True


def specialize(module: ModuleOp) -> None:
    while True:
        _inline_function_value_producers(module)
        applies = [
            op for op in module.walk() if isinstance(op, M.ApplyOp) and isinstance(op.fn.owner, M.ClosureOp)
        ]
        if not applies:
            break
        for op in applies:
            closure = op.fn.owner
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



def _callees(root) -> list[str]:
    """The functions that calls and closures in `root` (walked) name."""
    return [op.callee.string_value() for op in root.walk() if isinstance(op, (func.CallOp, M.ClosureOp))]


def remove_unreachable_functions(module: ModuleOp) -> None:
    """Erase private functions that no public function reaches (through calls
    or closures), e.g. a differentiated function once its derivative exists.
    An op at the module's top level outside any function is a root too (as in
    MLIR's symbol-dce, every use outside a dead symbol keeps it): what it calls
    or closes over stays."""
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, func.FuncOp)}
    live: set[str] = set()
    stack = [n for n, f in funcs.items() if f.sym_visibility is None or f.sym_visibility.data != "private"]
    for op in module.ops:
        if not isinstance(op, func.FuncOp):
            stack += _callees(op)
    while stack:
        name = stack.pop()
        if name in live or name not in funcs:
            continue
        live.add(name)
        stack += _callees(funcs[name])
    for name, f in funcs.items():
        if name not in live:
            module.body.block.erase_op(f)
