"""Automatic synchronisation of a lowered Ascend kernel, from its data dependencies.

`convert-msir-to-ascend` builds a kernel body as a structured program (`Seq`
of `Instr`, `Scalar` and `Loop` nodes): each `Instr` is one pipe instruction
with the exact on-chip bytes it reads and writes. `insert_sync(seq, events)`
adds the `ascend.set_flag` / `ascend.wait_flag` / `ascend.pipe_barrier` ops
that the dependencies require, and nothing else; `emit(seq, block)` then
appends the ops to the kernel's block.

The dependencies are the emulator's (`msir.ascend.hazards`), so that what is
inserted is exactly what the emulator checks: a read after the last write
of a byte (RAW, also within one pipe, except mmad after mmad on the same
L0C), a write after another pipe's write (WAW) or read (WAR). A vector clock
per pipe records what is already ordered, including transitively through
earlier flags, so a dependency already covered gets nothing:

* on one pipe: `pipe_barrier p` before the consumer;
* between pipes: `set_flag q to p` + `wait_flag q to p` before the consumer;
* across a loop's back edge (a dependency of iteration i + 1 on iteration i
  that the body's own syncs do not cover): `set_flag q to p` before the loop,
  `wait_flag q to p` before the consumer in the body, `set_flag q to p` at
  the end of the body, `wait_flag q to p` after the loop, as AscendNPU-IR's
  InjectSync does; a back-edge dependency within one pipe gets a barrier
  before the consumer.

A loop is analysed as running `max_trips` times, at most twice: a second
iteration finds the back edges, one at a time (a back edge's wait may cover
the next), and the body's own syncs are planned again whenever one is added,
since its pre-loop set may cover what the body needed. The lowering gives
core 0 the most iterations of every loop, so the analysis follows core 0,
where each inserted sync is needed; the back-edge flags are balanced for any
trip count, zero included, so the other cores run the same code safely.

GM is not tracked: the lowering reads kernel inputs only on MTE2 and writes
each output byte once, on one pipe (the emulator's `CoreOwnership` checks the
cores never share written bytes).

With `early_sets` (convert-msir-to-ascend asks for it for double-buffered
kernels: a matmul, whose loads of one step are issued before the compute of
the last, and an elementwise kernel's software-pipelined tiles), a set_flag
goes directly after the producer its consumer waits for rather than
directly before the wait, so the consumer does not also wait for the
producer pipe's later work (AscendNPU-IR's MoveSyncState). Each consumer
gets its own pair even when other pairs of the same pipes are set or waited
in between (folding it into such a pair would make that pair's consumer
wait for this producer too); the forward pairs of the same pipes in a block
then take the free event ids least recently waited first, a pair never
one that a pair set earlier and not yet waited (in program order) holds,
as a pipe may set a flag again before the other has waited for the last;
after a loop, not one of its back-edge flags' ids while another is free
(the src pipe may set it again before the dst pipe's post-loop wait). A
loop body's dependency on work before the loop becomes a back-edge flag, one per pair of pipes, whose set goes directly
after the last body instruction its consumers depend on.

Event ids: a forward pair uses the lowest id its (src, dst) pipes do not hold
in an enclosing loop's back-edge flag; each back-edge flag gets its own id.
More live flags of one pipe pair than the target has ids is a `CompileError`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from msir.errors import CompileError


@dataclass(frozen=True)
class Access:
    """Bytes `indices` (a NumPy array of byte offsets) of on-chip buffer
    `buffer` (any hashable naming it); `l0c` marks the cube's accumulator,
    where mmad after mmad needs no barrier."""

    buffer: object
    indices: np.ndarray
    size: int
    l0c: bool = False


@dataclass(eq=False)
class Instr:
    """One instruction of `pipe` (`op`, an xDSL op) and its accesses."""

    op: object
    pipe: str
    reads: list[Access]
    writes: list[Access]
    mmad: bool = False


@dataclass(eq=False)
class Scalar:
    """An op of the scalar unit (index arithmetic): no pipe, no accesses."""

    op: object


@dataclass(eq=False)
class Loop:
    """An `scf.for` whose body block is `block` (its induction variable is
    `block.args[0]`) and whose body is `body`; `op` is the `scf.for`."""

    op: object
    block: object
    body: list
    max_trips: int = 2
    """The most iterations any core runs: a loop that runs at most once has no back edge."""
    pre: list = field(default_factory=list)
    """The back-edge flags' sets before the loop (filled by `insert_sync`)."""
    post: list = field(default_factory=list)
    """Their waits after the loop."""


@dataclass(eq=False)
class Sync:
    """A sync op to emit: `kind` "set", "wait" or "barrier"; `flag` ties the
    four ops of one back-edge flag (None for a forward pair)."""

    kind: str
    src: str
    dst: str
    flag: object = None
    pair: object = None
    """A forward pair's set and wait share one `_Pair`."""


class _Pair:
    """Ties a forward set_flag to its wait_flag."""


@dataclass(eq=False)
class _BackEdge:
    """A flag from `src` to `dst` over a loop's back edge, waited for
    before `consumer` (a node of the loop's body). With early sets it covers
    every back-edge dependency of those pipes: `consumers` are the
    instructions that need it, its wait goes before the first and its set
    directly after the last node of the body holding an instruction of `src`
    they depend on."""

    src: str
    dst: str
    consumer: object
    consumers: list = field(default_factory=list)


PIPES = ("v", "m", "mte1", "mte2", "mte3", "fix")


@dataclass
class _State:
    """The happens-before knowledge at one point of the program."""

    known: dict[str, dict[str, int]] = field(default_factory=lambda: {p: dict.fromkeys(PIPES, 0) for p in PIPES})
    count: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PIPES, 0))
    writer: dict = field(default_factory=dict)
    readers: dict = field(default_factory=dict)
    info: list = field(default_factory=list)
    """(pipe, sequence number, is mmad) of each recorded instruction."""
    after: list = field(default_factory=list)
    """The token of each recorded instruction's pipe right after it: what a
    set_flag placed directly after it carries."""

    def copy(self) -> _State:
        return _State({p: dict(k) for p, k in self.known.items()}, dict(self.count),
                      {b: a.copy() for b, a in self.writer.items()},
                      {b: a.copy() for b, a in self.readers.items()}, self.info, self.after)

    def token(self, pipe: str) -> dict[str, int]:
        token = dict(self.known[pipe])
        token[pipe] = self.count[pipe]
        return token

    def wait(self, pipe: str, token: dict[str, int]) -> None:
        known = self.known[pipe]
        for q, n in token.items():
            known[q] = max(known[q], n)

    def barrier(self, pipe: str) -> None:
        self.known[pipe][pipe] = self.count[pipe]

    def _ordered(self, pipe: str, ids: np.ndarray) -> list[int]:
        return [int(i) for i in np.unique(ids) if i and self.known[pipe][self.info[i - 1][0]] < self.info[i - 1][1]]

    def producers(self, ins: Instr) -> dict[str, int]:
        """For each pipe `ins` depends on without a happens-before edge yet,
        the latest of its instructions `ins` depends on (an index into `info`,
        from 1)."""
        p = ins.pipe
        latest: dict[str, int] = {}

        def add(i: int) -> None:
            q = self.info[i - 1][0]
            latest[q] = max(latest.get(q, 0), i)

        for acc in ins.reads:
            if acc.buffer in self.writer:
                for i in self._ordered(p, self.writer[acc.buffer][acc.indices]):
                    if not (ins.mmad and self.info[i - 1][2] and acc.l0c):
                        add(i)
        for acc in ins.writes:
            if acc.buffer in self.writer:
                for i in self._ordered(p, self.writer[acc.buffer][acc.indices]):
                    if self.info[i - 1][0] != p:
                        add(i)
            for q in PIPES:
                if q != p and (acc.buffer, q) in self.readers:
                    for i in self._ordered(p, self.readers[(acc.buffer, q)][acc.indices]):
                        add(i)
        return latest

    def needs(self, ins: Instr) -> list[str]:
        """The pipes `ins` depends on without a happens-before edge yet, its
        own pipe last: a flag from another pipe that had itself waited for
        this pipe's producer orders that producer too, and then the barrier
        is not needed. For the same reason another pipe whose flag would
        already order a third pipe's producer goes first (a store on MTE3
        that waited for the vector op before it: its flag orders both for
        the next load)."""
        latest = self.producers(ins)

        def covers(q: str) -> bool:
            return q != ins.pipe and any(self.known[q][r] >= self.info[i - 1][1] for r, i in latest.items() if r != q)

        return sorted(latest, key=lambda q: (q == ins.pipe, not covers(q), PIPES.index(q)))

    def record(self, ins: Instr) -> None:
        p = ins.pipe
        self.count[p] += 1
        self.info.append((p, self.count[p], ins.mmad))
        self.after.append(self.token(p))
        ident = len(self.info)
        for acc in ins.reads:
            self._shadow(self.readers, (acc.buffer, p), acc.size)[acc.indices] = ident
        for acc in ins.writes:
            for (buffer, _), readers in self.readers.items():
                if buffer == acc.buffer:
                    readers[acc.indices] = 0
            self._shadow(self.writer, acc.buffer, acc.size)[acc.indices] = ident

    @staticmethod
    def _shadow(table: dict, key, size: int) -> np.ndarray:
        if key not in table:
            table[key] = np.zeros(size, dtype=np.int64)
        return table[key]


class _Planner:
    """Plans (`plan`) or replays (`replay`) the syncs of a sequence on a state.
    `early_sets`: a forward pair's set_flag goes directly after the producer
    the consumer waits for, when that is in the same sequence with no loop
    in between (AscendNPU-IR's MoveSyncState), so that the consumer does not
    also wait for the producer pipe's later work; else directly before its
    wait."""

    def __init__(self, early_sets: bool = False):
        self.early_sets = early_sets
        self.nodes: dict[int, Instr] = {}
        """The planned instruction of each index into `_State.info`."""
        self.entry_dependencies: list = []

    def _early_set(self, out: list, producer: int) -> int | None:
        """Where in `out` a set_flag comes directly after instruction
        `producer`: None when the producer is not in `out` or a loop lies in
        between. Other pairs of the same pipes may be set or waited in
        between: each pair has its own event id (`emit`), so each consumer
        waits for its own producer only."""
        node = self.nodes.get(producer)
        for at in range(len(out) - 1, -1, -1):
            n = out[at]
            if n is node:
                return at + 1
            if isinstance(n, Loop):
                return None
        return None

    def plan(self, nodes: list, state: _State, backedge_waits: dict, tokens: dict,
             loop_entry: int | None = None) -> list:
        """`nodes` with the syncs their dependencies need, updating `state`.
        `backedge_waits`: consumer -> back-edge flags to wait for before it;
        `tokens`: the pending set of each back-edge flag; `loop_entry`: when
        `nodes` is a loop's body, the instructions recorded before the loop
        (with early sets, a body instruction's dependency on one of them is
        left to a back-edge flag, whose set before the loop covers it:
        `self.entry_dependencies`)."""
        out = []
        for node in nodes:
            for flag in backedge_waits.get(node, ()):
                out.append(Sync("wait", flag.src, flag.dst, flag))
                state.wait(flag.dst, tokens.pop(flag))
            if isinstance(node, Instr):
                for q in state.needs(node):
                    producer = state.producers(node).get(q)
                    if producer is None:
                        continue  # covered by a flag inserted for another pipe
                    if q == node.pipe:
                        out.append(Sync("barrier", q, q))
                        state.barrier(q)
                        continue
                    if self.early_sets and loop_entry is not None and producer <= loop_entry:
                        self.entry_dependencies.append((q, node.pipe, node))
                    at = self._early_set(out, producer) if self.early_sets else None
                    link = _Pair()
                    if at is None:
                        out += [Sync("set", q, node.pipe, pair=link), Sync("wait", q, node.pipe, pair=link)]
                        state.wait(node.pipe, state.token(q))
                        continue
                    out.insert(at, Sync("set", q, node.pipe, pair=link))
                    out.append(Sync("wait", q, node.pipe, pair=link))
                    state.wait(node.pipe, state.after[producer - 1])
                state.record(node)
                self.nodes[len(state.info)] = node
                out.append(node)
            elif isinstance(node, Loop):
                out.append(self._plan_loop(node, state, tokens))
            else:
                if isinstance(node, Sync):  # a back-edge barrier
                    state.barrier(node.src)
                out.append(node)
        return out

    def _plan_loop(self, loop: Loop, state: _State, tokens: dict) -> Loop:
        if loop.max_trips <= 1:
            body = self.plan(loop.body, state, {}, tokens)
            return Loop(loop.op, loop.block, body, loop.max_trips)
        edges: list[_BackEdge] = []
        barriers: set = set()
        # each round adds one back edge or barrier, to a consumer and pipe
        # that had none: a bounded number of rounds
        for _ in range(len(loop.body) * len(PIPES) + 1):
            entry = state.copy()
            body, found = self._iterate_twice(loop.body, entry, edges, barriers, tokens)
            if not found:
                break
            # one back edge at a time: its wait may cover the later ones; a
            # consumer in an inner loop is waited for before that loop
            src, dst, consumer = found[0]
            top = next(n for n in loop.body if _contains(n, consumer))
            same = next((e for e in edges if (e.src, e.dst) == (src, dst)), None) if self.early_sets else None
            if src == dst:
                barriers.add((top, src))
            elif same is not None:  # one flag per pair of pipes: the target has few event ids
                same.consumers.append(consumer)
                if loop.body.index(top) < loop.body.index(same.consumer):
                    same.consumer = top
            else:
                edges.append(_BackEdge(src, dst, top, [consumer]))
        else:
            raise AssertionError("sync insertion did not converge on a loop's back edges")
        pre = [Sync("set", e.src, e.dst, e) for e in edges]
        post = [Sync("wait", e.src, e.dst, e) for e in edges]
        state.__dict__.update(entry.__dict__)
        return Loop(loop.op, loop.block, body, loop.max_trips, pre, post)

    def _iterate_twice(self, body: list, state: _State, edges: list, barriers: set, tokens: dict):
        """Plan the body as the first iteration (from `state`, after the
        back edges' pre-loop sets), replay it as the second; returns the
        planned body and the dependencies of the second iteration nothing
        covers: (src pipe, dst pipe, consumer)."""
        waits: dict = {}
        for e in edges:
            tokens[e] = state.token(e.src)
            waits.setdefault(e.consumer, []).append(e)
        with_barriers = [x for n in body for x in
                         [*(Sync("barrier", p, p, "backedge") for p in PIPES if (n, p) in barriers), n]]
        if not self.early_sets:
            planned = self.plan(with_barriers, state, waits, tokens)
            planned += [Sync("set", e.src, e.dst, e) for e in edges]
            for e in edges:
                tokens[e] = state.token(e.src)
            found: list = []
            self.replay(planned, state, tokens, found)
            for e in edges:
                state.wait(e.dst, tokens.pop(e))
            return planned, found
        entry = state.copy()
        pre_tokens = {e: tokens[e] for e in edges}
        self.entry_dependencies = []
        planned = self.plan(with_barriers, state, waits, tokens, loop_entry=len(state.info))
        if self.entry_dependencies:
            return planned, self.entry_dependencies
        for e in edges:
            planned.insert(_after_last_producer(planned, e), Sync("set", e.src, e.dst, e))
        # both iterations replayed: a set inside the body carries what its
        # pipe had done there, not at the body's end
        state.__dict__.update(entry.__dict__)
        tokens.update(pre_tokens)
        self.replay(planned, state, tokens, None)
        found = []
        self.replay(planned, state, tokens, found)
        for e in edges:
            state.wait(e.dst, tokens.pop(e))
        return planned, found

    def replay(self, nodes: list, state: _State, tokens: dict, found: list | None) -> None:
        """Run planned `nodes` on `state`; the dependencies still uncovered
        go to `found` (first one per consumer and pipe)."""
        pending: dict = {}
        for node in nodes:
            if isinstance(node, Sync):
                if node.kind == "barrier":
                    state.barrier(node.src)
                elif node.flag is None:  # forward pairs of two pipes: the k-th wait takes the k-th set
                    if node.kind == "set":
                        pending[node.pair] = state.token(node.src)
                    else:
                        state.wait(node.dst, pending.pop(node.pair))
                elif node.kind == "set":
                    tokens[node.flag] = state.token(node.src)
                else:
                    state.wait(node.dst, tokens.pop(node.flag))
            elif isinstance(node, Instr):
                if found is not None:
                    found += [(q, node.pipe, node) for q in state.needs(node)]
                state.record(node)
            elif isinstance(node, Loop):
                for s in node.pre:
                    tokens[s.flag] = state.token(s.src)
                for _ in range(min(node.max_trips, 2)):
                    self.replay(node.body, state, tokens, found)
                for s in node.post:
                    state.wait(s.dst, tokens.pop(s.flag))


def _instructions(node) -> list:
    return [node] if isinstance(node, Instr) else [i for n in node.body for i in _instructions(n)] \
        if isinstance(node, Loop) else []


def _conflict(producer: Instr, consumer: Instr) -> bool:
    """Does `consumer` read bytes `producer` writes, or write bytes it touches?"""
    def overlap(a: list, b: list) -> bool:
        return any(x.buffer == y.buffer and np.intersect1d(x.indices, y.indices).size for x in a for y in b)

    return overlap(consumer.reads, producer.writes) or overlap(consumer.writes, [*producer.reads, *producer.writes])


def _after_last_producer(planned: list, edge: _BackEdge) -> int:
    """Where in a planned body the set of back-edge flag `edge` goes:
    directly after the last node holding an instruction of `edge.src` that
    one of its consumers depends on (the body's end if none does)."""
    for at in range(len(planned) - 1, -1, -1):
        if any(i.pipe == edge.src and _conflict(i, c) for i in _instructions(planned[at]) for c in edge.consumers):
            return at + 1
    return len(planned)


def _contains(node, target) -> bool:
    """`node` is `target` or a loop holding it."""
    return node is target or (isinstance(node, Loop) and any(_contains(n, target) for n in node.body))


def insert_sync(nodes: list, early_sets: bool = False) -> list:
    """`nodes` (a kernel body) with the syncs its dependencies need
    (`early_sets`: see `_Planner`)."""
    return _Planner(early_sets).plan(nodes, _State(), {}, {})


def emit(nodes: list, block, events: int, live: dict | None = None, rotate: bool = False) -> None:
    """Append the ops of planned `nodes` to `block`, with event ids. A
    forward pair takes the lowest id an enclosing loop's back-edge flag of
    its pipes does not hold; with `rotate` (for early sets, whose pipe may
    set a flag again before the other pipe has waited for the last one), a
    pair of pipes takes the id of those not held by a pair set before it and
    not yet waited whose last wait came earliest in the block, and after a
    loop not one of its back-edge flags' ids while others are free (the src
    pipe may set it again before the dst pipe's post-loop wait took it)."""
    from xdsl.dialects import scf
    from xdsl.dialects.builtin import IntegerAttr, i64

    from msir.dialects.ascend import PipeAttr, PipeBarrierOp, SetFlagOp, WaitFlagOp, Pipe

    live = {} if live is None else live
    ids: dict = {}
    last_wait: dict = {}
    """(src, dst) -> event id -> when (in program order) its last forward wait came."""
    clock = [0]
    outstanding: dict = {}
    """The event id of each forward pair set and not yet waited (in program order)."""
    after_loops: dict = {}
    """(src, dst) -> the ids of the back-edge flags of the loops emitted so far in
    this block: with early sets the src pipe may set one again right after
    the loop, before the dst pipe's post-loop wait took it, so the forward
    pairs after the loop take other ids while there are."""

    def event_of(sync: Sync) -> int:
        if isinstance(sync.flag, _Fixed):
            return sync.flag.event
        if sync.flag in ids:
            return ids[sync.flag]
        free = sorted(set(range(events + 1)) - live.get((sync.src, sync.dst), set()))
        if not rotate:
            return free[0]
        pipes = (sync.src, sync.dst)
        waited = last_wait.setdefault(pipes, {})
        if sync.kind == "wait":
            event = outstanding.pop(sync.pair)
            clock[0] += 1
            waited[event] = clock[0]
            return event
        taken = {e for p, e in outstanding.items() if p.pipes == pipes}
        usable = [e for e in free if e < events and e not in taken]
        if not usable:
            return events  # (reported below)
        usable = [e for e in usable if e not in after_loops.get(pipes, ())] or usable
        # the id waited for longest ago: its wait is then most likely past
        # when the source pipe, running ahead, sets it again
        event = min(usable, key=lambda e: (waited.get(e, -1), e))
        sync.pair.pipes = pipes
        outstanding[sync.pair] = event
        return event

    def sync_op(sync: Sync):
        if sync.kind == "barrier":
            return PipeBarrierOp.create(properties={"pipe": PipeAttr(Pipe(sync.src))})
        event = event_of(sync)
        if event >= events:
            raise CompileError(f"the kernel needs more than {events} live flags from pipe {sync.src} to "
                               f"{sync.dst}, the event ids of the target")
        cls = SetFlagOp if sync.kind == "set" else WaitFlagOp
        return cls.create(properties={"src_pipe": PipeAttr(Pipe(sync.src)), "dst_pipe": PipeAttr(Pipe(sync.dst)),
                                      "event": IntegerAttr(event, i64)})

    for node in nodes:
        if isinstance(node, Sync):
            block.add_op(sync_op(node))
        elif isinstance(node, (Instr, Scalar)):
            block.add_op(node.op)
        else:
            inner = {pair: set(held) for pair, held in live.items()}
            for s in node.pre:
                held = inner.setdefault((s.src, s.dst), set())
                ids[s.flag] = min(set(range(events + 1)) - held)
                held.add(ids[s.flag])
            for s in node.pre:
                block.add_op(sync_op(s))
            block.add_op(node.op)
            body_ids = _with_ids(node.body, ids)
            emit(body_ids, node.block, events, inner, rotate)
            node.block.add_op(scf.YieldOp())
            for s in node.post:
                block.add_op(sync_op(s))
                if rotate:
                    after_loops.setdefault((s.src, s.dst), set()).add(ids[s.flag])


def _with_ids(nodes: list, ids: dict) -> list:
    """Back-edge syncs of the body carry their flag's id as a fixed event."""
    return [dataclasses.replace(n, flag=_Fixed(ids[n.flag])) if isinstance(n, Sync) and n.flag in ids else n
            for n in nodes]


@dataclass(frozen=True)
class _Fixed:
    event: int
