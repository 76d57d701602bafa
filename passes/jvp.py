"""`msir-jvp`: forward-mode differentiation as a transformation of the IR.

Contract
--------
Expects: like `msir-grad`, a module whose `msir.jvp` ops take a function value
made by `msir.closure`.

Generates, per function `@f` and set of parameters with tangents ("active"),
`@f__jvp(params..., tangents of the active params...) -> (results..., tangents
of the results...)`: `@f`'s body with, after each op, its tangent computed by the
op's forward rule from `passes/grad_rules.py` (`JVP`); a `func.call @g` becomes a
call of `@g__jvp` for the active arguments of that call. Values without a
tangent (integers, values independent of the active parameters) get none, so no
work is spent on them; the tangent `@f__jvp` returns for an integer or boolean
result is a zero of that result's type (JAX gives `float0` zeros, which no
tensor type holds; the eager engine returns the same zeros). `@f__jvp` is named before its body is built, so a
recursive function's `__jvp` calls itself (forward mode through recursion is as
deep as the recursion, O(d) work). Then `msir.jvp` becomes `msir.closure` of a function
returning the results and the tangents of the non-aux results.

Names: a primal op keeps its `msir.name` in `@f__jvp`; the ops computing the
tangent of a named op `"n"` are named `"n/jvp"`.

Guarantees: after the pass no `msir.jvp` remains (run together with `msir-grad`
by `differentiate_all`, any nesting of forward and reverse mode expands
innermost first); the module verifies. An op without a forward rule raises
`NotDifferentiableError` at its source location.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from msir.dialects import msir as M
from msir.errors import NotDifferentiableError
from msir.passes.ad_ir import IRBuilder, derived_name, op_params
from msir.passes.ad_ir import is_float_type, source_loc
from msir.passes.grad import REVERSE_OPS, ModuleAD, differentiate, expand
from msir.passes.grad_control import CONTROL_FLOW, outline_regions, reads
from msir.passes.grad_rules import COLLECTIVE_JVP, JVP, NON_DIFFERENTIABLE


def jvp_function(ad: ModuleAD, name: str, active: tuple[int, ...], at: Operation) -> str:
    """`@name__jvp` for tangents of the parameters `active` (memoised)."""
    key = ("jvp", name, active)
    if key in ad.wrappers:
        return ad.wrappers[key]
    f = ad.funcs.get(name)
    if f is None or not f.body.blocks:
        raise NotDifferentiableError(f"cannot differentiate the external function '{name}'", source_loc(at))
    # Named before it is built: a recursive call inside calls it by this name.
    ad.wrappers[key] = ad.reserve(f"{name}__jvp")
    try:
        _build(ad, f, active, ad.wrappers[key])
    except BaseException:
        del ad.wrappers[key]
        raise
    return ad.wrappers[key]


def _build(ad: ModuleAD, f: func.FuncOp, active: tuple[int, ...], fname: str) -> None:
    params = list(f.function_type.inputs.data)
    block = Block(arg_types=params + [params[i] for i in active])
    value: dict[SSAValue, SSAValue] = dict(zip(f.body.block.args, block.args))
    tangent: dict[SSAValue, SSAValue | None] = {}
    for k, i in enumerate(active):
        tangent[f.body.block.args[i]] = block.args[len(params) + k]
    B = IRBuilder(block, f.location)
    outline_regions(ad, f)
    ret: func.ReturnOp | None = None
    for op in f.body.block.ops:
        B.loc = op.location
        B.name = derived_name(op, "jvp")
        if isinstance(op, func.ReturnOp):
            ret = op
            continue
        if isinstance(op, func.CallOp):
            _call(ad, op, block, value, tangent)
            continue
        if isinstance(op, CONTROL_FLOW) and any(tangent.get(v) is not None for v in reads(op)):
            _control(ad, op, block, value, tangent)
            continue
        _op(op, block, value, tangent, B)
    assert ret is not None
    B.loc = f.location
    B.name = None
    outs = [value[v] for v in ret.operands]
    t_outs = []
    for v in ret.operands:
        # an integer or boolean result's tangent is zero, of the result's own
        # dtype (JAX's float0 has no tensor type; PYNATIVE gives the same)
        t = tangent.get(v) if is_float_type(v.type) else None
        t_outs.append(t if t is not None else _zero_tangent(B, value[v], ret))
    t_outs = [B.cast(t, M.dtype_of(v.type)) for t, v in zip(t_outs, ret.operands)]
    block.add_op(func.ReturnOp(*outs, *t_outs))
    ad.add_func(fname, block, [v.type for v in outs + t_outs], f.location)


def _op(op: Operation, block: Block, value, tangent, B: IRBuilder) -> None:
    """A primal op and, by its forward rule, its result's tangent."""
    # every value it reads, its regions' reads from outside included
    clone = op.clone(value_mapper={v: value.get(v, v) for v in reads(op)})
    block.add_op(clone)
    for old, new in zip(op.results, clone.results):
        value[old] = new
    ts = [tangent.get(v) for v in op.operands]
    if all(t is None for t in ts) or not op.results:  # no results (msir.check): no tangent
        return
    if len(op.results) != 1:
        raise NotDifferentiableError(f"cannot differentiate '{op.name}'", source_loc(op))
    y = op.results[0]
    name, p = op_params(op)
    if name in NON_DIFFERENTIABLE or not is_float_type(y.type):
        return
    rule = JVP.get(name) or COLLECTIVE_JVP.get(name)
    if rule is None:
        raise NotDifferentiableError(f"'{op.name}' has no forward-mode rule", source_loc(op))
    tangent[y] = rule(B, p, [value[v] for v in op.operands], value[y], ts)


def _call(ad: ModuleAD, op: func.CallOp, block: Block, value, tangent) -> None:
    callee = op.callee.string_value()
    active = tuple(i for i, v in enumerate(op.arguments) if tangent.get(v) is not None)
    args = [value[v] for v in op.arguments]
    if not active:
        call = func.CallOp(callee, args, [r.type for r in op.results])
        call.location = op.location
        block.add_op(call)
        for old, new in zip(op.results, call.results):
            value[old] = new
        return
    name = jvp_function(ad, callee, active, op)
    types = [r.type for r in op.results]
    call = func.CallOp(name, args + [tangent[op.arguments[i]] for i in active], types + types)
    call.location = op.location
    block.add_op(call)
    n = len(op.results)
    for k, old in enumerate(op.results):
        value[old] = call.results[k]
        if is_float_type(old.type):
            tangent[old] = call.results[n + k]


def _zero_tangent(B: IRBuilder, v: SSAValue, at: Operation) -> SSAValue:
    """A zero tangent for `v`; a tape's is a tape of zeros of as many rows."""
    shape = M.shape_of(v.type)
    if not any(d < 0 for d in shape):
        return B.constant(0.0, M.dtype_of(v.type), shape)
    if isinstance(v.owner, M.TapeAllocOp):
        return B.emit(v.owner.clone(value_mapper={}))
    if not is_float_type(v.type):  # e.g. a tape of branch conditions a derivative returns
        return B.tape_zeros(v)
    raise NotDifferentiableError(f"forward mode through a dynamic-shaped value of type {v.type}", source_loc(at))


def _region_jvp(ad: ModuleAD, call: func.CallOp, block: Block, args: list[SSAValue], tangents: list,
                float_pos: list[int]) -> list[SSAValue]:
    """In `block`, call the region function (its jvp when a tangent is given);
    returns its results then the tangents of its results at `float_pos`."""
    types = [r.type for r in call.results]
    active = tuple(i for i, t in enumerate(tangents) if t is not None)
    B = IRBuilder(block, call.location)
    if not active:
        c = func.CallOp(call.callee.string_value(), args, types)
        block.add_op(c)
        zeros = [_zero_tangent(B, c.results[i], call) for i in float_pos]
        return list(c.results) + zeros
    name = jvp_function(ad, call.callee.string_value(), active, call)
    c = func.CallOp(name, args + [tangents[i] for i in active], types + types)
    c.location = call.location
    block.add_op(c)
    n = len(types)
    return list(c.results[:n]) + [c.results[n + i] for i in float_pos]


def _control(ad: ModuleAD, op: Operation, block: Block, value, tangent) -> None:
    """Forward mode through msir.if/for/while (regions already outlined)."""
    B = IRBuilder(block, op.location)
    res_types = [r.type for r in op.results]
    float_pos = [i for i, t in enumerate(res_types) if is_float_type(t)]
    t_types = [res_types[i] for i in float_pos]
    if isinstance(op, M.IfOp):
        regions = []
        for region in (op.then_region, op.else_region):
            call = region.block.first_op
            rb = Block()
            args = [value[v] for v in call.arguments]
            outs = _region_jvp(ad, call, rb, args, [tangent.get(v) for v in call.arguments], float_pos)
            rb.add_op(M.YieldOp(*outs))
            regions.append(Region(rb))
        new = M.IfOp(value[op.cond], res_types + t_types, regions[0], regions[1])
    else:
        counter = isinstance(op, M.ForOp)
        body = op.body.block
        carried_args = list(body.args[1:] if counter else body.args)
        inits = [value[v] for v in op.inits]
        t_inits = [tangent.get(op.inits[i]) or _zero_tangent(B, value[op.inits[i]], op) for i in float_pos]
        lead = [M.TensorType(M.i64, [])] if counter else []
        nb = Block(arg_types=lead + [v.type for v in inits] + [t.type for t in t_inits])
        new_carried = list(nb.args[len(lead) : len(lead) + len(inits)])
        b_value = {**value, **dict(zip(list(body.args), list(nb.args[: len(lead)]) + new_carried))}
        b_tangent = {**tangent, **dict(zip([carried_args[i] for i in float_pos], nb.args[len(lead) + len(inits) :]))}
        NB = IRBuilder(nb, op.location)
        term = body.last_op
        for o in body.ops:
            if o is term:
                break
            if not isinstance(o, func.CallOp):  # a kept tape-row op (see grad_control)
                _op(o, nb, b_value, b_tangent, NB)
                continue
            pos = [i for i, r in enumerate(o.results) if is_float_type(r.type)]
            outs = _region_jvp(ad, o, nb, [b_value[v] for v in o.arguments],
                               [b_tangent.get(v) for v in o.arguments], pos)
            b_value.update(zip(o.results, outs))
            b_tangent.update(zip([o.results[i] for i in pos], outs[len(o.results) :]))
        t_outs = [b_tangent.get(term.operands[i]) or _zero_tangent(NB, b_value[term.operands[i]], op)
                  for i in float_pos]
        nb.add_op(M.YieldOp(*[b_value[v] for v in term.operands], *t_outs))
        if counter:
            new = M.ForOp(value[op.lower], value[op.upper], value[op.step], inits + t_inits, Region(nb))
        else:
            cb = Block(arg_types=[v.type for v in inits + t_inits])  # the condition reads the primal ones
            cond_call = op.cond_region.block.first_op
            cm = dict(zip(op.cond_region.block.args, cb.args))
            c = func.CallOp(cond_call.callee.string_value(), [cm.get(v) or value[v] for v in cond_call.arguments],
                            [r.type for r in cond_call.results])
            cb.add_op(c)
            cb.add_op(M.ConditionOp(c.results[0]))
            new = M.WhileOp(inits + t_inits, Region(cb), Region(nb))
    new.location = op.location
    block.add_op(new)
    n = len(res_types)
    for i, r in enumerate(op.results):
        value[r] = new.results[i]
    for k, i in enumerate(float_pos):
        tangent[op.results[i]] = new.results[n + k]


def expand_jvp(ad: ModuleAD, op: M.JvpOp) -> None:
    """Replace one `msir.jvp` by a closure of a function returning results and tangents."""
    closure = op.fn.owner
    assert isinstance(closure, M.ClosureOp)
    fname = closure.callee.string_value()
    f = ad.funcs[fname]
    params = list(f.function_type.inputs.data)
    for a in op.argnums_list:
        if not is_float_type(params[a]):
            raise NotDifferentiableError(
                f"cannot differentiate with respect to argument {a} of type {params[a]}", source_loc(op)
            )
    has_aux = op.has_aux is not None
    n_captures = len(closure.captures)
    key = ("jvp-wrapper", fname, op.argnums_list, has_aux, n_captures)
    if key not in ad.wrappers:
        inner = jvp_function(ad, fname, op.argnums_list, op)
        ad.wrappers[key] = _closure_wrapper(ad, f, inner, op, has_aux, n_captures)
    new = M.ClosureOp(ad.wrappers[key], list(closure.captures), op.result.type)  # type: ignore[arg-type]
    new.location = op.location
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, op)
    op.result.replace_all_uses_with(new.result)
    block.erase_op(op)


def _closure_wrapper(ad: ModuleAD, f: func.FuncOp, inner: str, op: M.JvpOp, has_aux: bool, n_captures: int) -> str:
    """`(visible params..., tangents..., captures...)` in the order a closure binds
    them (captures last), calling `inner(params..., captures..., tangents...)`;
    with has_aux only the first result's tangent is returned."""
    if not has_aux and n_captures == 0:
        return inner
    params = list(f.function_type.inputs.data)
    outputs = list(f.function_type.outputs.data)
    n_visible = len(params) - n_captures
    tangent_types = [params[a] for a in op.argnums_list]
    block = Block(arg_types=params[:n_visible] + tangent_types + params[n_visible:])
    visible = list(block.args[:n_visible])
    tangents = list(block.args[n_visible : n_visible + len(tangent_types)])
    captures = list(block.args[n_visible + len(tangent_types) :])
    call = func.CallOp(inner, visible + captures + tangents, outputs + outputs)
    call.location = op.location
    block.add_op(call)
    n = len(outputs)
    rets = list(call.results[:n]) + ([call.results[n]] if has_aux else list(call.results[n:]))
    block.add_op(func.ReturnOp(*rets))
    name = ad.fresh_name(f"{f.sym_name.data}__jvp_closure")
    ad.add_func(name, block, [v.type for v in rets], op.location)
    return name


def _expand_any(ad: ModuleAD, op: Operation) -> None:
    if isinstance(op, M.JvpOp):
        expand_jvp(ad, op)
    else:
        expand(ad, op)  # type: ignore[arg-type]


def differentiate_all(module: ModuleOp) -> None:
    """Expand every differentiation op, forward and reverse, innermost first."""
    differentiate(module, REVERSE_OPS + (M.JvpOp,), _expand_any)


@dataclass(frozen=True)
class MsirJvp(ModulePass):
    """Forward-mode differentiation (see the module docstring)."""

    name = "msir-jvp"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        differentiate(op, (M.JvpOp,), _expand_any)
