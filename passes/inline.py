"""`msir-inline`: inline the private straight-line functions called once.

Why
---
Differentiation keeps calls as calls (each callee gets its own augmented
forward and adjoint, which is what makes recursion and loops differentiable):
a training step is the step function calling `@loss__fwd` and `@loss__bwd`
through wrappers. Across those boundaries nothing fuses, every result crosses
as a separate output buffer, and the lowering cannot see that the gradient a
matmul produces in `@loss__bwd` is only used by the update in the step. Inlined,
the step is one function: the backward's elementwise chains fuse with the
update, and a matmul whose only use is `w - lr * g` becomes one BLAS call
accumulating into the new weights (convert-msir-to-loops, "Matmul updates").

Contract
--------
Expects: `func` functions with one-block bodies, after differentiation.

Rewrites, to a fixed point: a `func.call` in a function's entry block (not in
a region) to a private function with a body, whose only use in the module is
that one call, that is not recursive, and whose body holds no region (no
control flow) and no tape op, is replaced by a copy of the callee's body; the
callee is erased. So wrappers disappear into their callers, and a chain of
single-use straight-line functions becomes one body.

Guarantees: values are unchanged (functions have value semantics); each op
keeps its location and attributes (its `msir.name`); public functions and
every function called more than once, recursive, holding loops or branches or
tapes stay as they are; the module verifies.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from msir.dialects import msir as M
from msir.passes.forward_arguments import _symbol_uses
from msir.passes.specialize import inline_call

_TAPE_OPS = (M.TapeAllocOp, M.TapeSetOp, M.TapeAddOp, M.TapePushOp, M.TapeGetOp, M.TapeZerosOp)


def _straight_line(f: func.FuncOp) -> bool:
    return all(not op.regions and not isinstance(op, _TAPE_OPS) for op in f.body.block.ops)


def inline_functions(module: ModuleOp) -> int:
    """Apply the rewrite to a fixed point; returns the number of calls inlined."""
    inlined = 0
    while True:
        calls, other = _symbol_uses(module)
        funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, func.FuncOp)}
        done = False
        for name, sites in calls.items():
            callee = funcs.get(name)
            if (callee is None or not callee.body.blocks or len(sites) != 1 or name in other
                    or callee.sym_visibility is None or callee.sym_visibility.data != "private"):
                continue
            (call,) = sites
            caller = call.parent_op()
            if not isinstance(caller, func.FuncOp) or caller is callee or not _straight_line(callee):
                continue  # (a recursive callee's one call site is in itself, or becomes so by inlining)
            inline_call(call, callee)
            module.body.block.erase_op(callee)
            inlined += 1
            done = True
            break  # the symbol uses changed: look again
        if not done:
            return inlined


@dataclass(frozen=True)
class MsirInline(ModulePass):
    """Inline private straight-line functions called once (see the module docstring)."""

    name = "msir-inline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        inline_functions(op)
