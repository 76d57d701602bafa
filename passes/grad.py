"""`msir-grad`: reverse-mode differentiation as a transformation of the IR.

Contract
--------
Expects: a module of `func.func` (value semantics, straight-line bodies with
`func.call`s) in which reverse-mode ops (`msir.grad`, `msir.value_and_grad`,
`msir.vjp`) take a function value made by `msir.closure`.

Generates, per differentiated function `@f` (and, recursively, per function it
calls), two new private functions:

* `@f__fwd(args) -> (results..., residuals...)`, the *augmented forward*: `@f`'s
  body, with each `func.call @g` replaced by a call of `@g__fwd` whose residuals
  join `@f`'s. The residuals are exactly the primal values the adjoint reads.
* `@f__bwd(cts..., residuals...) -> (arg cts...)`, the *adjoint*: one cotangent
  parameter per *live* float result of `@f`, one result per float parameter of
  `@f` (integer and boolean values get no cotangent). The other results' cotangents
  are symbolic zeros (`msir.passes.grad_zeros`): a gradient seeds result 0, a vjp
  its main results (not has_aux's aux), a call its results the caller differentiates;
  only values that can get a nonzero cotangent get one, so no rule runs on a zero. It walks `@f`'s ops backwards
  and applies each op's rule from `passes/grad_rules.py`; fan-out accumulates
  (`msir.add`), a call becomes a call of `@g__bwd`. A value the rule reads is
  taken from the residuals, except constants, which are recomputed.

Recursion (a call of a function whose pair is being built, directly or through
other functions or control-flow regions): its augmented forward cannot return
the callee's residuals (their types would nest without end), so at such a call
`@f__fwd` calls the primal `@g` and keeps only the call's arguments, and the
adjoint calls `@g__rebwd(cts..., args...)`, which recomputes the callee's
residuals from them with `@g__fwd__part` (a copy of `@g__fwd` returning only
the residuals, see `results_only`) and then runs `@g__bwd`. Cost, for a linear
recursion of depth d: when the adjoint does not read the result of the
recursive call (a tail call `f(g(x), n - 1)`, or `2 * f(x / 2)`), the copy
drops the primal recursive call and the adjoint does O(d) work, about twice the
forward's; when it does read it (`sin(f(x))`), each level recomputes the primal
recursion below it: O(d^2) forward work. Memory is O(d) either way (one level's
residuals per live native frame; the adjoint's recursion is as deep as the
forward's). A tape of per-level residuals would make the second case O(d) too,
but cannot hold a level whose residuals are themselves tapes (loops inside the
recursive function); this design handles every recursive function.

Residual policy (what the adjoint stores and what it recomputes):
* stored: the primal values a rule reads and nothing else (residuals are lazy;
  only values that depend on the differentiated arguments get cotangents, and
  the adjoint's dead code and unread residuals are pruned);
* recomputed: constants and broadcasts/casts of constants; in loops, the
  counter and values computed from it and loop-invariant values
  (`grad_control`); a value a function merely passes on from its caller is not
  stored at all (`msir-forward-arguments` hands the caller's own argument to the
  adjoint);
* on request: a call of a `msir.checkpoint` function (marked
  `msir.checkpoint`) keeps only its arguments, like a recursive call, and its
  adjoint is `@g__rebwd`, which recomputes `@g`'s residuals first: the user
  trades one more forward of `@g` for not storing its intermediates.

Names: an op keeps its `msir.name` (`msir.ops`' `name=`) in the augmented
forward, and so does a constant the adjoint recomputes; the adjoint ops that
differentiate a named op `"n"` (its rule's ops and the accumulation of the
cotangents it produces) are named `"n/grad"`; a second derivative names those
`"n/grad/grad"`. Calls and the ops differentiating unnamed ops get no name.

Then each transformation op becomes `msir.closure` of a small function that calls
the pair: `@f__grad_<argnums>`, `@f__value_and_grad_<argnums>`,
`@f__vjp_<argnums>` (returning the results and `msir.closure @f__pullback_..`
over the residuals). Transformation ops nested in functions being
differentiated are expanded first (innermost first), so the output of this pass
can be differentiated again: higher order is the same pass run on its own output.

Guarantees: after the pass no reverse-mode op remains; `msir.apply` of the new
closures is rewritten into direct calls (`msir-specialize`); the module verifies.
A gradient through an op without a rule, or with respect to (or of) an integer
value, raises `NotDifferentiableError` at the op's source location.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.traits import IsTerminator
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import dce, region_dce

from msir.dialects import msir as M
from msir.errors import NotDifferentiableError
from msir.passes.ad_ir import IRBuilder, Lazy, Pair, derived_name, is_float_type, op_params, source_loc
from msir.passes.grad_rules import COLLECTIVE_VJP, NON_DIFFERENTIABLE, VJP
from msir.passes.grad_shard import ShardedAdjoint, is_collective
from msir.passes.specialize import specialize

from msir.passes.grad_control import CONTROL_FLOW, outline_regions  # noqa: E402
from msir.passes.grad_control import adjoint as control_adjoint  # noqa: E402
from msir.passes.grad_control import zero_ct  # noqa: E402
from msir.passes.grad_control import forward as control_forward  # noqa: E402
from msir.passes.grad_zeros import call_wanted, live_values

REVERSE_OPS = (M.GradOp, M.ValueAndGradOp, M.VjpOp)


_RECOMPUTABLE = (M.ConstantOp, M.BroadcastToOp, M.CastOp, M.ReshapeOp, M.IotaOp)


def _constant_derived(v: SSAValue) -> bool:
    """Is `v` computed from constants only, by ops cheap enough to repeat?"""
    owner = v.owner
    if not isinstance(owner, _RECOMPUTABLE):
        return False
    return all(_constant_derived(x) for x in owner.operands)


def _activity(f: func.FuncOp, wanted: tuple[int, ...]) -> set[SSAValue]:
    """Values of `f` that depend on the parameters `wanted` (only these get
    cotangents; control-flow ops count all the values their regions read)."""
    from msir.passes.grad_control import reads

    active: set[SSAValue] = {f.body.block.args[i] for i in wanted}
    for op in f.body.block.ops:
        if any(v in active for v in reads(op)):
            active.update(r for r in op.results if is_float_type(r.type))
    return active


@dataclass
class ModuleAD:
    """Module-wide state: the functions by name and the pairs made so far."""

    module: ModuleOp
    funcs: dict[str, func.FuncOp] = field(default_factory=dict)
    pairs: dict[tuple, Pair] = field(default_factory=dict)
    building: dict[tuple, Pair] = field(default_factory=dict)
    """The pairs being built, by (function, wanted), with their names reserved."""
    recompute: dict[tuple, str] = field(default_factory=dict)
    """Per pair that recursive calls use: the name of its recomputing adjoint."""
    reserved: set[str] = field(default_factory=set)
    wrappers: dict[tuple, str] = field(default_factory=dict)
    nonzero: dict[tuple, tuple[int, ...]] = field(default_factory=dict)
    """`nonzero_params` by (function, wanted, live)."""
    cyclic: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self):
        for op in self.module.ops:
            if isinstance(op, func.FuncOp):
                self.funcs[op.sym_name.data] = op

    def fresh_name(self, base: str) -> str:
        name, i = base, 0
        while name in self.funcs or name in self.reserved:
            i += 1
            name = f"{base}_{i}"
        return name

    def reserve(self, base: str) -> str:
        """A fresh name for a function built later (recursive calls use it first)."""
        name = self.fresh_name(base)
        self.reserved.add(name)
        return name

    def add_func(self, name: str, block: Block, results: list[Attribute], loc: Attribute) -> func.FuncOp:
        ftype = FunctionType.from_lists([a.type for a in block.args], results)
        f = func.FuncOp(name, ftype, Region(block), visibility="private")
        f.location = loc
        self.module.body.block.add_op(f)
        self.funcs[name] = f
        return f

    # -- the pair of one function -------------------------------------------

    def pair(self, name: str, at: Operation, wanted: tuple[int, ...] | None = None,
             live: tuple[int, ...] | None = None) -> Pair:
        """The pair of `name` whose adjoint takes the cotangents of the results
        `live` (default: every float result; the others are zero) and returns
        the cotangents of the parameters `wanted` (default: every float
        parameter)."""
        f = self.funcs.get(name)
        if wanted is None and f is not None:
            wanted = tuple(i for i, t in enumerate(f.function_type.inputs.data) if is_float_type(t))
        live = self.live_results(name, live)
        key = (name, wanted, live)
        if key in self.pairs:
            return self.pairs[key]
        if key in self.building:
            raise NotDifferentiableError(
                f"reverse mode through '{name}', which a control-flow region reaches recursively "
                "with other arguments differentiated, is not supported",
                source_loc(at),
            )
        if f is None or not f.body.blocks:
            raise NotDifferentiableError(f"cannot differentiate the external function '{name}'", source_loc(at))
        outline_regions(self, f)
        rule = f.attributes.get("msir.custom_vjp")
        if rule is not None:
            pair = self.custom_pair(f, rule, live)
        else:
            outputs = list(f.function_type.outputs.data)
            reserved = Pair(
                self.reserve(f"{name}__fwd"), self.reserve(f"{name}__bwd"), len(outputs), [], list(live), list(wanted),
            )
            self.building[key] = reserved
            try:
                pair = _PairBuilder(self, f, wanted, reserved).build()
            finally:
                del self.building[key]
        self.pairs[key] = pair
        if key in self.recompute:
            self.recomputing_adjoint(f, pair, self.recompute[key])
        return pair

    # -- symbolic zeros (`msir.passes.grad_zeros`) -----------------------------

    def live_results(self, name: str, live: tuple[int, ...] | None) -> tuple[int, ...]:
        """The results of `name` whose cotangent a pair takes: `live`, or every
        float result when `live` is None or `name` is on a call-graph cycle (a
        recursive call then finds the pair being built under one key)."""
        f = self.funcs.get(name)
        if f is None:
            return tuple(live or ())
        floats = tuple(i for i, t in enumerate(f.function_type.outputs.data) if is_float_type(t))
        if live is None or self.on_cycle(name):
            return floats
        return tuple(i for i in live if i in floats)

    def on_cycle(self, name: str) -> bool:
        """Does `name` reach itself through calls and closures (in any region)?"""
        if name not in self.cyclic:
            seen: set[str] = set()
            stack = [name]
            found = False
            while stack and not found:
                f = self.funcs.get(stack.pop())
                if f is None:
                    continue
                for inner in f.walk():
                    if isinstance(inner, (func.CallOp, M.ClosureOp)):
                        callee = inner.callee.string_value()
                        found = found or callee == name
                        if callee not in seen:
                            seen.add(callee)
                            stack.append(callee)
            self.cyclic[name] = found
        return self.cyclic[name]

    def nonzero_params(self, name: str, wanted: tuple[int, ...], live: tuple[int, ...]) -> tuple[int, ...]:
        """The parameters among `wanted` to which `name`'s adjoint can give a
        nonzero cotangent when its results `live` get one (all of `wanted`
        for external, custom-rule and recursive functions)."""
        f = self.funcs.get(name)
        live = self.live_results(name, live)
        key = (name, wanted, live)
        if f is None or not f.body.blocks or "msir.custom_vjp" in f.attributes or self.on_cycle(name):
            return wanted
        if key not in self.nonzero:
            outline_regions(self, f)
            values = live_values(self, f, _activity(f, wanted), live, {})
            args = f.body.block.args
            self.nonzero[key] = tuple(i for i in wanted if args[i] in values)
        return self.nonzero[key]

    # -- recursion ------------------------------------------------------------

    def recursive_pair(self, key: tuple) -> Pair:
        """For a call of a function whose pair is being built (recursion): a pair
        whose `bwd` is `@f__rebwd(cts..., args...)`, the adjoint that first
        recomputes the callee's augmented forward from its arguments (the only
        residuals the call keeps; see the module docstring)."""
        reserved = self.building[key]
        if key not in self.recompute:
            self.recompute[key] = self.reserve(f"{key[0]}__rebwd")
        params = list(self.funcs[key[0]].function_type.inputs.data)
        return Pair(
            reserved.fwd, self.recompute[key], reserved.n_results, params,
            reserved.float_results, reserved.float_args,
        )

    def checkpoint_pair(self, name: str, at: Operation, wanted: tuple[int, ...], live: tuple[int, ...]) -> Pair:
        """For a call marked `msir.checkpoint`: the callee's pair with `bwd`
        replaced by its recomputing adjoint `@g__rebwd(cts..., args...)`, whose
        residuals are the call's arguments (as for recursion)."""
        pair = self.pair(name, at, wanted, live)
        key = (name, wanted, self.live_results(name, live))
        if key not in self.recompute:
            self.recompute[key] = self.reserve(f"{name}__rebwd")
            self.recomputing_adjoint(self.funcs[name], pair, self.recompute[key])
        params = list(self.funcs[name].function_type.inputs.data)
        return Pair(pair.fwd, self.recompute[key], pair.n_results, params, pair.float_results, pair.float_args)

    def recomputing_adjoint(self, f: func.FuncOp, pair: Pair, name: str) -> None:
        """`@f__rebwd(cts..., args...) = @f__bwd(cts..., residuals of @f__fwd(args...))`,
        the residuals computed by a copy of `@f__fwd` that returns only them."""
        params = list(f.function_type.inputs.data)
        outputs = list(f.function_type.outputs.data)
        block = Block(arg_types=[outputs[i] for i in pair.float_results] + params)
        cts, args = list(block.args[: len(pair.float_results)]), list(block.args[len(pair.float_results) :])
        n_out = len(outputs)
        residuals_only = self.results_only(pair.fwd, tuple(range(n_out, n_out + len(pair.residual_types))))
        fwd = func.CallOp(residuals_only, args, pair.residual_types)
        bwd = func.CallOp(pair.bwd, cts + list(fwd.results), [params[i] for i in pair.float_args])
        for op in (fwd, bwd):
            op.location = f.location
            block.add_op(op)
        block.add_op(func.ReturnOp(*bwd.results))
        self.add_func(name, block, [params[i] for i in pair.float_args], f.location)


    def custom_pair(self, f: func.FuncOp, rule: Attribute, live: tuple[int, ...]) -> Pair:
        """The pair of a function with a user rule: its `fwd` returns the results
        then the residuals; its `bwd(residuals..., cts of all results...)`
        returns a cotangent for every parameter (the user's rule is given
        zeros for the results that are not `live`, as JAX instantiates them)."""
        fwd_name, bwd_name = (r.string_value() for r in rule.data)  # type: ignore[attr-defined]
        fwd, bwd = self.funcs[fwd_name], self.funcs[bwd_name]
        outputs = list(f.function_type.outputs.data)
        params = list(f.function_type.inputs.data)
        residual_types = list(fwd.function_type.outputs.data)[len(outputs) :]
        float_results = list(live)
        float_args = [i for i, t in enumerate(params) if is_float_type(t)]
        block = Block(arg_types=[outputs[i] for i in float_results] + residual_types)
        B = IRBuilder(block, f.location)
        given = dict(zip(float_results, block.args))
        cts = [
            given[i] if i in given else B.constant(0.0, M.dtype_of(t), M.shape_of(t))
            for i, t in enumerate(outputs)
        ]
        residuals = list(block.args[len(float_results) :])
        call = func.CallOp(bwd_name, residuals + cts, params)
        call.location = f.location
        block.add_op(call)
        block.add_op(func.ReturnOp(*[call.results[i] for i in float_args]))
        name = self.fresh_name(f"{f.sym_name.data}__bwd")
        self.add_func(name, block, [params[i] for i in float_args], f.location)
        return Pair(fwd_name, name, len(outputs), residual_types, float_results, float_args)


    def results_only(self, name: str, keep: tuple[int, ...]) -> str:
        """A copy of `@name` returning only its results at `keep` (memoised), with
        the work they do not need removed: calls whose results are then unused
        go, others call their own such copy, msir.if drops unused results. For
        `@f__rebwd` this removes the primal recursive call when the adjoint does
        not read its result (a tail call, `2 * f(x / 2)`): O(depth) work, not
        O(depth^2)."""
        f = self.funcs[name]
        if keep == tuple(range(len(f.function_type.outputs.data))):
            return name
        key = ("results_only", name, keep)
        if key in self.wrappers:
            return self.wrappers[key]
        new_name = self.reserve(f"{name}__part")
        self.wrappers[key] = new_name
        clone = f.clone()
        block = clone.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        kept = [ret.operands[i] for i in keep]
        block.insert_op_before(func.ReturnOp(*kept), ret)
        block.erase_op(ret)
        self._prune(block)
        self.add_func(new_name, _take_block(clone), [v.type for v in kept], f.location)
        return new_name

    def _prune(self, block: Block) -> None:
        """Remove ops of `block` whose results are unused (msir is pure), and
        unused results of calls and msir.if, to a fixed point."""
        changed = True
        while changed:
            changed = False
            for op in reversed(list(block.ops)):
                if op is block.last_op and op.has_trait(IsTerminator):
                    continue
                used = [i for i, r in enumerate(op.results) if r.uses]
                if not used:
                    block.erase_op(op)
                    changed = True
                elif len(used) < len(op.results) and (isinstance(op, M.IfOp) or self._has_body(op)):
                    self._keep_results(op, used)
                    changed = True
            for op in block.ops:
                if isinstance(op, M.IfOp):
                    for region in op.regions:
                        self._prune(region.block)

    def _has_body(self, op: Operation) -> bool:
        if not isinstance(op, func.CallOp):
            return False
        callee = self.funcs.get(op.callee.string_value())
        return callee is not None and bool(callee.body.blocks)

    def _keep_results(self, op: Operation, used: list[int]) -> None:
        block = op.parent_block()
        assert block is not None
        if isinstance(op, func.CallOp):
            callee = self.results_only(op.callee.string_value(), tuple(used))
            new: Operation = func.CallOp(callee, list(op.arguments), [op.results[i].type for i in used])
        else:
            regions = []
            for region in op.regions:
                b = region.block
                region.detach_block(b)
                y = b.last_op
                assert y is not None
                b.insert_op_before(M.YieldOp(*[y.operands[i] for i in used]), y)
                b.erase_op(y)
                regions.append(Region(b))
            new = M.IfOp(op.cond, [op.results[i].type for i in used], regions[0], regions[1])
            new.attributes.update(op.attributes)
        new.location = op.location
        block.insert_op_before(new, op)
        for i, r in zip(used, new.results):
            op.results[i].replace_all_uses_with(r)
        block.erase_op(op)


def _take_block(f: func.FuncOp) -> Block:
    block = f.body.block
    f.body.detach_block(block)
    return block


class _PairBuilder:
    """Builds `@f__fwd` and `@f__bwd` for one function `@f`."""

    def __init__(self, ad: ModuleAD, f: func.FuncOp, wanted: tuple[int, ...], names: Pair):
        """`names` (reserved by `ModuleAD.pair`) also gives the live results."""
        self.ad = ad
        self.f = f
        self.names = names
        self.name = f.sym_name.data
        self.fwd_block = Block(arg_types=list(f.function_type.inputs.data))
        self.fwd_of: dict[SSAValue, SSAValue] = dict(zip(f.body.block.args, self.fwd_block.args))
        self.call_residuals: dict[Operation, list[SSAValue]] = {}
        self.call_pairs: dict[Operation, Pair] = {}
        outputs = list(f.function_type.outputs.data)
        self.float_results = list(names.float_results)
        self.float_args = list(wanted)
        self.active = _activity(f, wanted)
        self.live_results: dict[Operation, tuple[int, ...]] = {}
        """Per call and control-flow op: its results (a loop: its carried
        values) that can get a nonzero cotangent (`msir.passes.grad_zeros`)."""
        self.live = live_values(ad, f, self.active, tuple(self.float_results), self.live_results)
        self.bwd_block = Block(arg_types=[outputs[i] for i in self.float_results])
        self.residuals: list[SSAValue] = []
        self.residual_arg: dict[SSAValue, SSAValue] = {}
        self.remat: dict[SSAValue, SSAValue] = {}
        self.cf_residuals: dict[Operation, list] = {}
        self.cf_pairs: dict[Operation, list[Pair]] = {}
        self.sharded = ShardedAdjoint.of(f)
        """For a per-device function (msir-shard's): its cotangents' partial sums."""

    # -- forward ----------------------------------------------------------------

    def build_forward(self) -> func.ReturnOp:
        ret = None
        for op in self.f.body.block.ops:
            if isinstance(op, func.ReturnOp):
                ret = op
                continue
            if isinstance(op, func.CallOp):
                callee = op.callee.string_value()
                wanted = call_wanted(op, self.active)
                live = self.live_results.get(op)
                if not wanted or live is None:  # nothing to differentiate through this call
                    clone = op.clone(value_mapper=dict(self.fwd_of))
                    self.fwd_block.add_op(clone)
                    for old, new in zip(op.results, clone.results):
                        self.fwd_of[old] = new
                    continue
                key = (callee, wanted, self.ad.live_results(callee, live))
                recursive = key in self.ad.building
                if recursive or M.CHECKPOINT_ATTR in op.attributes:
                    # A recursive or checkpointed call: run the primal and keep
                    # its arguments; the adjoint recomputes the residuals.
                    self.call_pairs[op] = (
                        self.ad.recursive_pair(key) if recursive
                        else self.ad.checkpoint_pair(callee, op, wanted, live)
                    )
                    clone = op.clone(value_mapper=dict(self.fwd_of))
                    self.fwd_block.add_op(clone)
                    for old, new in zip(op.results, clone.results):
                        self.fwd_of[old] = new
                    self.call_residuals[op] = [self.fwd_of[v] for v in op.arguments]
                    continue
                pair = self.ad.pair(callee, op, wanted, live)
                self.call_pairs[op] = pair
                call = func.CallOp(
                    pair.fwd,
                    [self.fwd_of[v] for v in op.arguments],
                    [r.type for r in op.results] + pair.residual_types,
                )
                call.location = op.location
                self.fwd_block.add_op(call)
                for old, new in zip(op.results, call.results):
                    self.fwd_of[old] = new
                self.call_residuals[op] = list(call.results[len(op.results) :])
                continue
            if isinstance(op, CONTROL_FLOW):
                control_forward(self, op)
                continue
            if isinstance(op, M.JvpOp):  # only msir-grad-jvp expands both modes, innermost first
                raise NotDifferentiableError(
                    "msir-grad does not expand the forward-mode 'msir.jvp' inside the function it "
                    "differentiates: run msir-grad-jvp, which expands both modes", source_loc(op))
            if isinstance(op, REVERSE_OPS):
                raise AssertionError("nested transformations are expanded before their callers")
            clone = op.clone(value_mapper=dict(self.fwd_of))
            self.fwd_block.add_op(clone)
            for old, new in zip(op.results, clone.results):
                self.fwd_of[old] = new
        assert ret is not None
        return ret

    # -- residuals ----------------------------------------------------------------

    def resolve(self, lazy: Lazy) -> SSAValue:
        """A primal (forward) value made available in the adjoint."""
        v = lazy.value
        if v in self.remat:
            return self.remat[v]
        if _constant_derived(v):
            # Constants (and their broadcasts, casts, reshapes) are recomputed
            # in the adjoint rather than saved: cheaper, and no derivative flows
            # into them when the adjoint is differentiated again.
            owner = v.owner
            assert isinstance(owner, Operation)
            operands = [self.resolve(Lazy(x)) for x in owner.operands]
            c = owner.clone(value_mapper=dict(zip(owner.operands, operands)))
            self.bwd_block.add_op(c)
            self.remat[v] = c.results[0]
            return c.results[0]
        if v not in self.residual_arg:
            arg = self.bwd_block.insert_arg(v.type, len(self.bwd_block.args))
            self.residual_arg[v] = arg
            self.residuals.append(v)
        return self.residual_arg[v]

    # -- adjoint --------------------------------------------------------------

    def build(self) -> Pair:
        ret = self.build_forward()
        ct: dict[SSAValue, SSAValue] = {}
        B = IRBuilder(self.bwd_block, self.f.location, self.resolve)

        def accumulate(v: SSAValue, c: SSAValue, partial: frozenset[int] = frozenset()) -> None:
            if not is_float_type(v.type) or v not in self.live:  # a symbolic zero
                return
            if c.type != v.type:  # a rule produced another dtype: keep the primal's
                B.loc = v.owner.location if isinstance(v.owner, Operation) else B.loc
                c = B.cast(c, M.dtype_of(v.type))
            if self.sharded is not None:
                c = self.sharded.merge(B, v, c, partial, ct)
            ct[v] = c if v not in ct else B.binary("add", ct[v], c)

        for pos, arg in zip(self.float_results, self.bwd_block.args):
            if self.sharded is not None:
                arg = self.sharded.seed(B, pos, ret.operands[pos], arg)
            accumulate(ret.operands[pos], arg)
        for op in reversed(list(self.f.body.block.ops)):
            if op is ret or not any(r in ct for r in op.results):
                continue
            B.loc = op.location
            B.name = derived_name(op, "grad")
            if self.sharded is not None and (isinstance(op, (func.CallOp, *CONTROL_FLOW)) or is_collective(op)):
                for r in op.results:  # whole cotangents from here on
                    self.sharded.resolve(B, r, ct)
            if isinstance(op, func.CallOp):
                self.adjoint_of_call(op, ct, B, accumulate)
                continue
            if isinstance(op, CONTROL_FLOW):
                control_adjoint(self, op, ct, B, accumulate)
                continue
            self.adjoint_of_op(op, ct, B, accumulate)
        outs: list[SSAValue] = []
        B.loc = self.f.location
        B.name = None
        for i in self.float_args:
            a = self.f.body.block.args[i]
            if self.sharded is not None:
                self.sharded.resolve(B, a, ct)
            outs.append(ct[a] if a in ct else zero_ct(self, B, a))
        self.bwd_block.add_op(func.ReturnOp(*outs))

        self.prune_residuals()
        fwd_ret = func.ReturnOp(*[self.fwd_of[v] for v in ret.operands], *self.residuals)
        self.fwd_block.add_op(fwd_ret)
        fwd_name, bwd_name = self.names.fwd, self.names.bwd
        self.ad.add_func(fwd_name, self.fwd_block, [v.type for v in fwd_ret.operands], self.f.location)
        self.ad.add_func(bwd_name, self.bwd_block, [v.type for v in outs], self.f.location)
        return Pair(
            fwd_name,
            bwd_name,
            len(ret.operands),
            [v.type for v in self.residuals],
            self.float_results,
            self.float_args,
        )

    def prune_residuals(self) -> None:
        """Remove the adjoint's dead code, then the residuals nothing reads."""
        region = Region(self.bwd_block)
        region_dce(region)
        region.detach_block(self.bwd_block)
        kept = []
        for v in self.residuals:
            arg = self.residual_arg[v]
            if arg.uses:
                kept.append(v)
            else:
                self.bwd_block.erase_arg(arg)
        self.residuals = kept

    def adjoint_of_op(self, op: Operation, ct, B: IRBuilder, accumulate) -> None:
        name, params = op_params(op)
        if len(op.results) != 1:
            raise NotDifferentiableError(f"cannot differentiate '{op.name}'", source_loc(op))
        y = op.results[0]
        if name in NON_DIFFERENTIABLE:
            return
        rule = VJP.get(name) or COLLECTIVE_VJP.get(name)
        if rule is None:
            raise NotDifferentiableError(
                f"'{op.name}' has no differentiation rule", source_loc(op)
            )
        if self.sharded is not None:
            params = self.sharded.params(op, params)
        xs = [Lazy(self.fwd_of[v]) for v in op.operands]
        cts = rule(B, params, xs, Lazy(self.fwd_of[y]), ct[y])
        for v, c in zip(op.operands, cts):
            if c is not None:
                accumulate(v, c, self.sharded.partial_of(op, v, y) if self.sharded is not None else frozenset())

    def adjoint_of_call(self, op: func.CallOp, ct, B: IRBuilder, accumulate) -> None:
        pair = self.call_pairs.get(op)
        if pair is None:  # an inactive call
            return
        ins: list[SSAValue] = []
        for i in pair.float_results:
            r = op.results[i]
            ins.append(ct[r] if r in ct else zero_ct(self, B, r))
        ins += [self.resolve(Lazy(v)) for v in self.call_residuals[op]]
        call = func.CallOp(pair.bwd, ins, [op.arguments[i].type for i in pair.float_args])
        call.location = op.location
        self.bwd_block.add_op(call)
        for i, c in zip(pair.float_args, call.results):
            accumulate(op.arguments[i], c)


# ---------------------------------------------------------------------------
# Expanding the transformation ops
# ---------------------------------------------------------------------------


def _check_argnums(op: M._TransformOp, f: func.FuncOp) -> None:
    params = list(f.function_type.inputs.data)
    for a in op.argnums_list:
        if not is_float_type(params[a]):
            raise NotDifferentiableError(
                f"cannot differentiate with respect to argument {a} of type {params[a]}: "
                "only float arguments have gradients",
                source_loc(op),
            )


def _check_output(op: M._TransformOp, f: func.FuncOp, main: list[int]) -> None:
    outputs = list(f.function_type.outputs.data)
    for i in main:
        if not is_float_type(outputs[i]):
            raise NotDifferentiableError(
                f"cannot differentiate result {i} of type {outputs[i]}: only float results have derivatives",
                source_loc(op),
            )


def expand(ad: ModuleAD, op: M._TransformOp) -> None:
    """Replace one reverse-mode op by a closure of a new function calling the pair."""
    closure = op.fn.owner
    assert isinstance(closure, M.ClosureOp)
    fname = closure.callee.string_value()
    f = ad.funcs[fname]
    has_aux = op.has_aux is not None
    n_out = len(f.function_type.outputs.data)
    main = [0] if has_aux else list(range(n_out))
    _check_argnums(op, f)
    _check_output(op, f, main)
    kind = {M.GradOp: "grad", M.ValueAndGradOp: "value_and_grad", M.VjpOp: "vjp"}[type(op)]
    # grad and value_and_grad seed result 0 only; a vjp takes a cotangent per
    # main result: every other result (has_aux's aux) has a symbolic zero one
    live = tuple(main) if kind == "vjp" else (0,)
    pair = ad.pair(fname, op, tuple(sorted(set(op.argnums_list))), live)
    key = (kind, fname, op.argnums_list, has_aux)
    if key not in ad.wrappers:
        ad.wrappers[key] = _wrapper(ad, kind, f, pair, op, main)
    new = M.ClosureOp(ad.wrappers[key], list(closure.captures), op.result.type)  # type: ignore[arg-type]
    new.location = op.location
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, op)
    op.result.replace_all_uses_with(new.result)
    block.erase_op(op)


def _wrapper(ad: ModuleAD, kind: str, f: func.FuncOp, pair: Pair, op: M._TransformOp, main: list[int]) -> str:
    params = list(f.function_type.inputs.data)
    outputs = list(f.function_type.outputs.data)
    argnums = op.argnums_list
    block = Block(arg_types=params)
    B = IRBuilder(block, op.location)
    fwd = func.CallOp(pair.fwd, list(block.args), outputs + pair.residual_types)
    fwd.location = op.location
    block.add_op(fwd)
    results = list(fwd.results[: len(outputs)])
    residuals = list(fwd.results[len(outputs) :])
    positions = {p: k for k, p in enumerate(pair.float_args)}
    if kind == "vjp":
        pb = _pullback(ad, f, pair, argnums, main, positions, op)
        closure = M.ClosureOp(pb, residuals, FunctionType.from_lists([outputs[i] for i in main], [params[a] for a in argnums]))
        closure.location = op.location
        block.add_op(closure)
        block.add_op(func.ReturnOp(*results, closure.result))
        name = ad.fresh_name(f"{f.sym_name.data}__vjp")
        ad.add_func(name, block, outputs + [closure.result.type], op.location)
        return name
    cts = [B.constant(1.0 if i == 0 else 0.0, M.dtype_of(outputs[i]), M.shape_of(outputs[i]))
           for i in pair.float_results]
    bwd = func.CallOp(pair.bwd, cts + residuals, [params[i] for i in pair.float_args])
    bwd.location = op.location
    block.add_op(bwd)
    grads = [bwd.results[positions[a]] for a in argnums]
    aux = results[1:] if op.has_aux is not None else []
    rets = grads + aux if kind == "grad" else (results if op.has_aux is not None else results[:1]) + grads
    block.add_op(func.ReturnOp(*rets))
    name = ad.fresh_name(f"{f.sym_name.data}__{kind}")
    ad.add_func(name, block, [v.type for v in rets], op.location)
    return name


def _pullback(ad, f, pair: Pair, argnums, main, positions, op) -> str:
    outputs = list(f.function_type.outputs.data)
    params = list(f.function_type.inputs.data)
    block = Block(arg_types=[outputs[i] for i in main] + pair.residual_types)
    B = IRBuilder(block, op.location)
    given = dict(zip(main, block.args))
    cts = [
        given[i] if i in given else B.constant(0.0, M.dtype_of(outputs[i]), M.shape_of(outputs[i]))
        for i in pair.float_results
    ]
    residuals = list(block.args[len(main) :])
    bwd = func.CallOp(pair.bwd, cts + residuals, [params[i] for i in pair.float_args])
    bwd.location = op.location
    block.add_op(bwd)
    outs = [bwd.results[positions[a]] for a in argnums]
    block.add_op(func.ReturnOp(*outs))
    name = ad.fresh_name(f"{f.sym_name.data}__pullback")
    ad.add_func(name, block, [params[a] for a in argnums], op.location)
    return name


def _pending(module: ModuleOp, kinds: tuple[type, ...]) -> list[Operation]:
    return [op for op in module.walk() if isinstance(op, kinds)]


def _ready(ad: ModuleAD, op: M._TransformOp, kinds: tuple[type, ...]) -> bool:
    """An op can be expanded once the functions it differentiates hold no
    transformation ops themselves (reachable through calls)."""
    closure = op.fn.owner
    if not isinstance(closure, M.ClosureOp):
        raise NotDifferentiableError(
            "differentiating a function value that is not a known function is not supported",
            source_loc(op),
        )
    seen: set[str] = set()
    stack = [closure.callee.string_value()]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        f = ad.funcs.get(name)
        if f is None:
            continue
        for inner in f.walk():
            if isinstance(inner, kinds):
                return False
            if isinstance(inner, func.CallOp):
                stack.append(inner.callee.string_value())
            if isinstance(inner, M.ClosureOp):
                stack.append(inner.callee.string_value())
    return True


def differentiate(module: ModuleOp, kinds: tuple[type, ...] = REVERSE_OPS, expand_fn=None) -> None:
    """Expand the ops of `kinds` innermost first, then specialise closures."""
    expand_fn = expand_fn or expand
    ad = ModuleAD(module)
    while True:
        specialize(module)
        pending = _pending(module, kinds)
        if not pending:
            return
        ready = [op for op in pending if _ready(ad, op, kinds)]
        if not ready:
            raise NotDifferentiableError(
                "a function differentiates itself (directly or through calls)", source_loc(pending[0])
            )
        for op in ready:
            expand_fn(ad, op)
        # Between differentiation levels: merge repeated and drop dead code, so
        # that higher-order derivatives stay small.
        cse(module)
        dce(module)


@dataclass(frozen=True)
class MsirGrad(ModulePass):
    """Reverse-mode differentiation (see the module docstring)."""

    name = "msir-grad"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        differentiate(op)
