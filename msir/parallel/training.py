"""Plans of training steps: a function that calls `msir.grad`,
`msir.value_and_grad` or `msir.vjp` inside (`../shared/parallel.md` §4, §6).

What is planned is the function the step differentiates (the loss): its
graph (`op_graph`), with the transformation's `argnums` as the arguments
needing a gradient, so the cost model prices its forward and backward
(`find_step` reads it from the traced step). How the plan runs:

1. the loss's ops get the plan's strategies, the step's arguments that it
   passes to the loss (directly or as the closure's captures) the layouts the
   plan stores them in (`sharded_step_module`);
2. the step is differentiated and flattened into one function, as the cpu
   target does it (`msir-grad-jvp`, `msir-symbol-dce`,
   `msir-forward-arguments`, `msir-inline`, `dce`): the forward ops keep
   their strategies; the backward ops (`<name>/grad`) and the rest of the step
   (an optimizer's update) carry none;
3. `msir-shard{propagate=true}` partitions it: the backward ops take the
   strategies their operands' layouts imply, which are the forward op's (they
   read its values and cotangents in its layouts), so the gradient of a
   weight a data-parallel op reads is partial and its use is preceded by the
   all_reduce that is data-parallel gradient synchronisation.

A step whose differentiated function stays a call after inlining (a loop,
a recursion, a second use) or that differentiates twice is refused with a
located `PlanningError`.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

from msir.errors import PlanningError

_FLATTEN = ("msir-grad-jvp", "msir-symbol-dce", "msir-forward-arguments", "msir-inline", "dce")


@dataclass
class Step:
    """A training step around the planned loss function."""

    entry: str  # the step function of the traced module
    loss: str  # the differentiated function (the graph's entry)
    argnums: tuple[int, ...]  # the loss's parameters the step differentiates
    loss_arg_of: dict[int, int] = field(default_factory=dict)  # step parameter -> loss parameter it is passed as
    arg_names: list[str] = field(default_factory=list)  # the step's own parameters, for errors
    arg_locs: list = field(default_factory=list)
    # the step's own ops (the optimizer's update, `update_flops`): FLOPs per element of loss parameter k, in
    # its layout; and the FLOPs of the others, computed whole on every device
    update_flops: dict[int, float] = field(default_factory=dict)
    fixed_flops: float = 0.0


def build_graph(fn, example_args: tuple):
    """The planner's graph of `fn(*example_args)`: of the function it differentiates if `fn` is a training
    step (its parameters named and located by the step's they are passed as), else of `fn`."""
    from xdsl.dialects import func

    from msir.frontend.driver import spec_of, trace
    from msir.frontend.parameter_writes import refuse_parameter_writes
    from msir.frontend.source import get_source
    from msir.parallel.op_graph import graph_of_traced, leaf_positions

    fn = getattr(fn, "__wrapped__", fn)
    traced = trace(fn, [spec_of(a) for a in example_args])
    refuse_parameter_writes(traced, "auto-parallel planning")
    src = get_source(fn)
    arg_leaves = leaf_positions(traced)
    # a bound method's (a Cell's step) first parameter is its object, not an argument
    params = list(src.node.args.args)[1 if isinstance(fn, types.MethodType) else 0:]
    step = find_step(traced.module, traced.entry, src.loc(src.node))
    if step is None:
        return graph_of_traced(traced, src, arg_leaves, names=[a.arg for a in params],
                               locs=[src.loc(a) for a in params])
    loss = next(op for op in traced.module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == step.loss)
    user_arg_of = {leaf: i for i, leaves in enumerate(arg_leaves) for leaf in leaves}
    step_param_of = {k: j for j, k in step.loss_arg_of.items()}
    names, locs = [], []
    for k, arg in enumerate(loss.body.block.args):
        j = step_param_of.get(k)
        user = params[user_arg_of[j]] if j is not None and j in user_arg_of else None
        if user is None:
            names.append(arg.name_hint or f"arg{k}")
        else:  # an array inside a tuple argument: the argument and its place among its arrays (inputs_0)
            leaves = arg_leaves[user_arg_of[j]]
            names.append(user.arg if len(leaves) == 1 else f"{user.arg}_{leaves.index(j)}")
        locs.append(src.loc(user) if user is not None else src.loc(src.node))
        arg.name_hint = names[-1]
    graph = graph_of_traced(traced, src, [[k] for k in range(len(names))], step.loss, names, locs)
    graph.step, graph.step_arg_leaves = step, arg_leaves
    step.arg_names, step.arg_locs = [a.arg for a in params], [src.loc(a) for a in params]
    return graph


def find_step(module, entry: str, loc) -> Step | None:
    """The step `entry` of traced `module` (inlined in place so that the loss is one body), None if `entry`
    differentiates nothing."""
    from xdsl.dialects import func
    from xdsl.ir import BlockArgument

    import msir.dialects.msir as M
    from msir.compiler import make_context
    from msir.passes.inline import MsirInline

    f = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == entry)
    transforms = [op for op in f.body.block.ops if isinstance(op, (M.GradOp, M.ValueAndGradOp, M.VjpOp))]
    if not transforms:
        return None
    from msir.parallel.op_graph import source_loc

    if len(transforms) > 1:
        raise PlanningError(f"'{entry}' differentiates {len(transforms)} functions; the planner plans a step "
                            f"that differentiates one", source_loc(transforms[1]) or loc)
    transform = transforms[0]
    closure = transform.fn.owner
    applies = [u.operation for u in transform.result.uses if isinstance(u.operation, M.ApplyOp)]
    if not isinstance(closure, M.ClosureOp) or len(applies) != 1:
        raise PlanningError(f"the planner plans a step that applies '{transform.name}' of a named function "
                            f"once", source_loc(transform) or loc)
    MsirInline().apply(make_context(), module)  # the loss's calls of helpers and wrappers become its body
    apply = applies[0]
    passed = list(apply.args) + list(closure.captures)
    step = Step(entry, closure.callee.root_reference.data, tuple(transform.argnums_list))
    for i, v in enumerate(passed):
        if isinstance(v, BlockArgument) and v.owner is f.body.block:
            step.loss_arg_of.setdefault(v.index, i)
    step.update_flops, step.fixed_flops = update_flops(f, step, transform, apply)
    return step


def update_flops(f, step: Step, transform, apply) -> tuple[dict[int, float], float]:
    """What step function `f` computes besides the loss's forward and backward, priced as §4 prices the ops
    of the whole step (1 FLOP per element an op computes, forward only: the step is not differentiated):
    typically the optimizer's update. An op computing on the value, gradient or optimizer state of loss
    parameter k (an operand of as many elements as the op computes, tracing back to k's argument or its
    gradient) runs in k's layout, as `msir-shard{propagate=true}` places it: it counts per element of k
    (`update_flops[k]`); any other op counts whole (`fixed`). Views and constants are free (§4 folds them
    into their consumers); an op with regions (a loop or a branch of the step) counts as one op."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import TensorType

    import msir.dialects.msir as M

    def elements(v) -> int:
        import math

        return math.prod(M.shape_of(v.type)) if isinstance(v.type, TensorType) else 1

    tag = {arg: step.loss_arg_of[j] for j, arg in enumerate(f.body.block.args) if j in step.loss_arg_of}
    n = len(step.argnums)
    grads = list(apply.results[:n]) if isinstance(transform, M.GradOp) else (
        list(apply.results[-n:]) if isinstance(transform, M.ValueAndGradOp) else [])
    pullback = apply.results[-1] if isinstance(transform, M.VjpOp) else None
    for g, k in zip(grads, step.argnums):
        tag[g] = k
    per_element: dict[int, float] = {}
    fixed = 0.0
    views = (M.BroadcastToOp, M.TransposeOp, M.ReshapeOp)
    skipped = (M.ClosureOp, M.GradOp, M.ValueAndGradOp, M.VjpOp, M.ConstantOp, func.ReturnOp)
    for op in f.body.block.ops:
        if isinstance(op, M.ApplyOp):
            if pullback is not None and op.operands[0] is pullback:
                for g, k in zip(op.results, step.argnums):
                    tag[g] = k
            continue
        if isinstance(op, skipped) or not op.results:
            continue
        operands = [v for v in op.operands if isinstance(v.type, TensorType)]
        size = max([elements(r) for r in op.results] + [elements(v) for v in operands])
        k = next((tag[v] for v in operands if v in tag and elements(v) == size), None)
        if k is not None:
            for r in op.results:
                tag[r] = k
        if isinstance(op, views):
            continue
        if k is None:
            fixed += size
        else:  # an operand of k's shape: one FLOP per element of k
            per_element[k] = per_element.get(k, 0.0) + 1.0
    return per_element, fixed


def sharded_step_module(graph, mesh, strategies: dict, layouts):
    """The traced step with the plan's strategies and layouts, differentiated, flattened and partitioned
    (module docstring): the module and the per-device step's name."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr

    import msir.dialects.msir_shard as S
    from msir.compiler import make_context
    from msir.parallel.emulated import MESH_NAME, annotated_module
    from msir.pipeline import pass_class

    step = graph.step
    module = annotated_module(graph, mesh, strategies)
    f = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == step.entry)
    attrs = []
    for j in range(len(f.body.block.args)):
        k = step.loss_arg_of.get(j)
        attrs.append(DictionaryAttr({} if k is None else
                                    {S.LAYOUT_ATTR: S.LayoutAttr(MESH_NAME, layouts[k].dims)}))
    f.arg_attrs = ArrayAttr(attrs)
    ctx = make_context()
    for stage in _FLATTEN:
        pass_class(stage)().apply(ctx, module)
    call = next((op for op in f.body.walk() if isinstance(op, func.CallOp)), None)
    if call is not None:
        from msir.parallel.op_graph import source_loc

        raise PlanningError(f"the step '{step.entry}' still calls '{call.callee.string_value()}' after "
                            f"differentiation and inlining (a loop, a recursion or a function used twice): the "
                            f"planner shards a step that is one body", source_loc(call) or graph.loc)
    pass_class("msir-shard")(propagate=True).apply(ctx, module)
    module.verify()
    return module, step.entry
