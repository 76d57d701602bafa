"""Generated NumPy programs through `msir.jit` (GRAPH and PYNATIVE) and
`msir.grad`, checked against plain NumPy and central finite differences.

A program is a function `f(x, y, z, s, n)` of a float64 array `x`, two more
arrays of drawn shapes and dtypes (float32, float64, int64, bool), a Python
float `s` and a Python int `n`. Its body is a few statements drawn by
`generate`: assignments of expressions built from arithmetic and comparison
operators, the ufuncs msir supports, reductions with axes, broadcasting,
indexing and slicing, `astype`, `np.where` and matmul; an `if` on data; a
`for` over `range`; a `while` whose trip count depends on data (bounded by a
counter, so NumPy terminates). The shape and dtype of every expression are
found by evaluating it in NumPy on placeholder arrays while generating, so
most programs are valid NumPy; what NumPy itself refuses on the real inputs
is skipped.

`generate` takes a source of choices (`Choices`): `RandomChoices` for the
long runs (a trial is named by `SEED:INDEX` and can be replayed), or
`HypothesisChoices` for property tests (the CI run,
`test/unit/test_fuzz_programs.py`), whose failures hypothesis shrinks.

Every trial runs in a worker subprocess (`Worker`), so a segfault is seen,
and under a timeout. It is classified:

* `ok`: GRAPH and PYNATIVE give NumPy's dtype, shape and values (float64 to
  rtol 1e-7, float32 to rtol 2e-4, float16 to rtol 4e-3, each with an
  absolute part of the same relative size of the largest |value|; NaNs
  where NumPy has them; float16, NumPy's dtype for float functions of bools,
  is 4 half-precision ulps because msir computes it through float32 and
  rounds once per op, so its reductions accumulate in float32, as JAX's do,
  where NumPy rounds every partial sum to float16; a result computed
  through a narrower float, e.g. a float64 sum of `np.tanh` of a float32
  array, gets the narrowest tolerance met: each op's result dtype is
  recorded in NumPy by `_narrowest_float`, since two correct float32 tanh
  differ by an ulp, 6e-8, and a sum of them by more than 1e-7), and,
  where the output is a float64 scalar, `msir.grad` by `x` agrees with
  central differences (rtol 1e-4, absolute part 1e-4 of the largest
  |gradient|) at step 1e-6 or 1e-4;
* `kink`: the gradient disagrees, but so do the differences at the two steps
  (the program is not smooth at the point, or rounds through float32);
* `undefined`: the difference comes from an operation whose result NumPy
  itself leaves to the platform or to IEEE special values: a value differs
  where NumPy casts NaN or infinity to an integer ("invalid value
  encountered in cast"), or the gradient is not finite where the program
  computes an invalid, infinite or divided-by-zero intermediate, or
  evaluates an operation where its derivative is infinite (`np.sqrt` of 0,
  a zero base to a power below 1: `_singular_derivatives`); the chain rule
  multiplies a zero cotangent by it, as JAX and PyTorch do, e.g. in the
  branch `np.where` does not select;
* `rounding`: a value differs, but NumPy gives msir's value when the
  computed operands of the program's discontinuous operations (`%`, `//`,
  comparisons, floor, ceil, sign, logical ops, astype to int64 or bool) are
  moved by at most 4 ulps of their dtype (`_rounding_explains`): the two
  agree up to the rounding of an intermediate, which such an operation
  turns into a jump (e.g. `4096 % np.expm1(np.log(3))`: expm1 is 2 + 0.61
  ulp exactly, NumPy gives 2 + 1 ulp, glibc's expm1 (msir, math.expm1) 2.0,
  both within 1 ulp, and the remainder jumps from 2 to 0). An operand that is a
  literal or an argument never reassigned is exact and is not moved, so a
  wrong discontinuous operation on exact inputs stays `wrong`;
* `skipped`: NumPy raised on the inputs;
* `rejected`: msir raised an `MsirError` located in the program's file;
* `wrong`: a value, dtype, shape or gradient differs;
* `internal`: any other exception (also an `MsirError` with no location in
  the program);
* `crash`: the worker died (a signal);
* `hang`: no answer within the timeout.

    python test/fuzz/programs.py --trials 2000 --seed 0   # the long run
    python test/fuzz/programs.py --replay 0:17            # one trial, printed

A long run replays each failure in a fresh worker and counts those that
survive the replay.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

FAILURES = ("wrong", "internal", "crash", "hang")
GRADIENT_CHECKED = "gradient checked"

# ---------------------------------------------------------------------------
# Sources of choices
# ---------------------------------------------------------------------------


class Choices:
    """What the generator asks for; one implementation per source of randomness."""

    def integer(self, lo: int, hi: int) -> int:  # inclusive bounds
        raise NotImplementedError

    def pick(self, options):
        return options[self.integer(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) < percent


class RandomChoices(Choices):
    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class HypothesisChoices(Choices):
    """Choices drawn from hypothesis, so that it can shrink a failing program."""

    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        return self.draw(st.integers(lo, hi))


# ---------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------


@dataclass
class Arg:
    """One argument: an array (dtype, shape, values from `seed`) or a Python scalar."""

    name: str
    dtype: str  # float32 | float64 | int64 | bool | pyfloat | pyint
    shape: list[int] = field(default_factory=list)
    seed: int = 0

    def value(self):
        rng = np.random.default_rng(self.seed)
        if self.dtype == "pyfloat":
            return float(np.round(rng.uniform(-2, 2), 3))
        if self.dtype == "pyint":
            return int(rng.integers(1, 4))
        if self.dtype == "bool":
            return rng.integers(0, 2, self.shape).astype(bool)
        if self.dtype == "int64":
            return rng.integers(-3, 4, self.shape).astype(np.int64)
        return rng.uniform(-2, 2, self.shape).astype(self.dtype)

    def placeholder(self):
        """A value of the argument's type whose contents do not matter."""
        if self.dtype == "pyfloat":
            return 1.5
        if self.dtype == "pyint":
            return 2
        return np.ones(self.shape, self.dtype)


@dataclass
class Program:
    source: str
    args: list[Arg]

    def to_json(self) -> str:
        return json.dumps({"source": self.source, "args": [asdict(a) for a in self.args]})

    @staticmethod
    def from_json(text: str) -> Program:
        d = json.loads(text)
        return Program(d["source"], [Arg(**a) for a in d["args"]])


_SHAPES = [[3, 4], [4], [1, 4], [3, 1], [], [4, 3], [2, 3, 4]]
_UNARY = ["np.exp", "np.log", "np.log1p", "np.expm1", "np.sin", "np.cos", "np.tanh", "np.sqrt", "np.arctan",
          "np.abs", "np.sign", "np.floor", "np.ceil", "np.negative", "np.square", "np.logical_not", "-", "~"]
_BINARY_OPS = ["+", "-", "*", "/", "**", "//", "%", "<", ">", "<=", "==", "!=", "&", "|", "^"]
_BINARY_FNS = ["np.maximum", "np.minimum", "np.add", "np.multiply", "np.power", "np.logical_and"]
_REDUCTIONS = ["sum", "mean", "max", "min", "prod"]
_LITERALS = ["2.0", "0.5", "3", "1", "True", "False", "-1.5", "s", "n"]
_INDEXES = ["[1:]", "[0]", "[-1]", "[::2]", "[:, 1:3]", "[..., 0]", "[1:3, :]", "[:, ::-1]"]


class _Scope:
    """The variables of a program so far, with the NumPy value of each on placeholders."""

    def __init__(self, args: list[Arg]):
        self.env = {a.name: a.placeholder() for a in args}
        self.env["np"] = np

    def typeof(self, expr: str):
        """The placeholder value of `expr`, or None when NumPy refuses it."""
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                return eval(expr, {}, dict(self.env))
        except Exception:
            return None

    def names(self) -> list[str]:
        return [k for k in self.env if k != "np"]


def _expression(ch: Choices, scope: _Scope, depth: int) -> str:
    """An expression NumPy accepts on the scope's placeholders."""
    for _ in range(6):
        expr = _draw_expression(ch, scope, depth)
        if isinstance(scope.typeof(expr), (np.ndarray, np.generic, float, int, bool)):
            return expr
    return ch.pick([n for n in scope.names() if n not in ("s", "n")])


def _draw_expression(ch: Choices, scope: _Scope, depth: int) -> str:
    kind = ch.integer(0, 9) if depth > 0 else 0
    sub = lambda: _expression(ch, scope, depth - 1)  # noqa: E731
    if kind == 0:
        return ch.pick(scope.names()) if ch.chance(75) else ch.pick(_LITERALS)
    if kind == 1:
        op = ch.pick(_UNARY)
        return f"{op}({sub()})" if op not in ("-", "~") else f"({op}{sub()})"
    if kind in (2, 3):
        return f"({sub()} {ch.pick(_BINARY_OPS)} {sub()})"
    if kind == 4:
        return f"{ch.pick(_BINARY_FNS)}({sub()}, {sub()})"
    if kind == 5:
        red, arg = ch.pick(_REDUCTIONS), sub()
        axis = ch.pick(["", "axis=0", "axis=-1", "axis=1", "axis=(0, 1)"])
        keep = ", keepdims=True" if axis and ch.chance(30) else ""
        if ch.chance(50):
            return f"np.{red}({arg}{', ' + axis if axis else ''}{keep})"
        return f"({arg}).{red}({axis}{keep})"
    if kind == 6:
        return f"({sub()}){ch.pick(_INDEXES)}"
    if kind == 7:
        return f"({sub()}).astype(np.{ch.pick(['float32', 'float64', 'int64', 'bool_'])})"
    if kind == 8:
        return f"np.where({sub()} > {ch.pick(['0', '0.5', 's'])}, {sub()}, {sub()})"
    return f"({sub()} @ {sub()})"


def _same_type(a, b) -> bool:
    return np.shape(a) == np.shape(b) and np.result_type(a) == np.result_type(b) \
        and isinstance(a, (float, int)) == isinstance(b, (float, int))


def _matching(ch: Choices, scope: _Scope, like, depth: int, tries: int = 8) -> str | None:
    """An expression of the same shape and dtype as the placeholder `like`."""
    for _ in range(tries):
        expr = _expression(ch, scope, depth)
        if _same_type(scope.typeof(expr), like):
            return expr
    return None


def _condition(ch: Choices, scope: _Scope) -> str:
    value = _expression(ch, scope, 1)
    return f"np.{ch.pick(['sum', 'mean', 'max', 'min'])}({value}) > {ch.pick(['0', '0.5', 's', '-1.0'])}"


def _statement(ch: Choices, scope: _Scope, var: str, indent: str) -> list[str]:
    kind = ch.integer(0, 9)
    if kind <= 4 or var not in scope.env:
        expr = _expression(ch, scope, 3)
        scope.env[var] = scope.typeof(expr)
        return [f"{indent}{var} = {expr}"]
    like = scope.env[var]
    if kind <= 6:
        cond = _condition(ch, scope)
        then = _matching(ch, scope, like, 2)
        other = _matching(ch, scope, like, 2)
        if then is None or other is None:
            return []
        return [f"{indent}if {cond}:", f"{indent}    {var} = {then}", f"{indent}else:", f"{indent}    {var} = {other}"]
    if kind <= 8:
        scope.env["i"] = 1
        body = _matching(ch, scope, like, 2)
        del scope.env["i"]
        if body is None:
            return []
        bound = ch.pick(["3", "n", "1", "0"])
        return [f"{indent}for i in range({bound}):", f"{indent}    {var} = {body}"]
    body = _matching(ch, scope, like, 2)
    if body is None:
        return []
    cond = _condition(ch, scope)
    return [f"{indent}k = 0", f"{indent}while {cond} and k < 6:", f"{indent}    {var} = {body}",
            f"{indent}    k = k + 1"]


def generate(ch: Choices) -> Program:
    """One program; `x` is the argument differentiated."""
    args = [Arg("x", "float64", ch.pick(_SHAPES), ch.integer(0, 2**20))]
    for name in ("y", "z"):
        args.append(Arg(name, ch.pick(["float32", "float64", "int64", "bool"]), ch.pick(_SHAPES),
                        ch.integer(0, 2**20)))
    args += [Arg("s", "pyfloat", seed=ch.integer(0, 2**20)), Arg("n", "pyint", seed=ch.integer(0, 2**20))]
    scope = _Scope(args)
    lines = ["import numpy as np", "", "", f"def f({', '.join(a.name for a in args)}):"]
    assigned = "a"
    for i in range(ch.integer(1, 4)):
        var = ch.pick(["a", "b", "x"]) if i else "a"
        statement = _statement(ch, scope, var, "    ")
        lines += statement
        assigned = var if statement else assigned
    final = assigned if ch.chance(80) else ch.pick(["a", "x"])
    if ch.chance(70):
        final = f"np.sum({final})" if ch.chance(70) else f"np.mean({final} * x)"
    lines.append(f"    return {final}")
    return Program("\n".join(lines) + "\n", args)


def random_program(seed: int, index: int) -> Program:
    return generate(RandomChoices(random.Random(seed * 1_000_003 + index)))


def hypothesis_programs():
    """The hypothesis strategy of programs."""
    from hypothesis import strategies as st

    return st.composite(lambda draw: generate(HypothesisChoices(draw)))()


# ---------------------------------------------------------------------------
# One trial (in the worker)
# ---------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str  # ok | kink | undefined | rounding | skipped | rejected | wrong | internal | crash | hang
    detail: str = ""


def _load(program: Program, directory: str):
    """Write the program to its own module file and import `f` from it."""
    fd, path = tempfile.mkstemp(suffix=".py", prefix="fuzzprog_", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.write(program.source)
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f, path


def _tolerance(dtype) -> float:
    return {np.dtype(np.float16): 4e-3, np.dtype(np.float32): 2e-4}.get(np.dtype(dtype), 1e-7)


def _compare(what: str, got, want, through=None) -> str | None:
    """None when `got` is NumPy's `want` (type, shape, values), else what
    differs; `through`: the narrowest float dtype the computation rounded to
    (its tolerance if wider than the result's)."""
    want_a, got_a = np.asarray(want), np.asarray(got)
    if isinstance(want, (float, int, bool)) != isinstance(got, (float, int, bool)) and not (
        isinstance(want, np.generic) or isinstance(got, np.generic)
    ):
        return f"{what}: type {type(got).__name__}, NumPy gives {type(want).__name__}"
    if got_a.dtype != want_a.dtype:
        return f"{what}: dtype {got_a.dtype}, NumPy gives {want_a.dtype}"
    if got_a.shape != want_a.shape:
        return f"{what}: shape {got_a.shape}, NumPy gives {want_a.shape}"
    if want_a.dtype.kind in "biu":
        return None if np.array_equal(got_a, want_a) else f"{what}: values differ\n  got  {got_a}\n  want {want_a}"
    if not np.array_equal(np.isnan(got_a), np.isnan(want_a)):
        return f"{what}: NaNs differ\n  got  {got_a}\n  want {want_a}"
    finite = np.isfinite(want_a)
    if not np.array_equal(got_a[~finite & ~np.isnan(want_a)], want_a[~finite & ~np.isnan(want_a)]):
        return f"{what}: infinities differ\n  got  {got_a}\n  want {want_a}"
    rtol = max(_tolerance(want_a.dtype), _tolerance(through) if through is not None else 0.0)
    scale = float(np.max(np.abs(want_a[finite]), initial=0.0))
    if not np.allclose(got_a[finite], want_a[finite], rtol=rtol, atol=rtol * max(scale, 1.0)):
        return f"{what}: values differ (rtol {rtol})\n  got  {got_a}\n  want {want_a}"
    return None


def _finite_differences(f, args: list, step: float) -> np.ndarray:
    x = args[0]
    g = np.zeros_like(x)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in np.ndindex(x.shape):
            up, down = x.copy(), x.copy()
            up[i] += step
            down[i] -= step
            g[i] = (float(f(up, *args[1:])) - float(f(down, *args[1:]))) / (2 * step)
    return g


def _grad_close(got, want) -> bool:
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
    return np.allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


def _located_in(e, path: str) -> bool:
    loc = getattr(e, "loc", None)
    return loc is not None and os.path.exists(loc.file) and os.path.samefile(loc.file, path)


def _msir_failure(e: BaseException, path: str) -> Outcome:
    from msir.errors import MsirError

    if isinstance(e, MsirError) and _located_in(e, path):
        return Outcome("rejected", e.message)
    where = "msir error without a location in the program: " if isinstance(e, MsirError) else ""
    tb = traceback.format_exception(e)
    return Outcome("internal", where + "".join(tb[-3:]).strip()[-1500:])


def _floating_point_warnings(f, args: list) -> list[str]:
    """NumPy's messages for the invalid, overflowing and dividing-by-zero
    operations `f` computes on `args`."""
    with np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        except Exception:
            pass
    return sorted({str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)})



def _run_instrumented(tree: ast.Module, hooks: dict, args: list, filename: str) -> None:
    """Run `f` of a program's rewritten syntax tree in NumPy on copies of `args`, with
    `hooks` (the names its rewrite calls) in its globals, warnings and NumPy's
    floating-point errors silenced; an exception ends the run (what it recorded stays)."""
    env = {"np": np, **hooks}
    exec(compile(ast.fix_missing_locations(tree), filename, "exec"), env)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env["f"](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    except Exception:
        pass


_RECORD = "_fuzz_record"


class _RecordResults(ast.NodeTransformer):
    """Wraps every call, operator and method result in `_fuzz_record(value)`."""

    def _record(self, node):
        self.generic_visit(node)
        return ast.Call(ast.Name(_RECORD, ast.Load()), [node], [])

    visit_BinOp = visit_UnaryOp = visit_Call = _record


def _narrowest_float(program: Program, args: list):
    """The narrowest float dtype among the results of the program's
    operations as NumPy computes them (arguments and literals not counted:
    they are exact), or None."""
    seen: set[np.dtype] = set()

    def record(value):
        dtype = getattr(value, "dtype", None)
        if dtype is not None and dtype.kind == "f":
            seen.add(dtype)
        return value

    tree = ast.parse(program.source)
    fdef = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "f")
    fdef.body = [_RecordResults().visit(statement) for statement in fdef.body]
    _run_instrumented(tree, {_RECORD: record}, args, "<recorded program>")
    return min(seen, key=lambda d: d.itemsize) if seen else None


_SINGULAR = "_fuzz_singular"


class _WatchSingular(ast.NodeTransformer):
    """Wraps the operands of `np.sqrt` and of powers (`**`, `np.power`) in
    `_fuzz_singular(kind, operands...)`, which returns the first operand."""

    def _watch(self, kind: str, operands: list[ast.expr]) -> ast.expr:
        return ast.Call(ast.Name(_SINGULAR, ast.Load()), [ast.Constant(kind), *operands], [])

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow):
            node.left = self._watch("power", [node.left, node.right])
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "np":
            if func.attr == "sqrt" and node.args:
                node.args[0] = self._watch("sqrt", node.args[:1])
            elif func.attr == "power" and len(node.args) == 2:
                node.args[0] = self._watch("power", node.args)
        return node


def _singular_derivatives(program: Program, args: list) -> list[str]:
    """The operations the program evaluates where their derivative is
    infinite: `np.sqrt` of a float 0, a float zero base to a power below 1.
    Their gradient rule gives inf or NaN there even when a zero cotangent
    reaches it (a branch `np.where` does not select), as in JAX and PyTorch."""
    found: set[str] = set()

    def watch(kind, value, exponent=None):
        try:
            base = np.asarray(value)
            if base.dtype.kind != "f" and not isinstance(value, float):  # no gradient reaches an int or bool
                return value
            zero = base == 0
            if kind == "power":
                zero = zero & (np.asarray(exponent) < 1)
            if np.any(zero):
                found.add(f"{kind} at 0, where its derivative is infinite")
        except Exception:
            pass
        return value

    _run_instrumented(_WatchSingular().visit(ast.parse(program.source)), {_SINGULAR: watch}, args,
                      "<watched program>")
    return sorted(found)


# ---------------------------------------------------------------------------
# Rounding-level differences through a discontinuous operation
# ---------------------------------------------------------------------------

_STEP_FUNCTIONS = {"floor", "ceil", "sign", "logical_not", "logical_and", "logical_or", "logical_xor"}
_NUDGE = "_fuzz_nudge"


class _NudgeOperands(ast.NodeTransformer):
    """Wraps each computed operand of a discontinuous operation in
    `_fuzz_nudge(operand, site)`; `sites` lists their source. Literals and the
    function's parameters that the body never assigns are exact: left alone."""

    def __init__(self, exact_names: set[str]):
        self.exact_names = exact_names
        self.sites: list[str] = []  # each nudged operand's source text

    def _exact(self, node: ast.expr) -> bool:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node = node.operand
        return isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id in self.exact_names)

    def _wrap(self, node: ast.expr) -> ast.expr:
        if self._exact(node):
            return node
        self.sites.append(ast.unparse(node))
        return ast.Call(ast.Name(_NUDGE, ast.Load()), [node, ast.Constant(len(self.sites) - 1)], [])

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, (ast.Mod, ast.FloorDiv)):
            node.left, node.right = self._wrap(node.left), self._wrap(node.right)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        node.left = self._wrap(node.left)
        node.comparators = [self._wrap(c) for c in node.comparators]
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "np" \
                and func.attr in _STEP_FUNCTIONS:
            node.args = [self._wrap(a) for a in node.args]
        elif isinstance(func, ast.Attribute) and func.attr == "astype" and node.args and \
                isinstance(node.args[0], ast.Attribute) and node.args[0].attr in ("int64", "bool_"):
            func.value = self._wrap(func.value)
        return node


def _nudged_program(source: str):
    """The program's `f` with its discontinuous operations' computed operands
    nudged by `_fuzz_nudge`, and the source text of each such operand."""
    tree = ast.parse(source)
    fdef = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "f")
    assigned = {t.id for n in ast.walk(fdef) for t in ast.walk(n)
                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
    transformer = _NudgeOperands({a.arg for a in fdef.args.args} - assigned)
    tree = ast.fix_missing_locations(transformer.visit(tree))
    return compile(tree, "<nudged program>", "exec"), transformer.sites


def _nudge(value, ulps: int, sign):
    """`value` moved by `ulps` ulps of its own dtype in the direction `sign`
    (-1, 0, +1, or an array of them); ints, bools and non-finite values stay.
    Python floats stay Python floats, NumPy scalars keep their type."""
    if isinstance(value, bool) or not isinstance(value, (float, np.floating, np.ndarray)):
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind != "f":
        return value
    arr = np.asarray(value)
    sign = np.broadcast_to(sign, arr.shape) if np.ndim(sign) else np.full(arr.shape, sign)
    out = arr
    for _ in range(ulps):
        out = np.where(sign == 0, out, np.nextafter(out, np.where(sign > 0, np.inf, -np.inf).astype(arr.dtype)))
    out = out.astype(arr.dtype)
    if isinstance(value, float) and not isinstance(value, np.floating):
        return float(out)
    if isinstance(value, np.generic):
        return out[()]
    return out


def _rounding_explains(program: Program, args: list, got, ulps=(1, 4), random_patterns: int = 8,
                       through=None) -> str | None:
    """Whether NumPy gives msir's `got` once the computed operands of the
    program's discontinuous operations move by a few ulps (module docstring):
    each of `ulps`, all operands up, all down, each one alone up or down, and
    `random_patterns` random per-element directions. The pattern found, or None."""
    code, sites = _nudged_program(program.source)
    if not sites:
        return None
    rng = np.random.default_rng(0)
    patterns = [("all up", lambda i, v: 1), ("all down", lambda i, v: -1)]
    for site, text in enumerate(sites):
        for sign, word in ((1, "up"), (-1, "down")):
            patterns.append((f"`{text}` {word}", lambda i, v, s=site, d=sign: d if i == s else 0))
    for r in range(random_patterns):
        patterns.append((f"random directions {r}", lambda i, v: rng.integers(-1, 2, np.shape(v))))
    for u in ulps:
        for name, direction in patterns:
            env = {"np": np, _NUDGE: lambda v, i, d=direction, u=u: _nudge(v, u, d(i, v))}
            exec(code, env)
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    want = env["f"](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
            except Exception:
                continue
            if _compare("nudged", got, want, through) is None:
                return f"NumPy gives msir's value with {name} by {u} ulp (rounding through a discontinuity)"
    return None


def run_trial(program: Program, directory: str) -> Outcome:
    """Run `program` in this process and classify it (module docstring)."""
    import msir

    f, path = _load(program, directory)
    args = [a.value() for a in program.args]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    except Exception as e:
        return Outcome("skipped", f"NumPy: {type(e).__name__}: {e}")
    special = _floating_point_warnings(f, args) + _singular_derivatives(program, args)
    through = _narrowest_float(program, args)
    rounding = []
    for mode, mode_name in ((msir.GRAPH_MODE, "GRAPH"), (msir.PYNATIVE_MODE, "PYNATIVE")):
        msir.set_context(mode=mode)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = msir.jit(f)(*args)
        except Exception as e:
            return _msir_failure(e, path)
        finally:
            msir.set_context(mode=msir.GRAPH_MODE)
        diff = _compare(f"{mode_name} result", got, want, through)
        if diff:
            if any("in cast" in w for w in special):
                return Outcome("undefined", f"{diff}\n  NumPy: {special}")
            explained = _rounding_explains(program, args, got, through=through)
            if explained is None:
                return Outcome("wrong", diff)
            rounding.append(f"{diff}\n  {explained}")
    if rounding:
        return Outcome("rounding", "\n".join(rounding))
    if not (isinstance(want, (np.floating, float)) and np.asarray(want).dtype == np.float64 and np.isfinite(want)):
        return Outcome("ok")
    fd_small, fd_large = (_finite_differences(f, args, h) for h in (1e-6, 1e-4))
    if not (np.all(np.isfinite(fd_small)) and np.all(np.isfinite(fd_large))):
        return Outcome("ok", "no finite differences")
    for mode, mode_name in ((msir.GRAPH_MODE, "GRAPH"), (msir.PYNATIVE_MODE, "PYNATIVE")):
        msir.set_context(mode=mode)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = msir.grad(f)(*args)
        except Exception as e:
            return _msir_failure(e, path)
        finally:
            msir.set_context(mode=msir.GRAPH_MODE)
        diff = _compare(f"{mode_name} gradient type", g, fd_small) if np.shape(g) != np.shape(fd_small) or \
            np.asarray(g).dtype != np.float64 else None
        if diff:
            return Outcome("wrong", diff)
        if special and not np.all(np.isfinite(g)):
            return Outcome("undefined", f"{mode_name} gradient {np.asarray(g)}\n  NumPy: {special}")
        if not (_grad_close(g, fd_small) or _grad_close(g, fd_large)):
            if not _grad_close(fd_small, fd_large):
                return Outcome("kink", f"{mode_name} gradient at a point that is not smooth")
            return Outcome("wrong", f"{mode_name} gradient\n  got  {np.asarray(g)}\n  want {fd_small}")
    return Outcome("ok", GRADIENT_CHECKED)


def serve() -> None:
    """The worker loop: after a `ready` line, a program as one JSON line on
    stdin, its outcome as one on stdout."""
    out = sys.stdout
    sys.stdout = sys.stderr  # what a program or msir prints must not corrupt the protocol
    with tempfile.TemporaryDirectory(prefix="fuzzprog_") as directory:
        # verify the module after every stage; keep thousands of programs out of the user's cache
        os.environ.setdefault("MSIR_VERIFY", "1")
        os.environ.setdefault("MSIR_CACHE_DIR", directory)
        import msir.api  # noqa: F401  (the start-up cost is not a trial's)

        out.write("ready\n")
        out.flush()
        for line in sys.stdin:
            try:
                outcome = run_trial(Program.from_json(line), directory)
            except Exception as e:
                outcome = Outcome("internal", "in the harness: " + "".join(traceback.format_exception(e))[-1500:])
            out.write(json.dumps(asdict(outcome)) + "\n")
            out.flush()


# ---------------------------------------------------------------------------
# The worker subprocess
# ---------------------------------------------------------------------------


class Worker:
    """A subprocess running `serve`, restarted after a crash or a hang."""

    STARTUP_TIMEOUT = 300.0

    def __init__(self, timeout: float = 120.0):
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ready, _, _ = select.select([proc.stdout], [], [], self.STARTUP_TIMEOUT)
        if not ready or proc.stdout.readline() != "ready\n":
            proc.kill()
            raise RuntimeError("the fuzzing worker did not start")
        return proc

    def run(self, program: Program) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        self.proc.stdin.write(program.to_json() + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.close()
            return Outcome("hang", f"no answer within {self.timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.proc = None
            return Outcome("crash", f"worker exit status {code}")
        return Outcome(**json.loads(line))

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


def run(trials: int, seed: int, start: int = 0, timeout: float = 120.0, verbose: bool = True):
    """Run trials `start..start+trials` of `seed`; return the counts and the
    failures that survive a replay in a fresh worker, as (index, outcome)."""
    counts: Counter[str] = Counter()
    failures = []
    worker = Worker(timeout)
    try:
        for i in range(start, start + trials):
            outcome = worker.run(random_program(seed, i))
            counts[outcome.kind] += 1
            counts["ok with a gradient"] += outcome.kind == "ok" and outcome.detail == GRADIENT_CHECKED
            if outcome.kind in FAILURES:
                fresh = Worker(timeout)
                replayed = fresh.run(random_program(seed, i))
                fresh.close()
                if replayed.kind in FAILURES:
                    failures.append((i, replayed))
                else:
                    counts["not replayed"] += 1
                if verbose:
                    first = outcome.detail.strip().splitlines()[-1] if outcome.detail.strip() else ""
                    print(f"{seed}:{i} {outcome.kind} (replay: {replayed.kind}) {first[:200]}", flush=True)
    finally:
        worker.close()
    return counts, failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--replay", type=str, default=None, help="SEED:INDEX: print the program and its outcome")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve()
        return
    if args.replay:
        seed, index = map(int, args.replay.split(":"))
        program = random_program(seed, index)
        print(program.source)
        print("args:", {a.name: (a.dtype, a.shape) for a in program.args})
        worker = Worker(args.timeout)
        outcome = worker.run(program)
        worker.close()
        print(outcome.kind)
        print(outcome.detail)
        return
    counts, failures = run(args.trials, args.seed, args.start, args.timeout)
    print(dict(counts))
    print(f"failures surviving replay: {len(failures)}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
