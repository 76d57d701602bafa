"""Happens-before tracking of one AI core, and of GM across cores.

The pipes of a core run their instruction queues independently; the only
orders between instructions are the ones the kernel creates:

* within a pipe, `pipe_barrier p`: every earlier instruction of p finishes
  before any later one starts (instructions of one pipe otherwise overlap);
* between pipes, `set_flag p to q` + `wait_flag p to q`: the instructions of
  q after the wait see everything p did before the set;
* `pipe_barrier all`: everything before it, before everything after it.

`HappensBefore` keeps a vector clock per pipe (`known[p][q]`: how many
instructions of q are known finished before the next instruction of p starts)
and shadow memory per region (the last writer of every byte, and its last
reader per pipe, as instruction index + 1, 0 for none). Every access is checked against the shadow: a read of a byte
whose writer is not known finished is a RAW race, a write over an unfinished
write a WAW race, a write over an unfinished read of another pipe a WAR race.
Exempt: a write after a read on the same pipe (a pipe reads its operands when
it issues, in order) and mmad after mmad on the same L0C (the cube
accumulates in order).

`CoreOwnership` checks that cores, which this dialect cannot synchronise,
never share written GM bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msir.ascend.errors import RaceError, describe, source_loc

PIPES = ("s", "v", "m", "mte1", "mte2", "mte3", "fix")
PIPE_INDEX = {p: i for i, p in enumerate(PIPES)}


@dataclass
class Access:
    """The bytes an instruction reads or writes in one region (a memory of the
    core, or one GM argument)."""

    region: tuple
    bytes: np.ndarray | slice
    """Byte indices in the region, or one contiguous range of them."""
    buffer: str
    """The buffer's name as written (`%a_l1`)."""
    base: int
    size: int

    def indices(self) -> np.ndarray:
        if isinstance(self.bytes, slice):
            return np.arange(self.bytes.start, self.bytes.stop)
        return self.bytes


class HappensBefore:
    def __init__(self, instructions: int, region_sizes: dict[tuple, int]):
        n = len(PIPES)
        self.known = np.zeros((n, n), dtype=np.int64)
        self.count = np.zeros(n, dtype=np.int64)
        self.op_pipe = np.zeros(instructions, dtype=np.int64)
        self.op_seq = np.zeros(instructions, dtype=np.int64)
        self.op_is_mmad = np.zeros(instructions, dtype=bool)
        self.ops: list = [None] * instructions
        self.region_sizes = region_sizes
        self.writer: dict[tuple, np.ndarray] = {}
        self.readers: dict[tuple[tuple, int], np.ndarray] = {}

    # -- ordering -------------------------------------------------------

    def token(self, pipe: str) -> np.ndarray:
        """What a set_flag on `pipe` carries: everything `pipe` knows, and all
        its instructions so far."""
        p = PIPE_INDEX[pipe]
        token = self.known[p].copy()
        token[p] = self.count[p]
        return token

    def wait(self, pipe: str, token: np.ndarray) -> None:
        q = PIPE_INDEX[pipe]
        np.maximum(self.known[q], token, out=self.known[q])

    def barrier(self, pipe: str) -> None:
        if pipe == "all":
            self.known[:] = self.count
        else:
            p = PIPE_INDEX[pipe]
            self.known[p, p] = self.count[p]

    # -- accesses -------------------------------------------------------

    def _writer(self, region: tuple) -> np.ndarray:
        if region not in self.writer:
            self.writer[region] = np.zeros(self.region_sizes[region], dtype=np.int32)
        return self.writer[region]

    def _reader(self, region: tuple, pipe: int) -> np.ndarray:
        key = (region, pipe)
        if key not in self.readers:
            self.readers[key] = np.zeros(self.region_sizes[region], dtype=np.int32)
        return self.readers[key]

    def access(self, index: int, op, pipe: str, reads: list[Access], writes: list[Access]) -> None:
        """Check instruction `index` (`op` on `pipe`) against the shadow
        memory, then record its accesses."""
        p = PIPE_INDEX[pipe]
        is_mmad = op.name == "ascend.mmad"
        # the shadow holds instruction index + 1 (0: no access yet);
        # ordered[i + 1]: instruction i is known finished before this one
        # starts. One table lookup per byte instead of comparing pipes and
        # counts per byte.
        ordered = np.empty(len(self.op_pipe) + 1, dtype=bool)
        ordered[0] = True
        ordered[1:] = self.known[p][self.op_pipe] >= self.op_seq
        if reads:
            raw = ordered
            if is_mmad:  # the cube accumulates into L0C in order
                raw = ordered.copy()
                raw[1:] |= self.op_is_mmad
            for acc in reads:
                if acc.region in self.writer:
                    table = raw if acc.region[0] == "l0c" else ordered
                    self._check(self.writer[acc.region][acc.bytes], table, "RAW", op, p, acc)
        if writes:
            waw = ordered.copy()
            waw[1:] |= self.op_pipe == p  # a pipe retires its writes in order
            for acc in writes:
                if acc.region in self.writer:
                    self._check(self.writer[acc.region][acc.bytes], waw, "WAW", op, p, acc)
                for q in range(len(PIPES)):
                    if q != p and (acc.region, q) in self.readers:
                        self._check(self.readers[(acc.region, q)][acc.bytes], ordered, "WAR", op, p, acc)
        self.count[p] += 1
        self.op_pipe[index], self.op_seq[index], self.op_is_mmad[index] = p, self.count[p], is_mmad
        self.ops[index] = op
        for acc in reads:
            self._reader(acc.region, p)[acc.bytes] = index + 1
        for acc in writes:
            for (region, _), readers in self.readers.items():
                if region == acc.region:
                    readers[acc.bytes] = 0
            self._writer(acc.region)[acc.bytes] = index + 1

    def _check(self, previous: np.ndarray, ordered: np.ndarray, kind: str, op, p: int, acc: Access) -> None:
        if not previous.size:
            return
        lo, hi = int(previous.min()), int(previous.max())
        if lo == hi and ordered[lo]:  # one earlier access (or none) for every byte, and ordered
            return
        unordered = ~ordered[previous]
        if not unordered.any():
            return
        first = int(np.argmax(unordered))
        producer = int(previous[first]) - 1
        conflict = acc.indices()[unordered & (previous == producer + 1)]
        lo, hi = int(conflict.min()), int(conflict.max()) + 1
        raise _race(kind, self.ops[producer], PIPES[self.op_pipe[producer]], op, PIPES[p], acc, lo, hi)


def _race(kind: str, producer, producer_pipe: str, consumer, consumer_pipe: str, acc: Access, lo: int,
          hi: int) -> RaceError:
    verb = {"RAW": "reads", "WAW": "writes", "WAR": "writes"}[kind]
    earlier = {"RAW": "written", "WAW": "written", "WAR": "read"}[kind]
    if producer_pipe == consumer_pipe:
        missing = f"no ascend.pipe_barrier {consumer_pipe} nor flags through another pipe between them"
    else:
        missing = f"no ascend.set_flag/wait_flag {producer_pipe} to {consumer_pipe} between them"
    space = acc.region[0]
    message = (f"{kind} race: {consumer.name} (pipe {consumer_pipe}) {verb} bytes [{lo - acc.base}, {hi - acc.base}) "
               f"of {space} buffer {acc.buffer} ({space}[{lo}, {hi})), {earlier} by {describe(producer)} "
               f"(pipe {producer_pipe}) with {missing}")
    return RaceError(message, source_loc(consumer), kind=kind, producer=producer.name, consumer=consumer.name,
                     pipes=(producer_pipe, consumer_pipe), buffer=acc.buffer, byte_range=(lo - acc.base, hi - acc.base))


class CoreOwnership:
    """Which core wrote, and which cores read, every GM byte: cores run with
    no synchronisation between them, so a byte one core writes must be
    touched by no other."""

    MANY = -2

    def __init__(self, region_sizes: dict[tuple, int]):
        self.writer = {r: np.full(n, -1, dtype=np.int32) for r, n in region_sizes.items()}
        self.reader = {r: np.full(n, -1, dtype=np.int32) for r, n in region_sizes.items()}

    def access(self, block: int, op, reads: list[Access], writes: list[Access]) -> None:
        for acc in reads:
            self._check(self.writer[acc.region], block, op, acc, "RAW", "written")
        for acc in writes:
            self._check(self.writer[acc.region], block, op, acc, "WAW", "written")
            self._check(self.reader[acc.region], block, op, acc, "WAR", "read")
        for acc in reads:
            readers = self.reader[acc.region]
            old = readers[acc.bytes]
            readers[acc.bytes] = np.where((old == -1) | (old == block), block, self.MANY)
        for acc in writes:
            self.writer[acc.region][acc.bytes] = block

    def _check(self, owners: np.ndarray, block: int, op, acc: Access, kind: str, earlier: str) -> None:
        other = owners[acc.bytes]
        if not other.size:
            return
        lo, hi = int(other.min()), int(other.max())
        if lo == hi and lo in (-1, block):  # untouched, or only this core's
            return
        clash = (other != -1) & (other != block)
        if not clash.any():
            return
        first = int(np.argmax(clash))
        conflict = acc.indices()[clash]
        lo, hi = int(conflict.min()), int(conflict.max()) + 1
        who = "other cores" if other[first] == self.MANY else f"core {int(other[first])}"
        verb = "reads" if kind == "RAW" else "writes"
        message = (f"{kind} race between cores: {op.name} on core {block} {verb} bytes [{lo - acc.base}, "
                   f"{hi - acc.base}) of gm buffer {acc.buffer}, {earlier} by {who}; cores cannot synchronise, so "
                   "each GM byte a core writes must be touched by no other core")
        raise RaceError(message, source_loc(op), kind=kind, producer=who, consumer=op.name, pipes=("gm", "gm"),
                        buffer=acc.buffer, byte_range=(lo - acc.base, hi - acc.base))
