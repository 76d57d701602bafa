"""The state of one trace, and the compile-time values the translator passes around.

`TraceContext` is shared by every `Translator` of one trace (the entry
function, the functions it outlines, the bodies it inlines): the functions
built so far, the arrays captured as hidden arguments, the recursion being
built. The dataclasses below it are frontend values that exist only while
tracing: closures (nested `def`s and lambdas), `range` objects, variables not
defined on every path, function values of the IR (outlined callables, the
pullback of `msir.vjp`), and plain Python objects with the path they were
reached by (`ObjectValue`, `MethodValue`: see `msir.frontend.objects`).
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msir.errors import SourceLoc
from msir.frontend.source import FunctionSource
from msir.frontend.values import Tensor

if TYPE_CHECKING:
    from xdsl.dialects.builtin import FunctionType
    from xdsl.ir import Attribute, Block, Operation, SSAValue

    from msir.trace_cache import Guard


@dataclass
class Capture:
    """An array read from an enclosing scope: a hidden runtime argument."""

    get: Callable[[], Any]
    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass
class TraceContext:
    """The module-wide state of one trace, shared by all its translators."""

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
    scalar_constants: dict[tuple, Operation] = field(default_factory=dict)
    """The scalar constants emitted, by (block, dtype, value bits): one per block
    (`TranslatorBase.constant`)."""
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
    guards: list[Guard] = field(default_factory=list)
    """What the trace read through objects, checked before every call of its code."""
    bound_parameters: list[tuple[int, dict[int, Tensor]]] = field(default_factory=list)
    """The Parameters bound to values while a `BindParameters` function is
    translated (innermost last), by id: (the binding's number, the values)."""
    bound_parameters_seen: list[Any] = field(default_factory=list)
    """Every binding of the trace (numbers them; keeps the parameters alive)."""
    parameter_reads: dict[int, tuple[Tensor, Any]] = field(default_factory=dict)
    """The Parameters read by the traced code, by the id of the frontend Tensor
    the read gave: (that Tensor, kept alive, the Parameter), so that
    `ops.assign(self.moving_mean, ...)` knows which Parameter it writes."""
    parameter_writes: dict[int, "ParameterWrite"] = field(default_factory=dict)
    """The Parameters the traced code assigned (`ops.assign`), by id: the last
    value of each, not yet returned (`msir.frontend.parameter_writes`)."""
    written_captures: list[int] = field(default_factory=list)
    """Per extra result of the entry function, the capture its Parameter's
    array is: the call writes the result into it (`Traced.writes`)."""
    python_values: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """Objects given to Python code while tracing (`msir.grad(self.loss)`), by
    id: (the Python object, the frontend value it was), so that a call of it
    (the transform calling it back) reads it through the same path."""

    def unique_name(self, base: str) -> str:
        name, i = base, 0
        while name in self.names:
            i += 1
            name = f"{base}_{i}"
        self.names.add(name)
        return name


_RETURN = object()
"""The marker of a translated `return`: statement translation gives `(_RETURN, value)`."""


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


@dataclass
class Path:
    """How a value read while tracing is reached from the traced function's
    scopes: `get()` reads it again (hidden arguments and guards do, at every
    call), `name` names it (hidden arguments), `ref` is the trace cache
    recorder's reference to it (None when not recording)."""

    get: Callable[[], Any]
    name: str
    ref: list | None = None


@dataclass(eq=False)
class ObjectValue:
    """A plain Python object (an instance of a user class) or a dict, known at
    compile time; what the trace reads of it is read through `path`."""

    obj: Any
    path: Path


@dataclass(eq=False)
class MethodValue:
    """A method of an object bound to it: a call inlines `fn` with `self` bound."""

    self_value: ObjectValue
    fn: types.FunctionType
    name: str


@dataclass
class Outlined:
    """A callable built as its own function by `Translator.outline_callable`."""

    name: str
    type: FunctionType  # the parameters for `leaves` only (captures are bound)
    leaves: list[Tensor]
    captured: list[Tensor]
    structure: Any
    weak: list[bool]
    writes: list[Any] = field(default_factory=list)
    """The Parameters the callable assigned: their new values are its last
    result (a tuple), which the transform returns as an auxiliary output."""


@dataclass
class ParameterWrite:
    """`ops.assign(parameter, value)` in traced code: the Parameter, its new
    value, the function body (block) that value belongs to, and where in the
    user's source it was assigned."""

    parameter: Any
    value: Tensor
    block: Block
    loc: SourceLoc | None


@dataclass
class FunctionValue:
    """A runtime function value (e.g. the pullback `msir.vjp` returns)."""

    ssa: SSAValue
    structure: Any
    weak: list[bool]


_MAX_UNROLL = 1024
"""Loops over tuples, lists, and loops that build lists, are unrolled up to this."""
