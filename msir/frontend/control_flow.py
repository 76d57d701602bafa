"""Control flow: `if`, conditional expressions, `for` and `while` on runtime values.

A condition known at compile time picks a branch (the other is not
translated); a runtime condition becomes `msir.if`, whose results are the
variables either branch assigns. `for` over a tuple or list, or over a static
`range` whose body builds a list, is unrolled; other `for`s become
`msir.for`, `while` becomes `msir.while`, their carried values the variables
the body assigns. `break`/`continue` become flags (`msir.frontend.rewrites`).

Dtype joins (`join_dtype`): a value that reaches the code after an `if` (or
the next iteration of a loop) from two paths gets one dtype, although in NumPy
it has the dtype of the path taken at run time. The join is made for equal
dtypes, and for a Python scalar meeting an array or NumPy scalar whose dtype
the scalar takes when they meet (NEP 50: the accumulator `acc = 0.0` of a
float32 loop; the one approximation kept: when the scalar's path is taken,
e.g. after zero iterations, the value has the array's dtype instead of being
a Python number). Any other pair (int64 and float64, float32 and float64, bool
and int, a Python int and a Python float, a Python float and an integer array)
is refused with a `DTypeError` naming the variable, both dtypes and the line
of the `if` or loop, except where the path is known at compile time: a
condition known at compile time takes one branch only, and a `for` over a
range of Python ints whose body changes a dtype is specialised on the bounds
and its first iterations peeled off until the dtypes stay (`peel`), so both
have exactly NumPy's dtypes.

`return` inside loops (`loop_returning`) becomes a loop-carried `returned` flag
and return value: every loop of the nest is left through `break`, and after the
outermost one an early return selects the returned value or continues.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.ir import Attribute, Block, Operation, Region

from msir.dialects import msir as M
from msir.errors import DTypeError, ShapeError, UnsupportedSyntaxError
from msir.frontend.base import TypeError_, ValueError_
from msir.frontend.rewrites import _appends, _assigned, _endless, _has_jump, _lower_jumps, _lower_returns, _returns, _Sub
from msir.frontend.state import _MAX_UNROLL, RangeValue, _Undefined
from msir.frontend.structure import _rebuild
from msir.frontend.user_errors import RAISED
from msir.frontend.values import Closure, KnownInt, Tensor, promote


class ControlFlowMixin:
    """Runtime and compile-time `if`, loops, early returns."""

    def truth(self, cond: Tensor, node: ast.AST) -> Tensor:
        """A condition as a rank-0 bool (Python truthiness of a scalar)."""
        if cond.ndim != 0:
            raise self.error(
                ValueError_,
                f"the truth value of an array of shape {M.fmt_shape(cond.shape)} is ambiguous; "
                "use .any() / .all() or np.where",
                node,
            )
        return cond if cond.dtype == "bool" else self.compare("ne", cond, 0, node)

    def new_block(self, arg_types: Sequence[Attribute] = ()) -> Block:
        block = Block(arg_types=list(arg_types))
        self.tc.block_fn[block] = self.fn_block
        return block

    def in_block(self, block: Block, scope: dict[str, Any], fn: Callable[[], Any]) -> tuple[dict[str, Any], Any]:
        """Translate `fn()` with ops going to `block` and variables in a copy of `scope`."""
        saved_block, saved_scope, saved_loc = self.block, self.scope, self.loc
        self.block, self.scope = block, dict(scope)
        try:
            result = fn()
            return self.scope, result
        finally:
            self.block, self.scope, self.loc = saved_block, saved_scope, saved_loc

    def to_tensors(self, value: Any, node: ast.AST, what: str) -> tuple[Any, list[Tensor]]:
        """A value made of runtime leaves: its structure and leaves (numbers become weak tensors)."""
        if isinstance(value, (tuple, list)):
            parts = [self.to_tensors(v, node, what) for v in value]
            leaves = [leaf for _, ls in parts for leaf in ls]
            return (type(value).__name__, [st for st, _ in parts]), leaves
        if isinstance(value, (bool, int, float, KnownInt, Tensor)):
            return ("leaf", 0), [self.as_tensor(value, node)]
        raise self.error(UnsupportedSyntaxError, f"{what} holds {self.describe(value)}, which cannot change at run time", node)

    def unify(self, a: list[Tensor], b: list[Tensor], names: list[str], node: ast.AST,
              paths: tuple[str, str] | None = None) -> list[tuple[str, bool]]:
        """The joined (dtype, weak) of each pair of leaves, which must have equal
        shapes and dtypes that join exactly (`join_dtype`); `paths` names where
        each side comes from, for the error."""
        if paths is None:
            paths = ((f"on one side of the conditional expression at line {node.lineno}", "on the other")
                     if isinstance(node, ast.IfExp) else (f"in one branch of the if at line {node.lineno}", "in the other"))
        dtypes = []
        for x, y, name in zip(a, b, names):
            what = name if name.startswith("the ") else f"variable '{name}'"
            if M.DYNAMIC in x.shape or M.DYNAMIC in y.shape:
                raise self.error(
                    ShapeError,
                    f"{what} has a runtime length (from a boolean mask or np.arange) {paths[0]}: a value of "
                    "runtime length cannot leave an if or cross loop iterations yet; compute it where it is used",
                    node,
                )
            if x.shape != y.shape:
                raise self.error(
                    ShapeError,
                    f"{what} has shape {M.fmt_shape(x.shape)} on one path and "
                    f"{M.fmt_shape(y.shape)} on the other; it must keep one shape",
                    node,
                )
            dtypes.append(self.join_dtype((x.dtype, x.weak), (y.dtype, y.weak), what, node, paths))
        return dtypes

    def join_dtype(self, a: tuple[str, bool], b: tuple[str, bool], what: str, node: ast.AST,
                   paths: tuple[str, str]) -> tuple[str, bool]:
        """The one (dtype, weak) of a value reaching a point with (dtype, weak)
        `a` or `b`, when that cannot change an answer (see the module
        docstring); else a DTypeError naming both dtypes and the paths."""
        joined = promote(*a, *b)
        if a == b:
            return joined
        if a[1] != b[1] and joined == (b if a[1] else a):  # the Python scalar takes the array's dtype
            return joined
        reason = "how many iterations run" if isinstance(node, (ast.For, ast.While)) else "the path taken"
        raise self.error(
            DTypeError,
            f"{what} is {_dtype_phrase(a)} {paths[0]} and {_dtype_phrase(b)} {paths[1]}; "
            f"in NumPy its dtype would depend on {reason} at run time: give it one dtype on every path "
            "(e.g. with .astype(...) or np.asarray(..., dtype))",
            node,
        )

    # -- if -----------------------------------------------------------------

    def if_stmt(self, node: ast.If, cond: Tensor) -> None:
        """A runtime `if`: every variable a branch assigns becomes a result of msir.if."""
        c = self.truth(cond, node.test)
        names = sorted(_assigned(node.body) | _assigned(node.orelse))
        before = self.scope
        then_block, else_block = self.new_block(), self.new_block()
        outcomes = [
            self.branch(then_block, before, lambda: self.run_body(node.body)),
            self.branch(else_block, before, lambda: self.run_body(node.orelse)),
        ]
        k = self.only_branch(outcomes, [then_block, else_block])
        if k is not None:
            self.scope = outcomes[k][0]
            return None
        if any(result is RAISED for _, result in outcomes):
            return self.if_raising(c, outcomes, [then_block, else_block])
        (then_scope, _), (else_scope, _) = outcomes
        merged, undefined = [], {}
        for name in names:
            in_then, in_else = name in then_scope, name in else_scope
            if not (in_then and in_else) or isinstance(then_scope[name], _Undefined) or isinstance(else_scope[name], _Undefined):
                undefined[name] = _Undefined(f"is assigned in only one branch of the if at line {node.lineno}")
                continue
            tv, ev = then_scope[name], else_scope[name]
            if tv is ev or (_is_static(tv) and _is_static(ev) and type(tv) is type(ev) and tv == ev):
                self.scope[name] = tv
                continue
            if _is_callable_value(tv) and _is_callable_value(ev):
                self.scope[name] = CallableChoice(c, tv, ev)
                continue
            merged.append(name)
        struct_t, leaves_t, struct_e, leaves_e = {}, [], {}, []
        for name in merged:
            self.block, saved = then_block, self.block
            st, lt = self.to_tensors(then_scope[name], node, f"variable '{name}'")
            self.block = else_block
            se, le = self.to_tensors(else_scope[name], node, f"variable '{name}'")
            self.block = saved
            if st != se:
                raise self.error(
                    UnsupportedSyntaxError, f"variable '{name}' has a different structure in the two branches", node
                )
            struct_t[name] = st
            leaves_t += [(name, x) for x in lt]
            leaves_e += le
        names_flat = [n for n, _ in leaves_t]
        lt = [x for _, x in leaves_t]
        dtypes = self.unify(lt, leaves_e, names_flat, node)
        results = self.emit_if(c, then_block, else_block, lt, leaves_e, dtypes)
        it = iter(results)
        for name in merged:
            self.scope[name] = _rebuild(struct_t[name], it)
        self.scope.update(undefined)

    def if_raising(self, c: Tensor, outcomes: list[Any], blocks: list[Block]) -> Any:
        """A runtime `if` with a branch that raises: an msir.if without results
        runs the raising branch (its failing msir.check); the other branch's ops
        follow it in the current block, and its variables are the if's. Both
        branches raising: the body raises here."""
        raised = [result is RAISED for _, result in outcomes]
        moved: list[Operation] = []
        if not all(raised):
            k = raised.index(False)
            moved = list(blocks[k].ops)
            for op in moved:
                op.detach()
        for block in blocks:
            block.add_op(M.YieldOp())
        self.emit(M.IfOp(c.ssa, [], Region(blocks[0]), Region(blocks[1])))
        if all(raised):
            return RAISED
        for op in moved:
            self.block.add_op(op)
        self.scope = outcomes[k][0]
        return None

    def emit_if(self, c: Tensor, then_block: Block, else_block: Block, lt, le, dtypes) -> list[Tensor]:
        for block, leaves in ((then_block, lt), (else_block, le)):
            self.block, saved = block, self.block
            ys = [self.cast(x, d, w).ssa for x, (d, w) in zip(leaves, dtypes)]
            self.block = saved
            block.add_op(M.YieldOp(*ys))
        types = [M.tensor_type(x.shape, d) for x, (d, _) in zip(lt, dtypes)]
        op = self.emit(M.IfOp(c.ssa, types, Region(then_block), Region(else_block)))
        return [Tensor(r, d, x.shape, w) for r, x, (d, w) in zip(op.results, lt, dtypes)]

    def if_expr(self, node: ast.IfExp, cond: Tensor) -> Any:
        """`a if c else b` on a runtime condition: only the taken side runs."""
        c = self.truth(cond, node.test)
        blocks = [self.new_block(), self.new_block()]
        outcomes = [
            self.branch(block, self.scope, lambda expr=expr: self.expr(expr))
            for block, expr in zip(blocks, (node.body, node.orelse))
        ]
        k = self.only_branch(outcomes, blocks)
        if k is not None:
            return outcomes[k][1]
        values = [value for _, value in outcomes]
        if all(_is_callable_value(v) for v in values):
            return self.choose_callable(c, values, blocks, node)
        structs, leaves = [], []
        for block, (_, value) in zip(blocks, outcomes):
            self.block, saved = block, self.block
            st, ls = self.to_tensors(value, node, "a conditional expression")
            self.block = saved
            structs.append(st)
            leaves.append(ls)
        if structs[0] != structs[1]:
            raise self.error(UnsupportedSyntaxError, "the two sides of a conditional expression differ in structure", node)
        dtypes = self.unify(leaves[0], leaves[1], ["the conditional expression"] * len(leaves[0]), node)
        return _rebuild(structs[0], iter(self.emit_if(c, blocks[0], blocks[1], leaves[0], leaves[1], dtypes)))

    def choose_callable(self, c: Tensor, values: list[Any], blocks: list[Block], node: ast.AST) -> CallableChoice:
        """`g if c else h` of two functions (or an `if` whose branches return
        them): a choice to call later. The ops the branches emitted on the way
        run unconditionally, which is right for values, not for checks."""
        if any(isinstance(op, M.CheckOp) for block in blocks for op in block.walk()):
            raise self.error(UnsupportedSyntaxError, "an assert or raise in a branch that chooses a function at run "
                             "time is not supported; check before the if", node)
        for block in blocks:
            for op in list(block.ops):
                op.detach()
                self.block.add_op(op)
        return CallableChoice(c, values[0], values[1])

    def call_choice(self, fn: CallableChoice, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """Call the function chosen at run time: each option in a branch of an
        msir.if, whose results must agree in structure (their dtypes join)."""
        blocks = [self.new_block(), self.new_block()]
        outcomes = [
            self.branch(block, self.scope, lambda option=option: self.call_value(option, args, kwargs, node))
            for block, option in zip(blocks, (fn.then, fn.other))
        ]
        k = self.only_branch(outcomes, blocks)
        if k is not None:
            return outcomes[k][1]
        structs, leaves = [], []
        for block, (_, value) in zip(blocks, outcomes):
            self.block, saved = block, self.block
            st, ls = self.to_tensors(value, node, "the result of a function chosen at run time")
            self.block = saved
            structs.append(st)
            leaves.append(ls)
        if structs[0] != structs[1]:
            raise self.error(UnsupportedSyntaxError, "the functions a runtime condition chooses between return "
                             "results of different structures", node)
        dtypes = self.unify(leaves[0], leaves[1], ["the chosen function's result"] * len(leaves[0]), node)
        return _rebuild(structs[0], iter(self.emit_if(fn.cond, blocks[0], blocks[1], leaves[0], leaves[1], dtypes)))

    def if_returning(self, node: ast.If, cond: Tensor, then_stmts, else_stmts) -> Any:
        """An `if` whose branches end the function: msir.if yields the returned values."""
        c = self.truth(cond, node.test)
        then_block, else_block = self.new_block(), self.new_block()
        outcomes = [
            self.branch(block, self.scope, lambda stmts=stmts: self.run_body(stmts))
            for block, stmts in ((then_block, then_stmts), (else_block, else_stmts))
        ]
        k = self.only_branch(outcomes, [then_block, else_block])
        if k is not None:
            result = outcomes[k][1]
            return None if result is None else result[1]
        values = [None if result is None else result[1] for _, result in outcomes]
        if all(_is_callable_value(v) for v in values):
            return self.choose_callable(c, values, [then_block, else_block], node)
        if (values[0] is None) != (values[1] is None):
            raise self.error(
                UnsupportedSyntaxError,
                "the function returns a value on one path and falls off its end (returning None) on another",
                node,
            )
        self.block, saved = then_block, self.block
        st, lt = self.to_tensors(values[0], node, "the returned value")
        self.block = else_block
        se, le = self.to_tensors(values[1], node, "the returned value")
        self.block = saved
        if st != se:
            raise self.error(
                UnsupportedSyntaxError, "the function returns values of different structures on different paths", node
            )
        dtypes = self.unify(lt, le, ["the returned value"] * len(lt), node)
        return _rebuild(st, iter(self.emit_if(c, then_block, else_block, lt, le, dtypes)))

    # -- loops --------------------------------------------------------------

    def loop_returning(self, node: ast.For | ast.While, rest: list[ast.stmt]) -> Any:
        """A loop containing `return`: each `return v` becomes `returned = True;
        value = v; break` (through every enclosing loop of the nest), both carried
        by the loops; after the loop, `if returned: return value` is an early
        return that continues with `rest` otherwise."""
        returns = _returns(node.body)
        for r in returns:
            if r.value is None:
                raise self.error(
                    UnsupportedSyntaxError, "a bare 'return' inside a loop (the function would return None)", r
                )
        tag = f"{node.lineno}_{node.col_offset}"
        flag, slot = f"__msir_returned_{tag}", f"__msir_return_value_{tag}"
        loop = copy.copy(node)
        loop.body = _lower_returns(node.body, flag, slot)
        self.scope[flag] = self.constant(False, "bool", weak=True)
        self.scope[slot] = self.return_placeholder(loop, slot)
        self.stmt(loop)
        first = returns[0]
        if _endless(node):  # only a return leaves it: what follows never runs
            guard = ast.Return(value=ast.Name(id=slot, ctx=ast.Load()))
            for n_ in ast.walk(guard):
                ast.copy_location(n_, first)
            return self.run_body([guard])
        guard = ast.If(
            test=ast.Name(id=flag, ctx=ast.Load()),
            body=[ast.Return(value=ast.Name(id=slot, ctx=ast.Load()))],
            orelse=[],
        )
        for n_ in ast.walk(guard):
            ast.copy_location(n_, first)
        return self.run_body([guard, *rest])

    def return_placeholder(self, loop: ast.stmt, slot: str) -> Any:
        """The initial (never returned) value of a loop's return slot: zeros of the
        type every `return` in the loop gives, found by translating the loop once
        aside. The returns must agree in structure and shapes."""
        self.return_slots[slot] = observed = []
        try:
            self.in_block(self.new_block(), self.scope, lambda: self.stmt(loop))
        finally:
            del self.return_slots[slot]
        aside = self.new_block()
        self.block, saved = aside, self.block
        try:
            typed = [(self.to_tensors(v, r, "the returned value"), r) for v, r in observed]
        finally:
            self.block = saved
        (struct, leaves), first = typed[0]
        dtypes = [(x.dtype, x.weak) for x in leaves]
        for (st, ls), r in typed[1:]:
            if st != struct:
                raise self.error(
                    UnsupportedSyntaxError,
                    f"this return gives a value of another structure than the return at line {first.lineno}",
                    r,
                )
            for k, (x, y) in enumerate(zip(leaves, ls)):
                if x.shape != y.shape:
                    raise self.error(
                        ShapeError,
                        f"this return gives shape {M.fmt_shape(y.shape)} where the return at line "
                        f"{first.lineno} gives {M.fmt_shape(x.shape)}; every return must give the same shapes",
                        r,
                    )
                dtypes[k] = self.join_dtype(dtypes[k], (y.dtype, y.weak), "the returned value", r,
                                            (f"at the return at line {first.lineno}", "at this return"))
        zeros = [self.broadcast(self.constant(0, d, w), x.shape) for x, (d, w) in zip(leaves, dtypes)]
        return _rebuild(struct, iter(zeros))

    def loop_carried(self, body: Sequence[ast.stmt], node: ast.AST, exclude: set[str]) -> list[str]:
        assigned = _assigned(body) - exclude
        carried = []
        for name in sorted(assigned):
            v = self.scope.get(name)
            if name in self.scope and not isinstance(v, (_Undefined, Closure)) and not _is_static_non_number(v):
                carried.append(name)
        return carried

    def loop(self, node: ast.AST, names: list[str], build) -> None:
        """Build a loop whose carried variables are `names`; `build(inits, structs)`
        creates the op for initial leaves and returns its results. Dtypes that
        change in the body (a Python float meeting float32) are promoted and the
        body translated again."""
        structs, inits, labels = {}, [], []
        for name in names:
            st, leaves = self.to_tensors(self.scope[name], node, f"variable '{name}'")
            structs[name] = st
            inits += leaves
            labels += [name] * len(leaves)
        for _ in range(4):
            result = build(inits, structs, labels)
            if result is not None:
                break
        else:
            raise self.error(UnsupportedSyntaxError, "loop-carried variables keep changing dtype", node)
        it = iter(result)
        for name in names:
            self.scope[name] = _rebuild(structs[name], it)

    def body_block(self, stmts, inits: list[Tensor], structs, names, extra: list[tuple[str, Tensor]], node, labels,
                   peelable: bool = False):
        """Translate a loop body whose carried leaves are block arguments; returns
        (block, yielded leaves) or (None, promoted inits) when a dtype changed
        and joins exactly. A dtype change that does not join exactly raises
        `_DTypeChanges` when the loop is `peelable` (a static trip count:
        `peel`), a DTypeError otherwise."""
        block = self.new_block([x.ssa.type for _, x in extra] + [x.ssa.type for x in inits])
        args = list(block.args)
        scope = dict(self.scope)
        for (name, x), a in zip(extra, args):
            scope[name] = Tensor(a, x.dtype, x.shape, x.weak)
        it = iter(Tensor(a, x.dtype, x.shape, x.weak) for a, x in zip(args[len(extra) :], inits))
        for name in names:
            scope[name] = _rebuild(structs[name], it)

        def run():
            result = self.run_body(stmts)
            assert result is None or result is RAISED, "returns inside loops are lowered by loop_returning"
            out = []
            for name in names:
                _, leaves = self.to_tensors(self.scope[name], node, f"variable '{name}'")
                out += leaves
            return out

        body_scope, outs = self.in_block(block, scope, run)
        try:
            dtypes = self.unify(inits, outs, labels, node,
                                (f"before an iteration of the loop at line {node.lineno}", "after it"))
        except DTypeError:
            if peelable:
                raise _DTypeChanges() from None
            raise
        if any(d != x.dtype or w != x.weak for (d, w), x in zip(dtypes, inits)):
            return None, [self.cast(x, d, w) for x, (d, w) in zip(inits, dtypes)]
        self.block, saved = block, self.block
        ys = [self.cast(y, x.dtype, x.weak).ssa for y, x in zip(outs, inits)]
        self.block = saved
        block.add_op(M.YieldOp(*ys))
        self.mark_loop_locals(stmts, names, node)
        return block, None

    def mark_loop_locals(self, stmts, names, node) -> None:
        for name in _assigned(stmts) - set(names):
            if name not in self.scope or isinstance(self.scope[name], _Undefined):
                self.scope[name] = _Undefined(
                    f"is assigned only inside the loop at line {node.lineno}; define it before the loop"
                )

    def jump_flags(self, node: ast.AST, body: Sequence[ast.stmt]) -> tuple[list[ast.stmt], str | None]:
        """A loop body with break/continue rewritten into flags (see `_lower_jumps`)."""
        if not _has_jump(body):
            return list(body), None
        brk, cont = f"__msir_break_{node.lineno}_{node.col_offset}", f"__msir_continue_{node.lineno}_{node.col_offset}"
        self.scope[brk] = self.constant(False, "bool", weak=True)
        reset = ast.copy_location(ast.Assign(targets=[ast.Name(id=cont, ctx=ast.Store())], value=ast.Constant(False)), body[0])
        self.scope[cont] = self.constant(False, "bool", weak=True)
        return [reset, *_lower_jumps(body, brk, cont)], brk

    def for_stmt(self, node: ast.For) -> None:
        if node.orelse:
            raise self.unsupported("for ... else", node)
        body, brk = self.jump_flags(node, node.body)
        if brk is not None:
            # After a break, the remaining iterations do nothing.
            guard = ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=brk, ctx=ast.Load()))
            for n_ in ast.walk(guard):
                ast.copy_location(n_, node)
            body = [ast.copy_location(ast.If(test=guard, body=body, orelse=[]), node)]
        node = ast.copy_location(ast.For(target=node.target, iter=node.iter, body=body, orelse=[]), node)
        self.for_over(node, self.expr(node.iter))

    def for_over(self, node: ast.For, it: Any, peeled: int = 0) -> None:
        """A `for` (its jumps already lowered) over the value `it`, after
        `peeled` of its first iterations were translated on their own (`peel`)."""
        if isinstance(it, (tuple, list)) or (isinstance(it, RangeValue) and it.static and _appends(node.body)):
            items = list(it) if not isinstance(it, RangeValue) else list(range(*it.static))
            if len(items) > _MAX_UNROLL:
                raise self.error(UnsupportedSyntaxError, f"a loop building a list unrolls at most {_MAX_UNROLL} iterations", node)
            for item in items:
                self.assign(node.target, item)
                result = self.run_body(node.body)
                assert result is None or result is RAISED, "returns inside loops are lowered by loop_returning"
            return
        if _appends(node.body):
            raise self.error(
                UnsupportedSyntaxError,
                "appending to a list in a loop needs a trip count known at compile time", node,
            )
        array = None
        if isinstance(it, Tensor):
            if it.ndim == 0:
                raise self.error(TypeError_, "iteration over a 0-d array", node)
            array, it = it, RangeValue(0, self.rows(it, node), 1)
        if not isinstance(it, RangeValue):
            raise self.error(UnsupportedSyntaxError, f"iterating over {self.describe(it)}", node.iter)
        if not isinstance(node.target, ast.Name) and array is None:
            raise self.unsupported("this loop target", node.target)
        bounds = [self.cast(self.as_tensor(b, node), "int64", True) for b in (it.start, it.stop, it.step)]
        if isinstance(it.step, int) and it.step == 0:
            raise self.error(ValueError_, "range() arg 3 must not be zero", node)
        target_names = _assigned([ast.Assign(targets=[node.target], value=ast.Constant(0))])
        names = self.loop_carried(node.body, node, target_names)
        counter = Tensor(bounds[0].ssa, "int64", (), True)
        # a range of Python ints known now: peeling can specialise on them
        peelable = array is None and peeled < _MAX_PEEL and all(
            isinstance(b, KnownInt) or (isinstance(b, int) and not isinstance(b, bool))
            for b in (it.start, it.stop, it.step))

        def build(inits, structs, labels):
            stmts = node.body
            if array is not None:
                # `for row in array`: the body starts with row = array[i].
                stmts = [ast.Assign(targets=[node.target], value=_Sub("__msir_iter_array", "__msir_iter_index"), lineno=node.lineno, col_offset=node.col_offset)] + list(node.body)
                self.scope["__msir_iter_array"] = array
                extra = [("__msir_iter_index", counter)]
            else:
                extra = [(node.target.id, counter)]
            block, promoted = self.body_block(stmts, inits, structs, names, extra, node, labels,
                                              peelable=peelable)
            if block is None:
                inits[:] = promoted
                return None
            op = self.emit(M.ForOp(bounds[0].ssa, bounds[1].ssa, bounds[2].ssa, [x.ssa for x in inits], Region(block)))
            return [Tensor(r, x.dtype, x.shape, x.weak) for r, x in zip(op.results, inits)]

        try:
            self.loop(node, names, build)
        except _DTypeChanges:
            self.scope.pop("__msir_iter_array", None)
            self.scope.pop("__msir_iter_index", None)
            self.peel(node, it, peeled)
            return
        self.scope.pop("__msir_iter_array", None)
        self.scope.pop("__msir_iter_index", None)
        for name in target_names:
            self.scope[name] = _Undefined(f"is the target of the loop at line {node.lineno}; its last value is not kept")

    def peel(self, node: ast.For, it: RangeValue, peeled: int) -> None:
        """A `for` over a range of Python ints whose body changes a carried
        dtype: the function is specialised on the bounds, the first iteration
        is translated on its own, with the dtypes NumPy has then, and the loop
        continues over the rest of the range (peeling again while the dtypes
        change, at most `_MAX_PEEL` times), so every dtype is NumPy's."""
        start, stop, step = (self.static_int(b, "a range bound", node) for b in (it.start, it.stop, it.step))
        if not range(start, stop, step):
            return  # no iteration runs: every variable keeps its dtype
        self.assign(node.target, start)
        result = self.run_body(node.body)
        assert result is None or result is RAISED, "returns inside loops are lowered by loop_returning"
        self.for_over(node, RangeValue(start + step, stop, step), peeled + 1)

    def while_stmt(self, node: ast.While) -> None:
        if node.orelse:
            raise self.unsupported("while ... else", node)
        body, brk = self.jump_flags(node, node.body)
        if brk is not None:
            not_broken = ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=brk, ctx=ast.Load()))
            test = ast.BoolOp(op=ast.And(), values=[not_broken, node.test])
            for n_ in ast.walk(not_broken):
                ast.copy_location(n_, node.test)
            ast.copy_location(test, node.test)
            node = ast.copy_location(ast.While(test=test, body=body, orelse=[]), node)
        test = self.expr(node.test)
        if not isinstance(test, Tensor) and not self.static_bool(test, node.test, "a while condition"):
            return
        names = self.loop_carried(node.body, node, set())
        if not names:
            raise self.error(
                UnsupportedSyntaxError, "a while loop whose body assigns no variable defined before it never ends", node
            )

        def build(inits, structs, labels):
            cond_block = self.new_block([x.ssa.type for x in inits])
            scope = dict(self.scope)
            it = iter(Tensor(a, x.dtype, x.shape, x.weak) for a, x in zip(cond_block.args, inits))
            for name in names:
                scope[name] = _rebuild(structs[name], it)

            def cond():
                v = self.expr(node.test)
                t = self.truth(self.as_tensor(v, node.test), node.test)
                self.block.add_op(M.ConditionOp(t.ssa))

            self.in_block(cond_block, scope, cond)
            block, promoted = self.body_block(node.body, inits, structs, names, [], node, labels)
            if block is None:
                inits[:] = promoted
                return None
            op = self.emit(M.WhileOp([x.ssa for x in inits], Region(cond_block), Region(block)))
            return [Tensor(r, x.dtype, x.shape, x.weak) for r, x in zip(op.results, inits)]

        self.loop(node, names, build)


_MAX_PEEL = 4
"""Iterations peeled off a loop at most (each a dtype change: bool, int, float32, float64)."""


class _DTypeChanges(Exception):
    """A carried dtype of a loop over a static range changes inexactly (`peel`)."""


@dataclass(frozen=True)
class CallableChoice:
    """A function chosen at run time, defunctionalised: `then` where the rank-0
    bool `cond` holds, else `other` (each a known callable, or a choice again,
    so a chain of ifs tags one closure among several). Calling it calls each
    option in a branch of one msir.if."""

    cond: Tensor
    then: Any
    other: Any


def _is_callable_value(v: Any) -> bool:
    """A function value a runtime choice may pick: a closure, a user or library function, a choice."""
    return isinstance(v, (Closure, CallableChoice)) or (callable(v) and not isinstance(v, type)
                                                        and not isinstance(v, (Tensor, KnownInt)))


def _dtype_phrase(dtype_weak: tuple[str, bool]) -> str:
    dtype, weak = dtype_weak
    if weak:
        return {"bool": "a Python bool", "int64": "a Python int"}.get(dtype, "a Python float")
    return dtype


def _is_static(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _is_static_non_number(v: Any) -> bool:
    """Compile-time values a loop cannot carry (functions, modules, dtypes...)."""
    if isinstance(v, (tuple, list)):
        return any(_is_static_non_number(x) for x in v)
    return not isinstance(v, (bool, int, float, KnownInt, Tensor))
