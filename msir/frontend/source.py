"""Reading a Python function's source: the AST node of its definition, with the
real file name, line numbers and columns (nested, indented functions and
lambdas included)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from msir.errors import SourceLoc, UnsupportedSyntaxError


@dataclass
class FunctionSource:
    """The definition of a function: `node` is an `ast.FunctionDef` or `ast.Lambda`
    whose line and column numbers are those of the real file."""

    node: ast.FunctionDef | ast.Lambda
    filename: str

    def loc(self, node: ast.AST) -> SourceLoc:
        return SourceLoc(self.filename, getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1)


_CACHE: dict[object, FunctionSource] = {}


def _unreadable(fn, why: str) -> UnsupportedSyntaxError:
    code = fn.__code__
    loc = SourceLoc(code.co_filename, code.co_firstlineno, 1)
    return UnsupportedSyntaxError(
        f"cannot read the source of function '{fn.__qualname__}' ({why}); msir compiles "
        "Python source, so define the function in a .py file (not with exec/eval or at "
        "an interactive prompt)",
        loc,
    )


def get_source(fn) -> FunctionSource:
    """The definition of `fn`, parsed once and cached by its code object."""
    code = fn.__code__
    key = (code, code.co_filename)  # equal code objects may come from different files
    if key in _CACHE:
        return _CACHE[key]
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise _unreadable(fn, str(e)) from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != text else 0
    try:
        tree = ast.parse(dedented)
    except SyntaxError:
        # A lambda inside a larger expression: parse the source lines with the
        # statement around it cut away by wrapping in parentheses.
        try:
            tree = ast.parse("(\n" + dedented + "\n)")
            first -= 1
        except SyntaxError as e:
            raise _unreadable(fn, f"its source lines do not parse: {e.msg}") from None
    ast.increment_lineno(tree, first - 1)
    if indent:
        for node in ast.walk(tree):
            if hasattr(node, "col_offset"):
                node.col_offset += indent
                if getattr(node, "end_col_offset", None) is not None:
                    node.end_col_offset += indent
    node = _find_definition(tree, fn)
    if node is None:
        raise _unreadable(fn, "its definition was not found in the source lines")
    result = FunctionSource(node, code.co_filename)
    _CACHE[key] = result
    return result


def _parameter_names(lam: ast.Lambda) -> tuple[str, ...]:
    a = lam.args
    return tuple(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs))


def _body_holds(lam: ast.Lambda, line: int, col: int) -> bool:
    b = lam.body
    return (b.lineno, b.col_offset) <= (line, col) < (b.end_lineno or b.lineno, b.end_col_offset or 1 << 30)


def _body_extent(lam: ast.Lambda) -> tuple[int, int]:
    b = lam.body
    return ((b.end_lineno or b.lineno) - b.lineno, (b.end_col_offset or 0) - b.col_offset)


def _find_definition(tree: ast.AST, fn) -> ast.FunctionDef | ast.Lambda | None:
    code = fn.__code__
    if code.co_name == "<lambda>":
        lambdas = [
            n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno
        ]
        if len(lambdas) <= 1:
            return lambdas[0] if lambdas else None
        # Several lambdas on one line: the right one has the code object's
        # parameters, and its body is the innermost one holding the code's
        # first positioned instruction (an outer lambda's body holds an inner
        # lambda's body too, so the innermost one wins).
        params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        same_params = [lam for lam in lambdas if _parameter_names(lam) == params] or lambdas
        if len(same_params) == 1:
            return same_params[0]
        for line, _, col, end_col in code.co_positions():
            if line is None or col is None or (col == 0 and end_col == 0):
                continue
            holding = [lam for lam in same_params if _body_holds(lam, line, col)]
            if holding:
                return min(holding, key=_body_extent)
        return same_params[0]
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and n.name == code.co_name:
            first_line = min([n.lineno, *[d.lineno for d in n.decorator_list]])
            if first_line == code.co_firstlineno or n.lineno == code.co_firstlineno:
                return n
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and n.name == code.co_name:
            return n
    return None
