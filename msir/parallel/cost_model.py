"""The cost model of `../shared/parallel.md` §4: the time of one training step
of a planned graph, and its memory per device.

`CostModel(alpha=[...], bandwidth=[...], flops=..., memory_limit=None)` holds
the constants: per mesh axis a, `alpha[a]` seconds per collective and
`bandwidth[a]` bytes/s; `flops` FLOP/s per device; `memory_limit` bytes per
device (None: no limit). A `Setting` is one planning problem: a graph, a
mesh, the constants, which arguments need a gradient and which of those are
parameters. It prices every term of the §4 total:

* `node_terms(i, s)`: op i under strategy s: its compute (an einsum 2 x its
  local loop product forward and again per input needing a gradient; an
  elementwise op 1 FLOP per local element forward and, per input needing a
  gradient, 1 (add, relu, ...) or 2 (mul, div, pow) backward; softmax 5 / 4,
  layer_norm 8 / 10, a reduction 1 / 1 per local element), softmax's and
  layer_norm's all-reduces of row statistics when a mesh axis splits the
  normalised loop, the all-reduce of a graph output's partial axes, its
  local output bytes, and, for each leaf it reads that has this one use (a
  tied leaf), the leaf's bytes (4x for a parameter: value, gradient, two
  Adam moments), its gradient's reshard to the leaf's layout (the
  data-parallel gradient all-reduce) and, in a training step, the compute of
  the step's own ops on it in that layout (its optimizer update, 1 FLOP per
  local element per op: `update_compute`; what no strategy changes is
  `fixed_compute`). The update's outputs add no memory: they replace the
  parameter's value (the compiled step donates it);
* `edge_terms(i, k, s, t)`: use k of op i under strategy t, reading the output
  of its producer under s: the forward reshard and, if the value needs a
  gradient, the backward reshard of the cotangent;
* `leaf_edge_terms(i, k, layout, t)` and `leaf_terms(v, layout)`: the same for
  a leaf with several uses (a decision leaf) stored in `layout` (its memory
  and update);
* `edge_table(i, k, sources, strategies)`: the times of an edge for every
  pair of options at once (what the search prices its cost graph with).

The total over all terms is the plan's cost; nothing overlaps.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from msir.errors import PlanningError, SourceLoc
from msir.parallel.mesh_layout import Layout, Mesh, Strategy, axes_on, split_of
from msir.parallel.op_graph import Graph, Node, Use
from msir.parallel.reshard import Collective, reshard

_FLOPS = {  # (forward, backward) FLOPs per local element
    "softmax": (5, 4),
    "layer_norm": (8, 10),
}
_FLOAT32 = 4


@dataclass(frozen=True)
class CostModel:
    """The constants of the cost model (§4); `alpha` and `bandwidth` per mesh
    axis (a single number applies to every axis)."""

    alpha: Sequence[float] | float = 5e-6
    bandwidth: Sequence[float] | float = 25e9
    flops: float = 1e12
    memory_limit: float | None = None

    def for_mesh(self, mesh: Mesh, loc: SourceLoc | None = None) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(alpha, bandwidth) with one entry per axis of `mesh`, every constant
        checked (errors at `loc`)."""
        out = []
        for what, v in (("alpha", self.alpha), ("bandwidth", self.bandwidth)):
            try:
                values = (float(v),) * mesh.rank if isinstance(v, numbers.Real) else tuple(float(x) for x in v)
            except (TypeError, ValueError):
                raise PlanningError(f"CostModel.{what} must be a number or one number per mesh axis, got {v!r}",
                                    loc) from None
            if len(values) != mesh.rank:
                raise PlanningError(f"CostModel.{what} has {len(values)} entries; the mesh {mesh.shape} has "
                                    f"{mesh.rank} axes", loc)
            if any(not x >= 0 for x in values) or (what == "bandwidth" and any(x == 0 for x in values)):
                raise PlanningError(f"CostModel.{what} must be positive, got {values}", loc)
            out.append(values)
        for what, v, optional in (("flops", self.flops, False), ("memory_limit", self.memory_limit, True)):
            if optional and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not v > 0:
                raise PlanningError(f"CostModel.{what} must be a positive number{' or None' if optional else ''}, "
                                    f"got {v!r}", loc)
        return out[0], out[1]


@dataclass
class Terms:
    """Seconds of compute and of communication forward/backward, bytes of memory,
    and the collectives behind the communication (for the report)."""

    compute: float = 0.0
    comm_fwd: float = 0.0
    comm_bwd: float = 0.0
    memory: float = 0.0
    fwd: list[Collective] = field(default_factory=list)
    bwd: list[Collective] = field(default_factory=list)

    @property
    def time(self) -> float:
        return self.compute + self.comm_fwd + self.comm_bwd

    def add(self, other: Terms) -> Terms:
        self.compute += other.compute
        self.comm_fwd += other.comm_fwd
        self.comm_bwd += other.comm_bwd
        self.memory += other.memory
        self.fwd += other.fwd
        self.bwd += other.bwd
        return self


class Setting:
    """One planning problem: prices the terms of §4 for a graph on a mesh."""

    def __init__(self, graph: Graph, mesh: Mesh, model: CostModel, grad_leaves: set[int], param_leaves: set[int],
                 own_layout: frozenset[int] = frozenset()):
        """`grad_leaves`, `param_leaves`: positions among the flattened arguments;
        `own_layout`: value ids of leaves with a layout of their own even with one
        use (the user fixed it)."""
        self.graph, self.mesh, self.model = graph, mesh, model
        self.own_layout = own_layout
        self.alpha, self.bandwidth = model.for_mesh(mesh, graph.loc)
        self.grad_leaves, self.param_leaves = grad_leaves, param_leaves
        self.needs_grad = self._needs_grad()
        self.uses = {v: graph.uses_of(v) for v in graph.leaves}
        self.outputs = set(graph.outputs)
        # a training step's own ops (its optimizer's update): FLOPs per element of a leaf, in the leaf's layout
        step = graph.step
        self.update_flops = {graph.leaves[k]: c for k, c in step.update_flops.items()} if step is not None else {}
        fixed = step.fixed_flops if step is not None else 0.0
        fixed += sum(c * math.prod(graph.values[v].shape) for v, c in self.update_flops.items() if not self.uses[v])
        self.fixed_compute = fixed / model.flops
        """Seconds of the step's ops that no strategy changes: those not on a parameter, and the update of a
        parameter the loss does not read (stored whole)."""

    def _needs_grad(self) -> list[bool]:
        g = self.graph
        need = [False] * len(g.values)
        for pos in self.grad_leaves:
            v = g.values[g.leaves[pos]]
            need[v.id] = v.is_float
        for node in g.nodes:  # program order: producers first
            need[node.out] = g.values[node.out].is_float and any(need[u.value] for u in node.uses)
        return need

    def is_decision_leaf(self, value: int) -> bool:
        return len(self.uses[value]) != 1 or value in self.own_layout

    # -- layouts -------------------------------------------------------------

    def in_layout(self, use: Use, s: Strategy) -> Layout:
        return Layout(tuple(axes_on(s, c) for c in use.letters))

    def out_layout(self, node: Node, s: Strategy) -> Layout:
        reduction = node.reduction_letters
        return Layout(tuple(axes_on(s, c) for c in node.out_letters),
                      tuple(a for a, c in enumerate(s) if c is not None and c in reduction))

    def ct_layout(self, use: Use, s: Strategy) -> Layout:
        return Layout(tuple(axes_on(s, c) for c in use.letters),
                      tuple(a for a, c in enumerate(s) if c is not None and c not in use.letters))

    # -- pricing -------------------------------------------------------------

    def _reshard(self, cur: Layout, dst: Layout, value: int) -> list[Collective]:
        v = self.graph.values[value]
        return list(reshard(cur, dst, v.shape, v.itemsize, self.mesh))

    def _time(self, steps: Sequence[Collective]) -> float:
        return sum(c.time(self.mesh, self.alpha, self.bandwidth) for c in steps)

    def local_elements(self, node: Node, s: Strategy, letters: str) -> int:
        return math.prod(node.sizes[c] // split_of(s, c, self.mesh) for c in letters)

    def local_bytes(self, value: int, layout: Layout) -> int:
        v = self.graph.values[value]
        return v.itemsize * math.prod(layout.local_shape(v.shape, self.mesh))

    def memory_factor(self, leaf_value: int) -> int:
        return 4 if self.graph.values[leaf_value].leaf in self.param_leaves else 1

    def node_terms(self, i: int, s: Strategy) -> Terms:
        node = self.graph.nodes[i]
        t = Terms()
        t.compute = self._flops(node, s) / self.model.flops
        self._statistics(node, s, t)
        out = self.out_layout(node, s)
        if node.out in self.outputs and out.partial:
            t.fwd += self._reshard(out, out.resolved(), node.out)
        t.memory += self.local_bytes(node.out, out)
        for use in node.uses:
            if self.graph.values[use.value].leaf is not None and not self.is_decision_leaf(use.value):
                layout = self.in_layout(use, s)
                t.memory += self.memory_factor(use.value) * self.local_bytes(use.value, layout)
                t.compute += self.update_compute(use.value, layout)
                if self.needs_grad[use.value]:
                    t.bwd += self._reshard(self.ct_layout(use, s), layout, use.value)
        t.comm_fwd += self._time(t.fwd)
        t.comm_bwd += self._time(t.bwd)
        return t

    def _flops(self, node: Node, s: Strategy) -> float:
        loops = self.local_elements(node, s, node.loops)
        out = self.local_elements(node, s, node.output_letters)
        grads = [self.needs_grad[u.value] for u in node.uses]
        out_needs_grad = self.needs_grad[node.out]
        if node.kind == "einsum":
            contraction_grads = sum(g for g, u in zip(grads, node.uses) if u.contraction)
            flops = 2 * loops * (1 + contraction_grads)
            if node.has_elementwise:
                other_grads = sum(g for g, u in zip(grads, node.uses) if not u.contraction)
                flops += out * (1 + node.backward_flops * (other_grads + (contraction_grads > 0)))
            return flops
        if node.kind in _FLOPS:
            fwd, bwd = _FLOPS[node.kind]
            return out * (fwd + (bwd if out_needs_grad else 0))
        if node.kind == "reduce":
            return loops * (1 + sum(grads))
        return out * (1 + node.backward_flops * sum(grads))

    def _statistics(self, node: Node, s: Strategy, t: Terms) -> None:
        """softmax's / layer_norm's all-reduces of row statistics over axes splitting the normalised loop."""
        if not node.normalised:
            return
        rows = self.local_elements(node, s, node.output_letters) // self.local_elements(node, s, node.normalised)
        per_row = 2 if node.kind == "layer_norm" else 1
        size = _FLOAT32 * per_row * rows
        fwd_count = 2 if node.kind == "softmax" else 1
        for a, c in enumerate(s):
            if c is not None and c in node.normalised:
                t.fwd += [Collective("all_reduce", a, None, None, size)] * fwd_count
                if self.needs_grad[node.out]:
                    t.bwd.append(Collective("all_reduce", a, None, None, size))

    def edge_terms(self, i: int, k: int, s: Strategy, t: Strategy) -> Terms:
        """Use k of node i (strategy t) of the output of its producer (strategy s)."""
        node = self.graph.nodes[i]
        use = node.uses[k]
        producer = self.graph.nodes[self.graph.values[use.value].producer]
        out = self.out_layout(producer, s)
        terms = Terms(fwd=self._reshard(out, self.in_layout(use, t), use.value))
        if self.needs_grad[use.value]:
            terms.bwd = self._reshard(self.ct_layout(use, t), out.resolved(), use.value)
        terms.comm_fwd, terms.comm_bwd = self._time(terms.fwd), self._time(terms.bwd)
        return terms

    def leaf_edge_terms(self, i: int, k: int, layout: Layout, t: Strategy) -> Terms:
        """Use k of node i (strategy t) of a decision leaf stored in `layout`."""
        use = self.graph.nodes[i].uses[k]
        terms = Terms(fwd=self._reshard(layout, self.in_layout(use, t), use.value))
        if self.needs_grad[use.value]:
            terms.bwd = self._reshard(self.ct_layout(use, t), layout, use.value)
        terms.comm_fwd, terms.comm_bwd = self._time(terms.fwd), self._time(terms.bwd)
        return terms

    def edge_table(self, i: int, k: int, sources: Sequence[Layout], strategies: Sequence[Strategy]) -> np.ndarray:
        """Seconds of use k of node i under each of `strategies` (columns) reading its
        value stored in each of `sources` (rows: the producer's output layouts, or a
        decision leaf's layouts): `edge_terms` / `leaf_edge_terms` for every pair,
        each distinct reshard priced once."""
        use = self.graph.nodes[i].uses[k]
        src, src_index = _distinct(sources)
        dst, dst_index = _distinct([self.in_layout(use, t) for t in strategies])
        fwd = np.array([[self._time(self._reshard(a, b, use.value)) for b in dst] for a in src])
        table = fwd[np.ix_(src_index, dst_index)]
        if self.needs_grad[use.value]:
            ct, ct_index = _distinct([self.ct_layout(use, t) for t in strategies])
            back, back_index = _distinct([layout.resolved() for layout in sources])
            bwd = np.array([[self._time(self._reshard(c, b, use.value)) for c in ct] for b in back])
            table = table + bwd[np.ix_(back_index, ct_index)]
        return table

    def leaf_terms(self, value: int, layout: Layout) -> Terms:
        """The memory of a decision leaf stored in `layout`, and its update's compute."""
        return Terms(compute=self.update_compute(value, layout),
                     memory=self.memory_factor(value) * self.local_bytes(value, layout))

    def update_compute(self, value: int, layout: Layout) -> float:
        """Seconds of a training step's own ops on leaf `value` stored in `layout` (its update)."""
        flops = self.update_flops.get(value)
        if not flops:
            return 0.0
        return flops * math.prod(layout.local_shape(self.graph.values[value].shape, self.mesh)) / self.model.flops

    def data_parallel_axes(self, i: int, s: Strategy) -> int:
        """How many mesh axes strategy s of node i spends on loops no parameter it reads
        has: the data parallelism ties are broken towards."""
        node = self.graph.nodes[i]
        param_letters = {c for u in node.uses if self.graph.values[u.value].leaf in self.param_leaves
                         for c in u.letters if c}
        return sum(1 for c in s if c is not None and c not in param_letters)


def _distinct(layouts: Sequence[Layout]) -> tuple[list[Layout], np.ndarray]:
    """The distinct layouts, and the index of each given one among them."""
    index: dict[Layout, int] = {}
    positions = [index.setdefault(layout, len(index)) for layout in layouts]
    return list(index), np.array(positions, dtype=np.intp)
