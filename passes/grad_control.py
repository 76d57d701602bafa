"""Reverse mode through `msir.if`, `msir.for` and `msir.while` (used by `msir-grad`).

Each region is first outlined into its own function (`outline_regions`), so that
a region holds one `func.call` and its terminator, and the differentiation of
the region's code is the ordinary per-function pair (augmented forward and
adjoint). The exception are the tape-row ops of a loop body (`TAPE_ROW_OPS`:
`msir.tape_set`, `msir.tape_add`, `msir.tape_push`, `msir.tape_get`, which
only derivatives contain) and the integer arithmetic computing their row index: they stay in the
loop's block, around the call, so that differentiating a derivative handles
them in place (below). A body that is already one call plus such ops is not
wrapped again. Node by node, what is generated:

* `msir.if %c`: the forward `msir.if` calls the branch's augmented forward and
  also yields its residuals (the other branch's residual slots get placeholders);
  the adjoint `msir.if %c` (the predicate is a residual) calls the taken branch's
  adjoint and yields a cotangent for every float value either branch reads.
* `msir.for`: the forward computes the trip count N, allocates one tape
  (`msir.tape_alloc`, a `tensor<?x...>` of N rows) per residual of the body, and
  runs the loop with the tapes as loop-carried values, storing the residuals of
  iteration k in row k (`msir.tape_set`, in place). The adjoint runs k = N-1
  down to 0, reads row k (`msir.tape_get`), calls the body's adjoint, carries
  the cotangents of the loop-carried values and accumulates those of the values
  the body reads from outside the loop. What the adjoint can recompute from k
  is not taped: the `msir.for` counter (lb + k * step), a value the body reads
  from outside the loop (stored once), a row the body reads from a tape, and a
  residual the body also stores with `msir.tape_set` into a carried tape (read
  back from that tape's final value), and the new value of a carried variable
  whose old value is taped (`_shifted`: at iteration k it is the old value at
  k + 1, read from that row, or the loop's final value at k = N - 1; an RNN's
  `h = tanh(W @ h + ...)` tapes h once, not twice).
* `msir.while`: the trip count depends on data, so the forward is one
  `msir.while` (the condition evaluated as written) that also carries an
  iteration count N (tensor<i64>, from 0) and one tape per residual, started
  empty (`msir.tape_alloc` of 0 rows); each iteration calls the body's
  augmented forward once (kept tape-row ops around it, as for `msir.for`) and
  appends its residuals (`msir.tape_push`, which the lowering grows by
  doubling). The adjoint is the `msir.for` adjoint over k = N-1 .. 0.
* A loop nested in a loop body (for or while, in for or while): the body's
  residuals then include the inner loop's tapes, whose length may change with
  every outer iteration, which a tape row cannot hold. The outer body is
  checkpointed instead (`body_pair`, `_checkpointed`): its pair becomes
  `@body__fwd_ckpt`, which runs the plain body and returns the body's inputs
  as residuals (the carried values at the start of the iteration, integers
  included), and `@body__bwd_ckpt`, which recomputes the body's augmented
  forward from them (inner tapes and all) and runs its adjoint. So the outer
  loop tapes one row of inputs per iteration, the body's forward runs twice,
  and only one outer iteration's inner tapes are alive at a time.
* Kept tape-row ops (differentiating a derivative's loops), in the adjoint loop,
  in place (`_kept_adjoint`): the cotangent of a tape the loop carries and only
  writes is loop-invariant (every row is written once, so a write passes its
  new tape's cotangent on to the tape it consumed): it is read from outside the
  loop, and the adjoint of `tape_set(t, k, v)` / `tape_add(t, k, v)` is
  `ct_v = tape_get(ct_t, k)`; that of `tape_push(t, v)` (a while's forward,
  differentiated again) is `tape_get(ct_t, row)`, the row being r + k * p + i
  for the i-th of the p pushes per iteration onto a carried tape started by
  `msir.tape_alloc` of r rows (`_push_rows`). A tape the loop reads from outside gets a
  loop-carried cotangent tape, started as `msir.tape_zeros` and updated per
  iteration by `tape_add(ct_t, k, ct_row)` (one row, in place), never by a
  whole-tape addition. So second and higher orders through loops cost O(N)
  per level.
* Rows of outer arrays (`_kept_takes`): a `msir.for` body's `xs[i]` (a 0-d
  i64 index computed from the counter by integer ops, `xs` a float array from
  outside the loop) is kept in the loop's block like a tape read, so its
  adjoint is the same: the cotangent of `xs` is carried through the adjoint
  loop, started at zeros, and each iteration adds its row's cotangent with
  `tape_add(ct_xs, i, ct_row)` in place. The body's adjoint returns one row,
  not an array of `xs`'s shape to be summed: a gradient with respect to a
  sequence an RNN reads step by step costs O(T) instead of O(T^2).

Integer and boolean values get no cotangent.

Refused, with `NotDifferentiableError` at the loop's location: a loop that reads
a tape it also carries (`reverse mode through a loop reading a tape it
carries`), tape rows indexed by a loop-carried value rather than the counter
(`... whose tape rows are indexed by a carried value`), an index computed by a
float or structured op (`a tape row index computed by '<op>'`), a `tape_push`
onto a tape the loop does not carry or that `msir.tape_alloc` did not start
(`... appending to a tape ...`); none of these
is generated by msir-grad itself. `_check_tapeable` guards that every residual
taped per iteration has a static shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from msir.dialects import msir as M
from msir.errors import NotDifferentiableError
from msir.passes.ad_ir import IRBuilder, Lazy, Pair, is_float_type, source_loc

if TYPE_CHECKING:
    from msir.passes.grad import ModuleAD, _PairBuilder

CONTROL_FLOW = (M.IfOp, M.ForOp, M.WhileOp)
OUTLINED = "msir.outlined"
I64 = TensorType(M.i64, [])


def _outer_values(block: Block) -> list[SSAValue]:
    """Values a block (and the regions nested in it) reads from outside, in order."""
    inside: set[SSAValue] = set(block.args)
    seen: list[SSAValue] = []
    for op in block.walk():
        for region in op.regions:
            for b in region.blocks:
                inside.update(b.args)
        inside.update(op.results)
    for op in block.walk():
        for v in op.operands:
            if v not in inside and v not in seen:
                seen.append(v)
    return seen


def reads(op: Operation) -> list[SSAValue]:
    """The operands of `op` and what its regions read from outside."""
    if not op.regions:
        return list(op.operands)
    out = list(op.operands)
    for region in op.regions:
        for block in region.blocks:
            out += _outer_values(block)
    return out


TAPE_READS = (M.TapeGetOp,)
TAPE_WRITES = (M.TapeSetOp, M.TapeAddOp, M.TapePushOp)
TAPE_ROW_OPS = TAPE_READS + TAPE_WRITES
"""Ops that read or write one row of a tape: `.tape`, `.index`, and for a write
`.value` (a write returns the new tape). A new tape op joins one of these.
`msir.tape_push` has no `.index`: it writes the row after the tape's last one,
which in a loop is found from the iteration (`_push_rows`)."""


def _row_read_source(o: Operation) -> SSAValue:
    """The tape, or outer array, a kept row read (`_is_row_read`) reads."""
    return o.tape if isinstance(o, TAPE_READS) else o.input


def _is_row_read(o: Operation) -> bool:
    """A kept op reading one row: `msir.tape_get`, or a kept `msir.take`
    (`_kept_takes`) of a row of an array from outside the loop."""
    return isinstance(o, TAPE_READS + (M.TakeOp,))


def _row_index(o: Operation) -> SSAValue:
    return o.indices if isinstance(o, M.TakeOp) else o.index


def _index_ops(block: Block, index: SSAValue, counter: SSAValue | None) -> set[Operation] | None:
    """The ops of `block` computing `index` from the loop counter and values
    from outside only, by integer ops; None when it depends on anything else."""
    found: set[Operation] = set()
    stack = [index]
    while stack:
        v = stack.pop()
        owner = v.owner
        if not isinstance(owner, Operation):
            if v in block.args and v is not counter:
                return None
            continue
        if owner.parent_block() is not block or owner in found:
            continue
        if owner.regions or isinstance(owner, func.CallOp) or any(is_float_type(r.type) for r in owner.results):
            return None
        found.add(owner)
        stack.extend(owner.operands)
    return found


def _kept_takes(block: Block, counter: SSAValue | None) -> set[Operation]:
    """Row reads `xs[i]` of a float array from outside a `msir.for` body,
    whose 0-d i64 index comes from the counter (`_index_ops`): kept in the
    loop's block, so that the adjoint adds each row's cotangent into one
    carried cotangent of `xs` in place (`msir.tape_add`), instead of the
    body's adjoint returning a whole array per iteration to be summed."""
    kept: set[Operation] = set()
    if counter is None:
        return kept
    for op in block.ops:
        if not (isinstance(op, M.TakeOp) and op.axis.value.data == 0 and is_float_type(op.input.type)
                and not _inside(op.input, block) and not _dynamic(op.input.type)
                and op.indices.type == M.TensorType(M.i64, [])):
            continue
        index_ops = _index_ops(block, op.indices, counter)
        if index_ops is not None:
            kept.add(op)
            kept.update(index_ops)
    return kept


def _kept_ops(block: Block, counter: SSAValue | None = None) -> set[Operation]:
    """The tape-row ops of a loop body, the row reads of `_kept_takes` and the
    integer ops computing their indices: they stay in the loop's block when
    the body is outlined."""
    kept: set[Operation] = _kept_takes(block, counter)
    stack: list[SSAValue] = []
    for op in block.ops:
        if isinstance(op, TAPE_ROW_OPS):
            kept.add(op)
            if not isinstance(op, M.TapePushOp):
                stack.append(op.index)
    while stack:
        owner = stack.pop().owner
        if not isinstance(owner, Operation) or owner.parent_block() is not block or owner in kept:
            continue
        if owner.regions or isinstance(owner, func.CallOp) or any(is_float_type(r.type) for r in owner.results):
            raise NotDifferentiableError(f"a tape row index computed by '{owner.name}'", source_loc(owner))
        kept.add(owner)
        stack.extend(owner.operands)
    return kept


def outline_regions(ad: ModuleAD, f: func.FuncOp) -> None:
    """Move every region of `f`'s control-flow ops into a function of its own."""
    for op in list(f.body.block.ops):
        if not isinstance(op, CONTROL_FLOW) or OUTLINED in op.attributes:
            continue
        for k, region in enumerate(op.regions):
            _outline(ad, f, op, region, k)
        op.attributes[OUTLINED] = StringAttr("")


def _outline(ad: ModuleAD, f: func.FuncOp, op: Operation, region: Region, k: int) -> None:
    """Replace `region`'s code by a call of a new function holding it; a loop
    body keeps its tape-row ops (`_kept_ops`) around the call, the function
    taking what the moved ops read and returning what the rest uses."""
    block = region.block
    term = block.last_op
    assert term is not None
    kept = _kept_ops(block, block.args[0] if isinstance(op, M.ForOp) else None) \
        if isinstance(op, (M.ForOp, M.WhileOp)) else set()
    moved = [o for o in block.ops if o is not term and o not in kept]
    if kept and len(moved) == 1 and isinstance(moved[0], func.CallOp) and \
            not any(_dynamic(v.type) for v in moved[0].arguments):
        return  # already one call (a derivative's loop): no wrapper function
    if kept:
        produced = {r for o in moved for r in o.results}
        inputs = [v for v in _unique(v for o in moved for v in reads(o)) if v not in produced]
        # the block's arguments first, tapes left out (the kept ops handle them)
        ins = [a for a in block.args if a in inputs] + [v for v in inputs if v not in block.args]
        outputs = _unique(v for o in [term, *[o for o in block.ops if o in kept]] for v in o.operands
                          if v in produced)
    else:
        ins = [*block.args, *_outer_values(block)]
        outputs = list(term.operands)
    body = Block(arg_types=[v.type for v in ins])
    mapping: dict[SSAValue, SSAValue] = dict(zip(ins, body.args))
    for inner in moved:
        clone = inner.clone(value_mapper=mapping)
        body.add_op(clone)
        for r, cr in zip(inner.results, clone.results):
            mapping[r] = cr
    results = [mapping.get(v, v) for v in outputs]
    ret = func.ReturnOp(*results)
    ret.location = term.location
    body.add_op(ret)
    name = ad.fresh_name(f"{f.sym_name.data}__{op.name.removeprefix('msir.')}_region{k}")
    ad.add_func(name, body, [v.type for v in results], op.location)
    new = Block(arg_types=[a.type for a in block.args])
    remap: dict[SSAValue, SSAValue] = dict(zip(block.args, new.args))
    post = _after_body(block, kept, set(moved))
    for o in block.ops:
        if o in kept and o not in post:
            _clone_into(new, o, remap)
    call = func.CallOp(name, [remap.get(v, v) for v in ins], [v.type for v in results])
    call.location = op.location
    new.add_op(call)
    remap.update(zip(outputs, call.results))
    for o in block.ops:
        if o in post:
            _clone_into(new, o, remap)
    _clone_into(new, term, remap)
    for old_op in reversed(list(block.ops)):
        old_op.detach()
        old_op.erase(safe_erase=False)
    region.detach_block(block)
    region.add_block(new)


def _unique(values) -> list[SSAValue]:
    out: list[SSAValue] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _after_body(block: Block, kept: set[Operation], moved: set[Operation]) -> set[Operation]:
    """The kept ops that depend on the outlined part (they go after its call)."""
    post: set[Operation] = set()
    for o in block.ops:
        if o in kept and any(isinstance(v.owner, Operation) and (v.owner in moved or v.owner in post)
                             for v in o.operands):
            post.add(o)
    for o in moved:
        for v in reads(o):
            if isinstance(v.owner, Operation) and v.owner in post:
                raise NotDifferentiableError(
                    f"'{o.name}' reads a tape row written in the same loop iteration", source_loc(o))
    return post


def _clone_into(block: Block, op: Operation, mapping: dict[SSAValue, SSAValue]) -> Operation:
    clone = op.clone(value_mapper={v: mapping.get(v, v) for v in op.operands})
    block.add_op(clone)
    mapping.update(zip(op.results, clone.results))
    return clone


def _region_call(region: Region) -> func.CallOp:
    """The call of the outlined region function (the region's other ops, if
    any, are kept tape-row ops and their index arithmetic)."""
    (call,) = [o for o in region.block.ops if isinstance(o, func.CallOp)]
    return call


def placeholder(B: IRBuilder, t: Attribute) -> SSAValue:
    """A value of type `t` for a residual slot that a path does not fill."""
    shape = M.shape_of(t)
    if shape and shape[0] < 0:
        return B.emit(M.TapeAllocOp(B.constant(0, "int64"), TensorType(t.element_type, list(shape[1:]))))
    return B.constant(0.0, M.dtype_of(t), shape)


def trip_count(B: IRBuilder, lb: SSAValue, ub: SSAValue, step: SSAValue) -> SSAValue:
    """max(0, ceil((ub - lb) / step)) for either sign of step, in msir ops; 0
    for a zero step, which the loop itself reports (Python's range refuses it)."""
    zero = B.constant(0, "int64")
    one = B.constant(1, "int64")
    sign = B.select(B.compare("gt", step, zero), one, B.constant(-1, "int64"))
    span = B.binary("sub", B.binary("add", B.binary("sub", ub, lb), step), sign)
    if not (isinstance(step.owner, M.ConstantOp) and 0 not in step.owner.values()):
        zero_step = B.compare("eq", step, zero)
        span = B.select(zero_step, zero, span)  # 0 // 1: no iteration, no division by zero
        step = B.select(zero_step, one, step)
    return B.binary("maximum", B.binary("floordiv", span, step), zero)


def _dynamic(t: Attribute) -> bool:
    return any(d < 0 for d in M.shape_of(t))


def _check_tapeable(types: list[Attribute], op: Operation) -> None:
    """A loop's residuals go to tapes of static rows (`body_pair` checkpoints a
    body whose own residuals are tapes, so this holds for every body it made)."""
    for t in types:
        if _dynamic(t):
            raise NotDifferentiableError(
                f"reverse mode through this loop: a residual of its body has the dynamic type {t}, "
                "which a tape row cannot hold",
                source_loc(op),
            )


def body_pair(pb: _PairBuilder, call: func.CallOp, op: Operation, carried: list[SSAValue]):
    """The pair of a loop body function (called by `call` in `op`'s body).

    When the body's residuals include a tape (a loop inside the body, whose trip
    count may vary per iteration), the pair is replaced by its checkpointed pair
    (`_checkpointed`), in the module's cache too: a body function is called by
    its loop only, and every loop construction then finds tapeable residuals."""
    name = call.callee.string_value()
    wanted = _wanted(pb, call, carried)
    live = pb.live_results.get(call, ())  # the body call's results that get a nonzero cotangent
    pair = pb.ad.pair(name, op, wanted, live)
    if any(_dynamic(t) for t in pair.residual_types):
        pair = _checkpointed(pb.ad, name, pair, op)
        pb.ad.pairs[(name, wanted, pb.ad.live_results(name, live))] = pair
    return pair


def _checkpointed(ad: ModuleAD, name: str, pair, at: Operation):
    """A pair of `name` whose residuals are its inputs: the forward runs the plain
    function and returns the parameters the augmented forward reads; the adjoint
    recomputes the augmented forward from them, then runs the adjoint."""
    f, real_fwd = ad.funcs[name], ad.funcs[pair.fwd]
    params = list(f.function_type.inputs.data)
    outputs = list(f.function_type.outputs.data)
    needed = [i for i, a in enumerate(real_fwd.body.block.args) if a.uses]
    fb = Block(arg_types=params)
    primal = func.CallOp(name, list(fb.args), outputs)
    primal.location = at.location
    fb.add_op(primal)
    fb.add_op(func.ReturnOp(*primal.results, *[fb.args[i] for i in needed]))
    fwd = ad.fresh_name(f"{name}__fwd_ckpt")
    ad.add_func(fwd, fb, outputs + [params[i] for i in needed], at.location)
    n_ct = len(pair.float_results)
    bb = Block(arg_types=[outputs[i] for i in pair.float_results] + [params[i] for i in needed])
    B = IRBuilder(bb, at.location)
    given = dict(zip(needed, bb.args[n_ct:]))
    args = [given[i] if i in given else placeholder(B, t) for i, t in enumerate(params)]
    again = func.CallOp(pair.fwd, args, outputs + pair.residual_types)
    again.location = at.location
    bb.add_op(again)
    back = func.CallOp(pair.bwd, [*bb.args[:n_ct], *again.results[len(outputs) :]],
                       [params[i] for i in pair.float_args])
    back.location = at.location
    bb.add_op(back)
    bb.add_op(func.ReturnOp(*back.results))
    bwd = ad.fresh_name(f"{name}__bwd_ckpt")
    ad.add_func(bwd, bb, [params[i] for i in pair.float_args], at.location)
    return Pair(fwd, bwd, pair.n_results, [params[i] for i in needed], pair.float_results, pair.float_args)


# ---------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------


def _wanted(pb: _PairBuilder, call: func.CallOp, carried: list[SSAValue]) -> tuple[int, ...]:
    def active(a: SSAValue) -> bool:
        if a in carried or a in pb.active:
            return True
        # a row the loop reads from a tape or outer array (a kept op): active with it
        return isinstance(a.owner, Operation) and _is_row_read(a.owner) and \
            a.owner.parent_block() is call.parent_block() and (
                _row_read_source(a.owner) in carried or _row_read_source(a.owner) in pb.active)

    return tuple(i for i, a in enumerate(call.arguments) if is_float_type(a.type) and active(a))


def forward(pb: _PairBuilder, op: Operation) -> None:
    if op not in pb.live_results:  # inactive, or no result gets a nonzero cotangent
        clone = op.clone(value_mapper=dict(pb.fwd_of))
        pb.fwd_block.add_op(clone)
        for old, new in zip(op.results, clone.results):
            pb.fwd_of[old] = new
        return
    if isinstance(op, M.IfOp):
        _forward_if(pb, op)
    elif isinstance(op, M.ForOp):
        _forward_for(pb, op)
    else:
        _forward_while(pb, op)


def _forward_if(pb: _PairBuilder, op: M.IfOp) -> None:
    calls = [_region_call(op.then_region), _region_call(op.else_region)]
    pairs = [pb.ad.pair(c.callee.string_value(), op, _wanted(pb, c, []), pb.live_results[op]) for c in calls]
    pb.cf_pairs[op] = pairs
    res_types = [r.type for r in op.res]
    slots = [p.residual_types for p in pairs]
    regions = []
    for k, (call, pair) in enumerate(zip(calls, pairs)):
        block = Block()
        B = IRBuilder(block, op.location)
        fcall = func.CallOp(pair.fwd, [pb.fwd_of[v] for v in call.arguments], res_types + pair.residual_types)
        fcall.location = op.location
        block.add_op(fcall)
        values = list(fcall.results[: len(res_types)])
        for j, types in enumerate(slots):
            if j == k:
                values += list(fcall.results[len(res_types) :])
            else:
                values += [placeholder(B, t) for t in types]
        block.add_op(M.YieldOp(*values))
        regions.append(Region(block))
    new = M.IfOp(pb.fwd_of[op.cond], res_types + slots[0] + slots[1], regions[0], regions[1])
    new.location = op.location
    pb.fwd_block.add_op(new)
    n = len(res_types)
    for old, r in zip(op.res, new.res):
        pb.fwd_of[old] = r
    pb.cf_residuals[op] = [list(new.res[n : n + len(slots[0])]), list(new.res[n + len(slots[0]) :])]


def _residual_plan(pb: _PairBuilder, pair, call: func.CallOp, region_args, counter=None) -> list:
    """Per residual of a loop body's augmented forward: ("tape", None) when it
    changes with the iteration, ("outer", v) when it is just a value the body
    reads from outside the loop (stored once, not in a tape), ("counter", None)
    when it is the `msir.for` counter, ("kept", v) when it is the value `v` of
    a kept op of the loop's block (a tape row: both are recomputed from the row
    index in the adjoint), ("stored", (j, w)) when the body also returns it and
    the kept `msir.tape_set` w stores it in the tape carried at position j (the
    adjoint reads it back from that tape's final value, a row written once)."""
    from xdsl.ir import BlockArgument

    fwd = pb.ad.funcs[pair.fwd]
    ret = fwd.body.block.last_op
    n = len(ret.operands) - len(pair.residual_types)
    plan = []
    for r in ret.operands[n:]:
        stored = _stored(call, list(ret.operands[:n]).index(r)) if r in ret.operands[:n] else None
        if stored is not None:
            plan.append(("stored", stored))
            continue
        if _recomputable(r, fwd.body.block, call, region_args, counter):
            plan.append(("recompute", r))
            continue
        if isinstance(r, BlockArgument) and r.block is fwd.body.block:
            arg = call.arguments[r.index]
            if arg is counter:
                plan.append(("counter", None))
                continue
            if isinstance(arg.owner, Operation) and arg.owner.parent_block() is call.parent_block():
                plan.append(("kept", arg))
                continue
            if arg not in region_args:
                plan.append(("outer", pb.fwd_of[arg]))
                continue
        plan.append(("tape", None))
    return _shifted(plan, fwd, n, call, counter)


def _shifted(plan: list, fwd: func.FuncOp, n: int, call: func.CallOp, counter) -> list:
    """Residuals that are the body's new value of a carried variable whose old
    value is taped too: at iteration k the new value is the old value at k + 1,
    so it becomes ("next", (b, p)), read from row k + 1 of residual b's tape
    (the final carried value p at the last iteration) instead of taping the
    same data twice (an RNN's `h = tanh(...)` tapes `h` once, not twice)."""
    from xdsl.ir import BlockArgument

    ret = fwd.body.block.last_op
    block = call.parent_block()
    term = block.last_op if block is not None else None
    carried = [a for a in block.args if a is not counter] if block is not None else []
    old_of = {}  # carried position -> plan index of its taped old value
    for b, (kind, _) in enumerate(plan):
        r = ret.operands[n + b]
        if kind == "tape" and isinstance(r, BlockArgument) and r.block is fwd.body.block:
            arg = call.arguments[r.index]
            if arg in carried:
                old_of.setdefault(carried.index(arg), b)
    out = list(plan)
    for a, (kind, _) in enumerate(plan):
        r = ret.operands[n + a]
        if kind != "tape" or r not in ret.operands[:n]:
            continue
        p = list(ret.operands[:n]).index(r)
        if p in old_of and term is not None and p < len(term.operands) and term.operands[p] is call.results[p]:
            out[a] = ("next", (old_of[p], p))
    return out


def _next_row(pb: _PairBuilder, RB: IRBuilder, op: Operation, k: SSAValue, n: SSAValue, tape: SSAValue,
              p: int) -> SSAValue:
    """A plan's ("next", (b, p)) row at iteration k: row k + 1 of the tape of
    carried value p's old values, or the loop's final value p when k = N - 1."""
    one = RB.constant(1, "int64")
    k1 = RB.binary("add", k, one)
    nxt = RB.tape_get(tape, RB.binary("minimum", k1, RB.binary("sub", n, one)))
    final = pb.resolve(Lazy(pb.fwd_of[op.res[p]]))
    shape = M.shape_of(nxt.type)
    return RB.select(RB.broadcast_to(RB.compare("lt", k1, n), shape), nxt, final)


_CHEAP = (M.ConstantOp, M.TakeOp, M.SliceOp, M.ReshapeOp, M.BroadcastToOp, M.CastOp)


def _recomputable(r: SSAValue, fwd_block: Block, call: func.CallOp, region_args, counter) -> bool:
    """Is the residual `r` of a body's augmented forward computed, by integer
    arithmetic and cheap indexing ops (`_CHEAP`, e.g. `xs[i]`), from the
    counter and values that do not change with the iteration only?"""
    from xdsl.ir import BlockArgument

    stack, seen = [r], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v, BlockArgument):
            arg = call.arguments[v.index]
            if arg in region_args and arg is not counter:
                return False
            continue
        o = v.owner
        if not isinstance(o, Operation) or o.parent_block() is not fwd_block or o.regions:
            return False
        if not isinstance(o, _CHEAP) and (isinstance(o, func.CallOp) or any(is_float_type(x.type) for x in o.results)):
            return False
        stack.extend(o.operands)
    return True


def _recompute(B: IRBuilder, r: SSAValue, call: func.CallOp, primal) -> SSAValue:
    """`r` (see `_recomputable`) recomputed in the adjoint loop's block."""
    from xdsl.ir import BlockArgument

    env: dict[SSAValue, SSAValue] = {}

    def value(v: SSAValue) -> SSAValue:
        if v not in env:
            if isinstance(v, BlockArgument):
                env[v] = primal(call.arguments[v.index])
            else:
                o = v.owner
                clone = o.clone(value_mapper={x: value(x) for x in o.operands})
                B.block.add_op(clone)
                env.update(zip(o.results, clone.results))
        return env[v]

    return value(r)


def _stored(call: func.CallOp, p: int):
    """(j, w) when result p of a loop body's call is written by the kept
    `msir.tape_set` or `msir.tape_push` w into a tape that the loop carries at
    position j."""
    body = call.parent_block()
    term = body.last_op
    for use in call.results[p].uses:
        w = use.operation
        if not isinstance(w, (M.TapeSetOp, M.TapePushOp)) or use.index != len(w.operands) - 1:
            continue
        tape = w.result
        while True:
            users = [u for u in tape.uses]
            if len(users) != 1:
                break
            user = users[0].operation
            if user is term:
                return users[0].index, w
            if not isinstance(user, TAPE_WRITES) or users[0].index != 0:
                break
            tape = user.result
    return None


def _augmented_body(block: Block, body: Block, call: func.CallOp, pair, mapping: dict,
                    loc) -> list[SSAValue]:
    """Copy a loop body into `block` for the augmented forward: the body call
    becomes a call of the pair's `fwd`, the kept tape-row ops are cloned as
    they are (`mapping` maps the body's values, and is extended); returns the
    residuals the call produced."""
    residuals: list[SSAValue] = []
    for o in body.ops:
        if o is call:
            fcall = func.CallOp(pair.fwd, [mapping[v] for v in call.arguments],
                                [r.type for r in call.results] + pair.residual_types)
            fcall.location = loc
            block.add_op(fcall)
            mapping.update(zip(call.results, fcall.results))
            residuals = list(fcall.results[len(call.results) :])
        elif o is not body.last_op:  # a kept tape-row op: the primal op
            _clone_into(block, o, mapping)
    return residuals


def _forward_for(pb: _PairBuilder, op: M.ForOp) -> None:
    call = _region_call(op.body)
    body = op.body.block
    pair = body_pair(pb, call, op, list(body.args[1:]))
    pb.cf_pairs[op] = [pair]
    _check_tapeable(pair.residual_types, op)
    B = IRBuilder(pb.fwd_block, op.location)
    lb, ub, step = (pb.fwd_of[v] for v in (op.lower, op.upper, op.step))
    n = trip_count(B, lb, ub, step)
    plan = _residual_plan(pb, pair, call, set(body.args), counter=body.args[0])
    taped = [k for k, (kind, _) in enumerate(plan) if kind == "tape"]
    tapes = [B.emit(M.TapeAllocOp(n, pair.residual_types[k])) for k in taped]  # type: ignore[arg-type]
    inits = [pb.fwd_of[v] for v in op.inits]
    block = Block(arg_types=[I64, *[v.type for v in inits], *[t.type for t in tapes]])
    i, carried, tape_args = block.args[0], block.args[1 : 1 + len(inits)], block.args[1 + len(inits) :]
    IB = IRBuilder(block, op.location)
    k = IB.binary("floordiv", IB.binary("sub", i, lb), step)
    mapping = {**pb.fwd_of, body.args[0]: i, **dict(zip(body.args[1:], carried))}
    residuals = _augmented_body(block, body, call, pair, mapping, op.location)
    new_tapes = [IB.emit(M.TapeSetOp(t, k, residuals[j])) for t, j in zip(tape_args, taped)]
    block.add_op(M.YieldOp(*[mapping[v] for v in body.last_op.operands], *new_tapes))
    loop = M.ForOp(lb, ub, step, inits + tapes, Region(block))
    loop.location = op.location
    pb.fwd_block.add_op(loop)
    for old, r in zip(op.res, loop.res):
        pb.fwd_of[old] = r
    pb.cf_residuals[op] = [[n, lb, step], list(loop.res[len(inits) :]), plan]


def _forward_while(pb: _PairBuilder, op: M.WhileOp) -> None:
    """One `msir.while` carrying, besides the primal values, an iteration count
    N and one tape per residual (from `msir.tape_alloc` of 0 rows); the body
    calls the augmented forward, with the kept tape-row ops of the body around
    it (as `_forward_for`), and appends its residuals (`msir.tape_push`), so
    the loop body runs once per iteration. The adjoint reads rows N-1 .. 0."""
    call = _region_call(op.body)
    body = op.body.block
    pair = body_pair(pb, call, op, list(body.args))
    pb.cf_pairs[op] = [pair]
    _check_tapeable(pair.residual_types, op)
    B = IRBuilder(pb.fwd_block, op.location)
    inits = [pb.fwd_of[v] for v in op.inits]
    types = [v.type for v in inits]
    zero = B.constant(0, "int64")
    plan = _residual_plan(pb, pair, call, set(body.args))
    taped = [k for k, (kind, _) in enumerate(plan) if kind == "tape"]
    tapes = [B.emit(M.TapeAllocOp(zero, pair.residual_types[k])) for k in taped]  # type: ignore[arg-type]
    carried_types = [*types, I64, *[t.type for t in tapes]]
    n_in = len(inits)
    # the condition as written (its region's ops: the call and any kept ones)
    cond_block = Block(arg_types=carried_types)
    cond = op.cond_region.block
    mapping = {**pb.fwd_of, **dict(zip(cond.args, cond_block.args))}
    for o in cond.ops:
        if o is not cond.last_op:
            _clone_into(cond_block, o, mapping)
    cond_block.add_op(M.ConditionOp(mapping[cond.last_op.operands[0]]))
    body_block = Block(arg_types=carried_types)
    carried, count, tape_args = body_block.args[:n_in], body_block.args[n_in], body_block.args[n_in + 1 :]
    mapping = {**pb.fwd_of, **dict(zip(body.args, carried))}
    residuals = _augmented_body(body_block, body, call, pair, mapping, op.location)
    BB = IRBuilder(body_block, op.location)
    new_tapes = [BB.emit(M.TapePushOp(t, residuals[j])) for t, j in zip(tape_args, taped)]
    next_count = BB.binary("add", count, BB.constant(1, "int64"))
    body_block.add_op(M.YieldOp(*[mapping[v] for v in body.last_op.operands], next_count, *new_tapes))
    loop = M.WhileOp(inits + [zero] + tapes, Region(cond_block), Region(body_block))
    loop.location = op.location
    pb.fwd_block.add_op(loop)
    for old, r in zip(op.res, loop.res):
        pb.fwd_of[old] = r
    n = loop.res[n_in]
    pb.cf_residuals[op] = [[n, zero, B.constant(1, "int64")], list(loop.res[n_in + 1 :]), plan]


# ---------------------------------------------------------------------------
# Adjoint
# ---------------------------------------------------------------------------


def adjoint(pb: _PairBuilder, op: Operation, ct: dict, B: IRBuilder, accumulate) -> None:
    if isinstance(op, M.IfOp):
        _adjoint_if(pb, op, ct, B, accumulate)
    else:
        _adjoint_loop(pb, op, ct, B, accumulate)


def zero_ct(pb: _PairBuilder, B: IRBuilder, v: SSAValue) -> SSAValue:
    """A zero cotangent for the primal value `v` (of a tape: a tape of zeros)."""
    if _dynamic(v.type):
        return B.tape_zeros(Lazy(pb.fwd_of[v]))
    return B.constant(0.0, M.dtype_of(v.type), M.shape_of(v.type))


def _ct_or_zero(pb: _PairBuilder, B: IRBuilder, ct: dict, v: SSAValue) -> SSAValue:
    return ct[v] if v in ct else zero_ct(pb, B, v)


def _counter(B: IRBuilder, k: SSAValue, lb: SSAValue, step: SSAValue) -> SSAValue:
    """The `msir.for` counter of row k: lb + k * step."""
    return B.binary("add", B.val(Lazy(lb)), B.binary("mul", k, B.val(Lazy(step))))


def _adjoint_if(pb: _PairBuilder, op: M.IfOp, ct: dict, B: IRBuilder, accumulate) -> None:
    calls = [_region_call(op.then_region), _region_call(op.else_region)]
    pairs = pb.cf_pairs[op]
    targets: list[SSAValue] = []
    for call, pair in zip(calls, pairs):
        for i in pair.float_args:
            v = call.arguments[i]
            if is_float_type(v.type) and v not in targets:
                targets.append(v)
    regions = []
    for k, (call, pair) in enumerate(zip(calls, pairs)):
        block = Block()
        RB = IRBuilder(block, op.location, pb.resolve)
        cts = [_ct_or_zero(pb, RB, ct, op.res[i]) for i in pair.float_results]
        residuals = [pb.resolve(Lazy(r)) for r in pb.cf_residuals[op][k]]
        bcall = func.CallOp(pair.bwd, cts + residuals, [call.arguments[i].type for i in pair.float_args])
        bcall.location = op.location
        block.add_op(bcall)
        sums: dict[SSAValue, SSAValue] = {}
        for i, g in zip(pair.float_args, bcall.results):
            v = call.arguments[i]
            sums[v] = g if v not in sums else RB.binary("add", sums[v], g)
        block.add_op(M.YieldOp(*[sums[v] if v in sums else RB.constant(0.0, M.dtype_of(v.type), M.shape_of(v.type)) for v in targets]))
        regions.append(Region(block))
    cond = pb.resolve(Lazy(pb.fwd_of[op.cond]))
    adj = M.IfOp(cond, [v.type for v in targets], regions[0], regions[1])
    adj.location = op.location
    pb.bwd_block.add_op(adj)
    for v, g in zip(targets, adj.res):
        accumulate(v, g)


def _add_ct(B: IRBuilder, cts: dict, v: SSAValue, g: SSAValue | None) -> None:
    if g is None or not is_float_type(v.type):
        return
    cts[v] = g if v not in cts else B.binary("add", cts[v], g)


def _adjoint_loop(pb: _PairBuilder, op: M.ForOp | M.WhileOp, ct: dict, B: IRBuilder, accumulate) -> None:
    """The reversed loop. Its block recomputes what the body's adjoint reads
    (counter, kept index arithmetic and rows; tape rows of residuals), walks the
    body backwards (kept tape-row ops in place, the body call through its
    adjoint) and carries: the cotangents of the static float carried values,
    running sums for the static float values read from outside, and one
    cotangent tape per tape read from outside (a row added per read). The
    cotangent of a carried tape, which the body only writes, is loop-invariant:
    read from outside, not carried."""
    body = op.body.block
    term = body.last_op
    call = _region_call(op.body)
    (pair,) = pb.cf_pairs[op]
    counter = body.args[0] if isinstance(op, M.ForOp) else None
    carried = list(body.args[1:] if counter is not None else body.args)
    (n, lb, step), tapes, plan = pb.cf_residuals[op][:3]
    n = pb.resolve(Lazy(n))
    live = pb.live_results[op]
    floats = [j for j in live if not _dynamic(op.res[j].type)]
    kept = [o for o in body.ops if o is not call and o is not term]
    for o in kept:
        if isinstance(o, TAPE_READS) and o.tape in body.args:
            raise NotDifferentiableError("reverse mode through a loop reading a tape it carries", source_loc(op))
    read_tapes = _unique(_row_read_source(o) for o in kept
                         if _is_row_read(o) and _row_read_source(o) in pb.active)
    outer = [v for v in _unique([call.arguments[i] for i in pair.float_args]
                                + [o.value for o in kept if isinstance(o, TAPE_WRITES)])
             if not _inside(v, body) and is_float_type(v.type)]
    init_cts = [_ct_or_zero(pb, B, ct, op.res[j]) for j in floats]
    init_acc = [zero_ct(pb, B, v) for v in outer]
    init_tapes = [B.tape_zeros(Lazy(pb.fwd_of[t])) if _dynamic(t.type) else zero_ct(pb, B, t) for t in read_tapes]
    inits = init_cts + init_acc + init_tapes
    block = Block(arg_types=[I64, *[v.type for v in inits]])
    k = block.args[0]
    args = iter(block.args[1:])
    ct_c = {j: next(args) for j in floats}
    acc = {v: next(args) for v in outer}
    acc_tape = {t: next(args) for t in read_tapes}
    RB = IRBuilder(block, op.location, pb.resolve)
    env: dict[SSAValue, SSAValue] = {}

    def primal(v: SSAValue) -> SSAValue:
        """The value of `v` (of the primal body) at iteration k, in the adjoint."""
        if v in env:
            return env[v]
        if v is counter:
            env[v] = _counter(RB, k, lb, step)
        elif v in body.args:
            raise NotDifferentiableError(
                "reverse mode through a loop whose tape rows are indexed by a carried value", source_loc(op))
        elif _inside(v, body):
            o = v.owner
            clone = o.clone(value_mapper={x: primal(x) for x in o.operands})
            block.add_op(clone)
            env.update(zip(o.results, clone.results))
        else:
            env[v] = pb.resolve(Lazy(pb.fwd_of[v]))
        return env[v]

    push_rows = _push_rows(pb, op, carried, kept, RB, k)

    def row(o: Operation) -> SSAValue:
        """The row the kept tape-row op `o` reads or writes at iteration k."""
        return push_rows[o] if isinstance(o, M.TapePushOp) else primal(_row_index(o))

    cts: dict[SSAValue, SSAValue] = {}
    for j in floats:
        _add_ct(RB, cts, term.operands[j], ct_c[j])
    for j, v in enumerate(carried):
        if _dynamic(v.type) and op.res[j] in ct:
            cts[term.operands[j]] = ct[op.res[j]]
    after = _after_call(body, call)
    for o in reversed(kept):
        if o in after:
            _kept_adjoint(RB, o, cts, acc_tape, row)
    tapes = iter([pb.resolve(Lazy(t)) for t in tapes])
    tape_of = {b: next(tapes) for b, (kind, _) in enumerate(plan) if kind == "tape"}
    rows = []
    for b, (kind, v) in enumerate(plan):
        if kind == "outer":
            rows.append(pb.resolve(Lazy(v)))
        elif kind == "counter":
            rows.append(primal(counter))
        elif kind == "kept":
            rows.append(primal(v))
        elif kind == "recompute":
            rows.append(_recompute(RB, v, call, primal))
        elif kind == "stored":
            j, w = v
            rows.append(RB.tape_get(Lazy(pb.fwd_of[op.res[j]]), row(w)))
        elif kind == "next":
            rows.append(_next_row(pb, RB, op, k, n, tape_of[v[0]], v[1]))
        else:
            rows.append(RB.tape_get(tape_of[b], k))
    ins = [cts[call.results[r]] if call.results[r] in cts else zero_ct(pb, RB, call.results[r])
           for r in pair.float_results]
    bcall = func.CallOp(pair.bwd, ins + rows, [call.arguments[i].type for i in pair.float_args])
    bcall.location = op.location
    block.add_op(bcall)
    for i, g in zip(pair.float_args, bcall.results):
        _add_ct(RB, cts, call.arguments[i], g)
    for o in reversed(kept):
        if o not in after:
            _kept_adjoint(RB, o, cts, acc_tape, row)
    new_ct = [cts[carried[j]] if carried[j] in cts else RB.constant(0.0, M.dtype_of(op.res[j].type),
                                                                       M.shape_of(op.res[j].type)) for j in floats]
    new_acc = [RB.binary("add", acc[v], cts[v]) if v in cts else acc[v] for v in outer]
    block.add_op(M.YieldOp(*new_ct, *new_acc, *[acc_tape[t] for t in read_tapes]))
    one = B.constant(1, "int64")
    start = B.binary("sub", n, one)
    minus_one = B.constant(-1, "int64")
    loop = M.ForOp(start, minus_one, minus_one, inits, Region(block))
    loop.location = op.location
    pb.bwd_block.add_op(loop)
    res = iter(loop.res)
    for j in floats:
        accumulate(op.inits[j], next(res))
    for v in outer:
        accumulate(v, next(res))
    for t in read_tapes:
        accumulate(t, next(res))
    for j, v in enumerate(carried):
        if _dynamic(v.type) and op.res[j] in ct and not isinstance(op.inits[j].owner, M.TapeAllocOp):
            accumulate(op.inits[j], ct[op.res[j]])


def _push_rows(pb: _PairBuilder, op: M.ForOp | M.WhileOp, carried: list[SSAValue], kept: list[Operation],
               RB: IRBuilder, k: SSAValue) -> dict[Operation, SSAValue]:
    """The row each kept `msir.tape_push` of the loop body writes at iteration
    k: a carried tape started by `msir.tape_alloc` of r rows and pushed to p
    times per iteration gets its i-th push of iteration k in row r + k * p + i."""
    pushes = [o for o in kept if isinstance(o, M.TapePushOp)]
    if not pushes:
        return {}
    body = op.body.block
    term = body.last_op
    assert term is not None
    rows: dict[Operation, SSAValue] = {}
    for j, a in enumerate(carried):
        chain: list[Operation] = []
        v = term.operands[j]
        while isinstance(v.owner, TAPE_WRITES) and v.owner.parent_block() is body:
            chain.append(v.owner)
            v = v.owner.tape
        chain_pushes = [o for o in reversed(chain) if isinstance(o, M.TapePushOp)]
        if not chain_pushes or v is not a:
            continue
        alloc = op.inits[j].owner
        if not isinstance(alloc, M.TapeAllocOp):
            raise NotDifferentiableError(
                "reverse mode through a loop appending to a tape not started by 'msir.tape_alloc'", source_loc(op))
        base = RB.binary("add", RB.val(Lazy(pb.fwd_of[alloc.rows])),
                         RB.binary("mul", k, RB.constant(len(chain_pushes), "int64")))
        for i, o in enumerate(chain_pushes):
            rows[o] = base if i == 0 else RB.binary("add", base, RB.constant(i, "int64"))
    if any(o not in rows for o in pushes):
        raise NotDifferentiableError(
            "reverse mode through a loop appending to a tape it does not carry through", source_loc(op))
    return rows


def _inside(v: SSAValue, body: Block) -> bool:
    """Is `v` an argument or a value of the loop body `body`?"""
    return v in body.args or (isinstance(v.owner, Operation) and v.owner.parent_block() is body)


def _after_call(body: Block, call: func.CallOp) -> set[Operation]:
    """The ops of a loop body after its call."""
    after, seen = set(), False
    for o in body.ops:
        if seen:
            after.add(o)
        seen = seen or o is call
    return after


def _kept_adjoint(B: IRBuilder, o: Operation, cts: dict, acc_tape: dict, row) -> None:
    """The adjoint of one kept op, in place: a write hands the row of its new
    tape's cotangent to the value written and passes the cotangent on to the
    tape it consumed (rows are written once); a read adds its row's cotangent
    into the loop-carried cotangent tape of the tape read."""
    if isinstance(o, TAPE_WRITES):
        c = cts.pop(o.result, None)
        if c is not None:
            _add_ct(B, cts, o.value, B.tape_get(c, row(o)))
            cts[o.tape] = c
    elif _is_row_read(o):
        c = cts.pop(o.result, None)
        source = _row_read_source(o)
        if c is not None and source in acc_tape:
            acc_tape[source] = B.tape_add(acc_tape[source], row(o), c)
