"""The user's entry points: `auto_shard` (the search picks every strategy) and
`shard` (semi-auto: the user's strategies fixed, the rest propagated by the
same search), both returning a `Plan`.

Defaults (`../shared/parallel.md` §6): every float argument needs a gradient
and is a parameter; `argnums=()` plans inference only; `params` defaults to
`argnums`. `argnums`/`params` are tuples of argument positions (an int is
one position). The cost model defaults to `CostModel()`'s constants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from msir.errors import PlanningError
from msir.parallel.cost_model import CostModel, Setting
from msir.parallel.mesh_layout import (
    Layout,
    Mesh,
    Strategy,
    format_strategy,
    parse_strategy,
    split_of,
    strategy_from_slices,
)
from msir.parallel.op_graph import Graph, Node
from msir.parallel.plan import Plan
from msir.parallel.search import build_problem, solve
from msir.parallel.training import build_graph


def auto_shard(fn, mesh, example_args: Sequence[Any], cost_model: CostModel | None = None,
               argnums: int | Sequence[int] | None = None, params: int | Sequence[int] | None = None) -> Plan:
    """The plan of least cost for `fn(*example_args)` on `mesh` (a `Mesh`, a
    device count or a shape tuple) under `cost_model`."""
    return shard(fn, mesh, example_args=example_args, cost_model=cost_model, argnums=argnums, params=params)


def shard(fn, mesh, strategies: Mapping[str, Any] | None = None,
          input_layouts: Mapping[int, Layout | str] | None = None, example_args: Sequence[Any] | None = None,
          cost_model: CostModel | None = None, argnums: int | Sequence[int] | None = None,
          params: int | Sequence[int] | None = None) -> Plan:
    """The plan of `fn(*example_args)` on `mesh` with the ops named in
    `strategies` fixed (text `"m,-"` or MindSpore slice tuples `((2, 1), (1, 4))`)
    and the arguments in `input_layouts` (position -> `Layout` or its text)
    stored as given; every other op gets the strategy of least cost."""
    if example_args is None:
        raise PlanningError("msir.parallel.shard needs example_args= (the arguments to plan for)")
    try:
        mesh = Mesh.of(mesh)
    except (TypeError, ValueError) as e:
        raise PlanningError(f"mesh {mesh!r}: {e}; give a device count or a shape tuple like (2, 4)") from None
    model = cost_model if cost_model is not None else CostModel()
    if not isinstance(model, CostModel):
        raise PlanningError(f"cost_model must be a msir.parallel.CostModel, got {type(model).__name__}")
    return plan_graph(build_graph(fn, tuple(example_args)), mesh, strategies, input_layouts, example_args, model,
                      argnums, params)


def plan_graph(graph: Graph, mesh: Mesh, strategies: Mapping[str, Any] | None,
               input_layouts: Mapping[int, Layout | str] | None, example_args: Sequence[Any], model: CostModel,
               argnums: int | Sequence[int] | None, params: int | Sequence[int] | None,
               loss_layouts: Mapping[int, Layout | str] | None = None) -> Plan:
    """`shard`'s plan of a graph already built (`msir.parallel.context_plan` reads the graph first).
    `loss_layouts`: for a training step, layouts by the position of the loss's flattened argument, which
    reach the arrays inside the step's tuple arguments (a Cell's weights and inputs) that `input_layouts`,
    by the step's own positions, cannot."""
    model.for_mesh(mesh, graph.loc)
    if graph.step is not None:
        # a training step: its transformation says what needs a gradient; positions are the step's parameters
        argnums = graph.step.argnums if argnums is None else _loss_positions(graph, argnums, "argnums")
        params = None if params is None else _loss_positions(graph, params, "params")
        # errors name the step's position the user gave, not the loss's it maps to
        shown = {(_loss_positions(graph, p, "input_layouts")[0] if isinstance(p, int) else p): p
                 for p in (input_layouts or {})}
        input_layouts = {k: input_layouts[p] for k, p in shown.items()}
        input_layouts.update(loss_layouts or {})
    else:
        shown = {}
    grad, param = _gradient_leaves(graph, example_args, argnums, params)
    fixed_layouts = _input_layouts(graph, input_layouts or {}, mesh, shown)
    setting = Setting(graph, mesh, model, grad, param, frozenset(fixed_layouts))
    fixed = {graph.nodes.index(graph.node(name)): _strategy(graph.node(name), s, mesh)
             for name, s in (strategies or {}).items()}
    problem = build_problem(setting, fixed, fixed_layouts)
    return Plan(setting, problem, solve(problem, model.memory_limit))


def _loss_positions(graph: Graph, value: int | Sequence[int], what: str) -> tuple[int, ...]:
    """Positions of the step's parameters as the loss's parameters they are passed as."""
    positions = (value,) if isinstance(value, int) else tuple(value)
    out = []
    for p in positions:
        leaves = graph.step_arg_leaves[p] if isinstance(p, int) and 0 <= p < len(graph.step_arg_leaves) else []
        k = graph.step.loss_arg_of.get(leaves[0]) if len(leaves) == 1 else None
        if k is None:
            raise PlanningError(f"{what}: {p!r} is not the position of an array argument that '{graph.step.entry}' "
                                f"passes to the function it differentiates ('{graph.fn_name}')", graph.loc)
        out.append(k)
    return tuple(out)


def _positions(value: int | Sequence[int] | None, what: str, graph: Graph) -> tuple[int, ...] | None:
    if value is None:
        return None
    positions = (value,) if isinstance(value, int) else tuple(value)
    for p in positions:
        if not isinstance(p, int) or not 0 <= p < len(graph.arg_leaves):
            raise PlanningError(f"{what}: {p!r} is not an argument position of '{graph.fn_name}' "
                                f"({len(graph.arg_leaves)} arguments)", graph.loc)
    return positions


def _gradient_leaves(graph: Graph, example_args, argnums, params) -> tuple[set[int], set[int]]:
    """Leaf positions needing a gradient, and those that are parameters."""
    argnums_t = _positions(argnums, "argnums", graph)
    params_t = _positions(params, "params", graph)
    floats = [i for i, leaves in enumerate(graph.arg_leaves)
              if leaves and all(graph.values[graph.leaves[j]].is_float for j in leaves)]
    if argnums_t is None:
        argnums_t = tuple(floats)
    if params_t is None:
        params_t = argnums_t
    if not set(params_t) <= set(argnums_t):
        raise PlanningError(f"params={params_t} must be among argnums={argnums_t}: a parameter is an argument "
                            f"whose gradient the step computes", graph.loc)
    grad = {j for i in argnums_t for j in graph.arg_leaves[i]}
    return grad, {j for i in params_t for j in graph.arg_leaves[i]}


def _input_layouts(graph: Graph, layouts: Mapping[int, Layout | str], mesh: Mesh,
                   shown: Mapping[int, int]) -> dict[int, Layout]:
    """The checked layouts by leaf value; `shown`: the position the user wrote for a graph position (a training
    step's, where the graph's is the loss's), named in errors."""
    out = {}
    for k, given in layouts.items():
        pos = shown.get(k, k)
        if not isinstance(k, int) or not 0 <= k < len(graph.arg_leaves) or len(graph.arg_leaves[k]) != 1:
            raise PlanningError(f"input_layouts: {pos!r} is not the position of an array argument of "
                                f"'{graph.fn_name}'", graph.loc)
        name, loc = graph.arg_names[k], graph.arg_locs[k]
        try:
            if not isinstance(given, (Layout, str)):
                raise ValueError(f"expected a msir.parallel.Layout or its text 'dims=[[0],[]], partial=[]', "
                                 f"got {given!r}")
            layout = Layout.of(given)
            layout.check_mesh(mesh)
        except ValueError as e:
            raise PlanningError(f"input_layouts[{pos}] for argument '{name}': {e}", loc) from None
        if layout.partial:
            raise PlanningError(f"input_layouts[{pos}] for argument '{name}': an argument cannot be partial "
                                f"(layout {layout})", loc)
        value = graph.values[graph.leaves[graph.arg_leaves[k][0]]]
        if layout.rank != len(value.shape):
            raise PlanningError(f"input_layouts[{pos}]: layout {layout} has rank {layout.rank}, but argument "
                                f"'{name}' has rank {len(value.shape)} (shape {value.shape})", loc)
        for d, (n, axes) in enumerate(zip(value.shape, layout.dims)):
            split = 1
            for a in axes:
                split *= mesh.shape[a]
                if n % split:
                    raise PlanningError(f"input_layouts[{pos}]: {mesh.axis_label(a)} splits dimension {d} "
                                        f"(size {n}) of argument '{name}' {split} ways, which does not "
                                        f"divide it", loc)
        out[value.id] = layout
    return out


def _strategy(node: Node, given: Any, mesh: Mesh) -> Strategy:
    """The user's strategy for `node`, converted and checked against its loop sizes."""
    try:
        if isinstance(given, str):
            s = parse_strategy(given, mesh, node.loops)
        elif not _is_slices(given):
            raise ValueError(f"a strategy is text ('m,-') or MindSpore slice tuples ((2, 1), (1, 4)), got {given!r}")
        else:
            terms = [u.term for u in node.uses]
            contraction = [u.term for u in node.uses if u.contraction]
            if contraction and len(given) == len(contraction) < len(terms):
                terms = contraction  # MindSpore's MatMul/Dense strategies slice the product's operands only
            s = strategy_from_slices(given, terms, mesh)
    except ValueError as e:
        raise PlanningError(f"op '{node.name}' ({node.spec}): {e}", node.loc) from None
    for letter in dict.fromkeys(c for c in s if c):
        split = 1
        for a, c in enumerate(s):
            if c != letter:
                continue
            split *= mesh.shape[a]
            if node.sizes[letter] % split:
                raise PlanningError(
                    f"strategy {format_strategy(s)!r} of op '{node.name}' ({node.spec}): {mesh.axis_label(a)} "
                    f"splits loop {letter} ({_where(node, letter)}, size {node.sizes[letter]}) "
                    f"{split_of(s, letter, mesh)} ways, which does not divide it", node.loc)
    return s


def _is_slices(given: Any) -> bool:
    return isinstance(given, (tuple, list)) and all(
        isinstance(t, (tuple, list)) and all(isinstance(c, int) and not isinstance(c, bool) for c in t) for t in given)


def _where(node: Node, letter: str) -> str:
    """Which dimension of which value loop `letter` is, for error messages."""
    if letter in node.out_letters:
        return f"dimension {node.out_letters.index(letter)} of the output"
    for i, u in enumerate(node.uses):
        if letter in u.letters:
            return f"dimension {u.letters.index(letter)} of input {i}"
    return "a loop"
