"""Reading a Python function's source: the AST node of its definition, with the
real file name, line numbers and columns (nested, indented functions and
lambdas included)."""

from __future__ import annotations

import ast
import inspect
import linecache
import re
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
    tree = _parse_def_lines(code) if code.co_name != "<lambda>" else None
    if tree is None:
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise _unreadable(fn, str(e)) from None
        tree = _parse_lines(fn, lines, first)
    node = _find_definition(tree, fn)
    if node is None:
        raise _unreadable(fn, "its definition was not found in the source lines")
    result = FunctionSource(node, code.co_filename)
    _CACHE[key] = result
    return result


def _parse_def_lines(code) -> ast.Module | None:
    """The `def` of `code` parsed from its file's lines without tokenizing them
    (`inspect.getsourcelines` runs Python's tokenizer over the function to find
    its end: ~2-3 ms for a 100-line function, a tenth of a small first compile).
    The lines run from the first decorator to the last line any instruction of
    the function or of the code nested in it spans, extended by the deeper
    indented lines after it (code after a `return`, which the compiler drops).
    Parsed with the real line numbers and columns (blank lines before it, and
    an `if 1:` above an indented definition). None when this does not give the
    definition (no file lines, a line that does not look like its start, lines
    that do not parse): the caller then takes `inspect`'s route."""
    linecache.checkcache(code.co_filename)  # as inspect does: a file edited since it was read
    lines = linecache.getlines(code.co_filename)
    start = code.co_firstlineno - 1
    if not lines or not 0 <= start < len(lines) or not _DEF_START.match(lines[start]):
        return None
    end = start + 1
    nested = [code]
    while nested:
        c = nested.pop()
        for _, end_line, _, _ in c.co_positions():
            if end_line is not None and end_line > end:
                end = end_line
        nested.extend(k for k in c.co_consts if inspect.iscode(k))
    def_line = lines[start]
    indent = len(def_line) - len(def_line.lstrip())
    if indent and start == 0:  # no line above it for the `if 1:`
        return None
    last = end
    while last < len(lines):
        text = lines[last]
        stripped = text.lstrip()
        is_code = bool(stripped) and not stripped.startswith("#")
        if is_code and len(text) - len(stripped) <= indent:
            break
        last += 1
        if is_code:
            end = last
    body = "".join(lines[start:end])
    prefix = "\n" * (start - 1) + "if 1:\n" if indent else "\n" * start
    try:
        return ast.parse(prefix + body)
    except (SyntaxError, ValueError):
        return None


_DEF_START = re.compile(r"^\s*(@|def\s|async\s+def\s)")


def _parse_lines(fn, lines: list[str], first: int) -> ast.Module:
    """`inspect.getsourcelines`'s lines of `fn`, parsed with the file's line numbers and columns."""
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
    return tree


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
