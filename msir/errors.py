"""The msir error hierarchy.

Every error a user can meet carries, where one is known, the source location of
the Python expression (or IR op) it concerns, and renders as::

    model.py:12:9: error: try/except is not supported in compiled functions
        try:
        ^

The classes also derive from the matching Python built-in exception, so that
``except ValueError`` or ``except IndexError`` keeps working for users who do not
know about msir.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A position in a source file: 1-based line, 1-based column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def source_line(self) -> str | None:
        text = linecache.getline(self.file, self.line)
        return text.rstrip("\n") if text else None


def format_diagnostic(message: str, loc: SourceLoc | None) -> str:
    """Render `message` at `loc` with the source line and a caret under the column."""
    if loc is None:
        return f"error: {message}"
    out = f"{loc}: error: {message}"
    line = loc.source_line()
    if line is not None:
        out += f"\n    {line}\n    {' ' * (loc.col - 1)}^"
    return out


class MsirError(Exception):
    """Base class of every error msir raises on purpose."""

    def __init__(self, message: str, loc: SourceLoc | None = None):
        self.message = message
        self.loc = loc
        super().__init__(format_diagnostic(message, loc))

    def __str__(self) -> str:
        return format_diagnostic(self.message, self.loc)


class UnsupportedSyntaxError(MsirError, SyntaxError):
    """A Python construct or library function that compiled code does not support."""

    def __init__(self, message: str, loc: SourceLoc | None = None):
        MsirError.__init__(self, message, loc)
        if loc is not None:
            self.filename, self.lineno, self.offset = loc.file, loc.line, loc.col
            self.text = loc.source_line()
        self.msg = message

    def __str__(self) -> str:
        return MsirError.__str__(self)


class MsirNameError(MsirError, NameError):
    """A name compiled code reads that is not defined (Python: NameError), or a
    variable read where it has no value on some path (Python raises
    UnboundLocalError, a NameError, when such a path runs)."""

    def __init__(self, message: str, loc: SourceLoc | None = None, name: str | None = None):
        MsirError.__init__(self, message, loc)
        self.name = name


class ShapeError(MsirError, ValueError):
    """Operand shapes that do not fit together (broadcasting, matmul, reshape...)."""


class DTypeError(MsirError, TypeError):
    """Element types that an operation does not accept."""


class MsirIndexError(MsirError, IndexError):
    """An index out of range, found at compile time or reported by native code."""


class MsirZeroDivisionError(MsirError, ZeroDivisionError):
    """Integer division or modulo by zero, reported by native code."""


class MsirValueError(MsirError, ValueError):
    """A bad value found by native code where Python raises ValueError (a `range` step of 0)."""


class MsirMemoryError(MsirError, MemoryError):
    """A failed allocation in native code."""


class MsirRecursionError(MsirError, RecursionError):
    """A native recursion about to overflow the stack, reported by native code."""


class NotDifferentiableError(MsirError, TypeError):
    """A gradient was asked through an operation or value that has none."""


class CompileError(MsirError):
    """A failure below the frontend: verification, lowering or code generation."""


class UnknownTargetError(MsirError, ValueError):
    """A compile target (`msir.jit(target=...)`, `device_target`) that names no
    registered target (`msir.targets`); the message lists the known ones."""


class DonationWarning(UserWarning):
    """A donated argument's buffer (`msir.jit(..., donate_argnums=...)`) was not
    reused: the output it was meant for got a new buffer. The message says why."""


class PlanningError(MsirError, ValueError):
    """Auto-parallel planning refused its input (`msir.parallel`): a strategy
    that does not divide a dimension, an unknown op name, a layout of the wrong
    rank, a memory limit no plan meets. The message names the op, dimension and
    mesh axis; the location is the user's source line."""


class LaunchError(MsirError, RuntimeError):
    """An MPI job (`msir.parallel.launch`, `msir-launch`) that could not start,
    had a rank fail (the message names the rank and shows its error) or ran
    past its timeout (the whole job is then killed)."""
