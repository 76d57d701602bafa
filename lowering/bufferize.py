"""Bufferisation of msir tensor functions: the buffer every tensor value lives in.

Given a `func.func` of `msir` ops (the input `convert-msir-to-loops` expects),
the bufferiser decides, before any code is emitted, which values share a
buffer, which buffer each op writes its result into, when every buffer is
freed, and which donated argument an output may overwrite. It returns these
decisions as a `FunctionPlan`; the loop emitter (`msir.lowering.to_loops`)
realises them with `memref.alloc`/`dealloc` and copies, and so could another
target's lowering. It creates no IR.

Use::

    module_plan = ModulePlan(module, pass_name)           # signatures, call graph
    planner = FunctionPlanner(module_plan, f)             # folds views (`folded`)
    plan = planner.plan(Schedule(absorbed, row_groups))   # the target's loop choices

The `Schedule` is the target's: ops it computes inside the code of another
(`absorbed`: a matmul accumulated by the BLAS call of its update, or computed
into the result of the fusion that is its epilogue) and runs of
top-level ops it lowers in one loop over their rows (`row_groups`).

The decisions
=============
* Signature (destination-passing style, `signature`). A tensor argument is
  a buffer of the same shape; a tensor result of fully static shape is an
  output buffer the caller passes as a trailing argument; other results are
  returned (a dynamic tensor in a buffer the callee allocates and the caller
  then owns, a scalar as itself). Output buffers do not alias input buffers
  unless donation pairs them (below).
* Views (`aliases`, `folded`). Tuple elements, identity casts, broadcasts,
  reshapes and transposes, and transposes of the last two axes read only by
  matmuls (which read their input transposed), share the buffer of the value
  they equal and get no code; `msir.tape_set`/`tape_add` write their tape's
  buffer in place, so their result is that buffer.
* Destinations (`outputs`). A value that is returned into an output buffer is
  computed straight into it; a returned argument, or a value returned twice,
  is copied (`ReturnPlan`).
* Lifetimes (`frees`). Every other buffer is allocated by the op computing its
  value and freed right after the value's last use (in its own block: a value
  read inside a loop lives until the loop op ends), or right away if unused.
* Loops (`LoopPlan`). A carried value lives in the buffer of the loop's result:
  its destination when it has one, the initial value's own buffer when that
  value dies at the loop (`SlotPlan.movable`), else a copy made once. Per
  `SlotKind`: the body's new value is computed straight into that buffer when
  nothing reads the old value after the op computing it, or only that op
  elementwise (`INPLACE`); else into a second buffer, the two swapping roles
  each iteration (`PINGPONG`, with a parity flag); a value the body does not
  compute (an outer value, a swap of arguments) is copied into the second
  buffer (`COPY`); the argument itself yielded back is one buffer (`SAME`); a
  value of dynamic shape (a tape growing) has its buffer and sizes carried
  (`MOVE`): the body's buffer for it is adopted when the body allocated it
  (`LoopPlan.adopt`), else copied. A region hands the buffers it allocated and
  still holds (`RegionPlan.live_out`) to its op, which copies out of them and
  frees them.
* Tapes. A tape's buffer has at least as many rows as the tape (`resized`:
  values whose buffer has more). `msir.tape_push` appends in place when the
  tape dies there and its buffer is the function's or its loop's (`PushMode`),
  else into a copy; inside a loop body, a row computed only to be pushed is
  written by its producer straight into the tape (`reserves`). `msir.tape_get`
  in a function that writes no tape reads a tape argument's row through a
  view (`views`).
* Row groups (`RowGroupPlan`). A value used only inside its group gets a
  one-row buffer, every other one a full buffer, all allocated before the
  group's loop and freed after it.
* Donation (`FunctionPlan.donation`). On a public function nothing in the
  module calls, an argument marked `{msir.donate}` may share its buffer with
  an output of the same static type (output k -> argument i) when the op
  computing the output writes it straight into the output buffer, every other
  op reading the argument (through any view) comes before that op (or in its
  row loop, reading only the row being computed), and that op, if it reads the
  argument, is elementwise and writes nothing into output k before reading
  (a matmul epilogue computes its product there first): then the function computes the same values
  whether the two buffers are one or not. Each other donated argument is
  refused with the reason.

The plan is keyed by the msir ops and values of the function; `canon` maps a
value to the one whose buffer holds it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    FileLineColLoc,
    MemRefType,
    ModuleOp,
    TensorType,
    TupleType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from msir.dialects import msir
from msir.errors import CompileError, SourceLoc
from msir.lowering.loops_abi import DONATE_ATTR, ERROR_FUNC

DYN = DYNAMIC_INDEX


def type_shape(t: Attribute) -> tuple[int, ...]:
    """The shape of a tensor or memref type, every dynamic dim as `DYN`.

    (A parsed `?` is `DYNAMIC_INDEX`, but a type built from Python with -1 keeps
    the -1; both mean dynamic.)"""
    return tuple(DYN if d < 0 else d for d in t.get_shape())  # type: ignore[attr-defined]


@functools.cache
def memref_type(t: Attribute) -> Attribute:
    """The buffer type of a tensor type (cached: building a type costs ~0.5 ms)."""
    if isinstance(t, TensorType):
        return MemRefType(t.element_type, type_shape(t))
    return t


def is_static_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType) and DYN not in type_shape(t)


def source_loc(op: Operation) -> SourceLoc | None:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
    return None


def used_values(op: Operation) -> list[SSAValue]:
    """The operands of `op` and the values its regions read from outside them."""
    if not op.regions:
        return list(op.operands)
    inside: set[SSAValue] = set()
    used: list[SSAValue] = list(op.operands)
    for inner in op.walk():
        for region in inner.regions:
            for blk in region.blocks:
                inside.update(blk.args)
        if inner is not op:
            inside.update(inner.results)
    for inner in op.walk():
        if inner is op:
            continue
        used += [v for v in inner.operands if v not in inside]
    return used


# ---------------------------------------------------------------------------
# Signatures in destination-passing style
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    inputs: tuple[Attribute, ...]
    """Lowered argument types: inputs, then the static output buffers."""
    results: tuple[Attribute, ...]
    """Lowered result types (dynamic tensors as memrefs, scalars)."""
    out_positions: tuple[int, ...]
    """Original result positions passed as output buffers."""
    ret_positions: tuple[int, ...]
    """Original result positions returned by func.return."""


class ModulePlan:
    """What the functions of a module need to know of each other: their
    signatures and who calls whom. Errors name the pass `pass_name`."""

    def __init__(self, module: ModuleOp, pass_name: str):
        self.pass_name = pass_name
        funcs = [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]
        self.calls: dict[str, set[str]] = {
            f.sym_name.data: {op.callee.string_value() for op in f.walk() if isinstance(op, func.CallOp)}
            for f in funcs
        }
        """Function -> the functions it calls."""
        self.called: set[str] = set().union(*self.calls.values())
        self.signatures: dict[str, Signature] = {
            f.sym_name.data: self._signature(f) for f in funcs if f.sym_name.data != ERROR_FUNC
        }

    def fail(self, op: Operation, message: str) -> CompileError:
        return CompileError(f"{self.pass_name}: '{op.name}' {message}", source_loc(op))

    def _signature(self, f: func.FuncOp) -> Signature:
        ft = f.function_type
        for t in (*ft.inputs, *ft.outputs):
            if isinstance(t, TupleType):
                raise self.fail(f, f"@{f.sym_name.data}: a tuple cannot cross a function boundary ({t})")
        outs = tuple(i for i, t in enumerate(ft.outputs) if is_static_tensor(t))
        rets = tuple(i for i, t in enumerate(ft.outputs) if not is_static_tensor(t))
        inputs = [memref_type(t) for t in ft.inputs] + [memref_type(ft.outputs.data[i]) for i in outs]
        return Signature(tuple(inputs), tuple(memref_type(ft.outputs.data[i]) for i in rets), outs, rets)


# ---------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """The target's choices the buffers must follow (see the module docstring)."""

    absorbed: Mapping[Operation, Operation] = field(default_factory=dict)
    """An op -> the op whose only result it computes in its own code: that
    producer gets no buffer, and its operands are read when the op runs."""
    row_groups: Mapping[Operation, Sequence[Operation]] = field(default_factory=dict)
    """First op -> consecutive top-level ops on static shapes with one leading
    dim, lowered in one loop over it (each row depends only on the same row of
    the group's values)."""
    written_first: Mapping[Operation, int] = field(default_factory=dict)
    """An absorbing op -> the result its absorbed producer writes before the op
    reads its own operands (a matmul epilogue's product, computed into that
    result's buffer): that buffer may not be an operand's donated buffer."""


class SlotKind(Enum):
    """How a carried value of a loop is kept (the module docstring, Loops)."""

    SAME = "same"
    INPLACE = "inplace"
    PINGPONG = "pingpong"
    COPY = "copy"
    MOVE = "move"


@dataclass(frozen=True)
class SlotPlan:
    """One carried value of a loop: its `kind`, and whether the loop's result
    takes over the initial value's buffer."""

    kind: SlotKind
    movable: bool

    @property
    def swaps(self) -> bool:
        """Whether the value has a second buffer that swaps roles with the first."""
        return self.kind in (SlotKind.PINGPONG, SlotKind.COPY)


@dataclass
class LoopPlan:
    """The carried values of an `msir.for`/`msir.while`."""

    slots: list[SlotPlan]
    adopt: list[bool] = field(default_factory=list)
    """Per slot: a `SlotKind.MOVE` value whose yielded buffer the body allocated (and
    no earlier slot adopted) is carried as it is; others are copied."""
    consumed: list[bool] = field(default_factory=list)
    """Per slot: a `SlotKind.MOVE` buffer a tape push of the body took over (so the
    iteration does not free it)."""


@dataclass
class RegionPlan:
    """A region lowered into its op: the buffers it leaves to the op."""

    dests: list[SSAValue | None]
    """Per terminator operand: the value computed straight into the buffer the
    op offers for that position, else None."""
    live_out: list[SSAValue] = field(default_factory=list)
    """Values whose buffers the region allocated and still holds at its end."""


@dataclass(frozen=True)
class RowGroupPlan:
    ops: list[Operation]
    one_row: dict[SSAValue, bool]
    """The group's values that get a buffer before its loop (in op order):
    True for a one-row buffer (used only inside the group), False for a full one."""


@dataclass(frozen=True)
class ReturnPlan:
    fresh: list[bool]
    """Per returned (non-output) value: whether it is copied into a new buffer."""
    frees: list[SSAValue]
    """The values whose buffers are freed before returning."""


class PushMode(Enum):
    """How a tape push appends its row."""

    WRITTEN = "written"
    """The row's producer wrote it into the tape (room was made before it)."""
    IN_PLACE = "in place"
    """Into the tape's own buffer (moved into a larger one when it is full)."""
    COPIED = "copied"
    """Into a copy of the tape."""


@dataclass
class Donation:
    pairs: dict[int, int] = field(default_factory=dict)
    """Output k -> the donated argument whose buffer it may be."""
    refused: list[str] = field(default_factory=list)
    """Why each other donated argument was refused."""


@dataclass
class FunctionPlan:
    """The buffers of one function (see the module docstring)."""

    signature: Signature
    aliases: dict[SSAValue, SSAValue] = field(default_factory=dict)
    folded: set[Operation] = field(default_factory=set)
    """Ops that get no code: views, tuple ops, absorbed producers."""
    outputs: dict[SSAValue, int] = field(default_factory=dict)
    """A value -> the output buffer (by output number) it is computed into."""
    frees: dict[Operation, list[SSAValue]] = field(default_factory=dict)
    """An op -> the values whose buffers are freed right after it."""
    loops: dict[Operation, LoopPlan] = field(default_factory=dict)
    regions: dict[Block, RegionPlan] = field(default_factory=dict)
    row_groups: dict[Operation, RowGroupPlan] = field(default_factory=dict)
    returns: dict[Operation, ReturnPlan] = field(default_factory=dict)
    pushes: dict[Operation, PushMode] = field(default_factory=dict)
    reserves: dict[Operation, list[msir.TapePushOp]] = field(default_factory=dict)
    """An op -> the tape pushes whose rows it computes straight into the tape
    (room is made before it)."""
    views: set[Operation] = field(default_factory=set)
    """`msir.tape_get` ops whose result is a view of the tape's row."""
    resized: set[SSAValue] = field(default_factory=set)
    """Tape values whose buffer has more rows (its capacity) than the value."""
    donation: Donation = field(default_factory=Donation)

    def canon(self, v: SSAValue) -> SSAValue:
        """The value whose buffer holds `v`."""
        return self.aliases.get(v, v)


# ---------------------------------------------------------------------------
# The planner: one walk over the function in the order of emission
# ---------------------------------------------------------------------------


class FunctionPlanner:
    """Plans the buffers of `f`. The views of its body are folded at once
    (`folded`), so that the target can make its `Schedule` over the rest."""

    def __init__(self, module_plan: ModulePlan, f: func.FuncOp):
        self.mp = module_plan
        self.f = f
        self.body_ops = list(f.body.block.ops)
        self.fplan = FunctionPlan(module_plan.signatures[f.sym_name.data])
        self.absorbed: Mapping[Operation, Operation] = {}
        self.written_first: Mapping[Operation, int] = {}
        self.dest: set[SSAValue] = set()  # values computed into a buffer chosen for them
        self.returned: set[SSAValue] = set()  # returned values whose buffer passes to the caller
        self.owned: set[SSAValue] = set()  # values whose buffer the current region frees
        self.consumable: set[SSAValue] = set()  # the current loop body's carried tapes (MOVE)
        self.consumed: set[SSAValue] = set()  # ... whose buffer a tape push took over
        self.rows: dict[Operation, list[msir.TapePushOp]] = {}
        self.reserved: set[Operation] = set()
        self.k = 0  # the op being planned: its index in its block, and that block's last uses
        self.last_use: dict[SSAValue, int] = {}
        self.writes_tapes = any(isinstance(o, msir.TapeSetOp | msir.TapePushOp) for o in f.walk())
        self._fold(self.body_ops)

    @property
    def folded(self) -> set[Operation]:
        return self.fplan.folded

    def canon(self, v: SSAValue) -> SSAValue:
        return self.fplan.aliases.get(v, v)

    def plan(self, schedule: Schedule | None = None) -> FunctionPlan:
        """The plan of the function for the target's `schedule` (none: every
        op lowered on its own)."""
        schedule = schedule or Schedule()
        p = self.fplan
        body = self.f.body.block
        ops = self.body_ops
        self.absorbed = schedule.absorbed
        self.written_first = schedule.written_first
        p.folded.update(schedule.absorbed.values())
        last_use = self._plan_outputs(ops, body)
        index = {op: k for k, op in enumerate(ops)}
        for consumer, producer in schedule.absorbed.items():
            for v in producer.operands:  # read when the consumer runs
                last_use[self.canon(v)] = max(last_use.get(self.canon(v), 0), index[consumer])
        groups = schedule.row_groups
        p.donation = _pair_donated(self, ops, index, body, groups)
        grouped = {o for g in groups.values() for o in g}
        for k, op in enumerate(ops):
            if op in p.folded:
                continue
            if op in grouped:
                if op in groups:
                    self._row_group(list(groups[op]), k, last_use)
                continue
            self._op(op, k, last_use)
        return p

    # -- views ----------------------------------------------------------------

    def _fold(self, ops: Sequence[Operation]) -> None:
        """Values that need no code of their own: tuple elements and identity
        casts/broadcasts/reshapes/transposes, mapped to the value they equal, and
        transposes read in place by the matmuls using them (`_matmul_absorbs`),
        mapped to their input."""
        alias, folded = self.fplan.aliases, self.fplan.folded
        for op in ops:
            if isinstance(op, msir.MakeTupleOp):
                folded.add(op)
            elif isinstance(op, msir.GetTupleOp):
                src = op.tuple.owner
                if not isinstance(src, msir.MakeTupleOp):
                    raise self.mp.fail(op, f"reads a tuple that is not built by msir.make_tuple ({op.tuple.type})")
                alias[op.result] = self.canon(src.elements[op.index.value.data])
                folded.add(op)
            elif isinstance(op, msir.CastOp | msir.BroadcastToOp | msir.ReshapeOp) and \
                    op.input.type == op.result.type:
                alias[op.result] = self.canon(op.input)
                folded.add(op)
            elif isinstance(op, msir.TapeSetOp | msir.TapeAddOp):
                # A tape is updated in place: the new tape is the old buffer.
                alias[op.result] = self.canon(op.tape)
            elif isinstance(op, msir.TransposeOp) and (list(msir._ints(op.permutation)) == sorted(
                    msir._ints(op.permutation)) or _matmul_absorbs(op)):
                alias[op.result] = self.canon(op.input)
                folded.add(op)
        for op in ops:
            if isinstance(op, msir.MakeTupleOp):
                for use in op.result.uses:
                    if not isinstance(use.operation, msir.GetTupleOp):
                        raise self.mp.fail(op, f"builds a tuple that survives lowering (used by '{use.operation.name}')")

    # -- the walk ---------------------------------------------------------------

    def _plan_outputs(self, ops: list[Operation], body: Block) -> dict[SSAValue, int]:
        """Last use of every value of the body, and where returned values are written."""
        last_use: dict[SSAValue, int] = {}
        for k, op in enumerate(ops):
            if op in self.fplan.folded:
                continue
            for v in used_values(op):
                last_use[self.canon(v)] = k
        ret = ops[-1] if ops and isinstance(ops[-1], func.ReturnOp) else None
        if ret is not None:
            args = set(body.args)
            sig = self.fplan.signature
            for k, pos in enumerate(sig.out_positions):
                v = self.canon(ret.operands[pos])
                if v not in args and v not in self.dest and v not in self.returned:
                    self.dest.add(v)
                    self.fplan.outputs[v] = k
            for pos in sig.ret_positions:
                v = self.canon(ret.operands[pos])
                if isinstance(v.type, TensorType) and v not in args and v not in self.dest:
                    self.returned.add(v)
        return last_use

    def _op(self, op: Operation, k: int, last_use: dict[SSAValue, int]) -> None:
        """Plan op number `k` of its block, then free what dies there."""
        self.k, self.last_use = k, last_use
        for push in self.rows.pop(op, ()):
            self._reserve_row(push, op)
        producer = self.absorbed.get(op)
        if producer is not None:
            for r in op.results:
                self._result(r)
            self._release(producer, k, last_use, at=op)
        elif isinstance(op, msir.IfOp):
            self._if(op)
        elif isinstance(op, msir.ForOp):
            self._loop(op, op.inits, lead=1)
        elif isinstance(op, msir.WhileOp):
            self._loop(op, op.inits, lead=0)
        elif isinstance(op, msir.TapeAllocOp):
            if op.result not in self.returned:
                self.owned.add(op.result)
        elif isinstance(op, msir.TapePushOp):
            self._tape_push(op)
        elif isinstance(op, msir.TapeGetOp):
            self._tape_get(op)
        elif isinstance(op, func.CallOp):
            self._call(op)
        elif isinstance(op, func.ReturnOp):
            self._return(op)
        elif not isinstance(op, msir.TapeSetOp | msir.TapeAddOp):  # those write in place
            for r in op.results:
                self._result(r)
        self._release(op, k, last_use)

    def _result(self, res: SSAValue) -> None:
        """`res` is written into its destination, else into a new buffer."""
        if res not in self.dest and res not in self.returned:
            self.owned.add(res)

    def _release(self, op: Operation, k: int, last_use: dict[SSAValue, int], at: Operation | None = None) -> None:
        dead = {self.canon(v) for v in used_values(op) if last_use.get(self.canon(v)) == k}
        dead.update(r for r in op.results if r not in last_use)
        for v in dead:
            if v in self.owned:
                self.owned.discard(v)
                self.fplan.frees.setdefault(at or op, []).append(v)

    def _region(self, block: Block, sized: Sequence[bool], dests: Sequence[bool] = (),
                consumable: Sequence[SSAValue] = ()) -> RegionPlan:
        """Plan a region lowered into its op, its argument i bound to a buffer of
        known sizes where `sized[i]` (a tape's capacity may exceed its length).
        A terminator operand computed by an op of the block (and yielded once)
        is written straight into the op's buffer for that position where
        `dests` offers one. A tape push may take over the buffers of the
        `consumable` arguments."""
        for arg, given in zip(block.args, sized):
            if given and not is_static_tensor(arg.type):
                self.fplan.resized.add(arg)
        ops = list(block.ops)
        self._fold(ops[:-1])
        rp = RegionPlan([None] * len(block.last_op.operands))  # type: ignore[union-attr]
        for j, (v, offered) in enumerate(zip(_own_results(self, block) if dests else (), dests)):
            if v is not None and offered:
                self.dest.add(v)
                rp.dests[j] = v
        last_use: dict[SSAValue, int] = {}
        for k, op in enumerate(ops):
            if op not in self.fplan.folded:
                for v in used_values(op):
                    last_use[self.canon(v)] = k
        for v in {self.canon(v) for v in ops[-1].operands}:  # kept alive past the terminator
            last_use[v] = len(ops)
        self._plan_rows(ops, last_use)
        outer_owned, self.owned = self.owned, set()
        outer_consumable, self.consumable = self.consumable, set(consumable)
        saved = self.k, self.last_use
        try:
            for k, op in enumerate(ops[:-1]):
                if op not in self.fplan.folded:
                    self._op(op, k, last_use)
            rp.live_out = list(self.owned)
        finally:
            self.owned = outer_owned
            self.consumable = outer_consumable
            self.k, self.last_use = saved
        self.fplan.regions[block] = rp
        return rp

    def _plan_rows(self, ops: list[Operation], last_use: dict[SSAValue, int]) -> None:
        """Values of a region computed only to be appended to a tape that dies
        at that push (`msir.tape_push` in the same block, the tape defined before
        the value's producer): the producer writes them into the tape's next row
        (`_reserve_row`) instead of a buffer of their own."""
        index = {op: k for k, op in enumerate(ops)}
        for p, op in enumerate(ops):
            if not isinstance(op, msir.TapePushOp):
                continue
            v, tape = op.value, self.canon(op.tape)
            producer = v.owner
            if not (isinstance(producer, Operation) and producer in index and producer not in self.fplan.folded
                    and is_static_tensor(v.type) and v.has_one_use() and v not in self.dest
                    and not isinstance(producer, msir.TapeGetOp) and last_use.get(tape) == p):
                continue
            owner = tape.owner
            if isinstance(owner, Block) or (owner in index and index[owner] < index[producer]):
                self.rows.setdefault(producer, []).append(op)

    def _reserve_row(self, push: msir.TapePushOp, producer: Operation) -> None:
        """Before `producer`: when the tape (dying at `push`) is the region's or
        its loop's, room is made in it and `producer` writes the row there."""
        tape = self.canon(push.tape)
        if not (tape in self.owned or tape in self.consumable):
            return
        if tape not in self.owned:
            self.consumed.add(tape)
        self.dest.add(push.value)
        self.reserved.add(push)
        self.fplan.reserves.setdefault(producer, []).append(push)

    def _tape_push(self, op: msir.TapePushOp) -> None:
        tape = self.canon(op.tape)
        if op in self.reserved:
            self.reserved.discard(op)
            self.owned.discard(tape)
            mode = PushMode.WRITTEN
        elif (tape in self.owned or tape in self.consumable) and self.last_use.get(tape) == self.k:
            mode = PushMode.IN_PLACE
            if tape in self.owned:
                self.owned.discard(tape)
            else:
                self.consumed.add(tape)
        else:
            mode = PushMode.COPIED
        self.fplan.pushes[op] = mode
        self.fplan.resized.add(op.result)
        if op.result not in self.returned:
            self.owned.add(op.result)

    def _tape_get(self, op: msir.TapeGetOp) -> None:
        """A view of the row when the tape is an argument of a function that
        writes no tape (an adjoint reading its forward's tapes): it outlives
        every use of the row."""
        if self.canon(op.tape) in self.f.body.block.args and op.result not in self.dest and not self.writes_tapes:
            self.fplan.views.add(op)
        else:
            self._result(op.result)

    def _call(self, op: func.CallOp) -> None:
        sig = self.mp.signatures.get(op.callee.root_reference.data)
        if sig is None:
            return  # the emitter reports it
        for pos in sig.out_positions:
            self._result(op.results[pos])
        for pos in sig.ret_positions:
            res = op.results[pos]
            if isinstance(res.type, TensorType) and res not in self.returned:
                self.owned.add(res)

    def _return(self, op: func.ReturnOp) -> None:
        fresh = []
        given: set[SSAValue] = set()
        for pos in self.fplan.signature.ret_positions:
            v = self.canon(op.operands[pos])
            if isinstance(v.type, TensorType) and (v not in self.returned or v in given):
                fresh.append(True)
            else:
                given.add(v)
                fresh.append(False)
        frees = list(self.owned)
        self.owned.clear()
        self.fplan.returns[op] = ReturnPlan(fresh, frees)

    def _if(self, op: msir.IfOp) -> None:
        for r in op.res:
            self._result(r)
        for region in (op.then_region, op.else_region):
            self._region(region.block, (), dests=[True] * len(op.res))

    def _loop(self, op: msir.ForOp | msir.WhileOp, inits: Sequence[SSAValue], lead: int) -> None:
        """`lead` block arguments (the `msir.for` counter) precede the carried ones."""
        body = op.body.block
        ops = list(body.ops)
        self._fold(ops[:-1])
        term = ops[-1]
        own = _own_results(self, body)
        loop_uses = [self.canon(u) for u in used_values(op)]
        slots = []
        for j, (r, init, a) in enumerate(zip(op.results, inits, body.args[lead:])):
            v = self.canon(term.operands[j])
            src = self.canon(init)
            movable = (src in self.owned and self.last_use.get(src) == self.k and loop_uses.count(src) == 1
                       and r not in self.dest)
            static = is_static_tensor(r.type)
            if v is a:
                kind = SlotKind.SAME
            elif not static:
                kind = SlotKind.MOVE
            elif own[j] is None:
                kind = SlotKind.COPY
            else:
                kind = SlotKind.INPLACE if self._in_place(ops, a, v) else SlotKind.PINGPONG
            if movable:
                self.owned.discard(src)
                if src in self.fplan.resized:
                    self.fplan.resized.add(r)
                if r not in self.returned:
                    self.owned.add(r)
            elif static:
                self._result(r)
            slots.append(SlotPlan(kind, movable))
        lp = self.fplan.loops[op] = LoopPlan(slots)
        sized = [not s.swaps for s in slots]
        if isinstance(op, msir.WhileOp):
            self._region(op.cond_region.block, sized)
        moving = [a for s, a in zip(slots, body.args[lead:]) if s.kind == SlotKind.MOVE]
        offered = [s.kind in (SlotKind.INPLACE, SlotKind.PINGPONG) for s in slots]
        rp = self._region(body, [False] * lead + sized, offered, moving)
        local = set(rp.live_out)
        adopted: set[SSAValue] = set()
        for s, v in zip(slots, term.operands):
            v = self.canon(v)
            adopt = s.kind == SlotKind.MOVE and v in local and v not in adopted
            if adopt:
                adopted.add(v)
            lp.adopt.append(adopt)
        for s, a in zip(slots, body.args[lead:]):
            lp.consumed.append(s.kind == SlotKind.MOVE and a in self.consumed)
            if s.kind == SlotKind.MOVE:
                self.consumed.discard(a)
        for r, s in zip(op.results, slots):
            if s.kind == SlotKind.MOVE:
                self.fplan.resized.add(r)
                if r not in self.returned:
                    self.owned.add(r)

    def _in_place(self, ops: list[Operation], a: SSAValue, v: SSAValue) -> bool:
        """Whether `v` (computed by an op of the body) can be written over its
        carried argument `a`: nothing reads `a` after the op computing `v`, and
        that op reads it only elementwise."""
        producer = v.owner
        p = ops.index(producer)  # type: ignore[arg-type]
        for q, o in enumerate(ops):
            if o in self.fplan.folded:
                continue
            if a not in {self.canon(u) for u in used_values(o)}:
                continue
            if q < p or (q == p and _aligned(o)):
                continue
            return False
        return True

    def _row_group(self, group: list[Operation], k0: int, last_use: dict[SSAValue, int]) -> None:
        members = set(group)
        one_row: dict[SSAValue, bool] = {}
        for op in group:
            for r in op.results:
                if r not in self.dest:
                    one_row[r] = all(use.operation in members for use in r.uses)
        self.fplan.row_groups[group[0]] = RowGroupPlan(group, one_row)
        self.owned.update(r for r, local in one_row.items() if not local)
        for k, op in enumerate(group, k0):
            self._release(op, k, last_use)


def _own_results(planner: FunctionPlanner, block: Block) -> list[SSAValue | None]:
    """Per terminator operand of `block`: the (canonical) value when an op of the
    block computes it into a buffer of a static shape and it is yielded only
    once, else None. Such a value can be computed straight into the buffer it
    is yielded to."""
    values = [planner.canon(v) for v in block.last_op.operands]  # type: ignore[union-attr]
    out: list[SSAValue | None] = []
    for v in values:
        owner = v.owner
        ok = (isinstance(owner, Operation) and owner.parent_block() is block and owner not in planner.fplan.folded
              and is_static_tensor(v.type) and values.count(v) == 1)
        out.append(v if ok else None)
    return out


def _aligned(producer: Operation) -> bool:
    """Whether `producer` reads each element of its operands only at the index
    of the element it writes, after reading everything it needs there
    (elementwise ops, and fusions whose results are all computed values)."""
    if isinstance(producer, msir.FUSIBLE_ELEMENTWISE):
        return True
    if isinstance(producer, msir.FusionOp):
        return all(isinstance(v.owner, Operation) for v in producer.body.block.last_op.operands)  # type: ignore[union-attr]
    return False


def _matmul_absorbs(op: msir.TransposeOp) -> bool:
    """A transpose of the last two axes whose every use is a matmul: the matmul
    reads the transpose's input in place (a transpose flag for the BLAS, swapped
    indices for the loop kernel), so the transpose gets no buffer or code."""
    perm = list(msir._ints(op.permutation))
    r = len(perm)
    return r >= 2 and perm == [*range(r - 2), r - 1, r - 2] and bool(op.result.uses) and all(
        isinstance(u.operation, msir.MatmulOp) for u in op.result.uses)


# ---------------------------------------------------------------------------
# Donation: outputs that may be written into a donated argument's buffer
# ---------------------------------------------------------------------------


def _is_donated(f: func.FuncOp, i: int) -> bool:
    return f.arg_attrs is not None and DONATE_ATTR in f.arg_attrs.data[i].data  # type: ignore[attr-defined]


def _where(op: Operation) -> str:
    loc = source_loc(op)
    return f"'{op.name}' at line {loc.line}" if loc is not None else f"'{op.name}'"


def _reads(planner: FunctionPlanner, op: Operation) -> list[SSAValue]:
    """What `op` reads when it runs: the operands of the op it absorbs too."""
    producer = planner.absorbed.get(op)
    return used_values(op) + (list(producer.operands) if producer is not None else [])


def _reads_own_row(planner: FunctionPlanner, op: Operation, arg: SSAValue) -> bool:
    """Whether `op`, in a row group, reads only row r of `arg` at row r: a
    reduction of it (axis 0 is kept), or a fusion reading it at its own shape."""
    if isinstance(op, msir.ReduceOp):
        return all(planner.canon(x) is not arg for x in op.operands[1:])
    if isinstance(op, msir.FusionOp):
        shape = type_shape(op.outputs[0].type)
        return all(type_shape(x.type) == shape for x in op.operands if planner.canon(x) is arg)
    return False


def _pair_donated(planner: FunctionPlanner, ops: list[Operation], index: dict[Operation, int], body: Block,
                  groups: Mapping[Operation, Sequence[Operation]]) -> Donation:
    """Pair donated arguments with output buffers (output k -> argument i) and
    say why each other donated argument was refused.

    Output k may be passed argument i's buffer when they have one static type,
    the op P computing output k writes it straight into its buffer, and the
    argument's value is dead once P has read it: every other op reading it
    (through any alias: a tuple element, an identity cast, a transposed matmul
    operand, an absorbed matmul's operand) comes before P at the top level (in
    P's row loop: reading only the row being computed), and P, if it reads it,
    is elementwise (a fusion or an elementwise op), so it reads the element it
    overwrites and no other, and its absorbed producer does not write output k
    first (`Schedule.written_first`). Then the function computes the same values
    whether or not the two buffers are one."""
    f = planner.f
    donated = [i for i in range(len(body.args)) if _is_donated(f, i)]
    if not donated:
        return Donation()

    def name(i: int) -> str:
        hint = body.args[i].name_hint
        return f"argument {i} ('{hint}')" if hint else f"argument {i}"

    if f.sym_name.data in planner.mp.called:
        return Donation(refused=[f"{name(i)}: the function is also called inside the module" for i in donated])
    canon, folded, absorbed = planner.canon, planner.fplan.folded, planner.absorbed
    row_group = {o: first for first, g in groups.items() for o in g}
    by_output = {k: v for v, k in planner.fplan.outputs.items()}
    candidates = [  # (output k, its value, the op writing it)
        (k, v, v.owner) for k, v in sorted(by_output.items()) if isinstance(v.owner, Operation) and v.owner in index
    ]
    aliases: dict[int, int] = {}
    refused = []
    for i in donated:
        arg = body.args[i]
        if not is_static_tensor(arg.type):
            refused.append(f"{name(i)}: only a tensor of static shape has a buffer to reuse")
            continue
        readers = [op for op in ops if op not in folded and any(canon(v) is arg for v in _reads(planner, op))]
        view = next((op for op in readers if isinstance(op, msir.TapeGetOp | msir.TapePushOp | msir.TapeSetOp)), None)
        if view is not None:
            refused.append(f"{name(i)}: {_where(view)} reads it as a tape")
            continue
        reason = f"no output of type {arg.type} is computed by an op of the function"
        for k, v, p in candidates:
            if k in aliases or v.type != arg.type:
                continue
            late = next((op for op in readers if op is not p and index[op] > index[p]), None)
            if late is not None:
                reason = f"{_where(late)} reads it after {_where(p)} writes output {k}"
                continue
            group = row_group.get(p)
            late = next((op for op in readers if op is not p and group is not None
                         and row_group.get(op) is group and not _reads_own_row(planner, op, arg)), None)
            if late is not None:
                reason = f"{_where(late)} reads other rows of it in the row loop where {_where(p)} writes output {k}"
                continue
            first = planner.written_first.get(p)
            if p in readers and first is not None and v is p.results[first]:
                reason = f"{_where(p)} computes its matmul into output {k} before it reads the argument"
                continue
            if p in readers:
                elementwise = isinstance(p, (msir.FusionOp, *msir.FUSIBLE_ELEMENTWISE)) and all(
                    type_shape(x.type) == type_shape(v.type) for x in p.operands if canon(x) is arg) and (
                    p not in absorbed or all(canon(x) is not arg for x in absorbed[p].operands))
                if not elementwise:
                    reason = f"{_where(p)} writes output {k} and reads it, but not elementwise"
                    continue
            aliases[k] = i
            break
        else:
            refused.append(f"{name(i)}: {reason}")
    return Donation(aliases, refused)
