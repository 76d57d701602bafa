"""The plan `msir.jit` runs a function with under the auto-parallel context
(`msir.set_auto_parallel_context`, `msir.context.PARALLEL_MODES`).

`plan_for_context(fn, args)` plans `fn(*args)` on the context's mesh:

* `auto_parallel`: `auto_shard` with the context's cost model;
* `semi_auto_parallel`: `shard` with the strategies that the primitives
  `fn` calls were given (`msir.ops.MatMul().shard(((2, 1), (1, 4)))`,
  registered by their op name in `msir.context.primitive_strategies`), the
  other ops' chosen by the search;
* `data_parallel`: `shard` with every *data* argument split along its first
  dimension over all mesh axes (major to minor), every parameter replicated,
  and every op's strategy the one its inputs' layouts imply (propagated in
  program order, as msir-shard propagates): the batch loop split, the
  gradients of the parameters partial and all-reduced.
  For a training step the parameters are the arrays it differentiates and
  the data the other arrays it passes to its loss, also those inside tuple
  arguments (a Cell's compiled step takes its weights, optimizer state and
  inputs as tuples: `nn.TrainOneStepCell`, `Model.train`); for another
  function the data are the array arguments whose first dimension is the
  first argument's (the batch). A batch the mesh does not divide is a
  `PlanningError` naming the argument and its line.

`msir.jit` caches the plan per argument signature and context
(`msir.context.auto_parallel_key`), and the serial compile caches never see
a function planned here (the plan's per-device code has its own entries,
keyed by its IR).
"""

from __future__ import annotations

import numpy as np

def plan_for_context(fn, args: tuple):
    from msir.context import get_auto_parallel_context, primitive_strategies
    from msir.parallel.api import plan_graph
    from msir.parallel.cost_model import CostModel
    from msir.parallel.mesh_layout import Mesh
    from msir.parallel.training import build_graph

    mode = get_auto_parallel_context("parallel_mode")
    mesh = Mesh.of(get_auto_parallel_context("mesh"))
    model = get_auto_parallel_context("cost_model") or CostModel()
    graph = build_graph(fn, tuple(args))
    strategies, layouts = {}, {}
    if mode == "semi_auto_parallel":
        names = {node.name for node in graph.nodes}
        strategies = {name: s for name, s in primitive_strategies.items() if name in names}
    elif mode == "data_parallel":
        by_leaf = _data_layouts(graph, args, mesh)
        strategies = _propagated(graph, by_leaf, mesh)
        if graph.step is not None:
            return plan_graph(graph, mesh, strategies, {}, args, model, None, None, loss_layouts=by_leaf)
        position_of = {leaves[0]: i for i, leaves in enumerate(graph.arg_leaves) if len(leaves) == 1}
        layouts = {position_of[leaf]: text for leaf, text in by_leaf.items()}
    return plan_graph(graph, mesh, strategies, layouts, args, model, None, None)


def _propagated(graph, layouts: dict[int, str], mesh) -> dict[str, str]:
    """Every op's strategy as the layouts of its inputs (by their index in `graph.leaves`) imply it, in
    program order from the arguments' (msir-shard's propagation on the planner's graph): the data
    parallelism of the batch split."""
    from msir.parallel.mesh_layout import Layout, format_strategy, split_of

    known: dict[int, Layout] = {graph.leaves[leaf]: Layout.of(text) for leaf, text in layouts.items()}
    strategies = {}
    for node in graph.nodes:
        s: list[str | None] = [None] * mesh.rank
        for use in node.uses:
            layout = known.get(use.value)
            for d, axes in enumerate(layout.dims if layout is not None else ()):
                for a in axes:
                    c = use.letters[d]
                    if c is None or s[a] is not None:
                        continue
                    s[a] = c
                    if node.sizes[c] % split_of(s, c, mesh):
                        s[a] = None
        strategies[node.name] = format_strategy(tuple(s))
        known[node.out] = Layout(tuple(tuple(a for a, c in enumerate(s) if c is not None and c == letter)
                                       for letter in node.out_letters))
    return strategies


def _data_layouts(graph, args: tuple, mesh) -> dict[int, str]:
    """The batch-split layout text of each data argument, the replicated one of each parameter (module
    docstring), by the argument's index in `graph.leaves`: for a training step, every array the step
    passes to its loss, also those inside tuples (a Cell's weights and inputs)."""
    split = "[" + ",".join(str(a) for a in range(mesh.rank)) + "]"

    def layout(rank: int, data: bool) -> str:
        return "dims=[" + ",".join(([split] + ["[]"] * (rank - 1)) if data else ["[]"] * rank) + "], partial=[]"

    if graph.step is not None:
        out = {}
        for k in sorted(set(graph.step.loss_arg_of.values())):
            rank = len(graph.values[graph.leaves[k]].shape)
            out[k] = layout(rank, rank >= 1 and k not in graph.step.argnums)
        return out
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.ndim >= 1]
    batch = args[arrays[0]].shape[0] if arrays else None
    return {graph.arg_leaves[i][0]: layout(args[i].ndim, args[i].shape[0] == batch) for i in arrays}
