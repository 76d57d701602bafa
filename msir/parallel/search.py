"""The exact search: the plan of least §4 cost (`../shared/parallel.md`).

`build_problem(setting, fixed_strategies, fixed_layouts)` turns a planning
`Setting` into a pairwise cost graph: one variable per op (its valid
strategies) and per decision leaf (a leaf with several uses, or one whose
layout the user fixed: its layouts), unary costs (an op's compute, internal
and output communication, tied leaves, memory) and pairwise costs (the
reshards of each edge). `solve(problem, memory_limit)` returns its optimum:

* **enumeration** of every assignment when there are at most
  `ENUMERATION_LIMIT` of them;
* otherwise **exact variable elimination** on the pairwise graph;
* when a memory limit is given and the unconstrained optimum exceeds it
  (after checking that the least memory any plan needs fits): **Pareto
  elimination**, the same elimination with each table entry holding the
  Pareto front of (cost, memory) of its completions (memory is a sum of
  per-variable terms), points that cannot fit the limit dropped; when the
  fronts outgrow `PARETO_BUDGET` points, an **ILP** (`scipy.optimize.milp`,
  HiGHS; one-hot strategy variables, edge variables linearised as in Alpa,
  the memory a linear constraint). Both are exact; on a 24-layer MLP on a
  (2, 4) mesh HiGHS took minutes to prove what the fronts find in seconds,
  hence the order.

Exactness and ties. Enumeration and elimination minimise the same integer
key: each term's time in whole femtoseconds (rounded term by term, so that
sums are exact and deterministic) times a weight larger than any tie count,
plus, per op, the number of mesh axes its strategy does not spend on data
parallelism (unused, or on a loop of a parameter it reads; an op reading no
parameter, as every op of an inference plan, counts each split as data
parallel). Equal times thus go to the plan with more data parallelism. What
remains tied goes to the first plan in the stated enumeration order:
variables in program order (each decision leaf just before its first
reader), plans compared lexicographically by option index; an op's options
are enumerated per mesh axis as `-` then its loop letters (axis 0 most
significant), a leaf's as unsplit then dimension 0, 1, ... Variable
elimination eliminates in reverse program order and back-substitutes with the
first minimising option, which yields exactly that plan. Under a binding
memory limit, Pareto elimination takes the least key and, among equal keys,
the least memory; HiGHS minimises the time (scaled to the largest term) to a
zero relative gap, its ties its own choice.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from msir.errors import PlanningError, SourceLoc
from msir.parallel.cost_model import Setting
from msir.parallel.mesh_layout import Layout, Mesh, Strategy, enumerate_strategies

ENUMERATION_LIMIT = 4096
"""Problems with at most this many assignments are solved by enumeration."""

_FEMTOSECONDS = 1e15
_TABLE_LIMIT = 1 << 24
"""The most entries an intermediate table of variable elimination may hold."""


@dataclass
class Variable:
    name: str
    kind: str  # "op" | "leaf"
    index: int  # node index, or value id of the leaf
    options: list  # strategies (op) or layouts (leaf)


@dataclass
class Problem:
    """A pairwise cost graph: unary[v][option] and pairwise[(u, v)][option_u, option_v] (u < v) in seconds."""

    variables: list[Variable]
    unary: list[np.ndarray]
    memory: list[np.ndarray]
    tie: list[np.ndarray]
    pairwise: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    base_memory: float = 0.0  # leaves no op reads: stored whole on every device
    loc: SourceLoc | None = None  # the planned function's definition, for errors

    def assignments(self) -> int:
        return math.prod(len(v.options) for v in self.variables)


def enumerate_layouts(shape: tuple[int, ...], mesh: Mesh) -> list[Layout]:
    """Every layout of a value of `shape`: each mesh axis splits one dimension or
    none, in the stated order (per axis: none, then dimension 0, 1, ...; axis 0
    the most significant); the product on a dimension must divide it."""
    choices = [(None,) if n == 1 else (None, *range(len(shape))) for n in mesh.shape]
    out = []
    for pick in itertools.product(*choices):
        dims = tuple(tuple(a for a, d in enumerate(pick) if d == i) for i in range(len(shape)))
        if all(n % math.prod(mesh.shape[a] for a in d) == 0 for n, d in zip(shape, dims)):
            out.append(Layout(dims))
    return out


def build_problem(setting: Setting, fixed: dict[int, Strategy], fixed_layouts: dict[int, Layout]) -> Problem:
    """The pairwise cost graph of `setting`; `fixed` maps node indices to the
    user's strategies, `fixed_layouts` leaf value ids to the user's layouts."""
    g, mesh = setting.graph, setting.mesh
    variables: list[Variable] = []
    var_of_node: dict[int, int] = {}
    var_of_leaf: dict[int, int] = {}
    for i, node in enumerate(g.nodes):
        for use in node.uses:
            v = g.values[use.value]
            if v.leaf is not None and setting.is_decision_leaf(use.value) and use.value not in var_of_leaf:
                options = [fixed_layouts[v.id]] if v.id in fixed_layouts else enumerate_layouts(v.shape, mesh)
                var_of_leaf[v.id] = len(variables)
                variables.append(Variable(v.name, "leaf", v.id, options))
        options = [fixed[i]] if i in fixed else enumerate_strategies(node.loops, node.sizes, mesh)
        var_of_node[i] = len(variables)
        variables.append(Variable(node.name, "op", i, options))
    unary, memory, tie = [], [], []
    for var in variables:
        if var.kind == "op":
            terms = [setting.node_terms(var.index, s) for s in var.options]
            ties = [mesh.rank - setting.data_parallel_axes(var.index, s) for s in var.options]
        else:
            terms = [setting.leaf_terms(var.index, layout) for layout in var.options]
            ties = [0] * len(var.options)
        unary.append(np.array([t.time for t in terms]))
        memory.append(np.array([t.memory for t in terms]))
        tie.append(np.array(ties, dtype=np.int64))
    problem = Problem(variables, unary, memory, tie, loc=g.loc)
    for leaf in g.leaves:
        if not setting.uses[leaf]:
            v = g.values[leaf]
            problem.base_memory += setting.memory_factor(leaf) * v.itemsize * math.prod(v.shape)
    for i, node in enumerate(g.nodes):
        vi = var_of_node[i]
        consumer = variables[vi].options
        for k, use in enumerate(node.uses):
            v = g.values[use.value]
            if v.producer is not None:
                vp = var_of_node[v.producer]
                producer = g.nodes[v.producer]
                sources = [setting.out_layout(producer, s) for s in variables[vp].options]
            elif use.value in var_of_leaf:
                vp = var_of_leaf[use.value]
                sources = variables[vp].options
            else:
                continue
            table = setting.edge_table(i, k, sources, consumer)
            key = (vp, vi)
            problem.pairwise[key] = problem.pairwise[key] + table if key in problem.pairwise else table
    return problem


# ---------------------------------------------------------------------------
# Solving
# ---------------------------------------------------------------------------


@dataclass
class Solution:
    choice: list[int]  # option index per variable
    method: str  # "enumeration" | "elimination" | "milp"


def solve(problem: Problem, memory_limit: float | None = None, method: str | None = None) -> Solution:
    """The optimum of `problem` (see the module docstring); `method` forces
    "enumeration" or "elimination" for the unconstrained search, and "milp"
    the ILP when the memory limit binds (tests compare them)."""
    if method is None:
        method = "enumeration" if problem.assignments() <= ENUMERATION_LIMIT else "elimination"
    unary, pairwise = _integer_keys(problem)
    choice = (_enumerate if method == "enumeration" else _eliminate)(problem, unary, pairwise)
    solution = Solution(choice, method)
    if memory_limit is not None and plan_memory(problem, choice) > memory_limit:
        least = problem.base_memory + sum(float(m.min()) for m in problem.memory)
        if least > memory_limit:
            raise PlanningError(f"no plan fits memory_limit={memory_limit:.6g} bytes per device: the smallest "
                                f"memory any plan needs is {least:.6g} bytes per device", problem.loc)
        if method != "milp":
            choice = _pareto_eliminate(problem, unary, pairwise, memory_limit)
            if choice is not None:
                return Solution(choice, "pareto elimination")
        solution = Solution(_milp(problem, memory_limit), "milp")
    return solution


def plan_memory(problem: Problem, choice: list[int]) -> float:
    return problem.base_memory + sum(float(m[c]) for m, c in zip(problem.memory, choice))


def _integer_keys(problem: Problem):
    """Unary and pairwise tables as exact integer keys: femtoseconds x weight + tie units."""
    weight = sum(int(t.max()) for t in problem.tie) + 1
    unary = [np.rint(u * _FEMTOSECONDS) for u in problem.unary]
    pairwise = {k: np.rint(p * _FEMTOSECONDS) for k, p in problem.pairwise.items()}
    bound = (sum(float(u.max()) for u in unary) + sum(float(p.max()) for p in pairwise.values()) + 1) * weight
    # beyond int64, Python ints (object arrays): exact at any size, slower
    integer = (lambda a: a.astype(np.int64)) if bound < 2.0**62 else np.frompyfunc(int, 1, 1)
    unary = [integer(u) * weight + integer(t) for u, t in zip(unary, problem.tie)]
    pairwise = {k: integer(p) * weight for k, p in pairwise.items()}
    return unary, pairwise


def _enumerate(problem: Problem, unary, pairwise) -> list[int]:
    best, best_key = None, None
    sizes = [range(len(v.options)) for v in problem.variables]
    edges = list(pairwise.items())
    for choice in itertools.product(*sizes):
        key = sum(u[c] for u, c in zip(unary, choice))
        for (a, b), table in edges:
            key += table[choice[a], choice[b]]
        if best_key is None or key < best_key:
            best, best_key = list(choice), key
    assert best is not None
    return best


def _eliminate(problem: Problem, unary, pairwise) -> list[int]:
    """Variable elimination in reverse program order, then back-substitution
    with the first minimising option."""
    factors: list[tuple[tuple[int, ...], np.ndarray]] = [((v,), u) for v, u in enumerate(unary)]
    factors += [((a, b), t) for (a, b), t in pairwise.items()]
    eliminated: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    for v in reversed(range(len(problem.variables))):
        mine = [f for f in factors if v in f[0]]
        factors = [f for f in factors if v not in f[0]]
        scope = tuple(sorted({u for vars_, _ in mine for u in vars_ if u != v}))
        shape = [len(problem.variables[u].options) for u in (*scope, v)]
        if math.prod(shape) > _TABLE_LIMIT:
            raise PlanningError(f"the cost graph is too densely connected for exact elimination at "
                                f"'{problem.variables[v].name}' ({math.prod(shape)} table entries)", problem.loc)
        total = None
        for vars_, table in mine:
            aligned = _align(table, vars_, (*scope, v))
            total = aligned if total is None else total + aligned
        total = np.broadcast_to(total, shape)
        best = np.argmin(total, axis=-1)
        factors.append((scope, np.take_along_axis(total, best[..., None], axis=-1)[..., 0]))
        eliminated.append((v, scope, best))
    choice = [0] * len(problem.variables)
    for v, scope, best in reversed(eliminated):
        choice[v] = int(best[tuple(choice[u] for u in scope)])
    return choice


PARETO_BUDGET = 2_000_000
"""The most (time, memory) points Pareto elimination may form before the ILP takes over."""


def _pareto_eliminate(problem: Problem, unary, pairwise, limit: float) -> list[int] | None:
    """Exact variable elimination under a memory limit: each table entry holds
    the Pareto front of (key, memory) of the eliminated variables' best
    completions (memory is a sum of unary terms), points that cannot fit the
    limit whatever the remaining variables choose are dropped, and the plan is
    the front's least key. None when the fronts outgrow `PARETO_BUDGET`."""
    n = len(problem.variables)
    least = [float(m.min()) for m in problem.memory]
    floor = [problem.base_memory + sum(least[:v]) for v in range(n + 1)]  # memory still to come below v
    work = [0]
    # a point: (key, memory, trace); trace = (variable, option, child traces)
    messages: list[tuple[tuple[int, ...], dict]] = []
    for v in reversed(range(n)):
        mine = [m for m in messages if v in m[0]]
        messages = [m for m in messages if v not in m[0]]
        edges = [(a, t) for (a, b), t in pairwise.items() if b == v]
        scope = tuple(sorted({a for a, _ in edges} | {u for sc, _ in mine for u in sc if u != v}))
        sizes = [len(problem.variables[u].options) for u in scope]
        table: dict = {}
        for assignment in itertools.product(*(range(k) for k in sizes)):
            at = dict(zip(scope, assignment))
            points = []
            for o in range(len(problem.variables[v].options)):
                at[v] = o
                key = int(unary[v][o]) + sum(int(t[at[a], o]) for a, t in edges)
                mem = float(problem.memory[v][o])
                fronts = [m.get(tuple(at[u] for u in sc), []) for sc, m in mine]
                for k2, m2, traces in _minkowski(fronts, floor[v] + mem, limit, work):
                    points.append((key + k2, mem + m2, (v, o, traces)))
            if work[0] > PARETO_BUDGET:
                return None
            front = _front(points)
            if front:
                table[assignment] = front
        messages.append((scope, table))
    roots = [m.get((), []) for _, m in messages]
    best = min(_minkowski(roots, floor[0], limit, work), key=lambda p: (p[0], p[1]), default=None)
    if best is None:
        return None
    choice = [0] * n
    pending = list(best[2])
    while pending:
        v, o, traces = pending.pop()
        choice[v] = o
        pending.extend(traces)
    return choice


def _minkowski(fronts: list[list], base: float, limit: float, work: list[int]) -> list:
    """Every sum of one point per front (as (key, memory, traces)) that can still fit
    `limit` on top of `base` bytes, reduced to its Pareto front."""
    out = [(0, 0.0, ())]
    for front in fronts:
        work[0] += len(out) * len(front)
        out = _front([(k1 + k2, m1 + m2, t1 + (t2,)) for k1, m1, t1 in out for k2, m2, t2 in front
                      if base + m1 + m2 <= limit])
    return [p for p in out if base + p[1] <= limit]


def _front(points: list) -> list:
    """The points no other beats on both key and memory (least key first)."""
    out = []
    best_mem = math.inf
    for p in sorted(points, key=lambda p: (p[0], p[1])):
        if p[1] < best_mem:
            out.append(p)
            best_mem = p[1]
    return out


def _align(table: np.ndarray, vars_: tuple[int, ...], scope: tuple[int, ...]) -> np.ndarray:
    """`table` over `vars_` as an array broadcastable over `scope`."""
    order = sorted(range(len(vars_)), key=lambda i: scope.index(vars_[i]))
    t = np.transpose(table, order)
    shape = [1] * len(scope)
    for i in order:
        shape[scope.index(vars_[i])] = table.shape[i]
    return t.reshape(shape)


def _milp(problem: Problem, memory_limit: float) -> list[int]:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_array

    offsets, n = [], 0
    for var in problem.variables:
        offsets.append(n)
        n += len(var.options)
    edge_offsets, m = {}, n
    for key, table in problem.pairwise.items():
        edge_offsets[key] = m
        m += table.size
    scale = max([float(u.max()) for u in problem.unary] + [float(p.max()) for p in problem.pairwise.values()] + [1e-30])
    cost = np.zeros(m)
    for v, u in enumerate(problem.unary):
        cost[offsets[v]: offsets[v] + u.size] = u / scale
    for key, table in problem.pairwise.items():
        cost[edge_offsets[key]: edge_offsets[key] + table.size] = table.ravel() / scale
    rows = len(problem.variables) + 1 + sum(t.shape[0] + t.shape[1] for t in problem.pairwise.values())
    A = lil_array((rows, m))
    lo, hi = np.zeros(rows), np.zeros(rows)
    r = 0
    for v, var in enumerate(problem.variables):  # one option per variable
        A[r, offsets[v]: offsets[v] + len(var.options)] = 1
        lo[r] = hi[r] = 1
        r += 1
    for v, mem in enumerate(problem.memory):
        A[r, offsets[v]: offsets[v] + mem.size] = mem
    lo[r], hi[r] = -np.inf, memory_limit - problem.base_memory
    r += 1
    for (a, b), table in problem.pairwise.items():  # sum_t y[s, t] = x_a[s]; sum_s y[s, t] = x_b[t]
        ka, kb = table.shape
        base = edge_offsets[(a, b)]
        for s in range(ka):
            A[r, base + s * kb: base + (s + 1) * kb] = 1
            A[r, offsets[a] + s] = -1
            r += 1
        for t in range(kb):
            A[r, [base + s * kb + t for s in range(ka)]] = 1
            A[r, offsets[b] + t] = -1
            r += 1
    integrality = np.zeros(m)
    integrality[:n] = 1
    result = milp(cost, constraints=LinearConstraint(A.tocsr(), lo, hi), integrality=integrality,
                  bounds=Bounds(0, 1), options={"mip_rel_gap": 0})
    if result.x is None:
        raise PlanningError(f"the ILP found no plan within memory_limit={memory_limit:.6g} bytes: {result.message}",
                            problem.loc)
    x = result.x
    return [int(np.argmax(x[offsets[v]: offsets[v] + len(var.options)])) for v, var in enumerate(problem.variables)]
