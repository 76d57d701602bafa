"""Statements: bodies, assignments and the statements that are refused.

`run_body` translates a statement list and stops at a `return` (giving
`(_RETURN, value)`) or a `raise` (`msir.frontend.user_errors.RAISED`); an `if` whose branches return, and a loop containing
`return`, are handed to the control-flow translation (`msir.frontend.control_flow`).
Assignments bind names (tuples unpack, one starred target allowed); writes
into arrays and in-place updates of arrays another name sees are refused,
since arrays are values, and so are changes of objects (assigning to an
attribute or a dict item, `self.items.append(x)`), which compiled code only
reads, except assigning to an object's Parameter (`self.moving_mean = v`,
`self.count += 1`), which is `ops.assign` (`msir.frontend.parameter_writes`).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from msir.common.parameter import Parameter
from msir.errors import ShapeError, UnsupportedSyntaxError
from msir.frontend.expressions import _BINOPS, _op_symbol
from msir.frontend.parameter_writes import translate_assign
from msir.frontend.rewrites import _may_return
from msir.frontend.state import _RETURN, ObjectValue
from msir.frontend.values import Closure, Tensor
from msir.transforms import compile_time_kind

_MUTATING_METHODS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "sort", "reverse"}
"""List and dict methods that change their object: refused on attributes."""

_UNSUPPORTED_STMTS = {
    ast.Try: "try/except",
    ast.With: "with",
    ast.AsyncWith: "async with",
    ast.Global: "global declarations",
    ast.Nonlocal: "nonlocal declarations",
    ast.AsyncFor: "async for",
    ast.Delete: "del",
    ast.Import: "import",
    ast.ImportFrom: "import",
    ast.ClassDef: "class definitions",
    ast.AsyncFunctionDef: "async functions",
}


class StatementsMixin:
    """Statement lists, single statements and assignments."""

    def run_body(self, stmts: Sequence[ast.stmt]) -> Any:
        """Translate statements; returns (_RETURN, value) or None (fell off the end)."""
        stmts = list(stmts)
        for k, stmt in enumerate(stmts):
            if isinstance(stmt, (ast.For, ast.While)) and _may_return([stmt]):
                self.loc = self.source.loc(stmt)
                return self.loop_returning(stmt, stmts[k + 1 :])
            if isinstance(stmt, ast.If) and (_may_return(stmt.body) or _may_return(stmt.orelse)):
                self.loc = self.source.loc(stmt)
                cond = self.expr(stmt.test)
                if not isinstance(cond, Tensor):
                    taken = self.static_bool(cond, stmt.test, "an if condition")
                    return self.run_body((stmt.body if taken else stmt.orelse) + stmts[k + 1 :])
                # An early return: both branches continue with the rest of the body.
                rest = stmts[k + 1 :]
                return (_RETURN, self.if_returning(stmt, cond, list(stmt.body) + rest, list(stmt.orelse) + rest))
            result = self.stmt(stmt)
            if result is not None:
                return result
        return None

    def stmt(self, node: ast.stmt) -> Any:
        self.loc = self.source.loc(node)
        for cls, what in _UNSUPPORTED_STMTS.items():
            if isinstance(node, cls):
                raise self.unsupported(what, node)
        match node:
            case ast.Return(value=value):
                return (_RETURN, None if value is None else self.expr(value))
            case ast.Assign(targets=targets, value=value):
                v = self.expr(value)
                for t in targets:
                    if isinstance(t, ast.Name) and t.id in self.return_slots:
                        self.return_slots[t.id].append((v, node))
                    self.assign(t, v)
            case ast.AnnAssign(target=target, value=value) if value is not None:
                self.assign(target, self.expr(value))
            case ast.AugAssign(target=target, op=op, value=value):
                self.aug_assign(node, target, op, value)
            case ast.Expr(value=ast.Constant()):
                pass  # docstrings
            case ast.Expr(value=ast.Call(func=ast.Attribute(value=ast.Name(id=lname), attr="append"), args=[arg])) if isinstance(self.scope.get(lname), list):
                self.scope[lname].append(self.expr(arg))
            case ast.Expr(value=ast.Call(func=ast.Attribute(value=ast.Attribute() as owner, attr=method))) if method in _MUTATING_METHODS:
                raise self.error(
                    UnsupportedSyntaxError,
                    f"changing the attribute '{ast.unparse(owner)}' (.{method}()) is not supported in compiled "
                    "functions: compiled code reads objects and does not change them",
                    node.value,
                )
            case ast.Expr(value=ast.Yield() | ast.YieldFrom() | ast.Await() as value):
                self.expr(value)
            case ast.Expr(value=ast.Call(func=func) as call) if getattr(type(self.expr(func)), "__msir_effect__", False):
                self.expr(call)  # ops.assign: its effect is recorded by the trace (msir.frontend.parameter_writes)
            case ast.Expr(value=ast.Call(func=func) as call) if compile_time_kind(self.expr(func)) == "python":
                self.expr(call)  # a check at compile time (msir.nn.cell.check_input): nothing to emit
            case ast.Expr(value=value):
                raise self.unsupported(
                    "an expression statement (a call for its side effect, e.g. print)", value
                )
            case ast.Pass():
                pass
            case ast.Assert():
                self.assert_stmt(node)
            case ast.Raise():
                return self.raise_stmt(node)
            case ast.If(test=test, body=body, orelse=orelse):
                cond = self.expr(test)
                if isinstance(cond, Tensor):
                    return self.if_stmt(node, cond)
                return self.run_body(body if self.static_bool(cond, test, "an if condition") else orelse)
            case ast.For():
                self.for_stmt(node)
            case ast.While():
                self.while_stmt(node)
            case ast.Break() | ast.Continue():
                raise self.unsupported(f"'{type(node).__name__.lower()}' outside a loop", node)
            case ast.FunctionDef():
                if node.decorator_list:
                    raise self.unsupported("decorators on nested functions", node.decorator_list[0])
                defaults = [self.expr(d) for d in node.args.defaults]
                self.scope[node.name] = Closure(node, self.scope, self.source, defaults)
            case _:
                raise self.unsupported(f"the statement '{type(node).__name__}'", node)
        return None

    def assign(self, target: ast.expr, value: Any) -> None:
        match target:
            case ast.Name(id=name):
                self.scope[name] = value
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                starred = [i for i, e in enumerate(elts) if isinstance(e, ast.Starred)]
                if len(starred) > 1:
                    raise self.error(UnsupportedSyntaxError, "multiple starred expressions in assignment", target)
                if starred:
                    k = starred[0]
                    n_after = len(elts) - k - 1
                    items = self.unpack(value, None, target)
                    if len(items) < len(elts) - 1:
                        raise self.error(
                            ShapeError, f"not enough values to unpack (expected at least {len(elts) - 1}, got {len(items)})", target
                        )
                    rest = items[k : len(items) - n_after]
                    items = items[:k] + [rest] + items[len(items) - n_after :]
                    elts = [e.value if isinstance(e, ast.Starred) else e for e in elts]
                else:
                    items = self.unpack(value, len(elts), target)
                for t, v in zip(elts, items):
                    self.assign(t, v)
            case ast.Attribute(value=ast.Name() | ast.Attribute() as owner, attr=attr) if self.holds_parameter(
                owner, attr
            ):  # `self.moving_mean = v` sets the Parameter, as MindSpore's Graph mode does
                translate_assign(self, [self.object_attribute(self.expr(owner), attr, target), value], {}, target)
            case ast.Subscript(value=ast.Name() | ast.Attribute() as container) if isinstance(
                self.expr(container), ObjectValue
            ):
                raise self.error(
                    UnsupportedSyntaxError,
                    f"assigning to an item of '{ast.unparse(container)}' is not supported in compiled functions: "
                    "compiled code reads dicts and does not change them; return the new value instead",
                    target,
                )
            case ast.Subscript():
                raise self.error(
                    UnsupportedSyntaxError,
                    "in-place array writes (x[...] = v) are not supported in compiled functions; "
                    "arrays are values: build a new one (np.where, np.concatenate)",
                    target,
                )
            case ast.Attribute():
                raise self.error(
                    UnsupportedSyntaxError,
                    f"assigning to the attribute '{ast.unparse(target)}' is not supported in compiled functions: "
                    "compiled code reads objects and does not change them; return the new value instead",
                    target,
                )
            case _:
                raise self.unsupported(f"assigning to '{type(target).__name__}'", target)

    def unpack(self, value: Any, n: int | None, node: ast.AST) -> list[Any]:
        if isinstance(value, (tuple, list)):
            items = list(value)
        elif isinstance(value, Tensor) and value.ndim > 0:
            items = [self.index(value, i, node) for i in range(self.rows(value, node))]
        else:
            raise self.error(UnsupportedSyntaxError, f"cannot unpack {self.describe(value)}", node)
        if n is not None and len(items) != n:
            raise self.error(
                ShapeError, f"cannot unpack {len(items)} values into {n} targets", node
            )
        return items

    def holds_parameter(self, owner: ast.expr, attr: str) -> bool:
        """Is `owner.attr` a Parameter of an object (an assignment to it is `ops.assign`)?"""
        obj = self.expr(owner)
        return isinstance(obj, ObjectValue) and isinstance(getattr(obj.obj, attr, None), Parameter)

    def aug_assign(self, node: ast.AugAssign, target: ast.expr, op: ast.operator, value: ast.expr) -> None:
        if isinstance(target, ast.Attribute) and isinstance(target.value, (ast.Name, ast.Attribute)) \
                and self.holds_parameter(target.value, target.attr):
            self.assign(target, self.binary(_BINOPS[type(op)], self.expr(target), self.expr(value), node))
            return
        if not isinstance(target, ast.Name):
            if isinstance(target, (ast.Subscript, ast.Attribute)):
                self.assign(target, None)
            raise self.unsupported("augmented assignment to this target", target)
        old = self.lookup(target.id, target)
        if isinstance(old, Tensor):
            aliases = [k for k, v in self.scope.items() if v is old and k != target.id]
            if aliases or old in self.tc.capture_values.values() or id(old) in self.params:
                other = f"'{aliases[0]}'" if aliases else "the caller"
                raise self.error(
                    UnsupportedSyntaxError,
                    f"in-place update of array '{target.id}' that {other} also sees; NumPy would "
                    f"change it there too. Write '{target.id} = {target.id} {_op_symbol(op)} ...'",
                    node,
                )
        self.scope[target.id] = self.binary(_BINOPS[type(op)], old, self.expr(value), node)
