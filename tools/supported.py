"""The page of what compiled code supports (`docs/supported.md`), generated from the frontend's own tables.

`python -m msir.tools.supported` rewrites the page; `--check` exits 1 when the
page on disk differs from what the tables give (the test suite runs the same
comparison). The rows come from the tables the translator and the eager
tracer dispatch on, so a function is on the page exactly when compiled code
can call it:

* NumPy functions, Python builtins and `math`: the keys of
  `msir.frontend.numpy_handlers._NUMPY_HANDLERS`; the PYNATIVE column from the
  eager tracer's `_FUNCTIONS` / `_UFUNCS` (a builtin runs as Python there);
* `msir.ops`: `msir.frontend.ops_calls.OPS_HANDLERS`, each with its docstring's
  first sentence;
* array methods and attributes: `_ARRAY_METHODS` and `ARRAY_ATTRIBUTES`;
* Python constructs: every `ast` statement and expression class, supported
  when `NOTES` describes it, refused when the frontend's `_UNSUPPORTED_*`
  tables name it.

The elementwise primitives (`dialects/primitives.py`) give their own
differentiability and summary. Every other row needs an entry in `NOTES`
(differentiability and a note): a handler without one, or a note for
something no table holds, is an error, so the page cannot drift from the
code.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msir.errors import USER_ERRORS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "supported.md"


@dataclass(frozen=True)
class Note:
    differentiable: str
    """`yes`; `no` (an integer or boolean result, or a piecewise constant: zero
    gradient); `-` (no array input: nothing to differentiate)."""
    text: str
    eager: bool | None = None
    """Runs in PYNATIVE mode; None: read from the eager tracer's tables."""


YES, NO, NONE = "yes", "no", "-"

NOTES: dict[str, Note] = {
    # NumPy composites and shapes
    "np.power": Note(YES, "`a ** b`; NumPy's integer and float promotion"),
    "np.logaddexp": Note(YES, "`log(exp(a) + exp(b))` without overflow"),
    "np.outer": Note(YES, "inputs flattened, as NumPy does"),
    "np.eye": Note(NONE, "N, M, k static"),
    "np.identity": Note(NONE, "n static"),
    "np.tril": Note(YES, "k static"),
    "np.triu": Note(YES, "k static"),
    "np.diag": Note(YES, "a vector's diagonal matrix, or a matrix's diagonal; k static"),
    "np.cumsum": Note(YES, "axis (static) or flattened; dtype"),
    "np.cumprod": Note(YES, "axis (static) or flattened; dtype"),
    "np.linalg.norm": Note(YES, "vectors: any static ord but 0; matrices: None/'fro'/1/-1/inf/-inf "
                           "(no 2, -2, 'nuc': they need singular values); axis, keepdims"),
    "np.any": Note(NO, "axis, keepdims"),
    "np.all": Note(NO, "axis, keepdims"),
    "np.linspace": Note(YES, "runtime scalar start/stop; num static, or runtime (a runtime length, as np.arange's); "
                        "endpoint, dtype"),
    "np.take_along_axis": Note(YES, "integer indices; the gradient scatters back"),
    "np.sort": Note(YES, "axis (static, default -1, None flattens); always stable (kind='stable', whatever kind "
                    "names); NaN last; O(n^2) per row in the axis length; the gradient scatters back through the "
                    "permutation"),
    "np.argsort": Note(NO, "as np.sort; int64 indices (ties in kind='stable' order, which NumPy's default "
                       "quicksort may order differently)"),
    "np.isnan": Note(NO, "bool; integers are never NaN"),
    "np.isinf": Note(NO, "bool; integers are never infinite"),
    "np.isfinite": Note(NO, "bool"),
    "np.log2": Note(YES, "`log(x) / log(2)`"),
    "np.log10": Note(YES, "`log(x) / log(10)`"),
    "np.sum": Note(YES, "axis, dtype, keepdims"),
    "np.prod": Note(YES, "axis, dtype, keepdims"),
    "np.mean": Note(YES, "axis, dtype, keepdims"),
    "np.max": Note(YES, "axis, keepdims; the gradient goes to the maxima"),
    "np.min": Note(YES, "axis, keepdims; the gradient goes to the minima"),
    "np.amax": Note(YES, "as np.max"),
    "np.amin": Note(YES, "as np.min"),
    "np.argmax": Note(NO, "axis, keepdims; int64"),
    "np.argmin": Note(NO, "axis, keepdims; int64"),
    "np.where": Note(YES, "the three-argument form (the one-argument form has a data-dependent size)"),
    "np.dot": Note(YES, "up to 2-d operands (use np.matmul for batches)"),
    "np.matmul": Note(YES, "batched; lowered to the BLAS"),
    "np.einsum": Note(YES, "NumPy's subscripts; `optimize` is accepted and ignored"),
    "np.transpose": Note(YES, "axes static"),
    "np.reshape": Note(YES, "one -1 allowed; shape static"),
    "np.concatenate": Note(YES, "axis static"),
    "np.stack": Note(YES, "axis static"),
    "np.zeros": Note(NONE, "shape static"),
    "np.ones": Note(NONE, "shape static"),
    "np.full": Note(YES, "shape static; a runtime fill value is differentiable"),
    "np.zeros_like": Note(NONE, "dtype"),
    "np.ones_like": Note(NONE, "dtype"),
    "np.full_like": Note(YES, "dtype; a runtime fill value is differentiable"),
    "np.arange": Note(NO, "bounds positional, dtype; static bounds give a static length, a runtime scalar bound a "
                      "runtime length (combines like a mask read: with scalars, static arrays along other axes "
                      "and values of the same arange; reductions; returned); step 0 is a ZeroDivisionError "
                      "at run time; no derivative with respect to the bounds", eager=True),
    "np.broadcast_to": Note(YES, "shape static"),
    "np.tan": Note(YES, "sin / cos"),
    "np.sinh": Note(YES, "finite up to where sinh overflows; expm1 near 0"),
    "np.cosh": Note(YES, "finite up to where cosh overflows"),
    "np.round": Note(NO, "decimals static; half to even, as NumPy; integers with decimals >= 0"),
    "np.around": Note(NO, "as np.round"),
    "np.diff": Note(YES, "n, axis static"),
    "np.hstack": Note(YES, "a tuple or list of arrays"),
    "np.vstack": Note(YES, "a tuple or list of arrays (1-d ones become rows)"),
    "np.equal": Note(NO, "as `==`"),
    "np.not_equal": Note(NO, "as `!=`"),
    "np.less": Note(NO, "as `<`"),
    "np.less_equal": Note(NO, "as `<=`"),
    "np.greater": Note(NO, "as `>`"),
    "np.greater_equal": Note(NO, "as `>=`"),
    "np.isclose": Note(NO, "rtol, atol, equal_nan static; NumPy's test, |a - b| <= atol + rtol * |b|"),
    "np.allclose": Note(NO, "as np.isclose, all elements; a 0-d bool array"),
    "np.count_nonzero": Note(NO, "axis, keepdims; int64"),
    "np.average": Note(YES, "axis, weights (of a's shape, or 1-d along axis), returned, keepdims"),
    "np.atleast_1d": Note(YES, "one or more arrays (a tuple for several)"),
    "np.atleast_2d": Note(YES, "one or more arrays; a 1-d array becomes a row"),
    "np.shape": Note(NONE, "as `.shape`"),
    "np.size": Note(NONE, "as `.size` (no axis)"),
    "np.ndim": Note(NONE, "as `.ndim`"),
    "np.ravel": Note(YES, "row-major (order 'C')"),
    "np.copy": Note(YES, "the value itself (values are immutable)"),
    "np.expand_dims": Note(YES, "axis static (an int or a tuple)"),
    "np.squeeze": Note(YES, "axis static"),
    "np.clip": Note(YES, "a_min/a_max (or min/max), either may be None"),
    "np.square": Note(YES, "`x * x`"),
    "np.var": Note(YES, "axis, keepdims (ddof 0)"),
    "np.std": Note(YES, "axis, keepdims (ddof 0)"),
    "np.logical_and": Note(NO, "non-boolean operands compare with 0"),
    "np.logical_or": Note(NO, "non-boolean operands compare with 0"),
    "np.logical_xor": Note(NO, "non-boolean operands compare with 0"),
    "np.asarray": Note(YES, "a copy of a value (compiled); refused in PYNATIVE mode, where it would drop the "
                       "derivative", eager=False),
    "np.array": Note(YES, "as np.asarray", eager=False),
    "np.float16": Note(YES, "a cast (or a constant)", eager=False),
    "np.float32": Note(YES, "a cast (or a constant)", eager=False),
    "np.float64": Note(YES, "a cast (or a constant)", eager=False),
    "np.int32": Note(NO, "a cast (or a constant)", eager=False),
    "np.int64": Note(NO, "a cast (or a constant)", eager=False),
    "np.bool_": Note(NO, "a cast (or a constant)", eager=False),
    # Python builtins and math: Python itself runs them in PYNATIVE mode, on the tracer's protocols
    "abs": Note(YES, "`|x|`", eager=True),
    "max": Note(YES, "of arguments or of an iterable; Python's tie rule (the first maximum)", eager=True),
    "min": Note(YES, "of arguments or of an iterable; Python's tie rule (the first minimum)", eager=True),
    "sum": Note(YES, "of an iterable (an array's rows), with start", eager=True),
    "len": Note(NONE, "static: the length of a tuple, list or an array's first axis (a runtime length: a runtime "
                      "int64)", eager=True),
    "float": Note(YES, "a 0-d value as a weak float64; refused in PYNATIVE mode (it would drop the derivative)",
                  eager=False),
    "int": Note(NO, "a 0-d value as a weak int64", eager=True),
    "bool": Note(NO, "a 0-d value as a bool", eager=True),
    "range": Note(NONE, "static bounds unroll, runtime bounds give an msir.for", eager=True),
    "enumerate": Note(NONE, "over a tuple, list, static range or an array's rows (unrolled); start", eager=True),
    "zip": Note(NONE, "over tuples, lists, static ranges or arrays' rows (unrolled); strict", eager=True),
    "math.exp": Note(YES, "as np.exp on a float; refused in PYNATIVE mode on a traced value", eager=False),
    "math.log": Note(YES, "as np.log on a float; refused in PYNATIVE mode on a traced value", eager=False),
    "math.sqrt": Note(YES, "as np.sqrt on a float; refused in PYNATIVE mode on a traced value", eager=False),
    "math.tanh": Note(YES, "as np.tanh on a float; refused in PYNATIVE mode on a traced value", eager=False),
    "math.sin": Note(YES, "as np.sin on a float; refused in PYNATIVE mode on a traced value", eager=False),
    "math.cos": Note(YES, "as np.cos on a float; refused in PYNATIVE mode on a traced value", eager=False),
    # msir.ops that are not differentiable in their arguments (the rest are)
    "msir.ops.argmax": Note(NO, ""),
    "msir.ops.ones": Note(NONE, ""),
    "msir.ops.zeros": Note(NONE, ""),
    "msir.ops.ones_like": Note(NONE, ""),
    "msir.ops.zeros_like": Note(NONE, ""),
    "msir.ops.stop_gradient": Note(NO, ""),
    # Python statements and expressions the frontend translates
    "stmt.FunctionDef": Note(YES, "nested functions are closures (no decorators)"),
    "stmt.Return": Note(YES, "also early returns from `if` branches and loops"),
    "stmt.Assign": Note(YES, "names and tuple/list unpacking (one starred target); arrays are values: no "
                        "`x[i] = v`, no attribute or dict item writes"),
    "stmt.AugAssign": Note(YES, "`x += y` on a name, rebinding it (refused when another name sees the array)"),
    "stmt.AnnAssign": Note(YES, "with a value"),
    "stmt.For": Note(YES, "over a static range, tuple or list (unrolled) or a runtime range (msir.for); "
                     "break/continue/return inside"),
    "stmt.While": Note(YES, "a runtime condition gives msir.while; data-dependent trip counts differentiate"),
    "stmt.If": Note(YES, "a static condition picks a branch; a runtime one gives msir.if"),
    "stmt.Expr": Note(NONE, "docstrings, `lst.append(v)` on a local list, compile-time checks; no other "
                      "calls for their side effect (print)"),
    "stmt.Pass": Note(NONE, ""),
    "stmt.Assert": Note(NONE, "a runtime check (msir.check): AssertionError at its line, with the message"),
    "stmt.Raise": Note(NONE, f"`raise E(msg)` for {', '.join(USER_ERRORS)}: a runtime error at its line (in a "
                       "runtime branch or loop: when reached)"),
    "stmt.Break": Note(NONE, "in loops"),
    "stmt.Continue": Note(NONE, "in loops"),
    "expr.Constant": Note(NONE, "numbers, booleans, None, strings, Ellipsis"),
    "expr.Name": Note(YES, "locals, arguments, globals and closure cells (read at compile time)"),
    "expr.Tuple": Note(YES, "`*xs` unpacks a tuple or list"),
    "expr.List": Note(YES, "a list of values (a compile-time container)"),
    "expr.BinOp": Note(YES, "`+ - * / // % ** @ & | ^` with NumPy broadcasting and promotion"),
    "expr.UnaryOp": Note(YES, "`-x`, `+x`, `not x`, `~x`"),
    "expr.BoolOp": Note(YES, "`and`/`or`, short-circuiting on static values"),
    "expr.Compare": Note(NO, "`< <= > >= == !=`, chained; `is` / `is not` on static values"),
    "expr.IfExp": Note(YES, "a runtime condition gives msir.if; between functions (also assigned or returned "
                       "by an `if`), a runtime choice that calls each in a branch of one msir.if"),
    "expr.ListComp": Note(YES, "unrolled over static iterables"),
    "expr.Attribute": Note(YES, "array attributes and methods, module attributes, plain objects' attributes"),
    "expr.Subscript": Note(YES, "ints (also runtime scalars), static slices, None, Ellipsis, one integer array; "
                           "a runtime start with a static length (`x[i:i + k]`, an IndexError at run time when "
                           "outside the axis); a boolean mask of the leading dims, alone (`x[x > 0]`, `x[m, ...]`): "
                           "a runtime length, which combines with scalars, static arrays along the other dims "
                           "and reads through the same mask, and reduces (sum, mean, max, min)"),
    "expr.Call": Note(YES, "the functions on this page, user functions (inlined or outlined) and closures"),
    "expr.Lambda": Note(YES, "a closure"),
    "expr.JoinedStr": Note(NONE, "f-strings: static ones anywhere; with runtime scalars (at most 4) only as the "
                           "message of raise or assert"),
    "expr.FormattedValue": Note(NONE, "inside an f-string: conversion (!r, !s, !a) and format spec"),
    "expr.Slice": Note(NONE, "inside a subscript"),
}


def _np_name(fn: Any) -> str:
    """`np.linalg.norm` for numpy.linalg.norm: the public module path of a NumPy callable."""
    module = getattr(fn, "__module__", None) or "numpy"
    public = [q for q in module.split(".")[1:] if q and not q.startswith("_")]
    return ".".join(["np", *public, fn.__name__])


def _numpy_aliases(fn: Any, name: str) -> list[str]:
    """The other public names NumPy binds to `fn` (`np.abs` for np.absolute, `np.mod` for np.remainder)."""
    import numpy as np

    if not name.startswith("np.") or name.count(".") != 1:
        return []
    return sorted(f"np.{n}" for n in dir(np) if not n.startswith("_") and f"np.{n}" != name
                  and getattr(np, n, None) is fn)


def _display_name(fn: Any) -> str:
    import builtins
    import math

    import numpy as np

    from msir import ops

    name = getattr(fn, "__name__", repr(fn))
    if getattr(builtins, name, None) is fn:
        return name
    if getattr(math, name, None) is fn:
        return f"math.{name}"
    if getattr(ops, name, None) is fn:
        return f"msir.ops.{name}"
    if fn is np.bool_:
        return "np.bool_"
    if isinstance(fn, type) and issubclass(fn, np.generic):
        return f"np.{np.dtype(fn).name}"
    return _np_name(fn)


@dataclass(frozen=True)
class Row:
    name: str
    compiled: bool
    eager: bool
    differentiable: str
    note: str


def _primitive_rows() -> dict[Any, tuple[str, str]]:
    """The NumPy functions of the elementwise primitive table: (differentiability, note)."""
    from msir.dialects import primitives

    return {p.numpy: (YES if p.differentiable else NO, f"`msir.{p.name}`: {p.summary}")
            for p in primitives.ELEMENTWISE if p.numpy is not None}


def _eager_supports(fn: Any) -> bool:
    import numpy as np

    from msir.eager import tracer

    if isinstance(fn, np.ufunc):
        return fn.__name__ in tracer._UFUNCS
    return fn in tracer._FUNCTIONS


def _note(name: str, used: set[str]) -> Note:
    if name not in NOTES:
        raise KeyError(f"msir.tools.supported: '{name}' is supported but has no entry in NOTES "
                       "(its differentiability and a note)")
    used.add(name)
    return NOTES[name]


def function_rows(used: set[str]) -> tuple[list[Row], list[Row]]:
    """(NumPy, builtins and math) rows, and msir.ops rows."""
    from msir.frontend.numpy_handlers import _NUMPY_HANDLERS
    from msir.frontend.ops_calls import OPS_HANDLERS

    primitive = _primitive_rows()
    library, ops_rows = [], []
    for fn in _NUMPY_HANDLERS:
        name = _display_name(fn)
        aliases = _numpy_aliases(fn, name)
        if fn in OPS_HANDLERS:
            note = NOTES.get(name)
            if note is not None:
                used.add(name)
            summary = (fn.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
            ops_rows.append(Row(name, True, True, note.differentiable if note else YES, " ".join(summary.split())))
            continue
        also = f" (also {', '.join(f'`{a}`' for a in aliases)})" if aliases else ""
        if fn in primitive:
            differentiable, text = primitive[fn]
            library.append(Row(name, True, _eager_supports(fn), differentiable, text + also))
            continue
        note = _note(name, used)
        eager = note.eager if note.eager is not None else _eager_supports(fn)
        library.append(Row(name, True, eager, note.differentiable, note.text + also))
    return sorted(library, key=lambda r: r.name), ops_rows


def array_rows() -> list[Row]:
    from msir.eager.tracer import Tracer
    from msir.frontend.attributes import ARRAY_ATTRIBUTES
    from msir.frontend.numpy_handlers import _ARRAY_METHODS

    notes = {"T": "a transpose", "shape": "known while tracing; a runtime length (a mask read, a runtime np.arange) "
             "is a runtime int64", "size": "known while tracing, or a runtime int64 as `.shape`"}
    rows = [Row(f".{a}", True, hasattr(Tracer, a), NONE if a != "T" else YES, notes.get(a, "known while tracing"))
            for a in ARRAY_ATTRIBUTES]
    for m in sorted(_ARRAY_METHODS):
        differentiable = NO if m in ("argmax", "argmin", "any", "all", "argsort") else YES
        note = {"item": "a size-1 array as a weak Python scalar", "astype": "a cast"}.get(m, f"as np.{m}")
        if m in ("flatten", "ravel"):
            note = "reshape to 1-d"
        rows.append(Row(f".{m}()", True, hasattr(Tracer, m), differentiable, note))
    return rows


def construct_rows(used: set[str]) -> list[Row]:
    from msir.frontend.expressions import _UNSUPPORTED_EXPRS
    from msir.frontend.statements import _UNSUPPORTED_STMTS

    rows = []
    for prefix, base, refused in (("stmt", ast.stmt, _UNSUPPORTED_STMTS), ("expr", ast.expr, _UNSUPPORTED_EXPRS)):
        for cls in sorted(base.__subclasses__(), key=lambda c: c.__name__):
            key = f"{prefix}.{cls.__name__}"
            if key in NOTES:
                note = _note(key, used)
                rows.append(Row(f"`{cls.__name__}`", True, True, note.differentiable, note.text))
            elif cls in refused:
                rows.append(Row(f"`{cls.__name__}`", False, True, NONE, f"refused: {refused[cls]}"))
            else:
                rows.append(Row(f"`{cls.__name__}`", False, True, NONE, "refused"))
    return rows


def _table(rows: list[Row], first: str) -> list[str]:
    yes_no = {True: "yes", False: "no"}
    out = [f"| {first} | compiled | PYNATIVE | differentiable | notes |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        name = r.name if r.name.startswith("`") else f"`{r.name}`"
        out.append(f"| {name} | {yes_no[r.compiled]} | {yes_no[r.eager]} | {r.differentiable} | "
                   f"{r.note.replace('|', '&#124;')} |")
    return out


def render() -> str:
    """The page, from the tables; raises KeyError when the tables and NOTES disagree."""
    used: set[str] = set()
    library, ops_rows = function_rows(used)
    constructs = construct_rows(used)
    stale = sorted(set(NOTES) - used)
    if stale:
        raise KeyError(f"msir.tools.supported: NOTES describes what no table supports: {', '.join(stale)}")
    lines = [
        "# What compiled code supports",
        "",
        "Generated by `python -m msir.tools.supported` from the frontend's own tables",
        "(`msir/frontend/numpy_handlers.py`, `ops_calls.py`, `attributes.py`, `statements.py`,",
        "`expressions.py`, the primitive table `dialects/primitives.py` and the eager tracer);",
        "do not edit by hand. `compiled`: `msir.jit` (GRAPH_MODE) translates it; `PYNATIVE`:",
        "it runs on the eager tracer; `differentiable`: `yes`, `no` (integer or boolean",
        "result, or zero gradient), `-` (no array input). Static arguments (shapes, axes)",
        "specialise the compiled function and join its cache key.",
        "",
        "## NumPy functions, Python builtins and `math`",
        "",
        *_table(library, "function"),
        "",
        "## `msir.ops` (MindSpore's spelling)",
        "",
        *_table(ops_rows, "function"),
        "",
        "## Array attributes and methods",
        "",
        *_table(array_rows(), "attribute"),
        "",
        "## Python constructs",
        "",
        "PYNATIVE mode runs the Python itself; `compiled` says whether `msir.jit` translates it.",
        "",
        *_table(constructs, "construct"),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m msir.tools.supported", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/supported.md is stale")
    parser.add_argument("-o", "--output", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if not args.output.exists() or args.output.read_text() != page:
            print(f"{args.output} is stale: run python -m msir.tools.supported", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
