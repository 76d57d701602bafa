"""Parameters that compiled code assigns: `ops.assign(param, value)` in a traced function.

Compiled code has value semantics, so a write to a Parameter (BatchNorm's
moving statistics, a step counter: `ops.assign(self.moving_mean, new)` in a
`construct`) is not an effect in the IR. The trace remembers, per Parameter,
its last value (`TraceContext.parameter_writes`); reads of that Parameter
later in the trace give that value; and the value leaves the function it was
computed in as an extra result:

* from the entry function: after the user's results, one per assigned
  Parameter (`entry_write_results`); `Traced.writes` names the capture each
  one is written into, and `msir.calling.Entry` copies it into the
  Parameter's own array after the native call (as MindSpore's Graph mode
  updates a Parameter in place);
* from a function differentiated by `grad` / `value_and_grad` (the network
  of a training step): as one more auxiliary output, never differentiated
  (`lift_outlined_writes`, then `record_write` again in the caller with the
  value the transform returned), so the update travels out of the
  differentiated function like any has_aux output.

Runners of traced code that would drop the updates (the compiled
`msir.vjp` called from Python, auto-parallel plans) refuse such a trace by
the Parameter's name (`refuse_parameter_writes`). Refused with a clear error
at the user's line: a first argument that is not
a Parameter read from an object (`self.moving_mean`), a value of another
shape, a write inside a compiled loop or branch (the value would not exist
after it), a write in a function called as a separate function or under a
transform other than grad / value_and_grad, and a write to a Parameter that
the same trace differentiates (`weights=`, `TrainOneStepCell`'s weights).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from msir.errors import MsirTypeError, ShapeError, UnsupportedSyntaxError
from msir.frontend.state import ParameterWrite
from msir.frontend.values import Tensor

if TYPE_CHECKING:
    from xdsl.ir import Block


def remember_parameter_read(tr: Any, parameter: Any, value: Any) -> Any:
    """Note that the frontend value `value` was read from `parameter`; gives `value`."""
    if isinstance(value, Tensor):
        tr.tc.parameter_reads[id(value)] = (value, parameter)
    return value


def written_value(tr: Any, parameter: Any) -> Tensor | None:
    """The value the trace last assigned to `parameter`, or None."""
    write = tr.tc.parameter_writes.get(id(parameter))
    return None if write is None else write.value


def translate_assign(tr: Any, args: list, kwargs: dict, node: ast.AST) -> Tensor:
    """`ops.assign(variable, value)` in compiled code: records the write; gives the new value."""
    if kwargs or len(args) != 2:
        raise tr.error(MsirTypeError, "ops.assign(variable, value) takes two positional arguments", node)
    target, value = args
    read = tr.tc.parameter_reads.get(id(target)) if isinstance(target, Tensor) else None
    if read is None or read[0] is not target:
        raise tr.error(
            MsirTypeError,
            f"ops.assign: the variable must be a Parameter read from an object (self.moving_mean), "
            f"got {tr.describe(target)}",
            node,
        )
    parameter = read[1]
    value = tr.as_tensor(value, node)
    if value.shape != target.shape:
        raise tr.error(
            ShapeError,
            f"ops.assign: the value of shape {value.shape} does not match the Parameter "
            f"'{parameter.name}' of shape {target.shape}",
            node,
        )
    value = tr.cast(value, target.dtype, weak=False)
    record_write(tr, parameter, value, node)
    return value


def record_write(tr: Any, parameter: Any, value: Tensor, node: ast.AST) -> None:
    """`parameter` is now `value` in the function `tr` translates."""
    if tr.block in tr.tc.block_fn:
        raise tr.error(
            UnsupportedSyntaxError,
            f"assigning the Parameter '{parameter.name}' inside a compiled loop or branch is not supported; "
            "compute its new value there and assign it after",
            node,
        )
    for _, bound in tr.tc.bound_parameters:
        if id(parameter) in bound:
            raise tr.error(
                UnsupportedSyntaxError,
                f"the Parameter '{parameter.name}' is assigned by code that is differentiated with respect to it",
                node,
            )
    tr.tc.parameter_writes[id(parameter)] = ParameterWrite(parameter, value, tr.block, tr.source.loc(node))
    remember_parameter_read(tr, parameter, value)


def take_writes(tr: Any, block: Block) -> list[ParameterWrite]:
    """The writes whose values belong to the function body `block`, removed from the trace's."""
    writes = [w for w in tr.tc.parameter_writes.values() if w.block is block]
    for w in writes:
        del tr.tc.parameter_writes[id(w.parameter)]
    return writes


def lift_outlined_writes(tr: Any, block: Block, value: Any, differentiated: str) -> tuple[Any, list]:
    """The result of a function outlined for a transform, with the values of
    the Parameters it assigned as one more (auxiliary) result, and those
    Parameters (`Outlined.writes`)."""
    writes = take_writes(tr, block)
    if not writes:
        return value, []
    if not differentiated:
        raise UnsupportedSyntaxError(
            f"the Parameter '{writes[0].parameter.name}' is assigned in a function that this transform "
            "outlines; only grad and value_and_grad carry Parameter updates out",
            writes[0].loc,
        )
    new_values = tuple(w.value for w in writes)
    lifted = (*value, new_values) if differentiated == "first" and isinstance(value, tuple) else (value, new_values)
    return lifted, [w.parameter for w in writes]


def refuse_callee_writes(tr: Any, block: Block) -> None:
    """A function compiled as a call of its own may not assign Parameters (its values stay in it)."""
    writes = take_writes(tr, block)
    if writes:
        raise UnsupportedSyntaxError(
            f"the Parameter '{writes[0].parameter.name}' is assigned in a function called as a separate "
            "function (all its arguments are arrays); assign it in the Cell's construct",
            writes[0].loc,
        )


def entry_write_results(tr: Any) -> list[Tensor]:
    """The entry function's extra results: the new values of the Parameters the
    trace assigned. `TraceContext.written_captures` gets, per result, the
    capture (hidden argument) holding the Parameter's array the call writes it into."""
    writes = take_writes(tr, tr.tc.entry_block)
    if tr.tc.parameter_writes:
        stray = next(iter(tr.tc.parameter_writes.values()))
        raise UnsupportedSyntaxError(
            f"the Parameter '{stray.parameter.name}' is assigned where its value cannot be returned", stray.loc,
        )
    # Every assigned Parameter was read first (ops.assign's first argument), so its array is a capture.
    tr.tc.written_captures = [
        next(i for i, c in enumerate(tr.tc.captures) if c.get() is w.parameter._data) for w in writes
    ]
    return [w.value for w in writes]


def refuse_parameter_writes(traced: Any, what: str) -> None:
    """Refuse a trace that assigns Parameters where `what` (a runner of
    traced code that does not write them back) would drop the updates."""
    if traced.writes:
        name = traced.captures[traced.writes[0]].name
        raise UnsupportedSyntaxError(
            f"{what} does not update Parameters yet, and the code assigns '{name}' (ops.assign, or a "
            "BatchNorm in training mode): call it with msir.jit, or without the transform"
        )
