"""AST analyses and rewrites for control flow.

Pure functions on Python ASTs, no IR: which names a body assigns, whether it
breaks, continues or returns, and the rewrites that lower `break`/`continue`
(`_lower_jumps`) and `return` inside loops (`_lower_returns`) into flag
variables the loops carry.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence


def _Sub(array_name: str, index_name: str) -> ast.Subscript:
    return ast.Subscript(value=ast.Name(id=array_name, ctx=ast.Load()), slice=ast.Name(id=index_name, ctx=ast.Load()), ctx=ast.Load())


def _assigned(stmts: Sequence[ast.stmt]) -> set[str]:
    """Names a statement list assigns (not inside nested functions)."""
    names: set[str] = set()

    def targets(t: ast.AST) -> None:
        if isinstance(t, ast.Name):
            names.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    def walk(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef, ast.ClassDef)):
            if isinstance(node, ast.FunctionDef):
                names.add(node.name)
            return
        if isinstance(node, ast.Assign):
            for t in node.targets:
                targets(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            targets(node.target)
        elif isinstance(node, ast.NamedExpr):
            targets(node.target)
        for child in ast.iter_child_nodes(node):
            walk(child)

    for s_ in stmts:
        walk(s_)
    return names


def _has_jump(stmts: Sequence[ast.stmt]) -> bool:
    """Does a loop body contain a break/continue of this loop (not of a nested one)?"""

    def walk(node: ast.AST) -> bool:
        if isinstance(node, (ast.Break, ast.Continue)):
            return True
        if isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.AsyncFor)):
            return False
        return any(walk(c) for c in ast.iter_child_nodes(node))

    return any(walk(s_) for s_ in stmts)


def _lower_jumps(stmts: Sequence[ast.stmt], brk: str, cont: str) -> list[ast.stmt]:
    """Rewrite break/continue into flag assignments, guarding what follows them:
    `break` sets `brk`, `continue` sets `cont`, and every statement after one that
    may jump runs under `if not (brk or cont)`."""
    out: list[ast.stmt] = []
    for k, st in enumerate(stmts):
        if isinstance(st, (ast.Break, ast.Continue)):
            flag = brk if isinstance(st, ast.Break) else cont
            out.append(ast.copy_location(
                ast.Assign(targets=[ast.Name(id=flag, ctx=ast.Store())], value=ast.Constant(True)), st
            ))
            return out  # the rest of the block never runs
        if isinstance(st, ast.If) and _has_jump([st]):
            new_if = ast.copy_location(
                ast.If(test=st.test, body=_lower_jumps(st.body, brk, cont) or [ast.Pass()],
                       orelse=_lower_jumps(st.orelse, brk, cont)), st
            )
            out.append(new_if)
            rest = list(stmts[k + 1 :])
            if rest:
                guard = ast.UnaryOp(op=ast.Not(), operand=ast.BoolOp(op=ast.Or(), values=[
                    ast.Name(id=brk, ctx=ast.Load()), ast.Name(id=cont, ctx=ast.Load())]))
                ast.copy_location(guard, rest[0])
                for node in ast.walk(guard):
                    ast.copy_location(node, rest[0])
                out.append(ast.copy_location(ast.If(test=guard, body=_lower_jumps(rest, brk, cont), orelse=[]), rest[0]))
            return out
        if isinstance(st, (ast.With, ast.Try)) and _has_jump([st]):
            out.append(st)  # refused later as unsupported syntax anyway
            continue
        out.append(st)
    return out


def _returns(stmts: Sequence[ast.stmt]) -> list[ast.Return]:
    """The `return` statements of a statement list (not of nested functions)."""
    found: list[ast.Return] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            for child in ast.iter_child_nodes(node):
                walk(child)

    for s_ in stmts:
        walk(s_)
    return found


def _endless(node: ast.stmt) -> bool:
    """`while True:` without a `break` of its own: only a return leaves it."""
    if not (isinstance(node, ast.While) and isinstance(node.test, ast.Constant) and node.test.value):
        return False

    def breaks(n: ast.AST) -> bool:
        if isinstance(n, ast.Break):
            return True
        if isinstance(n, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.Lambda)):
            return False
        return any(breaks(c) for c in ast.iter_child_nodes(n))

    return not any(breaks(st) for st in node.body)


def _may_return(stmts: Sequence[ast.stmt]) -> bool:
    return bool(_returns(stmts))


def _lower_returns(stmts: Sequence[ast.stmt], flag: str, slot: str) -> list[ast.stmt]:
    """Rewrite the returns of a loop body: `return v` becomes `flag = True;
    slot = v; break`, and a nested loop that may return is followed by
    `if flag: break`, so a return leaves every loop of the nest (`break` is then
    lowered by `_lower_jumps`)."""

    def at(new: ast.AST, old: ast.AST) -> ast.AST:
        for n_ in ast.walk(new):
            ast.copy_location(n_, old)
        return new

    out: list[ast.stmt] = []
    for st in stmts:
        if isinstance(st, ast.Return):
            out += [
                at(ast.Assign(targets=[ast.Name(id=flag, ctx=ast.Store())], value=ast.Constant(True)), st),
                ast.copy_location(ast.Assign(targets=[ast.Name(id=slot, ctx=ast.Store())], value=st.value), st),
                at(ast.Break(), st),
            ]
            return out  # the rest of the block never runs
        if isinstance(st, (ast.For, ast.While)) and _may_return([st]):
            inner = copy.copy(st)
            inner.body = _lower_returns(st.body, flag, slot)
            out += [inner, at(ast.If(test=ast.Name(id=flag, ctx=ast.Load()), body=[ast.Break()], orelse=[]), st)]
            continue
        if isinstance(st, ast.If) and _may_return([st]):
            new_if = copy.copy(st)
            new_if.body = _lower_returns(st.body, flag, slot) or [at(ast.Pass(), st)]
            new_if.orelse = _lower_returns(st.orelse, flag, slot)
            out.append(new_if)
            continue
        out.append(st)
    return out


def _appends(stmts: Sequence[ast.stmt]) -> bool:
    for s_ in stmts:
        for node in ast.walk(s_):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append":
                return True
    return False
