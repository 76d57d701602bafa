"""Expressions: operators, comparisons, boolean logic and comprehensions.

`expr` dispatches on the AST node (and turns the dialect's shape and dtype
errors into located `ShapeError`/`DTypeError`s). Operators on Python values
compute in Python, as NumPy would; on arrays they become msir ops with
NEP 50 promotion (`promote`) and explicit broadcasts. Known ints (Python int
arguments) compute both ways: their value stays known and their tensor is a
runtime value.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

import numpy as np
from xdsl.ir import Operation

from msir.dialects import msir as M
from msir.errors import DTypeError, MsirIndexError, ShapeError, UnsupportedSyntaxError
from msir.frontend.base import TypeError_, ValueError_, ZeroDivisionError_, _constant_scalar
from msir.frontend.elementwise import binary_typing, unary_typing
from msir.frontend.state import _MAX_UNROLL, ObjectValue, RangeValue
from msir.frontend.values import Closure, KnownInt, Tensor, kind, promote

_BINOPS: dict[type, str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
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
    "div": operator.truediv,
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
_UNSUPPORTED_EXPRS = {
    ast.Yield: "yield (generators)",
    ast.YieldFrom: "yield from (generators)",
    ast.Await: "await",
    ast.Dict: "dict literals",
    ast.Set: "set literals",
    ast.DictComp: "dict comprehensions",
    ast.SetComp: "set comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.NamedExpr: "assignment expressions (:=)",
    ast.Starred: "starred expressions",
}


class ExpressionsMixin:
    """Expression dispatch, arithmetic, comparisons and boolean operators."""

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
                return tuple(self.display_items(elts))
            case ast.List(elts=elts):
                return self.display_items(elts)
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
            case ast.JoinedStr():
                return self.static_string(node)
            case ast.Lambda():
                return Closure(node, self.scope, self.source, [self.expr(d) for d in node.args.defaults])
            case ast.Slice():
                return slice(
                    *(None if p is None else self.expr(p) for p in (node.lower, node.upper, node.step))
                )
        raise self.unsupported(f"the expression '{type(node).__name__}'", node)

    def display_items(self, elts: list[ast.expr]) -> list[Any]:
        """The items of a tuple or list display: `*xs` unpacks a tuple, a list
        or the rows of an array."""
        items: list[Any] = []
        for e in elts:
            if isinstance(e, ast.Starred):
                items.extend(self.unpack(self.expr(e.value), None, e))
            else:
                items.append(self.expr(e))
        return items

    # -- arithmetic ---------------------------------------------------------

    def binary(self, name: str, a: Any, b: Any, node: ast.AST) -> Any:
        if name == "matmul":
            return self.matmul(a, b, node)
        if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
            sequence = self.sequence_binary(name, a, b, node)
            if sequence is not None:
                return sequence
        known = self._known_binary(name, a, b, node)
        if known is not None:
            return known
        ta, tb = self.as_tensor(a, node), self.as_tensor(b, node)
        return self.elementwise(name, ta, tb, node)

    def sequence_binary(self, name: str, a: Any, b: Any, node: ast.AST) -> list | tuple | None:
        """Python's `a <op> b` when a list or tuple is an operand: `+` of two
        of one type concatenates, `*` by a Python int repeats (the count
        specialises the function), and whatever Python refuses raises its
        TypeError. Only an array or NumPy scalar operand makes NumPy convert the
        sequence to an array (None: the caller's elementwise path)."""
        seq, other = (a, b) if isinstance(a, (list, tuple)) else (b, a)
        if isinstance(other, Tensor) and not other.weak:
            if name == "mul" and other.ndim == 0:
                # Python repeats by a NumPy int and refuses a NumPy float; NumPy
                # multiplies by a 0-d array: compiled code cannot tell them apart
                raise self.error(
                    UnsupportedSyntaxError,
                    f"a {type(seq).__name__} times a rank-0 {other.dtype} value (a NumPy scalar repeats it or "
                    "is refused in Python, a 0-d array multiplies it in NumPy): convert the "
                    f"{type(seq).__name__} with np.asarray, or repeat it by a Python int",
                    node,
                )
            return None
        try:
            _PY_BINOPS[name](_python_stand_in(a), _python_stand_in(b))
        except TypeError as e:
            raise self.error(TypeError_, str(e), node) from None
        if name == "add":
            return type(a)([*a, *b])
        count = int(other) if isinstance(other, bool) else self.static_int(other, "a repetition count", node)
        return type(seq)(list(seq) * count)

    def _known_binary(self, name: str, a: Any, b: Any, node: ast.AST) -> Any:
        """Python values (and known ints) compute in Python, as NumPy would."""
        pa = isinstance(a, (bool, int, float)) and not isinstance(a, Tensor)
        pb = isinstance(b, (bool, int, float)) and not isinstance(b, Tensor)
        ka, kb = isinstance(a, KnownInt), isinstance(b, KnownInt)
        if (pa or isinstance(a, str)) and (pb or isinstance(b, str)) and (pa and pb or name in ("add", "mul", "rem")):
            # numbers, and strings built at compile time (`self.name + "_bias"`, `"%s" % x`)
            try:
                return _PY_BINOPS[name](a, b)
            except ZeroDivisionError as e:
                raise self.error(ZeroDivisionError_, str(e), node) from None
            except TypeError as e:
                raise self.error(TypeError_, str(e), node) from None
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
        """NumPy's `name(a, b)` for a binary primitive `name` (`msir.dialects.primitives`)."""
        try:
            prim, dtype, weak = binary_typing(name, a.dtype, a.weak, b.dtype, b.weak)
        except DTypeError as e:
            raise self.error(DTypeError, e.message, node) from None
        if prim == "pow" and isinstance(b.ssa.owner, M.ConstantOp) and b.ndim == 0:
            value = _constant_scalar(b)
            if value == 2:
                a2 = self.cast(a, dtype, weak)
                return self.elementwise("mul", a2, a2, node)
        if prim == "pow":
            self._check_power(a, b, dtype, node)
        return self._apply_binary(M.ELEMENTWISE_OPS[prim], a, b, dtype, weak)

    def _check_power(self, a: Tensor, b: Tensor, dtype: str, node: ast.AST) -> None:
        """The powers whose result type NumPy and Python decide by value, which
        msir fixes at compile time, raise ValueError at run time at the user's
        line: an integer to a negative integer power (NumPy raises "Integers to
        negative integer powers are not allowed."; Python ints give a float),
        and a negative Python float to a non-integer Python float power (Python
        gives a complex number; NumPy's floats give NaN, as msir does)."""
        python = a.weak and b.weak and a.ndim == 0 and b.ndim == 0
        if kind(dtype) == 1:
            if isinstance(b.ssa.owner, M.ConstantOp) and b.ndim == 0 and _constant_scalar(b) >= 0:
                return
            negative = self.compare("lt", b, 0, node)
            if negative.ndim:
                negative = self.tensor(M.ReduceMaxOp(self.cast(negative, "int64", False).ssa,
                                                     tuple(range(negative.ndim)), False), False)
                negative = self.compare("ne", negative, 0, node)
            message = ("{0} ** {1}: an int to a negative int power is a float in Python, and msir fixes the "
                       "result's type at compile time (write float(n) ** k)" if python
                       else "Integers to negative integer powers are not allowed.")
            values = [self.cast(a, "int64", False).ssa, self.cast(b, "int64", False).ssa] if python else []
            self.emit(M.CheckOp(self._not(negative).ssa, "ValueError",
                                message, values, [0, 1] if python else []))
        elif python and kind(dtype) == 2:
            base, exponent = self.cast(a, dtype, True), self.cast(b, dtype, True)
            fractional = self.compare("ne", exponent, self.unary("floor", exponent, node), node)
            complex_ = self.binary("and", self.compare("lt", base, 0, node), fractional, node)
            message = ("({0}) ** {1} is a complex number in Python (a negative float to a non-integer power); "
                       "msir computes real numbers (np.power gives NaN, as NumPy does)")
            self.emit(M.CheckOp(self._not(complex_).ssa, "ValueError", message, [base.ssa, exponent.ssa], [0, 1]))

    def _not(self, t: Tensor) -> Tensor:
        return self.tensor(M.NotOp(t.ssa), t.weak)

    def _apply_binary(self, op: type[Operation], a: Tensor, b: Tensor, dtype: str, weak: bool) -> Tensor:
        shape = M.infer_broadcast(a.shape, b.shape)
        if M.DYNAMIC in shape:  # an operand read through a boolean mask
            a2, b2 = self.align_runtime_lengths(self.cast(a, dtype), self.cast(b, dtype), shape, None)
            return self.tensor(op(a2.ssa, b2.ssa), weak)
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
            if isinstance(v, (list, tuple)):
                return not v
            return not self.static_bool(v, node, "'not'")
        if isinstance(v, (list, tuple)):
            symbol = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}[type(op)]
            raise self.error(TypeError_, f"bad operand type for unary {symbol}: '{type(v).__name__}'", node)
        if isinstance(v, (bool, int, float)) and not isinstance(v, Tensor):
            try:
                return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(op)](v)
            except TypeError as e:  # ~1.5: Python's error, at the user's line
                raise self.error(TypeError_, str(e), node) from None
        if isinstance(v, KnownInt) and isinstance(op, ast.USub):
            return KnownInt(-v.value, v.deps, self.unary("neg", v.tensor, node))
        t = self.as_tensor(v, node)
        if t.dtype == "bool" and t.weak:
            # a Python bool: its unary operators act on its int value (~True == -2)
            t = self.cast(t, "int64", True)
        if isinstance(op, ast.USub):
            return self.unary("neg", t, node)
        if isinstance(op, ast.UAdd):
            return t
        if t.dtype == "bool":
            return self.tensor(M.NotOp(t.ssa), t.weak)
        if kind(t.dtype) == 1:
            return self.elementwise("xor", t, self.constant(-1, t.dtype, t.weak, shape=()), node)
        if t.weak and t.ndim == 0:
            raise self.error(TypeError_, "bad operand type for unary ~: 'float'", node)
        raise self.error(DTypeError, f"the operator ~ is not supported for {t.dtype}", node)

    def unary(self, name: str, t: Tensor, node: ast.AST) -> Tensor:
        """NumPy's `name(t)` for a unary primitive `name` (`msir.dialects.primitives`)."""
        try:
            prim, dtype, weak = unary_typing(name, t.dtype, t.weak)
        except DTypeError as e:
            raise self.error(DTypeError, e.message, node) from None
        t = self.cast(t, dtype, weak) if dtype != t.dtype else t
        return t if prim is None else self.tensor(M.ELEMENTWISE_OPS[prim](t.ssa), weak)

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
        if M.DYNAMIC in shape:  # an operand of runtime length (a mask read, an np.arange)
            a2, b2 = self.align_runtime_lengths(self.cast(ta, dtype), self.cast(tb, dtype), shape, node)
        else:
            a2 = self.broadcast(self.cast(ta, dtype), shape)
            b2 = self.broadcast(self.cast(tb, dtype), shape)
        return self.tensor(M.CompareOp(pred, a2.ssa, b2.ssa), ta.weak and tb.weak)

    def compare_chain(self, left, ops, comps, node) -> Any:
        lhs = self.expr(left)
        result = None
        for op, comp in zip(ops, comps):
            rhs = self.expr(comp)
            if isinstance(op, (ast.Is, ast.IsNot)) and (isinstance(lhs, ObjectValue) or isinstance(rhs, ObjectValue)):
                r = (self.identity(lhs) is self.identity(rhs)) == isinstance(op, ast.Is)
            elif isinstance(op, (ast.Is, ast.IsNot)):
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

    # -- comprehensions -----------------------------------------------------

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
                it = [self.index(it, i, node) for i in range(self.rows(it, g.iter))]
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


def _python_stand_in(v: Any) -> Any:
    """A Python value of `v`'s Python type, for asking Python whether an
    operator accepts the types (an empty sequence for a list or tuple, the
    value of a known int, a number of a weak scalar's type)."""
    if isinstance(v, (list, tuple)):
        return type(v)()
    if isinstance(v, KnownInt):
        return v.value
    if isinstance(v, Tensor) and v.weak:
        return {"bool": True, "int64": 1}.get(v.dtype, 1.0)
    return v


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
