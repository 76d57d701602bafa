"""Recursion: native recursive calls and the result types of their base cases.

A recursion through Python values (an int depth) is unrolled at compile time.
A function that calls itself (directly or through others) with arguments of
the types it is being built for becomes a native recursive `func.call`: its
result type is the one its base cases return (the function is built once with
the branches that recurse left out, then until the type it returns is the one
its recursive calls assumed). An inlined recursion becomes native at its first
recursive call when nothing static could end it (only arrays and functions as
arguments), or once `_MAX_INLINED_RECURSION` levels deep (its Python numbers
then become runtime values). Refused, at the call: a recursion with no base
case, and one whose argument shapes change at every level (after
`_MAX_SPECIALISED_RECURSION` specialisations). The native stack bounds the
depth of a native recursion: a call may use `STACK_LIMIT` (4 MiB,
`msir.lowering.to_llvm`) of it, some 50 000 levels of a small function;
deeper, the recursive call raises `MsirRecursionError` at its line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects import func
from xdsl.ir import Block

from msir.dialects import msir as M
from msir.errors import ShapeError, UnsupportedSyntaxError
from msir.frontend.state import RangeValue, _Callee, _Recursive, _UnknownRecursiveResult
from msir.frontend.structure import _rebuild, _runtime_leaves
from msir.frontend.values import KnownInt, Tensor

_MAX_INLINED_RECURSION = 8
"""A recursion through Python values (an int depth, a function argument) is
unrolled at compile time this many levels deep; deeper, it continues as native
recursive calls (with its Python numbers as runtime values)."""

_MAX_SPECIALISED_RECURSION = 32
"""A function calling itself with arguments of a new type at each level is
specialised this many times before it is refused."""


class RecursionMixin:
    """When a call recurses natively, building a function that calls itself, trial branches."""

    def native_recursion(self, code: Any, bound: dict[str, Any]) -> bool:
        """Should a call of a function being inlined (recursion) become a native
        recursive call? Yes when nothing could end the recursion at compile time
        (its arguments are runtime values and functions: no Python number,
        tuple, None... that may change from level to level), or when it is
        already unrolled `_MAX_INLINED_RECURSION` levels deep."""
        depth = self.tc.inlining.count(code)
        if depth == 0:
            return False
        static = (bool, int, float, KnownInt, tuple, list, str, type(None), slice, RangeValue)
        return depth >= _MAX_INLINED_RECURSION or not any(isinstance(v, static) for v in bound.values())

    def runtime_arguments(self, fn: "_Callee", bound: dict[str, Any], node) -> dict[str, Any]:
        """The arguments of a recursion too deep to unroll at compile time: its
        Python numbers become runtime values (it continues as native recursion);
        functions and other compile-time objects stay compile-time."""
        out = {}
        for name, v in bound.items():
            if isinstance(v, KnownInt):
                v = v.tensor
            elif isinstance(v, (bool, int, float)) and not isinstance(v, Tensor):
                v = self.as_tensor(v, node)
            elif isinstance(v, (tuple, list)) and _runtime_leaves(v):
                raise self.error(
                    UnsupportedSyntaxError,
                    f"the recursion of '{fn.name}' is unrolled at compile time and is "
                    f"{_MAX_INLINED_RECURSION} levels deep; a deeper recursion runs as native recursive "
                    f"calls, which take arrays, numbers and functions, not {self.describe(v)} "
                    f"(argument '{name}')",
                    node,
                )
            out[name] = v
        return out

    def recursive_call(self, key: tuple, bound: dict[str, Any], node) -> Any:
        """A call of a function that is being built: a native recursive call,
        whose result type is that of the function's base cases."""
        rec = self.tc.recursive.get(key)
        if rec is None:
            raise _UnknownRecursiveResult(key, self.source.loc(node))
        operands = [v.ssa for v in bound.values() if isinstance(v, Tensor)]
        operands += [self.localize(c).ssa for c in rec.captured]
        call = self.emit(func.CallOp(rec.name, operands, rec.types))
        results = [Tensor(r, M.dtype_of(r.type), M.shape_of(r.type), w) for r, w in zip(call.results, rec.weak)]
        return _rebuild(rec.structure, iter(results))

    def build_callee(self, key: tuple, fn: "_Callee", bound: dict[str, Any]) -> tuple:
        """`build_function` for a call with array arguments. A function that calls
        itself (directly or through others) with arguments of the same types is
        built once more with the paths that recurse left out ("trial"), which
        gives the result type of its base cases; then for real, its recursive
        calls returning that type, until the type it returns is the one assumed
        (a fixed point: a base case returning a Python float can be promoted)."""
        tc = self.tc

        def build(rec: _Recursive | None) -> tuple:
            saved = (len(tc.module_ops), dict(tc.callees), set(tc.names))
            try:
                return self.build_function(
                    tc, fn.name, fn.source, fn.globals, fn.closure, bound,
                    fname=rec.name if rec else None, precaptured=rec.captured if rec else (), node=fn.node,
                )
            except BaseException:
                self.restore(saved)
                raise

        saved = (len(tc.module_ops), dict(tc.callees), set(tc.names))
        try:
            return build(None)
        except _UnknownRecursiveResult as e:
            if e.key != key:
                raise
            where = e.loc
        tc.trial.add(key)
        try:
            built = build(None)
        except _UnknownRecursiveResult as e:
            if e.key != key:
                raise
            raise UnsupportedSyntaxError(
                f"cannot tell what the recursive function '{fn.name}' returns: every path through it "
                "calls it again; it needs a base case that returns without recursing",
                where,
            ) from None
        finally:
            tc.trial.discard(key)
        self.restore(saved)
        name = tc.unique_name(fn.name)
        rec = _recursive_of(name, built)
        for _ in range(4):
            tc.recursive[key] = rec
            try:
                built = build(rec)
            finally:
                del tc.recursive[key]
            new = _recursive_of(name, built)
            if new.same_as(rec):
                return built
            if new.structure == rec.structure and [M.shape_of(t) for t in new.types] != [
                M.shape_of(t) for t in rec.types
            ]:
                raise ShapeError(
                    f"the recursive call of '{fn.name}' returns {_describe_types(new)} where its base case "
                    f"returns {_describe_types(rec)}; every path must return the same shapes",
                    where,
                )
            # Another dtype (a Python float met float32), or a Python number of a
            # base case that is a runtime value on the recursive path: again.
            self.restore(saved)
            tc.names.add(name)
            rec = new
        raise UnsupportedSyntaxError(
            f"the recursive function '{fn.name}' returns {_describe_types(new)} where its base case returns "
            f"{_describe_types(rec)}, and assuming one does not give the other",
            where,
        )

    def restore(self, saved: tuple) -> None:
        """Forget the functions built since `saved` (a build that is done again)."""
        n_ops, callees, names = saved
        del self.tc.module_ops[n_ops:]
        self.tc.callees.clear()
        self.tc.callees.update(callees)
        self.tc.names.clear()
        self.tc.names.update(names)

    def branch(self, block: Block, scope: dict[str, Any], fn: Callable[[], Any]) -> Any:
        """`in_block` for one branch of a runtime `if`; while a recursive function
        is built on trial, a branch reaching its recursive call gives the
        exception instead (the `if` then keeps only the other branch)."""
        try:
            return self.in_block(block, scope, fn)
        except _UnknownRecursiveResult as e:
            if e.key not in self.tc.trial:
                raise
            return e

    def only_branch(self, outcomes: list[Any], blocks: list[Block]) -> int | None:
        """After `branch` on both sides: the index of the only side that did not
        reach a trial recursive call, its ops moved to the current block (or
        None when both sides completed). Both sides failing re-raises."""
        failed = [isinstance(o, _UnknownRecursiveResult) for o in outcomes]
        if not any(failed):
            return None
        if all(failed):
            raise outcomes[0]
        k = failed.index(False)
        for op in list(blocks[k].ops):
            op.detach()
            self.block.add_op(op)
        return k


def _recursive_of(name: str, built: tuple) -> _Recursive:
    _, (structure, weak), ftype, captured = built
    return _Recursive(name, structure, list(weak), list(ftype.outputs.data), list(captured))


def _describe_types(rec: _Recursive) -> str:
    return ", ".join(f"{M.fmt_shape(M.shape_of(t))} {M.dtype_of(t)}" for t in rec.types) or "no array"
