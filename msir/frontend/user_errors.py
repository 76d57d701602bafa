"""User code's own errors: `assert`, `raise E(message)` and f-string messages.

Compiled code checks at run time, as Python does: `assert cond, msg` becomes
`msir.check %cond` and `raise E(msg)` a check that always fails where it is
reached (inside the branch of a runtime `if` that holds it, or of a loop's
body). Native code records the first failed check with its runtime values,
and msir's runtime raises the user's exception (an msir error that also
derives from `E`, `msir.errors.USER_ERRORS`) at the user's line when the call
returns. Statements after a `raise` in the same body are never translated;
variables a raising branch would have assigned come from the other branch
(the raising branch never continues).

A message is a `str.format` template with one field per runtime scalar: the
static parts of an f-string (its text, static values formatted now, with
their conversion and format spec) are folded into the template, and each
rank-0 runtime value becomes a field `{k!conv:spec}` that the runtime formats
as Python would: a Python number argument as a Python number, an array
value as its NumPy scalar (`repr` shows `np.float64(...)`, as NumPy's own;
half floats as float32). An f-string outside a message must be
static: compiled code has no runtime strings.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

import numpy as np

from msir.dialects import msir as M
from msir.errors import USER_ERRORS, UnsupportedSyntaxError
from msir.frontend.base import TypeError_
from msir.frontend.state import _RETURN
from msir.frontend.values import KnownInt, Tensor

RAISED = (_RETURN, None)
"""What translating a `raise` gives: the body stops there (compared by identity; a
function whose body ends by raising returns nothing, since the call raises)."""

_CONVERSIONS = {-1: "", ord("r"): "!r", ord("s"): "!s", ord("a"): "!a"}


class UserErrorsMixin:
    """`assert`, `raise` and f-strings."""

    def assert_stmt(self, node: ast.Assert) -> None:
        cond = self.expr(node.test)
        if not isinstance(cond, (Tensor, KnownInt)):
            if self.static_bool(cond, node.test, "an assert condition"):
                return
            cond = self.constant(False, "bool")
        elif isinstance(cond, KnownInt):
            cond = cond.tensor
        self.check(self.truth(cond, node.test), "AssertionError", node.msg, node)

    def raise_stmt(self, node: ast.Raise) -> Any:
        if node.exc is None:
            raise self.unsupported("a bare 'raise' (re-raising)", node)
        if node.cause is not None and not (isinstance(node.cause, ast.Constant) and node.cause.value is None):
            raise self.unsupported("'raise ... from <exception>'", node.cause)
        exc, args = node.exc, []
        if isinstance(exc, ast.Call):
            if exc.keywords or len(exc.args) > 1:
                raise self.unsupported("an exception with keyword arguments or more than one argument", exc)
            exc, args = exc.func, exc.args
        cls = self.expr(exc)
        name = getattr(cls, "__name__", None)
        if not (name in USER_ERRORS and getattr(builtins, name) is cls):
            what = f"'{cls.__name__}'" if isinstance(cls, type) else self.describe(cls)
            raise self.error(UnsupportedSyntaxError, f"raising {what} is not supported in compiled "
                             f"functions (one of {', '.join(USER_ERRORS)} is)", exc)
        self.check(self.constant(False, "bool"), name, args[0] if args else None, node)
        return RAISED

    def check(self, cond: Tensor, error: str, message: ast.expr | None, node: ast.AST) -> None:
        """Emit `msir.check` of the rank-0 bool `cond`, raising `error` with `message`."""
        template, values = self.error_message(message)
        self.loc = self.source.loc(node)
        numbers = [k for k, v in enumerate(values) if v.weak]
        self.emit(M.CheckOp(cond.ssa, error, template, [v.ssa for v in values], numbers))

    def error_message(self, node: ast.expr | None) -> tuple[str, list[Tensor]]:
        """The template and runtime values of an exception's message."""
        if node is None:
            return "", []
        if isinstance(node, ast.JoinedStr):
            return self.joined_string(node, runtime=True)
        value = self.expr(node)
        if isinstance(value, (Tensor, KnownInt)):
            return "{0}", [self.message_value(value, node)]
        return _escape(str(value)), []

    def joined_string(self, node: ast.JoinedStr, runtime: bool) -> tuple[str, list[Tensor]]:
        """An f-string as a template: static parts folded in, runtime scalars as fields
        (refused unless `runtime`: only a message can show runtime values)."""
        template, values = "", []
        for part in node.values:
            if isinstance(part, ast.Constant):
                template += _escape(part.value)
                continue
            assert isinstance(part, ast.FormattedValue)
            spec = "" if part.format_spec is None else self.static_string(part.format_spec)
            conversion = _CONVERSIONS[part.conversion]
            value = self.expr(part.value)
            if isinstance(value, KnownInt) and not runtime:
                value = self.static_int(value, "an int formatted into a string", part.value)  # specialises
            if not isinstance(value, (Tensor, KnownInt)):
                template += _escape(_format_now(self, value, conversion, spec, part))
                continue
            if not runtime:
                raise self.error(UnsupportedSyntaxError, "an f-string with a runtime value is supported only as "
                                 "the message of raise or assert (compiled code has no runtime strings)", part)
            scalar = self.message_value(value, part.value)
            _format_now(self, np.zeros((), scalar.dtype)[()], conversion, spec, part)  # a bad spec fails here
            template += "{" + str(len(values)) + conversion + (":" + spec if spec else "") + "}"
            values.append(scalar)
        if len(values) > M.MAX_CHECK_VALUES:
            raise self.error(UnsupportedSyntaxError, f"an error message shows at most {M.MAX_CHECK_VALUES} runtime "
                             f"values, this one {len(values)}", node)
        return template, values

    def static_string(self, node: ast.expr) -> str:
        """A compile-time f-string (or a format spec) as its text."""
        template, _ = self.joined_string(node, runtime=False) if isinstance(node, ast.JoinedStr) else (
            _escape(str(self.expr(node))), [])
        return template.format()

    def message_value(self, value: Tensor | KnownInt, node: ast.AST) -> Tensor:
        t = value.tensor if isinstance(value, KnownInt) else value
        if t.ndim != 0:
            raise self.error(UnsupportedSyntaxError, f"an error message can show runtime scalars, not an array of "
                             f"shape {M.fmt_shape(t.shape)} (compiled code has no runtime strings)", node)
        if t.dtype in ("float16", "bfloat16"):
            return self.cast(t, "float32", False)
        return t


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _format_now(tr, value: Any, conversion: str, spec: str, node: ast.AST) -> str:
    try:
        return ("{0" + conversion + (":" + spec if spec else "") + "}").format(value)
    except (ValueError, TypeError) as e:
        raise tr.error(TypeError_, f"cannot format {tr.describe(value)} with '{spec}': {e}", node) from None
