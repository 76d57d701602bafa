"""`msir-forward-arguments`: callers use their own argument where a private
function returns one of its parameters unchanged.

Why
---
Differentiation makes this common: an augmented forward `@f__fwd` returns as
residuals the parameters its adjoint reads (the weights of a matmul, the input
batch). Returned, each of them becomes an output buffer that the lowering fills
with a copy of the argument, on every call; forwarded, the caller passes the
argument it already has to `@f__bwd` and nothing is copied.

Contract
--------
Expects: `func` functions with one-block bodies (any dialect inside).

Rewrites, to a fixed point: for each private function `@g` whose only uses are
`func.call`s (not referenced by `msir.closure` or any other symbol use), each
result `j` of `@g` that is the block argument `i` on its `func.return` is
removed from `@g`'s signature and return, and every caller uses its call's
operand `i` wherever it used result `j`. Wrappers that return what an inner call
returned become forwardable in the next round.

Guarantees: public functions keep their signatures (they are the native ABI);
values are unchanged (a function with value semantics returning its parameter
returns the same value the caller passed); the module verifies.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, SymbolRefAttr
from xdsl.ir import Attribute, BlockArgument
from xdsl.passes import ModulePass


def _symbol_uses(module: ModuleOp) -> tuple[dict[str, list[func.CallOp]], set[str]]:
    """The calls of each function, and the names used other than as a callee."""
    calls: dict[str, list[func.CallOp]] = {}
    other: set[str] = set()
    for op in module.walk():
        if isinstance(op, func.CallOp):
            calls.setdefault(op.callee.string_value(), []).append(op)
            continue
        if isinstance(op, func.FuncOp):
            continue
        for attr in [*op.attributes.values(), *op.properties.values()]:
            _collect_symbols(attr, other)
    return calls, other


def _collect_symbols(attr: Attribute, out: set[str]) -> None:
    if isinstance(attr, SymbolRefAttr):
        out.add(attr.string_value())
        return
    data = getattr(attr, "data", None)
    if isinstance(data, tuple):
        for a in data:
            if isinstance(a, Attribute):
                _collect_symbols(a, out)


def _forwarded(f: func.FuncOp) -> dict[int, int]:
    """Result index -> parameter index, for results that are parameters."""
    ret = f.body.block.last_op
    if not isinstance(ret, func.ReturnOp):
        return {}
    return {
        j: v.index
        for j, v in enumerate(ret.operands)
        if isinstance(v, BlockArgument) and v.block is f.body.block
    }


def _drop_results(f: func.FuncOp, calls: list[func.CallOp], forwarded: dict[int, int]) -> None:
    ret = f.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    kept = [j for j in range(len(ret.operands)) if j not in forwarded]
    new_ret = func.ReturnOp(*[ret.operands[j] for j in kept])
    new_ret.location = ret.location
    f.body.block.insert_op_before(new_ret, ret)
    f.body.block.erase_op(ret)
    outputs = [f.function_type.outputs.data[j] for j in kept]
    f.function_type = FunctionType.from_lists(list(f.function_type.inputs.data), outputs)
    for call in calls:
        for j, i in forwarded.items():
            call.results[j].replace_all_uses_with(call.arguments[i])
        new = func.CallOp(call.callee, list(call.arguments), outputs)
        new.location = call.location
        new.attributes.update(call.attributes)
        for j_new, j in enumerate(kept):
            call.results[j].replace_all_uses_with(new.results[j_new])
        block = call.parent_block()
        assert block is not None
        block.insert_op_before(new, call)
        block.erase_op(call)


def forward_arguments(module: ModuleOp) -> int:
    """Apply the rewrite to a fixed point; returns the number of results removed."""
    removed = 0
    while True:
        calls, other = _symbol_uses(module)
        changed = False
        for f in list(module.ops):
            if not isinstance(f, func.FuncOp) or not f.body.blocks:
                continue
            name = f.sym_name.data
            if (f.sym_visibility is None or f.sym_visibility.data != "private") or name in other:
                continue
            forwarded = _forwarded(f)
            if not forwarded:
                continue
            _drop_results(f, calls.get(name, []), forwarded)
            removed += len(forwarded)
            changed = True
        if not changed:
            return removed


@dataclass(frozen=True)
class MsirForwardArguments(ModulePass):
    """Callers use their own arguments for returned parameters (module docstring)."""

    name = "msir-forward-arguments"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        forward_arguments(op)
