"""Symbolic zero cotangents for `msir-grad`: which values of a function can
receive a nonzero cotangent, before its pair is built.

A cotangent known to be zero (an output nobody differentiates, `has_aux`'s
aux, an unused result of a call, `msir.stop_gradient`, an integer value) is
never materialised and never passed through a rule: JAX's `Zero`. Passing a
zero through a rule is wasted work and can be wrong: `sqrt`'s rule at 0 computes
0 / 0 = NaN from a zero cotangent.

The analysis runs backwards over an (outlined, see `grad_control`) function
body, from the results that get a cotangent (the pair's *live* results):

* an elementwise, shape or reduction op with a live result makes its active
  operands live, except the ops of `NON_DIFFERENTIABLE` and `stop_gradient`;
* a `func.call` with live results makes live the arguments at the callee's
  nonzero parameters for those live results (`ModuleAD.nonzero_params`, a
  memoised analysis of the callee's own body);
* `msir.if`: the same through each branch function;
* `msir.for` / `msir.while`: a carried value is live when its result is, or
  when the body hands a nonzero cotangent to it from a live carried value, to
  a fixed point over the body block (`_loop_live`): its call, through the
  callee's analysis, and the tape-row ops a derivative's loop keeps around it
  (a write's live new tape makes the tape and the value written live, a
  read's live row the tape read).

Sound by construction (a superset of what gets a nonzero cotangent): the
adjoint gives a cotangent only to live values, asks each callee's adjoint for
the live results' cotangents only, and drops the zeros a callee returns for
its parameters that are not live. Functions on a call-graph cycle are not
analysed: all their float results are live, as before this analysis.
"""

from __future__ import annotations

from typing import Protocol

from xdsl.dialects import func
from xdsl.ir import Block, Operation, SSAValue

from msir.dialects import msir as M
from msir.passes.ad_ir import is_float_type
from msir.passes.grad_control import CONTROL_FLOW, _inside, _region_call, reads
from msir.passes.grad_rules import NON_DIFFERENTIABLE

_NO_CT = NON_DIFFERENTIABLE | {"stop_gradient"}


class Analysis(Protocol):
    """What the analysis asks of the module (`msir.passes.grad.ModuleAD`)."""

    def nonzero_params(self, name: str, wanted: tuple[int, ...], live: tuple[int, ...]) -> tuple[int, ...]: ...


def call_wanted(call: func.CallOp, active: set[SSAValue], carried: frozenset[SSAValue] = frozenset()) -> tuple[int, ...]:
    """The parameters of a call that are differentiated: its active float arguments."""
    return tuple(i for i, a in enumerate(call.arguments) if is_float_type(a.type) and (a in active or a in carried))


def live_values(ad: Analysis, f: func.FuncOp, active: set[SSAValue], live: tuple[int, ...],
                live_results: dict[Operation, tuple[int, ...]]) -> set[SSAValue]:
    """The values of `f` that can get a nonzero cotangent when its results at
    `live` do; fills `live_results` with the live result positions of each
    call and control-flow op (a loop: of its carried values), the calls in
    loop bodies included."""
    block = f.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    return _live_in_block(ad, block, active, [ret.operands[i] for i in live], live_results)


def _live_in_block(ad: Analysis, block: Block, active: set[SSAValue], seeds: list[SSAValue],
                   live_results: dict[Operation, tuple[int, ...]]) -> set[SSAValue]:
    """The values of `block` (and the outer values it reads) that can get a
    nonzero cotangent when the active values among `seeds` do."""
    out: set[SSAValue] = {v for v in seeds if v in active}
    for op in reversed(list(block.ops)):
        positions = tuple(i for i, r in enumerate(op.results) if r in out)
        if not positions:
            continue
        if isinstance(op, func.CallOp):
            wanted = call_wanted(op, active)
            if wanted:
                live_results[op] = positions
                out.update(op.arguments[i] for i in ad.nonzero_params(op.callee.string_value(), wanted, positions))
        elif isinstance(op, M.IfOp):
            live_results[op] = positions
            for region in op.regions:
                call = _region_call(region)
                wanted = call_wanted(call, active)
                out.update(call.arguments[i] for i in ad.nonzero_params(call.callee.string_value(), wanted, positions))
        elif isinstance(op, CONTROL_FLOW):
            live_results[op] = _loop_live(ad, op, active, positions, out, live_results)
        elif op.name.removeprefix("msir.") not in _NO_CT:
            out.update(v for v in op.operands if v in active)
    return out


def _loop_live(ad: Analysis, op: Operation, active: set[SSAValue], positions: tuple[int, ...],
               out: set[SSAValue], live_results: dict[Operation, tuple[int, ...]]) -> tuple[int, ...]:
    """The live carried positions of a loop whose results at `positions` are
    live: a fixed point over the body block (its call and kept tape-row ops),
    a carried value being live when the body hands a nonzero cotangent to it
    from a live one. Adds to `out` the values the loop reads that get a
    nonzero cotangent, and to `live_results` the body's own (its call's)."""
    body = op.body.block
    term = body.last_op
    assert term is not None
    carried = list(body.args[1:] if isinstance(op, M.ForOp) else body.args)
    body_active = set(active) | {a for a in carried if is_float_type(a.type)}
    for inner in body.ops:
        if any(v in body_active for v in reads(inner)):
            body_active.update(r for r in inner.results if is_float_type(r.type))
    live = set(positions)
    while True:
        inner_results: dict[Operation, tuple[int, ...]] = {}
        values = _live_in_block(ad, body, body_active, [term.operands[j] for j in sorted(live)], inner_results)
        reached = {j for j, a in enumerate(carried) if a in values}
        if reached <= live:
            break
        live |= reached
    live_results.update(inner_results)
    out.update(op.inits[j] for j in live if op.inits[j] in active)
    out.update(v for v in values if v in active and not _inside(v, body))
    return tuple(sorted(live))
