"""Python AST to the `msir` dialect.

`Translator` walks one function's AST and builds the body of a `func.func`,
keeping every value in SSA form. Shapes and dtypes are known while tracing
(the function is specialised to its argument types), so NumPy broadcasting and
type promotion become explicit `msir.broadcast_to` and `msir.cast` ops here, and
every shape or dtype mistake is reported at the user's source line.

Calls to other user functions whose arguments are all arrays become `func.call`
of a separate function (one per callee and argument types); other calls (with
Python values, functions or tuples as arguments, or callees that capture arrays)
are inlined. Nested `def`s and lambdas are compile-time closures, inlined where
called.

Recursion. A recursion through Python values (an int depth) is unrolled at
compile time. A function that calls itself (directly or through others) with
arguments of the types it is being built for becomes a native recursive
`func.call`: its result type is the one its base cases return (the function is
built once with the branches that recurse left out, then until the type it
returns is the one its recursive calls assumed). An inlined recursion becomes
native at its first recursive call when nothing static could end it (only
arrays and functions as arguments), or once `_MAX_INLINED_RECURSION` levels
deep (its Python numbers then become runtime values). Refused, at the call: a
recursion with no base case, and one whose argument shapes change at every
level (after `_MAX_SPECIALISED_RECURSION` specialisations). The native stack
bounds the depth of a native recursion: a call may use `STACK_LIMIT` (4 MiB,
`msir.lowering.to_llvm`) of it, some 50 000 levels of a small function;
deeper, the recursive call raises `MsirRecursionError` at its line.

`return` inside loops (`loop_returning`) becomes a loop-carried `returned` flag
and return value: every loop of the nest is left through `break`, and after the
outermost one an early return selects the returned value or continues.
"""

from __future__ import annotations

import ast
import builtins
import copy
import math
import operator
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    UnitAttr,
    ArrayAttr,
    SymbolRefAttr,
    DenseIntOrFPElementsAttr,
    FileLineColLoc,
    FunctionType,
    IntAttr,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue

from msir.dialects import msir as M
from msir.errors import (
    DTypeError,
    MsirError,
    MsirIndexError,
    NotDifferentiableError,
    ShapeError,
    SourceLoc,
    UnsupportedSyntaxError,
)
from msir.frontend.source import FunctionSource, get_source
from msir.frontend.values import Closure, KnownInt, Tensor, kind, promote, weak_dtype_of
from msir.transforms import CustomVjp, Jitted, Transform, checkpoint, compile_time_kind

# ---------------------------------------------------------------------------
# Module-wide state of one trace
# ---------------------------------------------------------------------------


@dataclass
class Capture:
    """An array read from an enclosing scope: a hidden runtime argument."""

    get: Callable[[], Any]
    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass
class TraceContext:
    module_ops: list[Operation] = field(default_factory=list)
    static_positions: set[int] = field(default_factory=set)
    captures: list[Capture] = field(default_factory=list)
    capture_values: dict[int, Tensor] = field(default_factory=dict)
    callees: dict[tuple, tuple[str, Any]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    entry_block: Block | None = None
    active: list[tuple] = field(default_factory=list)
    block_fn: dict[Block, Block] = field(default_factory=dict)
    """The entry block of the function each region block belongs to."""
    fn_captures: dict[Block, tuple[dict[SSAValue, Tensor], list[Tensor]]] = field(default_factory=dict)
    """Per outlined function: values of enclosing functions it reads, as extra parameters."""
    recorder: Any = None
    """A `msir.trace_cache.Recorder` of every name resolved outside the traced
    code (the persistent trace cache's dependency manifest), or None."""
    recursive: dict[tuple, "_Recursive"] = field(default_factory=dict)
    """Per function being built that calls itself: what its recursive calls return."""
    trial: set[tuple] = field(default_factory=set)
    """Functions built once to learn what their base cases return: a branch that
    reaches their recursive call is left out."""
    inlining: list[Any] = field(default_factory=list)
    """The code objects of the user functions being inlined, innermost last."""
    static_arguments: list[Any] = field(default_factory=list)
    """Compile-time arguments of outlined functions (kept alive: keys hold their ids)."""

    def unique_name(self, base: str) -> str:
        name, i = base, 0
        while name in self.names:
            i += 1
            name = f"{base}_{i}"
        self.names.add(name)
        return name


_RETURN = object()


@dataclass
class _Callee:
    """A user function (or nested def) that a call outlines: `code` identifies it."""

    code: Any
    name: str
    source: FunctionSource
    globals: dict
    closure: dict
    node: ast.FunctionDef | ast.Lambda


@dataclass
class _Recursive:
    """The function a recursive call calls, with the result its base cases give."""

    name: str
    structure: Any
    weak: list[bool]
    types: list[Attribute]
    captured: list[Tensor]

    def same_as(self, other: "_Recursive") -> bool:
        return (
            self.structure == other.structure
            and self.weak == other.weak
            and self.types == other.types
            and [c.ssa for c in self.captured] == [c.ssa for c in other.captured]
        )


class _UnknownRecursiveResult(Exception):
    """A recursive call reached before its function's result type is known."""

    def __init__(self, key: tuple, loc: SourceLoc):
        super().__init__(key)
        self.key = key
        self.loc = loc


def dtype_name(obj: Any, loc: SourceLoc | None = None) -> str:
    """A dtype argument (np.float32, 'float32', np.dtype, float, int, bool) as a name."""
    if obj is float:
        return "float64"
    if obj is int:
        return "int64"
    if obj is bool:
        return "bool"
    try:
        name = np.dtype(obj).name
    except TypeError:
        raise DTypeError(f"{obj!r} is not a dtype", loc) from None
    if name not in M.DTYPES:
        raise DTypeError(f"dtype {name} is not supported (use one of {', '.join(M.DTYPES)})", loc)
    return name


def _loc_attr(loc: SourceLoc) -> FileLineColLoc:
    return FileLineColLoc(StringAttr(loc.file), IntAttr(loc.line), IntAttr(loc.col))


# ---------------------------------------------------------------------------
# The translator
# ---------------------------------------------------------------------------

_BINOPS: dict[type, str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "truediv",
    ast.FloorDiv: "floordiv",
    ast.Mod: "rem",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.BitAnd: "and",
    ast.BitOr: "or",
    ast.BitXor: "xor",
}
_PY_BINOPS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "rem": operator.mod,
    "pow": operator.pow,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_CMP = {
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}
_ELEMENTWISE_OPS: dict[str, type[Operation]] = {
    "add": M.AddOp,
    "sub": M.SubOp,
    "mul": M.MulOp,
    "truediv": M.DivOp,
    "floordiv": M.FloorDivOp,
    "rem": M.RemOp,
    "pow": M.PowOp,
    "maximum": M.MaximumOp,
    "minimum": M.MinimumOp,
    "and": M.AndOp,
    "or": M.OrOp,
    "xor": M.XorOp,
}
_BOOL_EQUIVALENT: dict[str, type[Operation]] = {
    "add": M.OrOp,
    "mul": M.AndOp,
    "maximum": M.OrOp,
    "minimum": M.AndOp,
}
_UNARY_FLOAT_OPS: dict[str, type[Operation]] = {
    "exp": M.ExpOp,
    "log": M.LogOp,
    "log1p": M.Log1pOp,
    "expm1": M.Expm1Op,
    "sin": M.SinOp,
    "cos": M.CosOp,
    "tanh": M.TanhOp,
    "sqrt": M.SqrtOp,
}
_UNSUPPORTED_STMTS = {
    ast.Try: "try/except",
    ast.With: "with",
    ast.AsyncWith: "async with",
    ast.Global: "global declarations",
    ast.Nonlocal: "nonlocal declarations",
    ast.AsyncFor: "async for",
    ast.Delete: "del",
    ast.Raise: "raise",
    ast.Import: "import",
    ast.ImportFrom: "import",
    ast.ClassDef: "class definitions",
    ast.AsyncFunctionDef: "async functions",
    ast.Assert: "assert",
}
_UNSUPPORTED_EXPRS = {
    ast.Yield: "yield (generators)",
    ast.YieldFrom: "yield from (generators)",
    ast.Await: "await",
    ast.JoinedStr: "f-strings",
    ast.Dict: "dict literals",
    ast.Set: "set literals",
    ast.DictComp: "dict comprehensions",
    ast.SetComp: "set comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.NamedExpr: "assignment expressions (:=)",
    ast.Starred: "starred expressions",
}


class Translator:
    """Translates one Python function body into ops appended to `block`."""

    def __init__(self, tc: TraceContext, block: Block, source: FunctionSource, globals_: dict, closure: dict):
        self.tc = tc
        self.block = block
        self.fn_block = tc.block_fn.get(block, block)
        self.source = source
        self.globals = globals_
        self.closure = closure
        self.scope: dict[str, Any] = {}
        self.params: set[int] = set()
        self.loc = source.loc(source.node)
        self.return_slots: dict[str, list[tuple[Any, ast.AST]]] = {}
        """Per `return` lowered inside a loop: the values assigned to its slot."""

    # -- errors and emission ------------------------------------------------

    def error(self, cls, message: str, node: ast.AST | None = None) -> MsirError:
        return cls(message, self.source.loc(node) if node is not None else self.loc)

    def unsupported(self, what: str, node: ast.AST) -> UnsupportedSyntaxError:
        return self.error(UnsupportedSyntaxError, f"{what} is not supported in compiled functions", node)

    def emit(self, op: Operation) -> Operation:
        op.location = _loc_attr(self.loc)
        self.block.add_op(op)
        return op

    def tensor(self, op: Operation, weak: bool = False) -> Tensor:
        self.emit(op)
        r = op.results[0]
        return Tensor(r, M.dtype_of(r.type), M.shape_of(r.type), weak)

    # -- statements ---------------------------------------------------------

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
            case ast.Expr(value=ast.Yield() | ast.YieldFrom() | ast.Await() as value):
                self.expr(value)
            case ast.Expr(value=value):
                raise self.unsupported(
                    "an expression statement (a call for its side effect, e.g. print)", value
                )
            case ast.Pass():
                pass
            case ast.If(test=test, body=body, orelse=orelse):
                cond = self.expr(test)
                if isinstance(cond, Tensor):
                    self.if_stmt(node, cond)
                    return None
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
            case ast.Subscript():
                raise self.error(
                    UnsupportedSyntaxError,
                    "in-place array writes (x[...] = v) are not supported in compiled functions; "
                    "arrays are values: build a new one (np.where, np.concatenate)",
                    target,
                )
            case ast.Attribute():
                raise self.unsupported("assigning to an attribute", target)
            case _:
                raise self.unsupported(f"assigning to '{type(target).__name__}'", target)

    def unpack(self, value: Any, n: int | None, node: ast.AST) -> list[Any]:
        if isinstance(value, (tuple, list)):
            items = list(value)
        elif isinstance(value, Tensor) and value.ndim > 0:
            items = [self.index(value, i, node) for i in range(value.shape[0])]
        else:
            raise self.error(UnsupportedSyntaxError, f"cannot unpack {self.describe(value)}", node)
        if n is not None and len(items) != n:
            raise self.error(
                ShapeError, f"cannot unpack {len(items)} values into {n} targets", node
            )
        return items

    def aug_assign(self, node: ast.AugAssign, target: ast.expr, op: ast.operator, value: ast.expr) -> None:
        if not isinstance(target, ast.Name):
            if isinstance(target, ast.Subscript):
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

    # -- names --------------------------------------------------------------

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.scope:
            v = self.scope[name]
            if isinstance(v, _Undefined):
                raise self.error(UnsupportedSyntaxError, f"variable '{name}' {v.why}", node)
            return self.localize(v)
        if self.tc.recorder is not None:
            self.tc.recorder.resolved(self.closure, self.globals, name)
        if name in self.closure:
            return self.localize(self.external(self.closure[name], name, node))
        if name in self.globals:
            return self.localize(self.external(self.globals[name], name, node, lambda: self.globals[name]))
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(UnsupportedSyntaxError, f"name '{name}' is not defined", node)

    def localize(self, value: Any) -> Any:
        """A value of an enclosing function, made a parameter of this outlined one."""
        if isinstance(value, Tensor):
            owner = value.ssa.block if isinstance(value.ssa, BlockArgument) else value.ssa.owner.parent_block()
            owner = self.tc.block_fn.get(owner, owner)
            if owner is self.fn_block or self.fn_block not in self.tc.fn_captures:
                return value
            mapping, order = self.tc.fn_captures[self.fn_block]
            if value.ssa not in mapping:
                arg = self.fn_block.insert_arg(value.ssa.type, len(self.fn_block.args))
                arg.name_hint = value.ssa.name_hint
                mapping[value.ssa] = Tensor(arg, value.dtype, value.shape, value.weak)
                order.append(value)
            return mapping[value.ssa]
        if isinstance(value, KnownInt):
            return KnownInt(value.value, value.deps, self.localize(value.tensor))
        if isinstance(value, tuple):
            return tuple(self.localize(v) for v in value)
        if isinstance(value, list):
            return [self.localize(v) for v in value]
        return value

    def external(self, value: Any, name: str, node: ast.AST, getter=None) -> Any:
        """A value from an enclosing scope: arrays become hidden runtime arguments."""
        if isinstance(value, Closure):
            return value
        if isinstance(value, types.CellType):
            cell = value
            value = cell.cell_contents
            getter = lambda: cell.cell_contents  # noqa: E731
        if isinstance(value, np.ndarray):
            return self.capture(value, name, getter or (lambda: value), node)
        if isinstance(value, (tuple, list)) and any(isinstance(v, (np.ndarray, tuple, list)) for v in value):
            outer = getter or (lambda: value)
            items = [
                self.external(v, f"{name}_{i}", node, (lambda i=i: outer()[i]))
                for i, v in enumerate(value)
            ]
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, np.generic):
            return self.constant(value.item(), dtype_name(value.dtype), weak=False)
        return value

    def capture(self, value: np.ndarray, name: str, getter, node) -> Tensor:
        key = (name, id(value))
        for i, c in enumerate(self.tc.captures):
            if (c.name, id(c.get())) == key:
                return self.tc.capture_values[i]
        dtype = dtype_name(value.dtype, self.source.loc(node))
        assert self.tc.entry_block is not None
        arg = self.tc.entry_block.insert_arg(M.tensor_type(value.shape, dtype), len(self.tc.entry_block.args))
        arg.name_hint = name
        t = Tensor(arg, dtype, tuple(value.shape))
        self.tc.capture_values[len(self.tc.captures)] = t
        self.tc.captures.append(Capture(getter, name, dtype, tuple(value.shape)))
        return t

    # -- expressions --------------------------------------------------------

    def expr(self, node: ast.expr) -> Any:
        saved = self.loc
        self.loc = self.source.loc(node)
        try:
            return self._expr(node)
        except M.ShapeOrTypeError as e:
            cls = {"shape": ShapeError, "dtype": DTypeError, "index": MsirIndexError}[e.kind]
            raise cls(str(e), self.loc) from None
        finally:
            self.loc = saved

    def _expr(self, node: ast.expr) -> Any:
        for cls, what in _UNSUPPORTED_EXPRS.items():
            if isinstance(node, cls):
                raise self.unsupported(what, node)
        match node:
            case ast.Constant(value=value):
                return value
            case ast.Name(id=name):
                return self.lookup(name, node)
            case ast.Tuple(elts=elts):
                return tuple(self.expr(e) for e in elts)
            case ast.List(elts=elts):
                return [self.expr(e) for e in elts]
            case ast.BinOp(left=left, op=op, right=right):
                if type(op) not in _BINOPS:
                    raise self.unsupported(f"the operator {_op_symbol(op)}", node)
                return self.binary(_BINOPS[type(op)], self.expr(left), self.expr(right), node)
            case ast.UnaryOp(op=op, operand=operand):
                return self.unary_op(op, self.expr(operand), node)
            case ast.BoolOp(op=op, values=values):
                return self.bool_op(op, values, node)
            case ast.Compare(left=left, ops=ops, comparators=comps):
                return self.compare_chain(left, ops, comps, node)
            case ast.IfExp(test=test, body=body, orelse=orelse):
                cond = self.expr(test)
                if isinstance(cond, Tensor):
                    return self.if_expr(node, cond)
                return self.expr(body if self.static_bool(cond, test, "a conditional expression") else orelse)
            case ast.ListComp(elt=elt, generators=gens):
                return self.list_comprehension(node, elt, gens)
            case ast.Attribute(value=value, attr=attr):
                return self.attribute(self.expr(value), attr, node)
            case ast.Subscript(value=value, slice=idx):
                return self.subscript(self.expr(value), idx, node)
            case ast.Call():
                return self.call(node)
            case ast.Lambda():
                return Closure(node, self.scope, self.source, [self.expr(d) for d in node.args.defaults])
            case ast.Slice():
                return slice(
                    *(None if p is None else self.expr(p) for p in (node.lower, node.upper, node.step))
                )
        raise self.unsupported(f"the expression '{type(node).__name__}'", node)

    def describe(self, value: Any) -> str:
        if isinstance(value, Tensor):
            return f"an array of shape {M.fmt_shape(value.shape)} and dtype {value.dtype}"
        if isinstance(value, KnownInt):
            return "an int"
        return f"a value of type {type(value).__name__}"

    # -- conversions --------------------------------------------------------

    def constant(self, value: Any, dtype: str, weak: bool = False, shape: tuple[int, ...] = ()) -> Tensor:
        attr = DenseIntOrFPElementsAttr.from_list(
            M.tensor_type(shape, dtype), [float(value) if M.is_float(dtype) else int(value)]
        ) if not shape else DenseIntOrFPElementsAttr.from_list(
            M.tensor_type(shape, dtype), np.asarray(value, dtype=dtype).ravel().tolist()
        )
        return self.tensor(M.ConstantOp(attr), weak)

    def as_tensor(self, value: Any, node: ast.AST | None = None) -> Tensor:
        if isinstance(value, Tensor):
            return value
        if isinstance(value, KnownInt):
            return value.tensor
        if isinstance(value, (bool, int, float)):
            return self.constant(value, weak_dtype_of(value), weak=True)
        if isinstance(value, (list, tuple)) and value:
            items = [self.as_tensor(v, node) for v in value]
            dtype, weak = items[0].dtype, items[0].weak
            for it in items[1:]:
                dtype, weak = promote(dtype, weak, it.dtype, it.weak)
            items = [self.cast(it, dtype) for it in items]
            if all(it.ndim == 0 for it in items) and all(
                isinstance(v, (bool, int, float)) for v in value
            ):
                return self.constant(value, dtype, weak=False, shape=(len(value),))
            return self.tensor(M.StackOp([it.ssa for it in items], 0))
        raise self.error(
            DTypeError, f"expected an array or a number, got {self.describe(value)}", node
        )

    def cast(self, t: Tensor, dtype: str, weak: bool | None = None) -> Tensor:
        weak = t.weak if weak is None else weak
        if t.dtype == dtype:
            return t if t.weak == weak else Tensor(t.ssa, t.dtype, t.shape, weak)
        if isinstance(t.ssa.owner, M.ConstantOp) and t.ndim == 0:
            # Fold: a Python scalar meeting an array becomes a constant of its dtype.
            scalar = _constant_scalar(t)
            if t.weak and M.is_int(dtype) and isinstance(scalar, int):
                info = np.iinfo(dtype)
                if not info.min <= scalar <= info.max:
                    raise self.error(
                        OverflowError_, f"Python integer {scalar} out of bounds for {dtype}", None
                    )
            value = np.asarray(scalar).astype(dtype).item()
            return self.constant(value, dtype, weak)
        return self.tensor(M.CastOp(t.ssa, dtype), weak)

    def broadcast(self, t: Tensor, shape: tuple[int, ...]) -> Tensor:
        if t.shape == shape:
            return t
        return self.tensor(M.BroadcastToOp(t.ssa, shape), t.weak)

    def static_int(self, value: Any, what: str, node: ast.AST | None = None) -> int:
        """A value in a static position: it specialises the function."""
        if isinstance(value, KnownInt):
            self.tc.static_positions.update(value.deps)
            return int(value.value)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
        raise self.error(
            UnsupportedSyntaxError,
            f"{what} must be an integer known at compile time, got {self.describe(value)}",
            node,
        )

    def static_bool(self, value: Any, node: ast.AST, what: str) -> bool:
        if isinstance(value, KnownInt):
            self.tc.static_positions.update(value.deps)
            return bool(value.value)
        if isinstance(value, Tensor):
            raise self.error(
                UnsupportedSyntaxError,
                f"{what} on a runtime array value is not supported yet (needs msir.if); "
                "use np.where for elementwise choice",
                node,
            )
        return bool(value)

    def static_ints(self, value: Any, what: str, node: ast.AST | None = None) -> tuple[int, ...]:
        if isinstance(value, (tuple, list)):
            return tuple(self.static_int(v, what, node) for v in value)
        return (self.static_int(value, what, node),)

    def axes(self, axis: Any, ndim: int, node: ast.AST) -> tuple[int, ...]:
        if axis is None:
            return tuple(range(ndim))
        out = tuple(M.normalize_axis(a, ndim) for a in self.static_ints(axis, "an axis", node))
        return out

    # -- arithmetic ---------------------------------------------------------

    def binary(self, name: str, a: Any, b: Any, node: ast.AST) -> Any:
        if name == "matmul":
            return self.matmul(a, b, node)
        known = self._known_binary(name, a, b, node)
        if known is not None:
            return known
        ta, tb = self.as_tensor(a, node), self.as_tensor(b, node)
        return self.elementwise(name, ta, tb, node)

    def _known_binary(self, name: str, a: Any, b: Any, node: ast.AST) -> Any:
        """Python values (and known ints) compute in Python, as NumPy would."""
        pa = isinstance(a, (bool, int, float)) and not isinstance(a, Tensor)
        pb = isinstance(b, (bool, int, float)) and not isinstance(b, Tensor)
        ka, kb = isinstance(a, KnownInt), isinstance(b, KnownInt)
        if pa and pb:
            try:
                return _PY_BINOPS[name](a, b)
            except ZeroDivisionError as e:
                raise self.error(ZeroDivisionError_, str(e), node) from None
        if (ka or pa) and (kb or pb) and (ka or kb) and name in ("add", "sub", "mul", "floordiv", "rem"):
            va = a.value if ka else a
            vb = b.value if kb else b
            if isinstance(va, float) or isinstance(vb, float) or (name in ("floordiv", "rem") and vb == 0):
                return None
            deps = (a.deps if ka else frozenset()) | (b.deps if kb else frozenset())
            t = self.elementwise(name, self.as_tensor(a), self.as_tensor(b), node)
            return KnownInt(_PY_BINOPS[name](va, vb), deps, t)
        return None

    def elementwise(self, name: str, a: Tensor, b: Tensor, node: ast.AST) -> Tensor:
        dtype, weak = promote(a.dtype, a.weak, b.dtype, b.weak)
        if name == "truediv" and kind(dtype) < 2:
            dtype = "float64"
        if dtype == "bool" and weak and name in ("add", "sub", "mul", "floordiv", "rem", "pow"):
            dtype = "int64"  # Python bools do arithmetic as ints (True + True == 2)
        if dtype == "bool" and name in _BOOL_EQUIVALENT:
            return self._apply_binary(_BOOL_EQUIVALENT[name], a, b, "bool", weak)
        if dtype == "bool" and name == "sub":
            raise self.error(
                DTypeError,
                "numpy boolean subtract, the `-` operator, is not supported, use the "
                "bitwise_xor, the `^` operator, or the logical_xor function instead",
                node,
            )
        if dtype == "bool" and name in ("floordiv", "rem", "pow"):
            dtype = "int64"  # NumPy computes these in int8, which msir does not have
        if name in ("and", "or", "xor") and kind(dtype) == 2:
            raise self.error(
                DTypeError,
                f"the operator {_NAME_SYMBOL[name]} is not supported for {a.dtype} and {b.dtype} "
                "(bitwise operations need bool or integer arrays)",
                node,
            )
        if name == "pow" and isinstance(b.ssa.owner, M.ConstantOp) and b.ndim == 0:
            value = _constant_scalar(b)
            if value == 2:
                a2 = self.cast(a, dtype, weak)
                return self.elementwise("mul", a2, a2, node)
        return self._apply_binary(_ELEMENTWISE_OPS[name], a, b, dtype, weak)

    def _apply_binary(self, op: type[Operation], a: Tensor, b: Tensor, dtype: str, weak: bool) -> Tensor:
        shape = M.infer_broadcast(a.shape, b.shape)
        a2 = self.broadcast(self.cast(a, dtype), shape)
        b2 = self.broadcast(self.cast(b, dtype), shape)
        return self.tensor(op(a2.ssa, b2.ssa), weak)

    def unary_op(self, op: ast.unaryop, v: Any, node: ast.AST) -> Any:
        if isinstance(op, ast.Not):
            if isinstance(v, Tensor) and v.ndim == 0:
                t = self.truth(v, node)
                return self.tensor(M.NotOp(t.ssa), t.weak)
            if isinstance(v, Tensor):
                raise self.error(
                    UnsupportedSyntaxError,
                    "'not' on an array is not supported; use np.logical_not or ~ for elementwise not",
                    node,
                )
            return not self.static_bool(v, node, "'not'")
        if isinstance(v, (bool, int, float)) and not isinstance(v, Tensor):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(op)](v)
        if isinstance(v, KnownInt) and isinstance(op, ast.USub):
            return KnownInt(-v.value, v.deps, self.unary("neg", v.tensor, node))
        t = self.as_tensor(v, node)
        if isinstance(op, ast.USub):
            return self.unary("neg", t, node)
        if isinstance(op, ast.UAdd):
            return t
        if t.dtype == "bool":
            return self.tensor(M.NotOp(t.ssa), t.weak)
        if kind(t.dtype) == 1:
            return self.elementwise("xor", t, self.constant(-1, t.dtype, shape=()), node)
        raise self.error(DTypeError, f"the operator ~ is not supported for {t.dtype}", node)

    def unary(self, name: str, t: Tensor, node: ast.AST) -> Tensor:
        if name in _UNARY_FLOAT_OPS or name in ("floor", "ceil"):
            if kind(t.dtype) < 2:
                if name in ("floor", "ceil"):
                    return self.cast(t, "float64", False) if t.dtype == "bool" else t
                t = self.cast(t, "float64", False)
            op = _UNARY_FLOAT_OPS.get(name) or {"floor": M.FloorOp, "ceil": M.CeilOp}[name]
            return self.tensor(op(t.ssa), False)
        if name == "neg":
            if t.dtype == "bool":
                raise self.error(
                    DTypeError,
                    "the numpy boolean negative, the `-` operator, is not supported, use the "
                    "`~` operator or the logical_not function instead",
                    node,
                )
            return self.tensor(M.NegOp(t.ssa), t.weak)
        if name == "abs":
            return t if t.dtype == "bool" else self.tensor(M.AbsOp(t.ssa), t.weak)
        if name == "sign":
            if t.dtype == "bool":
                raise self.error(DTypeError, "np.sign is not supported for bool arrays", node)
            return self.tensor(M.SignOp(t.ssa), t.weak)
        raise AssertionError(name)

    def compare(self, pred: str, a: Any, b: Any, node: ast.AST) -> Any:
        pa = isinstance(a, (bool, int, float, str, type(None))) and not isinstance(a, Tensor)
        pb = isinstance(b, (bool, int, float, str, type(None))) and not isinstance(b, Tensor)
        if pa and pb:
            return _PY_CMP[pred](a, b)
        if isinstance(a, (KnownInt, int)) and isinstance(b, (KnownInt, int)):
            va = a.value if isinstance(a, KnownInt) else a
            vb = b.value if isinstance(b, KnownInt) else b
            deps = frozenset().union(*[x.deps for x in (a, b) if isinstance(x, KnownInt)])
            t = self.compare(pred, self.as_tensor(a), self.as_tensor(b), node)
            return KnownInt(_PY_CMP[pred](va, vb), deps, t)
        if isinstance(a, tuple) and isinstance(b, tuple) and pred in ("eq", "ne"):
            return _PY_CMP[pred](a, b)
        if pred in ("eq", "ne") and (_is_dtype_like(a) or _is_dtype_like(b)):
            return _PY_CMP[pred](np.dtype(a) if _is_dtype_like(a) else a, np.dtype(b) if _is_dtype_like(b) else b)
        ta, tb = self.as_tensor(a, node), self.as_tensor(b, node)
        dtype, _ = promote(ta.dtype, ta.weak, tb.dtype, tb.weak)
        if dtype == "int32" and any(_out_of_int32(x) for x in (a, b)):
            dtype = "int64"  # NumPy compares with a Python int exactly, whatever its size
        shape = M.infer_broadcast(ta.shape, tb.shape)
        a2 = self.broadcast(self.cast(ta, dtype), shape)
        b2 = self.broadcast(self.cast(tb, dtype), shape)
        return self.tensor(M.CompareOp(pred, a2.ssa, b2.ssa), ta.weak and tb.weak)

    def compare_chain(self, left, ops, comps, node) -> Any:
        lhs = self.expr(left)
        result = None
        for op, comp in zip(ops, comps):
            rhs = self.expr(comp)
            if isinstance(op, (ast.Is, ast.IsNot)):
                if not (rhs is None or lhs is None or isinstance(rhs, type) or callable(rhs)):
                    raise self.unsupported("'is' on runtime values", node)
                r = (lhs is rhs) == isinstance(op, ast.Is)
            elif isinstance(op, (ast.In, ast.NotIn)):
                raise self.unsupported("'in'", node)
            else:
                r = self.compare(_CMPOPS[type(op)], lhs, rhs, node)
            result = r if result is None else self.logical("and", result, r, node)
            lhs = rhs
        return result

    def logical(self, name: str, a: Any, b: Any, node: ast.AST) -> Any:
        if isinstance(a, Tensor) or isinstance(b, Tensor):
            ta, tb = self.as_tensor(a), self.as_tensor(b)
            if ta.ndim == 0 and tb.ndim == 0 and ta.dtype == "bool" and tb.dtype == "bool":
                # Both sides are truth values (e.g. a chained comparison): no
                # short-circuit is observable, so `and`/`or` are logical and/or.
                op = M.AndOp if name == "and" else M.OrOp
                return self.tensor(op(ta.ssa, tb.ssa), ta.weak and tb.weak)
            if ta.ndim or tb.ndim:
                raise self.error(
                    ValueError_,
                    "The truth value of an array with more than one element is ambiguous; "
                    "use np.logical_and / np.logical_or",
                    node,
                )
            raise self.error(
                UnsupportedSyntaxError,
                f"'{name}' on runtime values is not supported yet; use np.logical_{name}",
                node,
            )
        va = self.static_bool(a, node, f"'{name}'")
        return (va and b) if name == "and" else (va or b)

    def bool_op(self, op: ast.boolop, values: list[ast.expr], node: ast.AST) -> Any:
        name = "and" if isinstance(op, ast.And) else "or"
        result = self.expr(values[0])
        for v in values[1:]:
            decided = self.static_bool(result, node, f"'{name}'") if not isinstance(result, Tensor) else None
            if decided is None:
                return self.logical(name, result, self.expr(v), node)
            if (name == "and" and not decided) or (name == "or" and decided):
                return result
            result = self.expr(v)
        return result

    def matmul(self, a: Any, b: Any, node: ast.AST) -> Tensor:
        ta, tb = self.as_tensor(a, node), self.as_tensor(b, node)
        if ta.ndim == 0 or tb.ndim == 0:
            raise self.error(
                ShapeError,
                "matmul: Input operand does not have enough dimensions (a scalar given; use * to scale)",
                node,
            )
        dtype, weak = promote(ta.dtype, ta.weak, tb.dtype, tb.weak)
        if dtype == "bool":
            raise self.error(DTypeError, "matmul of boolean arrays is not supported", node)
        return self.tensor(M.MatmulOp(self.cast(ta, dtype).ssa, self.cast(tb, dtype).ssa), weak)

    # -- reductions ---------------------------------------------------------

    def reduce(self, name: str, x: Any, axis: Any, keepdims: Any, node: ast.AST, dtype: Any = None) -> Tensor:
        t = self.as_tensor(x, node)
        axes = self.axes(axis, t.ndim, node)
        keep = bool(keepdims)
        if dtype is not None:
            t = self.cast(t, dtype_name(dtype, self.loc))
        elif name in ("sum", "prod") and kind(t.dtype) < 2:
            t = self.cast(t, "int64")
        elif name == "mean" and kind(t.dtype) < 2:
            t = self.cast(t, "float64")
        if name in ("max", "min") and any(t.shape[a] == 0 for a in axes):
            raise self.error(
                ValueError_,
                f"zero-size array to reduction operation {'maximum' if name == 'max' else 'minimum'} "
                "which has no identity",
                node,
            )
        op = {
            "sum": M.ReduceSumOp,
            "prod": M.ReduceProdOp,
            "max": M.ReduceMaxOp,
            "min": M.ReduceMinOp,
            "mean": M.ReduceMeanOp,
        }[name]
        return self.tensor(op(t.ssa, axes, keep), False)

    def arg_reduce(self, name: str, x: Any, axis: Any, keepdims: Any, node: ast.AST) -> Tensor:
        t = self.as_tensor(x, node)
        ax = None if axis is None else M.normalize_axis(self.static_int(axis, "axis", node), t.ndim)
        op = M.ArgmaxOp if name == "argmax" else M.ArgminOp
        return self.tensor(op(t.ssa, ax, bool(keepdims)), False)

    # -- shapes -------------------------------------------------------------

    def reshape(self, t: Tensor, shape: Any, node: ast.AST) -> Tensor:
        dims = list(self.static_ints(shape, "a reshape dimension", node))
        if dims.count(-1) > 1:
            raise self.error(ShapeError, "can only specify one unknown dimension", node)
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            size = math.prod(t.shape)
            if known == 0 or size % known:
                raise self.error(
                    ShapeError,
                    f"cannot reshape array of size {size} into shape {tuple(dims)}",
                    node,
                )
            dims[dims.index(-1)] = size // known
        M.check_reshape(t.shape, dims)
        if tuple(dims) == t.shape:
            return t
        return self.tensor(M.ReshapeOp(t.ssa, dims), t.weak)

    def transpose(self, t: Tensor, axes: Any, node: ast.AST) -> Tensor:
        perm = tuple(reversed(range(t.ndim))) if axes is None else tuple(
            M.normalize_axis(a, t.ndim) for a in self.static_ints(axes, "an axis", node)
        )
        if perm == tuple(range(t.ndim)):
            return t
        return self.tensor(M.TransposeOp(t.ssa, perm), t.weak)

    def full(self, shape: Any, value: Any, dtype: Any, node: ast.AST) -> Tensor:
        dims = self.static_ints(shape, "a shape", node)
        if any(d < 0 for d in dims):
            raise self.error(ValueError_, "negative dimensions are not allowed", node)
        v = self.as_tensor(value, node)
        dt = dtype_name(dtype, self.loc) if dtype is not None else (
            "float64" if v.weak and kind(v.dtype) == 2 else ("int64" if v.weak and kind(v.dtype) == 1 else v.dtype)
        )
        if v.ndim != 0:
            return self.broadcast(self.cast(v, dt, False), tuple(dims))
        if isinstance(value, (bool, int, float)) and 0 not in dims:
            attr = DenseIntOrFPElementsAttr.from_list(
                M.tensor_type(dims, dt), [float(value) if M.is_float(dt) else int(value)]
            )
            return self.tensor(M.ConstantOp(attr), False)
        return self.broadcast(self.cast(v, dt, False), tuple(dims))

    def arange(self, args: list[Any], dtype: Any, node: ast.AST) -> Tensor:
        if not 1 <= len(args) <= 3:
            raise self.error(UnsupportedSyntaxError, "np.arange takes 1 to 3 positional arguments", node)
        if any(isinstance(a, Tensor) for a in args):
            raise self.error(
                UnsupportedSyntaxError,
                "np.arange bounds must be known at compile time (the length is a shape)",
                node,
            )
        vals = [a.value if isinstance(a, KnownInt) else a for a in args]
        for a in args:
            if isinstance(a, KnownInt):
                self.static_int(a, "an arange bound", node)
        start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (vals[0], vals[1], vals[2] if len(vals) == 3 else 1)
        if step == 0:
            raise self.error(ZeroDivisionError_, "np.arange step cannot be zero", node)
        n = max(0, math.ceil((stop - start) / step))
        is_float = any(isinstance(v, float) for v in (start, stop, step))
        dt = dtype_name(dtype, self.loc) if dtype is not None else ("float64" if is_float else "int64")
        idx = self.tensor(M.IotaOp(0, M.tensor_type((n,), "int64" if not M.is_float(dt) else dt)))
        idx = self.cast(idx, dt)
        if step != 1:
            idx = self.elementwise("mul", idx, self.constant(step, dt), node)
        if start != 0:
            idx = self.elementwise("add", idx, self.constant(start, dt), node)
        return self.cast(idx, dt, False)

    def concatenate(self, arrays: Any, axis: Any, node: ast.AST, stack: bool = False) -> Tensor:
        if not isinstance(arrays, (tuple, list)):
            raise self.error(UnsupportedSyntaxError, "expected a tuple or list of arrays", node)
        ts = [self.as_tensor(a, node) for a in arrays]
        if not ts:
            raise self.error(ValueError_, "need at least one array to concatenate", node)
        dtype, weak = ts[0].dtype, ts[0].weak
        for t in ts[1:]:
            dtype, weak = promote(dtype, weak, t.dtype, t.weak)
        ts = [self.cast(t, dtype, False) for t in ts]
        ndim = ts[0].ndim + (1 if stack else 0)
        ax = M.normalize_axis(self.static_int(axis, "axis", node), ndim)
        op = M.StackOp if stack else M.ConcatenateOp
        return self.tensor(op([t.ssa for t in ts], ax), False)

    # -- indexing -----------------------------------------------------------

    def index(self, t: Tensor, i: int, node: ast.AST) -> Tensor:
        return self.subscript_value(t, i, node)

    def subscript(self, value: Any, idx_node: ast.expr, node: ast.AST) -> Any:
        idx = self.expr(idx_node)
        if isinstance(value, (tuple, list)):
            if isinstance(idx, slice):
                s = slice(*(None if p is None else self.static_int(p, "a slice bound", node) for p in (idx.start, idx.stop, idx.step)))
                return value[s]
            i = self.static_int(idx, "a tuple index", node)
            if not -len(value) <= i < len(value):
                raise self.error(MsirIndexError, f"tuple index {i} out of range (length {len(value)})", node)
            return value[i]
        if isinstance(value, Tensor):
            return self.subscript_value(value, idx, node)
        raise self.error(UnsupportedSyntaxError, f"cannot index {self.describe(value)}", node)

    def subscript_value(self, t: Tensor, idx: Any, node: ast.AST) -> Tensor:
        items = list(idx) if isinstance(idx, tuple) else [idx]
        n_ellipsis = sum(1 for it in items if it is Ellipsis)
        if n_ellipsis > 1:
            raise self.error(MsirIndexError, "an index can only have a single ellipsis ('...')", node)
        consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
        if consumed > t.ndim:
            raise self.error(
                MsirIndexError,
                f"too many indices for array: array is {t.ndim}-dimensional, but {consumed} were indexed",
                node,
            )
        if n_ellipsis:
            k = next(i for i, it in enumerate(items) if it is Ellipsis)
            items[k : k + 1] = [slice(None)] * (t.ndim - consumed)
        else:
            items += [slice(None)] * (t.ndim - consumed)
        starts, sizes, steps, takes, out_shape = [], [], [], [], []
        axis = 0
        for it in items:
            if it is None:
                out_shape.append(("new", 1))
                continue
            dim = t.shape[axis]
            if isinstance(it, slice):
                bounds = [
                    None if p is None else self.static_int(p, "a slice bound", node)
                    for p in (it.start, it.stop, it.step)
                ]
                if bounds[2] == 0:
                    raise self.error(ValueError_, "slice step cannot be zero", node)
                r = range(*slice(*bounds).indices(dim))
                starts.append(r.start if len(r) else 0)
                sizes.append(len(r))
                steps.append(r.step)
                out_shape.append(("keep", len(r)))
            elif isinstance(it, (int, np.integer)) and not isinstance(it, bool):
                k = int(it)
                if not -dim <= k < dim:
                    raise self.error(
                        MsirIndexError,
                        f"index {k} is out of bounds for axis {axis} with size {dim}",
                        node,
                    )
                starts.append(k % dim)
                sizes.append(1)
                steps.append(1)
                out_shape.append(("drop", 0))
            else:
                if isinstance(it, bool) or (isinstance(it, Tensor) and it.dtype == "bool"):
                    raise self.error(
                        UnsupportedSyntaxError,
                        "boolean mask indexing gives a data-dependent shape and is not supported; "
                        "use np.where(mask, x, 0) instead",
                        node,
                    )
                it_t = self.as_tensor(it, node)
                if kind(it_t.dtype) != 1:
                    raise self.error(
                        MsirIndexError,
                        "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
                        f"integer or boolean arrays are valid indices (got {it_t.dtype})",
                        node,
                    )
                starts.append(0)
                sizes.append(dim)
                steps.append(1)
                takes.append((axis, it_t))
                out_shape.append(("take", it_t.shape))
            axis += 1
        if sum(1 for _, ix in takes if ix.ndim > 0) > 1:
            raise self.error(
                UnsupportedSyntaxError,
                "indexing with more than one integer array is not supported yet",
                node,
            )
        r = t
        if (starts, steps, sizes) != ([0] * t.ndim, [1] * t.ndim, list(t.shape)):
            r = self.tensor(M.SliceOp(t.ssa, starts, sizes, steps), t.weak)
        for ax, ix in sorted(takes, key=lambda p: -p[0]):
            r = self.tensor(M.TakeOp(r.ssa, ix.ssa, ax), t.weak)
            # The take replaced axis `ax` by the index's axes (none for a scalar).
        final: list[int] = []
        for what, v in out_shape:
            if what in ("new", "keep"):
                final.append(v)
            elif what == "take":
                final.extend(v)
        if tuple(final) != r.shape:
            r = self.tensor(M.ReshapeOp(r.ssa, final), t.weak)
        return r

    # -- attributes ---------------------------------------------------------

    def attribute(self, value: Any, attr: str, node: ast.AST) -> Any:
        if isinstance(value, KnownInt):
            value = value.tensor
        if isinstance(value, Tensor):
            match attr:
                case "shape":
                    return tuple(value.shape)
                case "ndim":
                    return value.ndim
                case "size":
                    return math.prod(value.shape)
                case "dtype":
                    return np.dtype(value.dtype)
                case "T":
                    return self.transpose(value, None, node)
            if attr in _ARRAY_METHODS:
                return _BoundMethod(value, attr)
            raise self.error(UnsupportedSyntaxError, f"array attribute '.{attr}' is not supported in compiled functions", node)
        if isinstance(value, types.ModuleType):
            if not hasattr(value, attr):
                raise self.error(UnsupportedSyntaxError, f"module '{value.__name__}' has no attribute '{attr}'", node)
            if self.tc.recorder is not None:
                self.tc.recorder.module_attribute(value, attr)
            return self.external(getattr(value, attr), f"{value.__name__}.{attr}", node)
        if isinstance(value, np.dtype) and attr in ("name", "type"):
            return getattr(value, attr)
        raise self.error(UnsupportedSyntaxError, f"attribute '.{attr}' of {self.describe(value)} is not supported", node)

    # -- calls --------------------------------------------------------------

    def call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value)
                if not isinstance(v, (tuple, list)):
                    raise self.unsupported("*args of a runtime value", a)
                args.extend(v)
            else:
                args.append(self.expr(a))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.unsupported("**kwargs", kw.value)
            kwargs[kw.arg] = self.expr(kw.value)
        self.loc = self.source.loc(node)
        return self.call_value(fn, args, kwargs, node)

    def call_value(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """Call a compile-time callable (user function, closure, NumPy function,
        differentiation transform...) on frontend values."""
        if isinstance(fn, Transform):
            return self.call_transformed(fn, args, kwargs, node)
        if isinstance(fn, CustomVjp):
            return self.call_custom_vjp(fn, args, node)
        if isinstance(fn, checkpoint):
            return self.call_checkpoint(fn, args, kwargs, node)
        api_kind = compile_time_kind(fn)
        if api_kind == "transform":
            return fn(*args, **kwargs)
        if api_kind == "stop_gradient":
            (x,) = args
            t = self.as_tensor(x, node)
            return self.tensor(M.StopGradientOp(t.ssa), t.weak)
        if api_kind in ("vjp", "jvp"):
            return self.transform_now(api_kind, args, kwargs, node)
        if isinstance(fn, FunctionValue):
            return self.apply_function_value(fn, args, node)
        if isinstance(fn, _BoundMethod):
            return _call_method(self, fn, args, kwargs, node)
        if isinstance(fn, Closure):
            return self.call_closure(fn, args, kwargs, node)
        handler = _handler_for(fn)
        if handler is not None:
            return handler(self, args, kwargs, node)
        if isinstance(fn, Jitted):
            fn = fn.__wrapped__
        if isinstance(fn, types.FunctionType):
            return self.call_user(fn, args, kwargs, node)
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
        module = getattr(fn, "__module__", None) or ""
        if module.startswith("numpy") or isinstance(fn, np.ufunc):
            sub = module.removeprefix("numpy").strip(".").split(".")
            public = [p for p in sub if p and not p.startswith("_")]
            qual = ".".join(["np", *public, getattr(fn, "__name__", name)])
            raise self.error(
                UnsupportedSyntaxError,
                f"the NumPy function {qual} is not supported in compiled functions",
                node,
            )
        raise self.error(
            UnsupportedSyntaxError,
            f"calling '{name}' is not supported in compiled functions (only NumPy functions msir "
            "knows and Python functions defined in source files)",
            node,
        )

    def bind(self, node: ast.FunctionDef | ast.Lambda, defaults: list[Any], args, kwargs, call_node) -> dict[str, Any]:
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise self.unsupported("*args, **kwargs and keyword-only parameters", node)
        names = [p.arg for p in a.args]
        if len(args) > len(names):
            raise self.error(
                TypeError_, f"the function takes {len(names)} arguments but {len(args)} were given", call_node
            )
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                raise self.error(TypeError_, f"unexpected or repeated argument '{k}'", call_node)
            bound[k] = v
        for name, d in zip(names[len(names) - len(defaults) :], defaults):
            bound.setdefault(name, d)
        missing = [n for n in names if n not in bound]
        if missing:
            raise self.error(TypeError_, f"missing argument '{missing[0]}'", call_node)
        return bound

    def call_closure(self, c: Closure, args, kwargs, node) -> Any:
        bound = self.bind(c.node, c.defaults, args, kwargs, node)
        if self.native_recursion(c.node, bound):
            name = c.node.name if isinstance(c.node, ast.FunctionDef) else "lambda"
            callee = _Callee(c.node, name, c.source, self.globals, {**self.closure, **c.env}, c.node)
            return self.outline(callee, self.runtime_arguments(callee, bound, node), node)
        sub = Translator(self.tc, self.block, c.source, self.globals, self.closure)
        sub.scope = dict(c.env)
        sub.scope.update(bound)
        self.tc.inlining.append(c.node)
        try:
            if isinstance(c.node, ast.Lambda):
                return sub.expr(c.node.body)
            result = sub.run_body(c.node.body)
        finally:
            self.tc.inlining.pop()
        return None if result is None else result[1]

    def call_user(self, fn: types.FunctionType, args, kwargs, node) -> Any:
        src = get_source(fn)
        if not isinstance(src.node, (ast.FunctionDef, ast.Lambda)):
            raise self.unsupported("this callable", node)
        defaults = list(fn.__defaults__ or ())
        bound = self.bind(src.node, defaults, args, kwargs, node)
        closure = _closure_env(fn)
        values = list(bound.values())
        callee = _Callee(fn.__code__, fn.__name__, src, fn.__globals__, closure, src.node)
        if all(isinstance(v, Tensor) for v in values):
            return self.outline(callee, bound, node)
        if self.native_recursion(fn.__code__, bound):
            return self.outline(callee, self.runtime_arguments(callee, bound, node), node)
        sub = Translator(self.tc, self.block, src, fn.__globals__, closure)
        sub.scope.update(bound)
        self.tc.inlining.append(fn.__code__)
        try:
            if isinstance(src.node, ast.Lambda):
                return sub.expr(src.node.body)
            result = sub.run_body(src.node.body)
        finally:
            self.tc.inlining.pop()
        return None if result is None else result[1]

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

    def call_checkpoint(self, cp: Any, args: list[Any], kwargs: dict[str, Any], node) -> Any:
        """A call of a `msir.checkpoint` function: always a `func.call` (its
        Python numbers become runtime values), marked `msir.checkpoint` so that
        msir-grad recomputes its residuals instead of keeping them."""
        fn = cp.fn
        if not isinstance(fn, types.FunctionType):
            raise self.error(UnsupportedSyntaxError, f"msir.checkpoint of {self.describe(fn)} (expected a Python function)", node)
        src = get_source(fn)
        if not isinstance(src.node, (ast.FunctionDef, ast.Lambda)):
            raise self.unsupported("this callable", node)
        bound = self.bind(src.node, list(fn.__defaults__ or ()), args, kwargs, node)
        runtime = {}
        for name, v in bound.items():
            if isinstance(v, KnownInt):
                v = v.tensor
            elif isinstance(v, (bool, int, float)) and not isinstance(v, Tensor):
                v = self.as_tensor(v, node)
            elif not isinstance(v, Tensor):
                raise self.error(
                    UnsupportedSyntaxError,
                    f"a msir.checkpoint function takes arrays and numbers; argument '{name}' of "
                    f"'{fn.__name__}' is {self.describe(v)} (pass the arrays of a tuple separately)",
                    node,
                )
            runtime[name] = v
        callee = _Callee(fn.__code__, fn.__name__, src, fn.__globals__, _closure_env(fn), src.node)
        return self.outline(callee, runtime, node, checkpoint=True)

    def outline(self, fn: "_Callee", bound: dict[str, Any], node, checkpoint: bool = False) -> Any:
        """Build (once per argument types) a separate func.func for a call with
        array arguments. Compile-time arguments (functions, as a recursion that
        is too deep to unroll may pass) are part of the function, by identity.
        `checkpoint` marks the call `msir.checkpoint` (see `call_checkpoint`)."""
        key = (fn.code, tuple(
            (v.dtype, v.shape, v.weak) if isinstance(v, Tensor) else ("static", id(v)) for v in bound.values()
        ))
        self.tc.static_arguments += [v for v in bound.values() if not isinstance(v, Tensor)]
        if key in self.tc.active:
            return self.recursive_call(key, bound, node)
        levels = sum(1 for k in self.tc.active if k[0] is fn.code)
        if levels >= _MAX_SPECIALISED_RECURSION:
            types = ", ".join(f"{M.fmt_shape(v.shape)} {v.dtype}" for v in bound.values() if isinstance(v, Tensor))
            raise self.error(
                UnsupportedSyntaxError,
                f"recursion whose argument shapes change at every level is not supported: '{fn.name}' "
                f"calls itself with arguments ({types}), another type at each of {levels} levels; "
                "a native recursive call needs the arguments' shapes and dtypes to repeat",
                node,
            )
        if key not in self.tc.callees:
            self.tc.active.append(key)
            try:
                self.tc.callees[key] = self.build_callee(key, fn, bound)
            finally:
                self.tc.active.pop()
        name, structure, ftype, captured = self.tc.callees[key]
        operands = [v.ssa for v in bound.values() if isinstance(v, Tensor)] + [self.localize(c).ssa for c in captured]
        call = self.emit(func.CallOp(name, operands, list(ftype.outputs.data)))
        if checkpoint:
            call.attributes[M.CHECKPOINT_ATTR] = UnitAttr()
        results = [
            Tensor(r, M.dtype_of(r.type), M.shape_of(r.type), weak) for r, weak in zip(call.results, structure[1])
        ]
        return _rebuild(structure[0], iter(results))

    # -- recursion ------------------------------------------------------------

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
                return build_function(
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

    # -- control flow -------------------------------------------------------

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

    def unify(self, a: list[Tensor], b: list[Tensor], names: list[str], node: ast.AST) -> list[str]:
        """The common dtype of each pair of leaves (they must have equal shapes)."""
        dtypes = []
        for x, y, name in zip(a, b, names):
            if x.shape != y.shape:
                what = name if name.startswith("the ") else f"variable '{name}'"
                raise self.error(
                    ShapeError,
                    f"{what} has shape {M.fmt_shape(x.shape)} on one path and "
                    f"{M.fmt_shape(y.shape)} on the other; it must keep one shape",
                    node,
                )
            dtypes.append(promote(x.dtype, x.weak, y.dtype, y.weak))
        return dtypes

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
            return
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

    def list_comprehension(self, node: ast.ListComp, elt: ast.expr, gens: list[ast.comprehension]) -> list[Any]:
        """A list comprehension over compile-time iterables (unrolled)."""
        saved = dict(self.scope)
        out: list[Any] = []

        def run(k: int) -> None:
            if k == len(gens):
                out.append(self.expr(elt))
                return
            g = gens[k]
            if g.is_async:
                raise self.unsupported("async comprehensions", node)
            it = self.expr(g.iter)
            if isinstance(it, RangeValue):
                if it.static is None:
                    raise self.error(
                        UnsupportedSyntaxError, "a list comprehension needs a range known at compile time", g.iter
                    )
                it = range(*it.static)
            elif isinstance(it, Tensor) and it.ndim > 0:
                it = [self.index(it, i, node) for i in range(it.shape[0])]
            elif not isinstance(it, (tuple, list, range)):
                raise self.error(UnsupportedSyntaxError, f"a list comprehension over {self.describe(it)}", g.iter)
            if len(it) > _MAX_UNROLL:
                raise self.error(UnsupportedSyntaxError, f"a list comprehension unrolls at most {_MAX_UNROLL} items", node)
            for item in it:
                self.assign(g.target, item)
                if all(self.static_bool(self.expr(cond), cond, "a comprehension condition") for cond in g.ifs):
                    run(k + 1)

        try:
            run(0)
        finally:
            self.scope = saved
        return out

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
                dtypes[k] = promote(*dtypes[k], y.dtype, y.weak)
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

    def body_block(self, stmts, inits: list[Tensor], structs, names, extra: list[tuple[str, Tensor]], node, labels):
        """Translate a loop body whose carried leaves are block arguments; returns
        (block, yielded leaves) or (None, promoted inits) when a dtype changed."""
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
            assert result is None, "returns inside loops are lowered by loop_returning"
            out = []
            for name in names:
                _, leaves = self.to_tensors(self.scope[name], node, f"variable '{name}'")
                out += leaves
            return out

        body_scope, outs = self.in_block(block, scope, run)
        dtypes = self.unify(inits, outs, labels, node)
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
        it = self.expr(node.iter)
        if isinstance(it, (tuple, list)) or (isinstance(it, RangeValue) and it.static and _appends(node.body)):
            items = list(it) if not isinstance(it, RangeValue) else list(range(*it.static))
            if len(items) > _MAX_UNROLL:
                raise self.error(UnsupportedSyntaxError, f"a loop building a list unrolls at most {_MAX_UNROLL} iterations", node)
            for item in items:
                self.assign(node.target, item)
                result = self.run_body(node.body)
                assert result is None, "returns inside loops are lowered by loop_returning"
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
            array, it = it, RangeValue(0, it.shape[0], 1)
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

        def build(inits, structs, labels):
            stmts = node.body
            if array is not None:
                # `for row in array`: the body starts with row = array[i].
                stmts = [ast.Assign(targets=[node.target], value=_Sub("__msir_iter_array", "__msir_iter_index"), lineno=node.lineno, col_offset=node.col_offset)] + list(node.body)
                self.scope["__msir_iter_array"] = array
                extra = [("__msir_iter_index", counter)]
            else:
                extra = [(node.target.id, counter)]
            block, promoted = self.body_block(stmts, inits, structs, names, extra, node, labels)
            if block is None:
                inits[:] = promoted
                return None
            op = self.emit(M.ForOp(bounds[0].ssa, bounds[1].ssa, bounds[2].ssa, [x.ssa for x in inits], Region(block)))
            return [Tensor(r, x.dtype, x.shape, x.weak) for r, x in zip(op.results, inits)]

        self.loop(node, names, build)
        self.scope.pop("__msir_iter_array", None)
        self.scope.pop("__msir_iter_index", None)
        for name in target_names:
            self.scope[name] = _Undefined(f"is the target of the loop at line {node.lineno}; its last value is not kept")

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

    # -- function values and differentiation ----------------------------------

    def outline_callable(self, fn: Any, args: list[Any], node: ast.AST) -> "Outlined":
        """Build a private func.func that calls `fn` on parameters of `args`' types.

        Runtime leaves of `args` (arrays, runtime scalars) become parameters in
        order; Python values stay compile-time constants; values of enclosing
        functions that `fn` reads become trailing parameters (`captured`)."""
        block = Block()
        self.tc.fn_captures[block] = ({}, [])
        leaves: list[Tensor] = []

        def param(v: Any) -> Any:
            if isinstance(v, (tuple, list)):
                items = [param(x) for x in v]
                return tuple(items) if isinstance(v, tuple) else items
            if isinstance(v, KnownInt):
                leaves.append(v.tensor)
                arg = block.insert_arg(v.tensor.ssa.type, len(block.args))
                return KnownInt(v.value, v.deps, Tensor(arg, v.dtype, v.tensor.shape, True))
            if isinstance(v, Tensor):
                leaves.append(v)
                arg = block.insert_arg(v.ssa.type, len(block.args))
                return Tensor(arg, v.dtype, v.shape, v.weak)
            return v

        params = [param(a) for a in args]
        n_params = len(block.args)
        sub = Translator(self.tc, block, self.source, self.globals, self.closure)
        sub.loc = self.loc
        value = sub.call_value(fn, params, {}, node)
        structure, results = flatten_result(value, sub, node)
        ret = func.ReturnOp(*[r.ssa for r in results])
        ret.location = _loc_attr(self.loc)
        block.add_op(ret)
        name = self.tc.unique_name(_callable_name(fn))
        ftype = FunctionType.from_lists([a.type for a in block.args], [r.ssa.type for r in results])
        f = func.FuncOp(name, ftype, Region(block), visibility="private")
        f.location = _loc_attr(self.loc)
        self.tc.module_ops.append(f)
        captured = [self.localize(c) for c in self.tc.fn_captures[block][1]]
        visible = FunctionType.from_lists([a.type for a in block.args[:n_params]], [r.ssa.type for r in results])
        return Outlined(name, visible, leaves, captured, structure, [r.weak for r in results])

    def not_differentiable_output(self, o: "Outlined", node: ast.AST) -> MsirError:
        """An error naming the op that made the (integer or boolean) output."""
        funcs = {op.sym_name.data: op for op in self.tc.module_ops if isinstance(op, func.FuncOp)}
        ret = funcs[o.name].body.block.last_op
        value = ret.operands[0] if ret is not None and ret.operands else None
        dtype = M.dtype_of(value.type) if value is not None else "?"
        producer = value.owner if value is not None else None
        while isinstance(producer, func.CallOp) and producer.callee.string_value() in funcs:
            callee_ret = funcs[producer.callee.string_value()].body.block.last_op
            value = callee_ret.operands[list(producer.results).index(value)]
            producer = value.owner
        if isinstance(producer, Operation) and isinstance(producer.location, FileLineColLoc):
            loc = producer.location
            where = SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
            return NotDifferentiableError(
                f"cannot differentiate: the output is computed by '{producer.name}', whose {dtype} "
                "result has no derivative",
                where,
            )
        return self.error(
            NotDifferentiableError, f"cannot differentiate a function whose output has dtype {dtype}", node
        )

    def closure_of(self, o: "Outlined") -> SSAValue:
        op = M.ClosureOp(o.name, [c.ssa for c in o.captured], o.type)
        return self.emit(op).results[0]

    def apply(self, fn: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
        return list(self.emit(M.ApplyOp(fn, args)).results)

    def basis(self, index: Tensor, i: int, shape: tuple[int, ...], dtype: str) -> Tensor:
        """The i-th unit array of `shape` (row-major), built from a shared iota."""
        flat = math.prod(shape)
        hit = self.tensor(M.CompareOp("eq", index.ssa, self.constant(i, "int64", shape=(flat,)).ssa))
        return self.reshape(self.cast(hit, dtype, False), shape, None)

    def jacobian(self, t: Any, args: list[Any], argnums: tuple[int, ...], node: ast.AST) -> Any:
        """jacrev: one forward and one adjoint call per output element; jacfwd: one
        forward-mode call per input element; all in this one function."""
        for a in argnums:
            if not isinstance(args[a], Tensor):
                raise self.error(
                    UnsupportedSyntaxError,
                    f"{t.kind} needs array (or float) arguments at argnums, got {self.describe(args[a])}",
                    node,
                )
        single = isinstance(t.argnums, int)
        aux = None
        if t.kind == "jacrev":
            res = self.call_transformed(Transform("vjp", t.fn, tuple(argnums), t.has_aux), args, {}, node)
            out, pb = res[0], res[1]
            aux = res[2] if t.has_aux else None
            if not isinstance(out, Tensor):
                raise self.error(UnsupportedSyntaxError, "jacrev needs a function returning one array", node)
            m = math.prod(out.shape)
            if m > _MAX_JACOBIAN:
                raise self.error(
                    ShapeError,
                    f"jacrev of an output with {m} elements would unroll {m} adjoint calls "
                    f"(limit {_MAX_JACOBIAN}); use jacfwd or vjp",
                    node,
                )
            index = self.tensor(M.IotaOp(0, M.tensor_type((m,), "int64")))
            rows = []
            for i in range(m):
                g = self.apply_function_value(pb, [self.basis(index, i, out.shape, out.dtype)], node)
                rows.append(g if isinstance(g, tuple) else (g,))
            jac = []
            for k, a in enumerate(argnums):
                stacked = self.tensor(M.StackOp([r[k].ssa for r in rows], 0))
                jac.append(self.reshape(stacked, (*out.shape, *args[a].shape), node))
        else:
            jac = []
            for a in argnums:
                x = args[a]
                n = math.prod(x.shape)
                if n > _MAX_JACOBIAN:
                    raise self.error(
                        ShapeError,
                        f"jacfwd of an input with {n} elements would unroll {n} forward-mode calls "
                        f"(limit {_MAX_JACOBIAN}); use jacrev or jvp",
                        node,
                    )
                index = self.tensor(M.IotaOp(0, M.tensor_type((n,), "int64")))
                cols, out = [], None
                for j in range(n):
                    tangent = self.basis(index, j, x.shape, x.dtype)
                    jt = Transform("jvp", t.fn, (a,), t.has_aux, tangents=(tangent,))
                    res = self.call_transformed(jt, args, {}, node)
                    out, tan = res[0], res[1]
                    if t.has_aux:
                        aux = res[2]
                    if not isinstance(tan, Tensor):
                        raise self.error(UnsupportedSyntaxError, "jacfwd needs a function returning one array", node)
                    cols.append(tan)
                stacked = self.tensor(M.StackOp([c.ssa for c in cols], len(out.shape)))
                jac.append(self.reshape(stacked, (*out.shape, *x.shape), node))
        result = jac[0] if single else tuple(jac)
        return (result, aux) if t.has_aux else result

    def call_custom_vjp(self, cv: Any, args: list[Any], node: ast.AST) -> Any:
        """A call of a `msir.custom_vjp` function: the primal function carries its
        rule (`msir.custom_vjp = [@fwd, @bwd]`) for `msir-grad` to use."""
        if cv.fwd is None or cv.bwd is None:
            raise self.error(UnsupportedSyntaxError, f"custom_vjp function '{cv.__name__}' has no defvjp(fwd, bwd)", node)
        primal = self.outline_callable(cv.fn, args, node)
        fwd = self.outline_callable(cv.fwd, args, node)
        if fwd.structure[0] != "tuple" or len(fwd.structure[1]) != 2:
            raise self.error(ValueError_, f"the custom_vjp forward '{cv.fwd.__name__}' must return (output, residuals)", node)
        n_out = len(primal.type.outputs.data)
        fwd_types = list(fwd.type.outputs.data)
        if fwd_types[:n_out] != list(primal.type.outputs.data):
            raise self.error(
                ShapeError,
                f"the custom_vjp forward '{cv.fwd.__name__}' returns outputs of types "
                f"({', '.join(map(str, fwd_types[:n_out]))}), the function "
                f"({', '.join(map(str, primal.type.outputs.data))})",
                node,
            )
        res_struct, out_struct = fwd.structure[1][1], primal.structure

        def placeholders(structure: Any, types: list) -> Any:
            # Values of the right types for tracing `bwd`; only their types are used.
            dummy = Block(arg_types=list(types))
            return _rebuild(structure, iter(_tensors(list(dummy.args), [False] * len(types))))

        res_vals = placeholders(res_struct, fwd_types[n_out:])
        ct_vals = placeholders(out_struct, list(primal.type.outputs.data))
        bwd = self.outline_callable(cv.bwd, [res_vals, ct_vals], node)
        arg_leaf_types = [leaf.ssa.type for leaf in primal.leaves]
        if list(bwd.type.outputs.data) != arg_leaf_types:
            raise self.error(
                ShapeError,
                f"the custom_vjp backward '{cv.bwd.__name__}' must return one gradient per argument, of its "
                f"shape and dtype: ({', '.join(map(str, arg_leaf_types))}), got "
                f"({', '.join(map(str, bwd.type.outputs.data))})",
                node,
            )
        for o in (primal, fwd, bwd):
            if o.captured:
                raise self.error(
                    UnsupportedSyntaxError,
                    "custom_vjp functions must not read arrays from enclosing scopes; pass them as arguments",
                    node,
                )
        f_op = next(op for op in self.tc.module_ops if isinstance(op, func.FuncOp) and op.sym_name.data == primal.name)
        f_op.attributes["msir.custom_vjp"] = ArrayAttr([SymbolRefAttr(fwd.name), SymbolRefAttr(bwd.name)])
        call = self.emit(func.CallOp(primal.name, [self.localize(x).ssa for x in primal.leaves], list(primal.type.outputs.data)))
        return _rebuild(primal.structure, iter(_tensors(list(call.results), primal.weak)))

    def transform_now(self, kind: str, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """`msir.vjp(f, *primals)` / `msir.jvp(f, primals, tangents)` (`kind`) inside compiled code."""
        has_aux = bool(kwargs.pop("has_aux", False))
        if kwargs:
            raise self.error(UnsupportedSyntaxError, f"unexpected keyword {next(iter(kwargs))}", node)
        f, *rest = args
        if kind == "jvp":
            primals, tangents = rest
            t = Transform("jvp", f, tuple(range(len(primals))), has_aux, tangents=tuple(tangents))
            return self.call_transformed(t, list(primals), {}, node)
        t = Transform("vjp", f, tuple(range(len(rest))), has_aux)
        return self.call_transformed(t, list(rest), {}, node)

    def apply_function_value(self, fv: "FunctionValue", args: list[Any], node: ast.AST) -> Any:
        leaves: list[Tensor] = []
        for a in args:
            _, ls = flatten_result(a, self, node)
            leaves.extend(ls)
        expected = list(fv.ssa.type.inputs.data)
        got = [leaf.ssa.type for leaf in leaves]
        if got != expected:
            raise self.error(
                ShapeError,
                f"the function value expects arguments of types ({', '.join(map(str, expected))}), "
                f"got ({', '.join(map(str, got))})",
                node,
            )
        outs = self.apply(fv.ssa, [leaf.ssa for leaf in leaves])
        return _rebuild(fv.structure, iter(_tensors(outs, fv.weak)))

    def call_transformed(self, t: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """`msir.grad(f)(*args)` and friends: outline `f`, apply the transform op."""
        if kwargs:
            raise self.error(UnsupportedSyntaxError, "keyword arguments to a differentiated function", node)
        argnums = (t.argnums,) if isinstance(t.argnums, int) else tuple(t.argnums)
        for a in argnums:
            if not -len(args) <= a < len(args):
                raise self.error(
                    ValueError_, f"argnums {t.argnums} out of range for {len(args)} arguments", node
                )
        argnums = tuple(a % len(args) for a in argnums)
        # Python numbers differentiated with respect to become (weak) runtime values.
        args = [
            self.as_tensor(a, node) if i in argnums and isinstance(a, (int, float)) else a
            for i, a in enumerate(args)
        ]
        if t.kind in ("jacrev", "jacfwd"):
            return self.jacobian(t, list(args), argnums, node)
        o = self.outline_callable(t.fn, list(args), node)
        # leaf positions of each Python argument
        spans, start = [], 0
        for a in args:
            n = len(_runtime_leaves(a))
            spans.append(range(start, start + n))
            start += n
        leaf_nums = [i for a in argnums for i in spans[a]]
        for a in argnums:
            for i in spans[a]:
                if not M.is_float(o.leaves[i].dtype):
                    raise self.error(
                        NotDifferentiableError,
                        f"cannot differentiate with respect to argument {a}: it holds a value of dtype "
                        f"{o.leaves[i].dtype}; only float arguments have derivatives",
                        node,
                    )
        has_aux = bool(getattr(t, "has_aux", False))
        main_struct, aux_struct = o.structure, None
        if has_aux:
            if o.structure[0] != "tuple" or len(o.structure[1]) != 2:
                raise self.error(
                    ValueError_, "with has_aux=True the function must return a pair (output, aux)", node
                )
            main_struct, aux_struct = o.structure[1]
        n_main = len(_struct_leaves(main_struct))
        if t.kind in ("grad", "value_and_grad"):
            if n_main != 1:
                raise self.error(
                    ShapeError, "grad needs a function returning one scalar (rank-0) float value", node
                )
            out_t = o.type.outputs.data[0]
            if M.shape_of(out_t) != ():
                raise self.error(
                    ShapeError,
                    f"grad needs a scalar output, but the function returns an array of shape "
                    f"{M.fmt_shape(M.shape_of(out_t))}; reduce it (e.g. .sum()) or use msir.vjp",
                    node,
                )
            if not M.is_float(M.dtype_of(out_t)):
                raise self.not_differentiable_output(o, node)
        closure = self.closure_of(o)
        leaf_ssa = [self.localize(leaf).ssa for leaf in o.leaves]

        def grads_of(values: list[SSAValue]) -> Any:
            it = iter(_tensors(values, [o.leaves[i].weak for i in leaf_nums]))
            per_arg = [_rebuild_like(args[a], it) for a in argnums]
            return per_arg[0] if isinstance(t.argnums, int) else tuple(per_arg)

        if t.kind in ("grad", "value_and_grad"):
            op_cls = M.GradOp if t.kind == "grad" else M.ValueAndGradOp
            g = self.emit(op_cls(closure, leaf_nums, has_aux)).results[0]
            outs = self.apply(g, leaf_ssa)
            n_out = len(o.type.outputs.data)
            if t.kind == "grad":
                grads = grads_of(outs[: len(leaf_nums)])
                if has_aux:
                    aux = _rebuild(aux_struct, iter(_tensors(outs[len(leaf_nums) :], o.weak[1:])))
                    return grads, aux
                return grads
            n_vals = n_out if has_aux else 1
            values = _rebuild(o.structure if has_aux else main_struct, iter(_tensors(outs[:n_vals], o.weak)))
            return values, grads_of(outs[n_vals:])
        if t.kind == "vjp":
            v = self.emit(M.VjpOp(closure, leaf_nums, has_aux)).results[0]
            outs = self.apply(v, leaf_ssa)
            results = _rebuild(o.structure, iter(_tensors(outs[:-1], o.weak)))
            arg_struct = [args[a] for a in argnums]
            pb = FunctionValue(
                outs[-1],
                ("tuple", [_structure_of(a) for a in arg_struct]) if not isinstance(t.argnums, int)
                else _structure_of(arg_struct[0]),
                [o.leaves[i].weak for i in leaf_nums],
            )
            if has_aux:
                return results[0], pb, results[1]
            return results, pb
        if t.kind == "jvp":
            tangents = t.tangents
            t_leaves = [self.localize(x) for x in _runtime_leaves(tangents)]
            t_leaves = [self.as_tensor(x, node) for x in t_leaves]
            for i, tl in zip(leaf_nums, t_leaves):
                if tl.ssa.type != o.leaves[i].ssa.type:
                    tl_cast = self.cast(tl, o.leaves[i].dtype) if tl.shape == o.leaves[i].shape else None
                    if tl_cast is None:
                        raise self.error(
                            ShapeError,
                            f"tangent of shape {M.fmt_shape(tl.shape)} does not match its primal's shape "
                            f"{M.fmt_shape(o.leaves[i].shape)}",
                            node,
                        )
            if len(t_leaves) != len(leaf_nums):
                raise self.error(ShapeError, "jvp needs one tangent per primal", node)
            t_ssa = [self.cast(tl, o.leaves[i].dtype).ssa for i, tl in zip(leaf_nums, t_leaves)]
            j = self.emit(M.JvpOp(closure, leaf_nums, has_aux)).results[0]
            outs = self.apply(j, leaf_ssa + t_ssa)
            n_out = len(o.type.outputs.data)
            primal_out = _rebuild(o.structure, iter(_tensors(outs[:n_out], o.weak)))
            tangent_out = _rebuild(main_struct, iter(_tensors(outs[n_out:], o.weak)))
            if has_aux:
                return primal_out[0], tangent_out, primal_out[1]
            return primal_out, tangent_out
        raise AssertionError(t.kind)



# ---------------------------------------------------------------------------
# Building functions
# ---------------------------------------------------------------------------


def flatten_result(value: Any, tr: Translator, node: ast.AST) -> tuple[Any, list[Tensor]]:
    """Split a returned value into its structure and its runtime leaves."""
    leaves: list[Tensor] = []

    def walk(v):
        if isinstance(v, tuple):
            return ("tuple", [walk(x) for x in v])
        if isinstance(v, list):
            return ("list", [walk(x) for x in v])
        if isinstance(v, KnownInt):
            v = v.tensor
        if isinstance(v, Tensor):
            leaves.append(v)
            return ("leaf", len(leaves) - 1)
        if v is None or isinstance(v, (bool, int, float, str)):
            return ("const", v)
        if isinstance(v, np.dtype):
            return ("const", v)
        raise tr.error(UnsupportedSyntaxError, f"returning {tr.describe(v)} from a compiled function is not supported", node)

    return walk(value), leaves


def _rebuild(structure, leaves):
    kind_, payload = structure
    if kind_ == "tuple":
        return tuple(_rebuild(s, leaves) for s in payload)
    if kind_ == "list":
        return [_rebuild(s, leaves) for s in payload]
    if kind_ == "leaf":
        return next(leaves)
    return payload


def build_function(
    tc: TraceContext,
    name: str,
    src: FunctionSource,
    globals_: dict,
    closure: dict,
    params: dict[str, Any],
    public: bool = False,
    block: Block | None = None,
    fname: str | None = None,
    precaptured: Sequence[Tensor] = (),
    node: ast.FunctionDef | ast.Lambda | None = None,
) -> tuple[str, tuple, FunctionType]:
    """Translate a function whose runtime parameters are Tensors (block arguments).

    For callees, `params` maps names to the caller's Tensors, whose types become
    the new function's argument types; values of enclosing functions the callee
    reads become extra trailing parameters (returned as `captured`), `precaptured`
    first (in that order: what the function's recursive calls pass). For the entry,
    the caller has already created the block and the parameter values. `fname`
    is the function's name when its recursive calls already use it; `node` the
    function to translate when it is not `src`'s (a nested def).
    """
    entry = block is not None
    if block is None:
        block = Block(arg_types=[M.tensor_type(v.shape, v.dtype) for v in params.values() if isinstance(v, Tensor)])
        tc.fn_captures[block] = ({}, [])
    tr = Translator(tc, block, src, globals_, closure)
    if entry:
        tr.scope.update(params)
        tr.params = {id(v) for v in _leaves(list(params.values()))}
    else:
        args = iter(block.args)
        for pname, v in params.items():
            if not isinstance(v, Tensor):
                tr.scope[pname] = v  # a compile-time argument: part of the function
                continue
            arg = next(args)
            arg.name_hint = pname
            tr.scope[pname] = Tensor(arg, v.dtype, v.shape, v.weak)
    for c in precaptured:
        tr.localize(c)
    node = node or src.node
    if isinstance(node, ast.Lambda):
        value = tr.expr(node.body)
    else:
        result = tr.run_body(node.body)
        value = None if result is None else result[1]
    structure, leaves = flatten_result(value, tr, node)
    ret = func.ReturnOp(*[leaf.ssa for leaf in leaves])
    ret.location = _loc_attr(tr.loc)
    block.add_op(ret)
    ftype = FunctionType.from_lists([a.type for a in block.args], [leaf.ssa.type for leaf in leaves])
    fname = fname or tc.unique_name(name)
    f = func.FuncOp(fname, ftype, Region(block), visibility=None if public else "private")
    f.location = _loc_attr(src.loc(node))
    tc.module_ops.append(f)
    captured = tc.fn_captures.get(block, ({}, []))[1]
    return fname, (structure, [leaf.weak for leaf in leaves]), ftype, captured


_MAX_UNROLL = 1024
"""Loops over tuples, lists, and loops that build lists, are unrolled up to this."""

_MAX_INLINED_RECURSION = 8
"""A recursion through Python values (an int depth, a function argument) is
unrolled at compile time this many levels deep; deeper, it continues as native
recursive calls (with its Python numbers as runtime values)."""

_MAX_SPECIALISED_RECURSION = 32
"""A function calling itself with arguments of a new type at each level is
specialised this many times before it is refused."""


def _recursive_of(name: str, built: tuple) -> _Recursive:
    _, (structure, weak), ftype, captured = built
    return _Recursive(name, structure, list(weak), list(ftype.outputs.data), list(captured))


def _describe_types(rec: _Recursive) -> str:
    return ", ".join(f"{M.fmt_shape(M.shape_of(t))} {M.dtype_of(t)}" for t in rec.types) or "no array"


@dataclass
class _Undefined:
    """A variable that is not defined on every path (reading it is an error)."""

    why: str


@dataclass
class RangeValue:
    """`range(start, stop, step)`; bounds are ints, known ints or runtime values."""

    start: Any
    stop: Any
    step: Any

    @property
    def static(self) -> tuple[int, int, int] | None:
        vals = (self.start, self.stop, self.step)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            return vals  # type: ignore[return-value]
        return None


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


def _is_static(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _is_static_non_number(v: Any) -> bool:
    """Compile-time values a loop cannot carry (functions, modules, dtypes...)."""
    if isinstance(v, (tuple, list)):
        return any(_is_static_non_number(x) for x in v)
    return not isinstance(v, (bool, int, float, KnownInt, Tensor))


@dataclass
class Outlined:
    """A callable built as its own function by `Translator.outline_callable`."""

    name: str
    type: FunctionType  # the parameters for `leaves` only (captures are bound)
    leaves: list[Tensor]
    captured: list[Tensor]
    structure: Any
    weak: list[bool]


@dataclass
class FunctionValue:
    """A runtime function value (e.g. the pullback `msir.vjp` returns)."""

    ssa: SSAValue
    structure: Any
    weak: list[bool]


def _tensors(values: Sequence[SSAValue], weak: Sequence[bool]) -> list[Tensor]:
    out = []
    for k, v in enumerate(values):
        w = weak[k] if k < len(weak) else False
        out.append(Tensor(v, M.dtype_of(v.type), M.shape_of(v.type), w))
    return out


def _runtime_leaves(v: Any) -> list[Any]:
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _runtime_leaves(item)]
    if isinstance(v, (Tensor, KnownInt)):
        return [v]
    return []


def _structure_of(v: Any) -> Any:
    if isinstance(v, tuple):
        return ("tuple", [_structure_of(x) for x in v])
    if isinstance(v, list):
        return ("list", [_structure_of(x) for x in v])
    if isinstance(v, (Tensor, KnownInt)):
        return ("leaf", 0)
    return ("const", v)


def _struct_leaves(structure: Any) -> list[Any]:
    kind_, payload = structure
    if kind_ in ("tuple", "list"):
        return [x for s in payload for x in _struct_leaves(s)]
    return [structure] if kind_ == "leaf" else []


def _rebuild_like(template: Any, leaves) -> Any:
    """`template`'s structure with its runtime leaves taken from `leaves`."""
    if isinstance(template, tuple):
        return tuple(_rebuild_like(x, leaves) for x in template)
    if isinstance(template, list):
        return [_rebuild_like(x, leaves) for x in template]
    if isinstance(template, (Tensor, KnownInt)):
        return next(leaves)
    return None


def _callable_name(fn: Any) -> str:
    import re

    if isinstance(fn, Closure):
        name = getattr(fn.node, "name", "lambda")
    else:
        name = getattr(getattr(fn, "fn", None), "__name__", None) or getattr(fn, "__name__", "fn")
        if hasattr(fn, "kind"):
            name = f"{fn.kind}_{name}"
    return re.sub(r"\W", "_", name) or "fn"


def _leaves(values: list[Any]) -> list[Tensor]:
    out: list[Tensor] = []
    for v in values:
        if isinstance(v, (tuple, list)):
            out.extend(_leaves(list(v)))
        elif isinstance(v, KnownInt):
            out.append(v.tensor)
        elif isinstance(v, Tensor):
            out.append(v)
    return out


def _closure_env(fn: types.FunctionType) -> dict[str, Any]:
    if not fn.__closure__:
        return {}
    return dict(zip(fn.__code__.co_freevars, fn.__closure__))


def _constant_scalar(t: Tensor) -> float | int | None:
    attr = t.ssa.owner.value  # type: ignore[union-attr]
    vals = attr.get_values()
    return vals[0] if len(vals) == 1 else None


def _out_of_int32(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and not -(2**31) <= v < 2**31


def _is_dtype_like(v: Any) -> bool:
    return isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic))


def _op_symbol(op: ast.operator) -> str:
    return {
        ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
        ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
        ast.LShift: "<<", ast.RShift: ">>",
    }.get(type(op), type(op).__name__)


_NAME_SYMBOL = {"and": "&", "or": "|", "xor": "^"}


# The built-in exception types with msir locations, for errors NumPy raises as such.
class ValueError_(MsirError, ValueError):
    pass


class TypeError_(MsirError, TypeError):
    pass


_MAX_JACOBIAN = 4096
"""Jacobians unroll one call per output (jacrev) or input (jacfwd) element."""


class ZeroDivisionError_(MsirError, ZeroDivisionError):
    pass


class OverflowError_(MsirError, OverflowError):
    pass


# ---------------------------------------------------------------------------
# NumPy functions, builtins and array methods
# ---------------------------------------------------------------------------


@dataclass
class _BoundMethod:
    value: Tensor
    name: str


def _params(tr: Translator, args, kwargs, names: Sequence[str], defaults: dict[str, Any], node, fname: str) -> list[Any]:
    """Bind positional and keyword arguments of a library call to `names`."""
    if len(args) > len(names):
        raise tr.error(TypeError_, f"{fname} takes at most {len(names)} positional arguments", node)
    out = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise tr.error(UnsupportedSyntaxError, f"{fname}: the keyword argument '{k}' is not supported", node)
        out[k] = v
    missing = [n for n in names if n not in out and n not in defaults]
    if missing:
        raise tr.error(TypeError_, f"{fname} is missing the argument '{missing[0]}'", node)
    return [out.get(n, defaults.get(n)) for n in names]


def _unary_np(name: str):
    def handler(tr: Translator, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {}, node, f"np.{name}")
        if isinstance(x, (int, float)) and not isinstance(x, bool) and name in _UNARY_FLOAT_OPS:
            x = tr.as_tensor(x, node)
        return tr.unary(name, tr.as_tensor(x, node), node)

    return handler


def _binary_np(name: str):
    def handler(tr: Translator, args, kwargs, node):
        a, b = _params(tr, args, kwargs, ["x1", "x2"], {}, node, f"np.{name}")
        ta, tb = tr.as_tensor(a, node), tr.as_tensor(b, node)
        return tr.elementwise(name, ta, tb, node)

    return handler


def _reduction(name: str):
    def handler(tr: Translator, args, kwargs, node):
        names = ["a", "axis", "dtype", "keepdims"] if name in ("sum", "prod", "mean") else ["a", "axis", "keepdims"]
        vals = _params(tr, args, kwargs, names, {"axis": None, "dtype": None, "keepdims": False}, node, f"np.{name}")
        if len(vals) == 4:
            a, axis, dtype, keepdims = vals
        else:
            (a, axis, keepdims), dtype = vals, None
        return tr.reduce(name, a, axis, keepdims, node, dtype)

    return handler


def _arg_reduction(name: str):
    def handler(tr: Translator, args, kwargs, node):
        a, axis, keepdims = _params(tr, args, kwargs, ["a", "axis", "keepdims"], {"axis": None, "keepdims": False}, node, f"np.{name}")
        return tr.arg_reduce(name, a, axis, keepdims, node)

    return handler


def _np_where(tr, args, kwargs, node):
    c, a, b = _params(tr, args, kwargs, ["condition", "x", "y"], {}, node, "np.where")
    tc_ = tr.as_tensor(c, node)
    if tc_.dtype != "bool":
        tc_ = tr.compare("ne", tc_, 0, node)
    ta, tb = tr.as_tensor(a, node), tr.as_tensor(b, node)
    dtype, weak = promote(ta.dtype, ta.weak, tb.dtype, tb.weak)
    shape = M.infer_broadcast(M.infer_broadcast(tc_.shape, ta.shape), tb.shape)
    c2 = tr.broadcast(tc_, shape)
    a2 = tr.broadcast(tr.cast(ta, dtype), shape)
    b2 = tr.broadcast(tr.cast(tb, dtype), shape)
    return tr.tensor(M.SelectOp(c2.ssa, a2.ssa, b2.ssa), False)


def _np_dot(tr, args, kwargs, node):
    a, b = _params(tr, args, kwargs, ["a", "b"], {}, node, "np.dot")
    ta, tb = tr.as_tensor(a, node), tr.as_tensor(b, node)
    if ta.ndim == 0 or tb.ndim == 0:
        return tr.elementwise("mul", ta, tb, node)
    if ta.ndim > 2 or tb.ndim > 2:
        raise tr.error(
            UnsupportedSyntaxError,
            "np.dot of arrays with more than 2 dimensions is not supported; use np.matmul or @",
            node,
        )
    return tr.matmul(ta, tb, node)


def _np_matmul(tr, args, kwargs, node):
    a, b = _params(tr, args, kwargs, ["x1", "x2"], {}, node, "np.matmul")
    return tr.matmul(a, b, node)


def _np_transpose(tr, args, kwargs, node):
    a, axes = _params(tr, args, kwargs, ["a", "axes"], {"axes": None}, node, "np.transpose")
    return tr.transpose(tr.as_tensor(a, node), axes, node)


def _np_reshape(tr, args, kwargs, node):
    a, shape = _params(tr, args, kwargs, ["a", "shape"], {}, node, "np.reshape")
    return tr.reshape(tr.as_tensor(a, node), shape, node)


def _np_concatenate(tr, args, kwargs, node):
    arrays, axis = _params(tr, args, kwargs, ["arrays", "axis"], {"axis": 0}, node, "np.concatenate")
    return tr.concatenate(arrays, axis, node)


def _np_stack(tr, args, kwargs, node):
    arrays, axis = _params(tr, args, kwargs, ["arrays", "axis"], {"axis": 0}, node, "np.stack")
    return tr.concatenate(arrays, axis, node, stack=True)


def _filler(value: Any):
    def handler(tr, args, kwargs, node):
        shape, dtype = _params(tr, args, kwargs, ["shape", "dtype"], {"dtype": None}, node, "np.zeros")
        return tr.full(shape, value, dtype if dtype is not None else float, node)

    return handler


def _np_full(tr, args, kwargs, node):
    shape, fill, dtype = _params(tr, args, kwargs, ["shape", "fill_value", "dtype"], {"dtype": None}, node, "np.full")
    return tr.full(shape, fill, dtype, node)


def _filler_like(value: Any):
    def handler(tr, args, kwargs, node):
        a, dtype = _params(tr, args, kwargs, ["a", "dtype"], {"dtype": None}, node, "np.*_like")
        t = tr.as_tensor(a, node)
        return tr.full(t.shape, value, dtype if dtype is not None else t.dtype, node)

    return handler


def _np_full_like(tr, args, kwargs, node):
    a, fill, dtype = _params(tr, args, kwargs, ["a", "fill_value", "dtype"], {"dtype": None}, node, "np.full_like")
    t = tr.as_tensor(a, node)
    return tr.full(t.shape, fill, dtype if dtype is not None else t.dtype, node)


def _np_arange(tr, args, kwargs, node):
    dtype = kwargs.pop("dtype", None)
    for k in ("start", "stop", "step"):
        if k in kwargs:
            raise tr.error(UnsupportedSyntaxError, "np.arange: pass start/stop/step positionally", node)
    if kwargs:
        raise tr.error(UnsupportedSyntaxError, f"np.arange: unsupported keyword {next(iter(kwargs))}", node)
    return tr.arange(list(args), dtype, node)


def _np_broadcast_to(tr, args, kwargs, node):
    a, shape = _params(tr, args, kwargs, ["array", "shape"], {}, node, "np.broadcast_to")
    t = tr.as_tensor(a, node)
    dims = tr.static_ints(shape, "a shape", node)
    M.check_broadcast_to(t.shape, dims)
    return tr.broadcast(t, tuple(dims))


def _np_expand_dims(tr, args, kwargs, node):
    a, axis = _params(tr, args, kwargs, ["a", "axis"], {}, node, "np.expand_dims")
    t = tr.as_tensor(a, node)
    axes = tr.static_ints(axis, "an axis", node)
    nd = t.ndim + len(axes)
    axes = sorted(M.normalize_axis(x, nd) for x in axes)
    shape = list(t.shape)
    for x in axes:
        shape.insert(x, 1)
    return tr.reshape(t, tuple(shape), node)


def _np_squeeze(tr, args, kwargs, node):
    a, axis = _params(tr, args, kwargs, ["a", "axis"], {"axis": None}, node, "np.squeeze")
    t = tr.as_tensor(a, node)
    if axis is None:
        axes = [i for i, d in enumerate(t.shape) if d == 1]
    else:
        axes = [M.normalize_axis(x, t.ndim) for x in tr.static_ints(axis, "an axis", node)]
        for x in axes:
            if t.shape[x] != 1:
                raise tr.error(ValueError_, "cannot select an axis to squeeze out which has size not equal to one", node)
    return tr.reshape(t, tuple(d for i, d in enumerate(t.shape) if i not in axes), node)


def _np_clip(tr, args, kwargs, node):
    kwargs = {{"min": "a_min", "max": "a_max"}.get(k, k): v for k, v in kwargs.items()}
    a, lo, hi = _params(tr, args, kwargs, ["a", "a_min", "a_max"], {"a_min": None, "a_max": None}, node, "np.clip")
    r = tr.as_tensor(a, node)
    if lo is not None:
        r = tr.elementwise("maximum", r, tr.as_tensor(lo, node), node)
    if hi is not None:
        r = tr.elementwise("minimum", r, tr.as_tensor(hi, node), node)
    return r


def _np_square(tr, args, kwargs, node):
    (x,) = _params(tr, args, kwargs, ["x"], {}, node, "np.square")
    t = tr.as_tensor(x, node)
    return tr.elementwise("mul", t, t, node)


def _np_var(std: bool):
    def handler(tr, args, kwargs, node):
        a, axis, keepdims = _params(tr, args, kwargs, ["a", "axis", "keepdims"], {"axis": None, "keepdims": False}, node, "np.var")
        t = tr.as_tensor(a, node)
        mean = tr.reduce("mean", t, axis, True, node)
        d = tr.elementwise("sub", t if kind(t.dtype) == 2 else tr.cast(t, "float64"), mean, node)
        v = tr.reduce("mean", tr.elementwise("mul", d, d, node), axis, keepdims, node)
        return tr.unary("sqrt", v, node) if std else v

    return handler


def _np_logical(name: str):
    def handler(tr, args, kwargs, node):
        ts = [tr.as_tensor(a, node) for a in args]
        ts = [t if t.dtype == "bool" else tr.compare("ne", t, 0, node) for t in ts]
        if name == "not":
            return tr.tensor(M.NotOp(ts[0].ssa), False)
        return tr.elementwise(name, ts[0], ts[1], node)

    return handler


def _np_scalar_type(dtype: str):
    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {"x": 0}, node, f"np.{dtype}")
        if isinstance(x, (bool, int, float)):
            return tr.constant(x, dtype)
        return tr.cast(tr.as_tensor(x, node), dtype, False)

    return handler


def _np_asarray(tr, args, kwargs, node):
    a, dtype = _params(tr, args, kwargs, ["a", "dtype"], {"dtype": None}, node, "np.asarray")
    t = tr.as_tensor(a, node)
    if dtype is not None:
        return tr.cast(t, dtype_name(dtype, tr.loc), False)
    return tr.cast(t, t.dtype, False)


def _log_base(base: float):
    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {}, node, "np.log")
        lx = tr.unary("log", tr.as_tensor(x, node), node)
        return tr.elementwise("truediv", lx, tr.constant(math.log(base), lx.dtype), node)

    return handler


def _py_abs(tr, args, kwargs, node):
    (x,) = _params(tr, args, kwargs, ["x"], {}, node, "abs")
    if isinstance(x, (int, float)) and not isinstance(x, KnownInt):
        return abs(x)
    return tr.unary("abs", tr.as_tensor(x, node), node)


def _py_minmax(name: str):
    def handler(tr, args, kwargs, node):
        if kwargs:
            raise tr.error(UnsupportedSyntaxError, f"{name}() with keyword arguments is not supported", node)
        items = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else list(args)
        if len(args) == 1 and isinstance(args[0], Tensor):
            items = [tr.index(args[0], i, node) for i in range(args[0].shape[0])]
        if not items:
            raise tr.error(ValueError_, f"{name}() arg is an empty sequence", node)
        if all(isinstance(i, (int, float)) for i in items):
            return getattr(builtins, name)(items)
        items = [tr.as_tensor(i, node) if isinstance(i, KnownInt) else i for i in items]
        best = items[0]
        for it in items[1:]:
            # Python's max(a, b) keeps a unless b > a (min: unless b < a).
            pred = "gt" if name == "max" else "lt"
            better = tr.compare(pred, it, best, node)
            tb, tit = tr.as_tensor(best, node), tr.as_tensor(it, node)
            dtype, weak = promote(tb.dtype, tb.weak, tit.dtype, tit.weak)
            shape = M.infer_broadcast(better.shape, M.infer_broadcast(tb.shape, tit.shape))
            best = tr.tensor(
                M.SelectOp(
                    tr.broadcast(better, shape).ssa,
                    tr.broadcast(tr.cast(tit, dtype), shape).ssa,
                    tr.broadcast(tr.cast(tb, dtype), shape).ssa,
                ),
                weak,
            )
        return best

    return handler


def _py_sum(tr, args, kwargs, node):
    items, start = _params(tr, args, kwargs, ["iterable", "start"], {"start": 0}, node, "sum")
    if isinstance(items, Tensor):
        items = [tr.index(items, i, node) for i in range(items.shape[0])]
    total = start
    for it in items:
        total = tr.binary("add", total, it, node)
    return total


def _py_len(tr, args, kwargs, node):
    (x,) = _params(tr, args, kwargs, ["obj"], {}, node, "len")
    if isinstance(x, (tuple, list)):
        return len(x)
    t = tr.as_tensor(x, node)
    if t.ndim == 0:
        raise tr.error(TypeError_, "len() of unsized object", node)
    return t.shape[0]


def _py_convert(name: str):
    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {"x": 0}, node, name)
        if isinstance(x, (bool, int, float)):
            return {"float": float, "int": int, "bool": bool}[name](x)
        if isinstance(x, KnownInt) and name == "int":
            return x
        t = tr.as_tensor(x, node)
        if t.ndim != 0:
            raise tr.error(
                TypeError_, f"only 0-dimensional arrays can be converted to Python scalars ({name}())", node
            )
        return tr.cast(t, {"float": "float64", "int": "int64", "bool": "bool"}[name], True)

    return handler


def _py_range(tr, args, kwargs, node):
    if kwargs or not 1 <= len(args) <= 3:
        raise tr.error(TypeError_, "range() takes 1 to 3 positional arguments", node)
    for a in args:
        if isinstance(a, float) or (isinstance(a, Tensor) and (a.ndim != 0 or kind(a.dtype) != 1)):
            raise tr.error(TypeError_, f"range() needs integers, got {tr.describe(a)}", node)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    return RangeValue(start, stop, step)


_NUMPY_HANDLERS: dict[Any, Callable] = {
    **{getattr(np, n): _unary_np(n) for n in ("exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "sqrt", "sign", "floor", "ceil")},
    np.abs: _unary_np("abs"),
    np.negative: _unary_np("neg"),
    np.log2: _log_base(2.0),
    np.log10: _log_base(10.0),
    np.add: _binary_np("add"),
    np.subtract: _binary_np("sub"),
    np.multiply: _binary_np("mul"),
    np.divide: _binary_np("truediv"),
    np.floor_divide: _binary_np("floordiv"),
    np.mod: _binary_np("rem"),
    np.power: _binary_np("pow"),
    np.maximum: _binary_np("maximum"),
    np.minimum: _binary_np("minimum"),
    np.sum: _reduction("sum"),
    np.prod: _reduction("prod"),
    np.mean: _reduction("mean"),
    np.max: _reduction("max"),
    np.min: _reduction("min"),
    np.amax: _reduction("max"),
    np.amin: _reduction("min"),
    np.argmax: _arg_reduction("argmax"),
    np.argmin: _arg_reduction("argmin"),
    np.where: _np_where,
    np.dot: _np_dot,
    np.matmul: _np_matmul,
    np.transpose: _np_transpose,
    np.reshape: _np_reshape,
    np.concatenate: _np_concatenate,
    np.stack: _np_stack,
    np.zeros: _filler(0),
    np.ones: _filler(1),
    np.full: _np_full,
    np.zeros_like: _filler_like(0),
    np.ones_like: _filler_like(1),
    np.full_like: _np_full_like,
    np.arange: _np_arange,
    np.broadcast_to: _np_broadcast_to,
    np.expand_dims: _np_expand_dims,
    np.squeeze: _np_squeeze,
    np.clip: _np_clip,
    np.square: _np_square,
    np.var: _np_var(False),
    np.std: _np_var(True),
    np.logical_and: _np_logical("and"),
    np.logical_or: _np_logical("or"),
    np.logical_xor: _np_logical("xor"),
    np.logical_not: _np_logical("not"),
    np.asarray: _np_asarray,
    np.array: _np_asarray,
    np.float32: _np_scalar_type("float32"),
    np.float64: _np_scalar_type("float64"),
    np.int32: _np_scalar_type("int32"),
    np.int64: _np_scalar_type("int64"),
    np.bool_: _np_scalar_type("bool"),
    abs: _py_abs,
    max: _py_minmax("max"),
    min: _py_minmax("min"),
    sum: _py_sum,
    len: _py_len,
    float: _py_convert("float"),
    int: _py_convert("int"),
    bool: _py_convert("bool"),
    range: _py_range,
    math.exp: _unary_np("exp"),
    math.log: _unary_np("log"),
    math.sqrt: _unary_np("sqrt"),
    math.tanh: _unary_np("tanh"),
    math.sin: _unary_np("sin"),
    math.cos: _unary_np("cos"),
}
_NUMPY_HANDLERS[np.absolute] = _NUMPY_HANDLERS[np.abs]
_NUMPY_HANDLERS[np.true_divide] = _NUMPY_HANDLERS[np.divide]
_NUMPY_HANDLERS[np.remainder] = _NUMPY_HANDLERS[np.mod]


def _handler_for(fn: Any) -> Callable | None:
    try:
        return _NUMPY_HANDLERS.get(fn)
    except TypeError:
        return None


_ARRAY_METHODS = {
    "sum", "prod", "mean", "max", "min", "argmax", "argmin", "reshape", "astype", "transpose",
    "flatten", "ravel", "squeeze", "clip", "dot", "var", "std", "item",
}


def _call_method(tr: Translator, m: _BoundMethod, args, kwargs, node) -> Any:
    x = m.value
    name = m.name
    if name in ("sum", "prod", "mean", "max", "min", "var", "std", "argmax", "argmin", "clip", "dot", "squeeze"):
        fn = {
            "sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min, "var": np.var,
            "std": np.std, "argmax": np.argmax, "argmin": np.argmin, "clip": np.clip, "dot": np.dot,
            "squeeze": np.squeeze,
        }[name]
        return _NUMPY_HANDLERS[fn](tr, [x, *args], kwargs, node)
    if name == "reshape":
        shape = args[0] if len(args) == 1 else tuple(args)
        if "shape" in kwargs:
            shape = kwargs.pop("shape")
        return tr.reshape(x, shape, node)
    if name == "transpose":
        axes = None if not args else (args[0] if len(args) == 1 else tuple(args))
        return tr.transpose(x, axes, node)
    if name in ("flatten", "ravel"):
        return tr.reshape(x, (-1,), node)
    if name == "astype":
        (dtype,) = _params(tr, args, kwargs, ["dtype"], {}, node, "astype")
        return tr.cast(x, dtype_name(dtype, tr.loc), False)
    if name == "item":
        if math.prod(x.shape) != 1:
            raise tr.error(ValueError_, "can only convert an array of size 1 to a Python scalar", node)
        t = tr.reshape(x, (), node)
        return tr.cast(t, "float64" if kind(t.dtype) == 2 else ("bool" if t.dtype == "bool" else "int64"), True)
    raise AssertionError(name)
