"""The timing model of one AI core: per-pipe queues, a discrete-event schedule.

The scalar unit issues the kernel's instructions in program order, one per
cycle (scalar `arith`/`scf` work included), into one in-order queue per pipe
(unbounded: the model never stalls the scalar unit on a full queue).
An instruction of pipe p starts at the earliest cycle when

* it has been issued,
* p has accepted its previous instruction (`ready[p]`: that one's start plus
  its occupancy; instructions of one pipe overlap their latencies),
* for the first instruction after a `pipe_barrier p`: every earlier
  instruction of p has finished (`done[p]`),
* for a `wait_flag q to p`: the matching `set_flag q to p` has fired, which
  it does once every earlier instruction of q has finished.

It then occupies p for `occupancy` cycles and its result is ready `latency`
cycles after that. A flag holds one set at a time: setting it again before
its wait has consumed it is an error, as is a set never waited. The schedule
processes instructions in order of their start cycle (ties in program order)
and returns that order and, for each wait, the set it consumed. When no pipe
can proceed while instructions remain, the kernel is deadlocked: the error
names the waits that can never fire.

Costs (`copy_cost`, `mmad_cost`, `vector_cost`), from the target's constants (`TargetSpec`): a copy occupies its
pipe `bytes / bandwidth` (GM transfers share the chip's GM bandwidth among
the `block_dim` cores, and a GM burst that is not 512-byte aligned runs at
70 %; the bytes GM sees are the GM end's, which a narrowing copy out of
L0C halves); an mmad one cycle per 16x16xC0 fractal step; a vector instruction
`repeat x cpi` cycles.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from msir.ascend.errors import DeadlockError, SyncError, describe, source_loc


@dataclass
class Instruction:
    """One issued instruction of a core's trace."""

    index: int
    op: object
    kind: str
    """"copy", "mmad", "vector", "set", "wait", "barrier"."""
    pipe: str
    issue: int
    occupancy: int = 0
    latency: int = 0
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    execute: object = None
    """The functional effect (a function of no arguments), None for sync."""


@dataclass
class Profile:
    """Cycles of a kernel run and what each pipe did on the slowest core."""

    cycles: int
    busy: dict[str, int]
    """Cycles each pipe was occupied, on the core that finished last."""
    block_dim: int
    target: str
    instructions: int
    intervals: list = field(default_factory=list, repr=False, compare=False)
    """(pipe, start, end, op name) of each instruction that occupied a pipe
    on that core, in start order: `timeline()`."""

    @property
    def critical_pipe(self) -> str:
        return max(self.busy, key=self.busy.get) if self.busy else "s"

    def utilisation(self, pipe: str) -> float:
        return self.busy.get(pipe, 0) / self.cycles if self.cycles else 0.0

    def __str__(self) -> str:
        lines = [f"cycles: {self.cycles} ({self.target}, block_dim {self.block_dim}, "
                 f"{self.instructions} instructions per core at most)"]
        for pipe, busy in sorted(self.busy.items(), key=lambda kv: -kv[1]):
            lines.append(f"  pipe {pipe:<5} busy {busy:>9} cycles  {100 * self.utilisation(pipe):5.1f} %")
        lines.append(f"critical pipe: {self.critical_pipe}")
        return "\n".join(lines)


    def timeline(self, width: int = 72) -> str:
        """Per-pipe busy intervals of the slowest core as text: one row per
        pipe, `width` columns of cycles / width each, a column `#` when the
        pipe was busy for at least half of it, `+` when for less, `.` idle;
        then each pipe's intervals merged where they touch."""
        span = max(self.cycles, 1)
        per_column = span / width
        pipes = sorted({pipe for pipe, *_ in self.intervals}, key=lambda p: (-self.busy.get(p, 0), p))
        lines = [f"timeline of the slowest core: {self.cycles} cycles, {per_column:.0f} per column"]
        merged: dict[str, list[list[int]]] = {}
        for pipe, start, end, _ in sorted(self.intervals, key=lambda i: i[1]):
            runs = merged.setdefault(pipe, [])
            if runs and start <= runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], end)
            else:
                runs.append([start, end])
        for pipe in pipes:
            cover = [0.0] * width
            for start, end in merged[pipe]:
                for column in range(int(start / per_column), min(width, int(math.ceil(end / per_column)))):
                    lo, hi = column * per_column, (column + 1) * per_column
                    cover[column] += max(0.0, min(hi, end) - max(lo, start))
            row = "".join("#" if c >= per_column / 2 else "+" if c > 0 else "." for c in cover)
            lines.append(f"  {pipe:<5}|{row}|")
        for pipe in pipes:
            runs = merged[pipe]
            shown = ", ".join(f"{a}-{b}" for a, b in runs[:8]) + (f", ... ({len(runs)} intervals)" if len(runs) > 8
                                                                     else "")
            lines.append(f"  {pipe:<5} busy {shown}")
        return "\n".join(lines)


def copy_cost(spec, pipe: str, nbytes: int, gm_aligned: bool | None, cores: int,
              gm_bytes: int | None = None) -> tuple[int, int]:
    """(occupancy, latency) of a copy of `nbytes` (read from its source) on
    `pipe`; `gm_aligned`: None if no GM end, else whether every GM burst
    starts 512-byte aligned; `gm_bytes`: the bytes at the GM end when they
    differ from `nbytes` (a copy out of L0C that narrows f32 to f16 writes
    half as many): the pipe moves `nbytes` at its rate, GM `gm_bytes` at
    the core's share, the slower of the two counts."""
    cost = spec.pipes[pipe]
    bandwidth = float(cost.bytes_per_cycle)
    if gm_aligned is not None:
        bandwidth = min(bandwidth, spec.gm_bytes_per_cycle / cores)
        if not gm_aligned:
            bandwidth /= spec.gm_unaligned_penalty
    if gm_bytes is None or gm_bytes == nbytes:
        return math.ceil(nbytes / bandwidth), cost.latency
    return math.ceil(max(nbytes / cost.bytes_per_cycle, gm_bytes / bandwidth)), cost.latency


def mmad_cost(spec, m: int, n: int, k: int, k0: int) -> tuple[int, int]:
    steps = math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / k0)
    return steps, spec.cube_latency


def vector_cost(spec, name: str, repeats: int) -> tuple[int, int]:
    return repeats * spec.vector_cpi.get(name, 1), spec.vector_latency


@dataclass
class Schedule:
    profile: Profile
    order: list[Instruction]
    """The instructions in the order they start."""
    consumed: dict[int, Instruction]
    """For each wait_flag (by index), the set_flag it consumed."""


def schedule(instructions: list[Instruction], spec, block_dim: int) -> Schedule:
    """Run one core's trace through the pipe queues (see the module docstring)."""
    used = tuple(sorted({ins.pipe for ins in instructions if ins.pipe != "all"})) or ("v",)

    def queues_of(ins: Instruction) -> tuple[str, ...]:
        # a `pipe_barrier all` sits in every queue and starts when it heads all of them
        return used if ins.pipe == "all" else (ins.pipe,)

    queues: dict[str, deque] = {}
    for ins in instructions:
        for pipe in queues_of(ins):
            queues.setdefault(pipe, deque()).append(ins)
    ready = dict.fromkeys(queues, 0)
    done = dict.fromkeys(queues, 0)
    busy: dict[str, int] = {}
    flags: dict[tuple, tuple[int, Instruction]] = {}
    order: list[Instruction] = []
    consumed: dict[int, Instruction] = {}
    intervals: list[tuple[str, int, int, str]] = []
    end = max((ins.issue for ins in instructions), default=0)
    while any(queues.values()):
        best = None
        for pipe, queue in queues.items():
            if not queue:
                continue
            ins = queue[0]
            start = _start(ins, pipe, queues, ready, done, flags, queues_of)
            if start is not None and (best is None or (start, ins.index) < (best[0], best[1].index)):
                best = (start, ins)
        if best is None:
            raise _deadlock(queues)
        start, ins = best
        end = max(end, start)
        if ins.kind == "set":
            key = ins.op.key
            if key in flags:
                raise SyncError(f"{ins.op.name} {key[0]} to {key[1]} event {key[2]} sets a flag that is still set "
                                f"(by {describe(flags[key][1].op)}) and not yet waited", source_loc(ins.op))
            flags[key] = (start, ins)
        elif ins.kind == "wait":
            _, consumed[ins.index] = flags.pop(ins.op.key)
            ready[ins.pipe] = max(ready[ins.pipe], start)
        elif ins.kind == "barrier":
            for pipe in queues_of(ins):
                ready[pipe] = max(ready[pipe], start)
        else:
            ready[ins.pipe] = start + ins.occupancy
            done[ins.pipe] = max(done[ins.pipe], start + ins.occupancy + ins.latency)
            busy[ins.pipe] = busy.get(ins.pipe, 0) + ins.occupancy
            intervals.append((ins.pipe, start, start + ins.occupancy, ins.op.name))
            end = max(end, done[ins.pipe])
        order.append(ins)
        for pipe in queues_of(ins):
            queues[pipe].popleft()
    if flags:
        _, ins = min(flags.values(), key=lambda f: f[1].index)
        key = ins.op.key
        raise SyncError(f"{ins.op.name} {key[0]} to {key[1]} event {key[2]} is never waited: every set_flag needs "
                        "its wait_flag", source_loc(ins.op))
    return Schedule(Profile(end, busy, block_dim, spec.name, len(instructions), intervals), order, consumed)


def _start(ins: Instruction, pipe: str, queues, ready, done, flags, queues_of) -> int | None:
    if ins.kind == "barrier":
        pipes = queues_of(ins)
        if any(queues[p][0] is not ins for p in pipes):
            return None
        return max(ins.issue, *(done[p] for p in pipes))
    if ins.kind == "set":
        return max(ins.issue, done[pipe])
    if ins.kind == "wait":
        slot = flags.get(ins.op.key)
        return None if slot is None else max(ins.issue, ready[pipe], slot[0])
    return max(ins.issue, ready[pipe])


def _deadlock(queues) -> DeadlockError:
    blocked = sorted({q[0].index: q[0] for q in queues.values() if q}.values(), key=lambda i: i.index)
    waits = [ins for ins in blocked if ins.kind == "wait"]
    first = waits[0] if waits else blocked[0]
    others = "; ".join(f"pipe {ins.pipe} waits at {describe(ins.op)}" for ins in waits[1:])
    src, dst, event = first.op.key
    message = (f"deadlock: {first.op.name} {src} to {dst} event {event} can never fire: no set_flag {src} to {dst} "
               f"event {event} is pending or can still be reached on pipe {src}")
    if others:
        message += f" (also blocked: {others})"
    return DeadlockError(message, source_loc(first.op))
