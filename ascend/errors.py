"""The errors of the Ascend emulator: each an `msir.errors.MsirError` naming
the op, its source location and, where memory is concerned, the buffer and the
byte range.

Static rules broken in the IR reach the user as the same classes: the
emulator verifies the module first and turns the dialect's
`AscendVerifyException` into the class of its `kind`.
"""

from __future__ import annotations

from msir.errors import MsirError, SourceLoc


class AscendError(MsirError):
    """Base class: a kernel that breaks a rule of the AI Core."""


class CapacityError(AscendError):
    """A buffer larger than its memory, or two buffers that overlap."""


class AlignmentError(AscendError):
    """A buffer, tile or vector operand not aligned as its memory requires."""


class PathError(AscendError):
    """A data movement on a path the chip does not have, or on the wrong pipe."""


class RaceError(AscendError):
    """Two accesses to the same bytes, one a write, with no happens-before
    edge between them: a cross-pipe access without a set_flag/wait_flag pair,
    a same-pipe dependency without a pipe_barrier, or two cores."""

    def __init__(self, message: str, loc: SourceLoc | None, *, kind: str, producer: str, consumer: str,
                 pipes: tuple[str, str], buffer: str, byte_range: tuple[int, int]):
        super().__init__(message, loc)
        self.kind, self.producer, self.consumer = kind, producer, consumer
        self.pipes, self.buffer, self.byte_range = pipes, buffer, byte_range


class SyncError(AscendError):
    """A broken flag protocol: an event id out of range, a flag set while it
    is still set, a flag set and never waited."""


class DeadlockError(SyncError):
    """A wait_flag that can never fire: every pipe still holding instructions
    waits for a flag nothing will set."""


class CubeError(AscendError):
    """An mmad with shapes, dtypes, spaces or layouts the cube does not take."""


class VectorError(AscendError):
    """A vector instruction with a mask, repeat, stride or dtype it cannot have."""


class BoundsError(AscendError):
    """A tile or a vector footprint outside its buffer."""


class KernelError(AscendError):
    """A kernel the emulator cannot run as given: its structure, an op it does
    not know, inputs that do not match the kernel's arguments."""


BY_KIND = {"capacity": CapacityError, "alignment": AlignmentError, "path": PathError, "cube": CubeError,
           "vector": VectorError, "sync": SyncError, "kernel": KernelError, "type": KernelError}
"""The error class of each `AscendVerifyException.kind`."""


def source_loc(op) -> SourceLoc | None:
    """The msir location of an xDSL op (None if it has no file location)."""
    from xdsl.dialects.builtin import FileLineColLoc

    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
    return None


def describe(op) -> str:
    """`ascend.vadd at k.mlir:12:3`, for naming a second op in a message."""
    loc = source_loc(op)
    return f"{op.name} at {loc}" if loc is not None else op.name
