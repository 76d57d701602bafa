"""The core of the translator: state, errors, emission and value conversions.

`TranslatorBase` holds what every part of the translator uses: the function
being built (its block, scope, source and enclosing scopes), error
construction at the current source line, op emission with locations, and the
conversions between frontend values (Python numbers, known ints, tensors) and
typed tensors (constants, casts, broadcasts, static ints). The per-concern
mixins (`msir.frontend.statements`, `.expressions`, ...) build on it; the
composed `msir.frontend.translate.Translator` is what runs.
"""

from __future__ import annotations

import ast
import functools
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FileLineColLoc,
    FunctionType,
    IntAttr,
    StringAttr,
)
from xdsl.ir import Block, Operation, Region

from msir.dialects import msir as M
from msir.errors import DTypeError, MsirError, ShapeError, SourceLoc, UnsupportedSyntaxError
from msir.frontend.parameter_writes import entry_write_results, refuse_callee_writes
from msir.frontend.source import FunctionSource
from msir.frontend.state import MethodValue, ObjectValue, TraceContext
from msir.frontend.structure import _leaves
from msir.frontend.values import KnownInt, Tensor, promote, weak_dtype_of


@functools.lru_cache(maxsize=4096)
def _loc_attr(loc: SourceLoc) -> FileLineColLoc:
    """The location attribute of `loc` (attributes are immutable: one per
    position serves every op at it; building one costs ~8 us)."""
    return FileLineColLoc(StringAttr(loc.file), IntAttr(loc.line), IntAttr(loc.col))


# The built-in exception types with msir locations, for errors NumPy raises as such.
class ValueError_(MsirError, ValueError):
    pass


class TypeError_(MsirError, TypeError):
    pass


class AttributeError_(MsirError, AttributeError):
    pass


class ZeroDivisionError_(MsirError, ZeroDivisionError):
    pass


class OverflowError_(MsirError, OverflowError):
    pass


class AttributeError_(MsirError, AttributeError):
    pass


class KeyError_(MsirError, KeyError):
    pass


class TranslatorBase:
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

    def describe(self, value: Any) -> str:
        if isinstance(value, Tensor):
            return f"an array of shape {M.fmt_shape(value.shape)} and dtype {value.dtype}"
        if isinstance(value, KnownInt):
            return "an int"
        if isinstance(value, ObjectValue):
            return "a dict" if isinstance(value.obj, dict) else f"an object of class {type(value.obj).__qualname__}"
        if isinstance(value, MethodValue):
            return f"the method {type(value.self_value.obj).__qualname__}.{value.name}"
        return f"a value of type {type(value).__name__}"

    # -- conversions --------------------------------------------------------

    def constant(self, value: Any, dtype: str, weak: bool = False, shape: tuple[int, ...] = ()) -> Tensor:
        if shape:
            attr = DenseIntOrFPElementsAttr.from_list(
                M.tensor_type(shape, dtype), np.asarray(value, dtype=dtype).ravel().tolist()
            )
            return self.tensor(M.ConstantOp(attr), weak)
        # A scalar is emitted once per block: a later one with the same dtype and
        # bits (0.0 and -0.0, equal in Python, stay apart) reuses the op if it is
        # still in the block, where it dominates the new use (one moved or erased
        # since is not reused). What CSE would merge later is never built: a
        # 200-op elementwise function with a Python scalar in most lines traces
        # ~260 ops instead of ~410 (each scalar was a weak constant and its
        # folded cast). Constants only: any other op belongs to the source line
        # that made it, which the planner's graph relies on (`msir.parallel.
        # op_graph`: one node per op call; constants are no node).
        scalar = float(value) if M.is_float(dtype) else int(value)
        key = (self.block, dtype, struct.pack("<d", scalar) if isinstance(scalar, float) else scalar)
        op = self.tc.scalar_constants.get(key)
        if op is None or op.parent is not self.block:
            op = self.emit(M.ConstantOp(DenseIntOrFPElementsAttr.from_list(M.tensor_type((), dtype), [scalar])))
            self.tc.scalar_constants[key] = op
        return Tensor(op.results[0], M.dtype_of(op.results[0].type), (), weak)

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
        if any(d == M.DYNAMIC and (i < len(shape) - t.ndim or t.shape[i - len(shape) + t.ndim] != d)
               for i, d in enumerate(shape)):
            # the size of a runtime dim comes from its operand (convert-msir-to-loops)
            raise self.error(ShapeError, f"cannot broadcast {self.describe(t)} to shape {M.fmt_shape(shape)}: "
                             "a dimension of runtime size (from a boolean mask or np.arange) needs one in the operand", None)
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
        if isinstance(value, ObjectValue):
            truth = bool(value.obj)
            self.guard("truth", value.path, value.obj)
            return truth
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

    # -- whole functions ----------------------------------------------------

    @classmethod
    def build_function(
        cls,
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
        tr = cls(tc, block, src, globals_, closure)
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
        if public:
            structure, leaves = static_results_first(structure, leaves)
        if entry:
            leaves = with_parameter_writes(leaves, tr, node)
        else:
            refuse_callee_writes(tr, block)
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


def flatten_result(value: Any, tr: TranslatorBase, node: ast.AST) -> tuple[Any, list[Tensor]]:
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


def static_results_first(structure: Any, leaves: list[Tensor]) -> tuple[Any, list[Tensor]]:
    """An entry's results reordered so that those of static shape come first
    (the structure renumbered to match): the native function fills its
    static-shape results into output buffers and returns those of runtime size
    (a mask read's) after them (convert-msir-to-loops), so this is the order in
    which the native call hands them back."""
    order = sorted(range(len(leaves)), key=lambda i: M.DYNAMIC in leaves[i].shape)
    position = {old: new for new, old in enumerate(order)}

    def renumber(s):
        kind, payload = s
        if kind == "leaf":
            return ("leaf", position[payload])
        if kind in ("tuple", "list"):
            return (kind, [renumber(x) for x in payload])
        return s

    return renumber(structure), [leaves[i] for i in order]


def with_parameter_writes(leaves: list[Tensor], tr: Any, node: ast.AST) -> list[Tensor]:
    """An entry's results followed by the new values of the Parameters its
    trace assigned (`msir.frontend.parameter_writes`), which the caller takes
    from the end. Results of runtime size come back after every static one
    (`static_results_first`), so they cannot be combined with writes yet."""
    writes = entry_write_results(tr)
    if writes and any(M.DYNAMIC in leaf.shape for leaf in leaves):
        raise tr.error(UnsupportedSyntaxError, "a function that assigns Parameters cannot return a value of "
                       "runtime size (a boolean-mask read) yet", node)
    return leaves + writes


def _constant_scalar(t: Tensor) -> float | int | None:
    vals = t.ssa.owner.values()  # type: ignore[union-attr]
    return vals[0] if len(vals) == 1 else None
