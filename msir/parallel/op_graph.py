"""The planner's graph: one node per op call of a function, each with its einsum
loop space (`../shared/parallel.md` §2, §4).

Built from the msir IR the frontend produces for `fn(*example_args)`
(`build_graph`), with these rules:

* **One node per op call.** The ops of one call share a key: their
  `msir.name` (`msir.ops`' `name=`) or, unnamed, their source location
  (`file.py:12:9`). A node is a maximal run of consecutive ops with one key
  (constants do not break a run) holding at most one contraction (a second
  matmul or einsum, with the views feeding it, starts the next call); a key
  met again (a layer applied twice) names a second node `key#1`, then
  `key#2`, ...
  Constants (`msir.constant`, `msir.iota`) are not nodes: every device holds
  them, at no cost.
* **Views fold into their consumer.** `broadcast_to`, `transpose` and
  `reshape` (one that only inserts or removes size-1 dimensions) are not
  loops of their own: they relate the dimensions of their operand to their
  result, so a bias add is `mn,n->mn` and `x @ w.T` is `mk,nk->mn`. A run of
  view ops alone (`w.T` written by the user) is folded into each op that
  reads it.
* **Loop letters.** Dimensions related by an op (elementwise operands and
  result, a contraction's shared letter, a reduction's kept axes, a view's
  operand and result) are one loop; a dimension of size 1 is no loop. A
  matmul's loops are `mk,kn->mn` (leading batch dimensions `b`, `c`, ...), an
  einsum's the user's letters; elementwise ops, softmax and layer_norm have
  the output's letters, and a plain reduction its input's: the trailing
  letters of `abcdefghijklmn` (rank 2: `mn`).
* **Kinds.** `einsum` (one matmul or einsum, perhaps with elementwise ops
  around it, as `dense`'s bias add), `softmax` (reductions broadcast back and
  an `exp`: `softmax`, `log_softmax`), `layer_norm` (reductions broadcast back
  and a `sqrt`), `reduce` (one reduction whose axes leave the output),
  `elementwise` (the rest). Anything else (control flow, calls that stay
  calls, slicing, concatenation) is refused with a located error.
* **Uses.** A node's inputs are the values it reads from outside itself, each
  with its letters per dimension (None for a size-1 dimension). A value read
  twice by one msir op (`x * x`) is two uses; the ops of one composite (the
  several ops of a layer_norm reading its input) count once.
* **Leaves** are the function's arguments; a leaf's use count is the number
  of uses over all nodes.
* **Training steps.** A function that calls `msir.grad`, `msir.value_and_grad`
  or `msir.vjp` inside is planned as the function it differentiates
  (`msir.parallel.training.build_graph`): the graph is that function's, and
  `Graph.step` says how the step passes its arguments to it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from msir.errors import PlanningError, SourceLoc

_ALPHABET = "abcdefghijklmn"
_FRESH = "opqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

# Backward FLOPs per element and per input needing a gradient (§4); ops not
# listed cost 1.
_BACKWARD_FLOPS = {"mul": 2, "div": 2, "pow": 2}


@dataclass
class Value:
    """A tensor of the graph: a leaf (argument), a node's output or a constant."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    producer: int | None = None  # node index
    leaf: int | None = None  # position among the function's flattened arguments
    name: str = ""

    @property
    def itemsize(self) -> int:
        return 1 if self.dtype == "bool" else np.dtype(self.dtype).itemsize

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith("float")


@dataclass
class Use:
    """A node's read of a value: `letters[i]` is the loop of dimension i (None: size 1);
    `contraction` marks an operand of the node's matmul/einsum."""

    value: int
    letters: tuple[str | None, ...]
    contraction: bool = False

    @property
    def term(self) -> str:
        return "".join(c or "1" for c in self.letters)


@dataclass
class Node:
    """One op call: its loops, the values it reads and the one it produces."""

    name: str
    kind: str  # einsum | elementwise | softmax | layer_norm | reduce
    loc: SourceLoc | None
    uses: list[Use]
    out: int
    out_letters: tuple[str | None, ...]
    sizes: dict[str, int]
    normalised: str = ""  # softmax/layer_norm: the letters the statistics reduce
    backward_flops: int = 1  # elementwise: FLOPs per element per input needing a gradient
    has_elementwise: bool = False  # einsum: elementwise ops besides the contraction (a bias add)
    ops: list = field(default_factory=list)  # the node's own msir ops (its folded views excluded)
    dim_letters: dict = field(default_factory=dict)  # id(SSA value) of each operand/result of `ops` -> its letters

    @property
    def output_letters(self) -> str:
        return "".join(c for c in self.out_letters if c)

    @property
    def loops(self) -> str:
        """The loop letters: output letters, then reduction letters (in first-use order)."""
        out = self.output_letters
        rest = [c for u in self.uses for c in u.letters if c and c not in out]
        return out + "".join(dict.fromkeys(rest))

    @property
    def reduction_letters(self) -> str:
        out = self.output_letters
        return "".join(c for c in self.loops if c not in out)

    @property
    def spec(self) -> str:
        return ",".join(u.term for u in self.uses) + "->" + "".join(c or "1" for c in self.out_letters)


@dataclass
class Graph:
    """The planner's view of a function."""

    fn_name: str
    loc: SourceLoc | None
    values: list[Value]
    nodes: list[Node]
    leaves: list[int]  # value id of each flattened argument
    outputs: list[int]  # value ids the function returns
    arg_leaves: list[list[int]] = field(default_factory=list)  # leaf positions of each user argument
    arg_names: list[str] = field(default_factory=list)
    arg_locs: list[SourceLoc | None] = field(default_factory=list)
    module: Any = None  # the traced msir module the graph was read from
    entry: str = ""  # its function
    step: Any = None  # a training step around `entry` (msir.parallel.training.Step), or None
    step_arg_leaves: list[list[int]] = field(default_factory=list)  # the step's user arguments' leaf positions
    out_structure: Any = None  # the traced entry's result tree (msir.calling's), which `Plan.run` rebuilds

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise PlanningError(f"no op named '{name}' in function '{self.fn_name}'; its ops are: "
                            f"{', '.join(n.name for n in self.nodes)}", self.loc)

    def uses_of(self, value: int) -> list[tuple[int, int]]:
        """(node index, use index) of every use of `value`, in program order."""
        return [(i, j) for i, n in enumerate(self.nodes) for j, u in enumerate(n.uses) if u.value == value]


# ---------------------------------------------------------------------------
# Building the graph from the IR
# ---------------------------------------------------------------------------


def source_loc(op) -> SourceLoc | None:
    from xdsl.dialects.builtin import FileLineColLoc

    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
    return None


def build_graph(fn, example_args: tuple) -> Graph:
    """The graph of `fn` traced for `example_args` (a training step: the graph of its loss,
    `msir.parallel.training.build_graph`)."""
    from msir.frontend.driver import spec_of, trace
    from msir.frontend.parameter_writes import refuse_parameter_writes
    from msir.frontend.source import get_source

    fn = getattr(fn, "__wrapped__", fn)
    traced = trace(fn, [spec_of(a) for a in example_args])
    refuse_parameter_writes(traced, "auto-parallel planning")
    src = get_source(fn)
    return graph_of_traced(traced, src, leaf_positions(traced))


def leaf_positions(traced) -> list[list[int]]:
    """The flattened argument positions of each user argument of a traced function."""
    arg_leaves, pos = [], 0
    for spec in traced.arg_specs:
        n = _leaf_count(spec)
        arg_leaves.append(list(range(pos, pos + n)))
        pos += n
    return arg_leaves


def graph_of_traced(traced, src, arg_leaves: list[list[int]], entry: str | None = None,
                    names: list[str] | None = None, locs: list | None = None) -> Graph:
    """The graph of function `entry` (default: the traced entry) of a traced module."""
    loc = src.loc(src.node)
    params = list(src.node.args.args)
    graph = _Builder(traced.module, entry or traced.entry, loc).build(
        arg_leaves, names if names is not None else [a.arg for a in params])
    graph.arg_locs = locs if locs is not None else [src.loc(a) for a in params]
    graph.module, graph.entry = traced.module, entry or traced.entry
    graph.out_structure = traced.out_structure
    return graph


def _leaf_count(spec) -> int:
    if spec[0] in ("tuple", "list"):
        return sum(_leaf_count(s) for s in spec[1])
    return 0 if spec[0] == "const" else 1


class _Builder:
    def __init__(self, module, entry: str, loc: SourceLoc | None):
        from xdsl.dialects import func

        self.loc = loc
        self.entry = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == entry)
        self.fn_name = entry
        self.values: list[Value] = []
        self.value_of: dict[int, int] = {}  # id(SSAValue) -> value id

    # -- the ops of the entry block, in runs ---------------------------------

    def build(self, arg_leaves: list[list[int]], arg_names: list[str]) -> Graph:
        from xdsl.dialects import func

        import msir.dialects.msir as M

        block = self.entry.body.block
        leaves = []
        for i, arg in enumerate(block.args):
            v = self._value(arg)
            v.leaf, v.name = i, arg.name_hint or f"arg{i}"
            leaves.append(v.id)
        self.constants: set[int] = set()
        runs: list[tuple[str, list]] = []
        ret = None
        for op in block.ops:
            if isinstance(op, func.ReturnOp):
                ret = op
                continue
            if isinstance(op, (M.ConstantOp, M.IotaOp)):
                self.constants.update(id(r) for r in op.results)
                continue
            if isinstance(op, (M.ClosureOp, M.ApplyOp, M.GradOp, M.ValueAndGradOp, M.VjpOp, M.JvpOp)):
                raise PlanningError(f"the planner does not plan '{op.name}' inside the function a step "
                                    f"differentiates ('{self.fn_name}'): a step differentiates once, by reverse "
                                    f"mode", source_loc(op) or self.loc)
            if op.regions or isinstance(op, func.CallOp) or not _plannable(op):
                raise PlanningError(f"the planner does not model '{op.name}' yet (in function '{self.fn_name}')",
                                    source_loc(op) or self.loc)
            key = _key(op)
            if runs and runs[-1][0] == key and not (_is_contraction(op) and any(map(_is_contraction, runs[-1][1]))):
                runs[-1][1].append(op)
            elif runs and runs[-1][0] == key:  # a second contraction: the next call of the same name
                runs.append((key, _views_feeding(runs[-1][1], op) + [op]))
            else:
                runs.append((key, [op]))
        assert ret is not None
        self.run_of = {id(op): i for i, (_, ops) in enumerate(runs) for op in ops}
        self.runs = runs
        self.view_only = [all(_is_view(op) for op in ops) for _, ops in runs]
        live = self._live_runs(ret)
        names = _node_names([key for key, _ in runs])
        self.nodes: list[Node] = []
        for i, (key, ops) in enumerate(runs):
            if i in live and (not self.view_only[i] or self._returned(i, ret)):
                self.nodes.append(self._node(names[i], ops))
        outputs = [self._external(v) for v in ret.operands]
        return Graph(self.fn_name, self.loc, self.values, self.nodes, leaves,
                     [o for o in outputs if o is not None], arg_leaves, arg_names)

    def _value(self, ssa) -> Value:
        import msir.dialects.msir as M

        key = id(ssa)
        if key not in self.value_of:
            v = Value(len(self.values), M.shape_of(ssa.type), M.dtype_of(ssa.type))
            self.values.append(v)
            self.value_of[key] = v.id
        return self.values[self.value_of[key]]

    def _external(self, ssa) -> int | None:
        """The graph value an SSA value stands for (through folded views), None for a constant."""
        if id(ssa) in self.constants:
            return None
        owner = getattr(ssa, "op", None)
        if owner is not None and self.view_only[self.run_of[id(owner)]] and id(ssa) not in self.value_of:
            return self._external(owner.operands[0])
        return self._value(ssa).id

    def _live_runs(self, ret) -> set[int]:
        live: set[int] = set()
        pending = [v for v in ret.operands]
        while pending:
            ssa = pending.pop()
            owner = getattr(ssa, "op", None)
            if owner is None or id(owner) not in self.run_of:
                continue
            r = self.run_of[id(owner)]
            if r in live:
                continue
            live.add(r)
            for op in self.runs[r][1]:
                pending.extend(op.operands)
        return live

    def _returned(self, run: int, ret) -> bool:
        return any(getattr(v, "op", None) is not None and self.run_of.get(id(v.op)) == run for v in ret.operands)

    # -- one node -------------------------------------------------------------

    def _node(self, name: str, own_ops: list) -> Node:
        import msir.dialects.msir as M

        ops = self._with_folded_views(own_ops)
        op_ids = {id(op) for op in ops}
        loc = source_loc(own_ops[-1]) or self.loc
        results = [r for op in own_ops for r in op.results
                   if any(id(u.operation) not in op_ids for u in r.uses)]
        if len(results) != 1:
            raise PlanningError(f"op '{name}' has {len(results)} results used outside it; the planner models "
                                f"ops with one result", loc)
        out = results[0]
        contractions = [op for op in ops if isinstance(op, (M.MatmulOp, M.EinsumOp))]
        if len(contractions) > 1:
            raise PlanningError(f"op '{name}' holds {len(contractions)} contractions; give each its own name=", loc)
        uf = _Loops()
        reduced: list[tuple[Any, int]] = []
        for op in ops:
            reduced.extend(_relate(op, uf, name, loc))
        compute = [op for op in ops if not _is_view(op)]
        kind, normalised_dims = self._kind(name, loc, compute, contractions, reduced, out, uf)
        letters = self._letters(kind, contractions, out, uf, ops)

        def letters_of(ssa) -> tuple[str | None, ...]:
            return tuple(letters.get(uf.find((id(ssa), d))) for d in range(len(M.shape_of(ssa.type))))

        feeds = self._feeding(contractions, ops)
        uses = self._uses(ops, op_ids, contractions, feeds, letters_of)
        out_value = self._value(out)
        out_letters = letters_of(out)
        for term in (*(u.letters for u in uses), out_letters):
            repeated = [c for c in term if c and term.count(c) > 1]
            if repeated:
                raise PlanningError(f"op '{name}' reads a diagonal (loop {repeated[0]} on two dimensions of one "
                                    f"value), which the planner does not model", loc)
        sizes = {}
        for op in ops:
            for ssa in (*op.operands, *op.results):
                for d, n in enumerate(M.shape_of(ssa.type)):
                    c = letters.get(uf.find((id(ssa), d)))
                    if c:
                        sizes[c] = n
        node = Node(name, kind, loc, uses, out_value.id, out_letters, sizes, ops=list(own_ops),
                    dim_letters={id(ssa): letters_of(ssa) for op in own_ops for ssa in (*op.operands, *op.results)})
        node.normalised = "".join(dict.fromkeys(letters[uf.find(d)] for d in normalised_dims))
        node.backward_flops = max((_BACKWARD_FLOPS.get(op.name.removeprefix("msir."), 1) for op in compute), default=1)
        node.has_elementwise = kind == "einsum" and any(
            op not in contractions and not _is_reduce(op) for op in compute)
        out_value.producer = len(self.nodes)
        if not out_value.name:
            out_value.name = name
        return node

    def _with_folded_views(self, own_ops: list) -> list:
        """The run's ops preceded by the view-only runs it reads (transitively)."""
        seen: set[int] = set()
        folded: list = []

        def visit(op):
            for v in op.operands:
                owner = getattr(v, "op", None)
                if owner is None or id(owner) not in self.run_of:
                    continue
                r = self.run_of[id(owner)]
                if self.view_only[r] and id(owner) not in seen:
                    seen.add(id(owner))
                    visit(owner)
                    folded.append(owner)

        for op in own_ops:
            visit(op)
        folded.sort(key=lambda op: self.run_of[id(op)])
        return folded + list(own_ops)

    def _kind(self, name, loc, compute, contractions, reduced, out, uf):
        out_loops = {uf.find((id(out), d)) for d in range(len(out.type.get_shape()))}
        reduced_loops = [uf.find(d) for d in reduced]
        if contractions:
            return "einsum", []
        if not reduced_loops:
            return "elementwise", []
        op_names = {op.name for op in compute}
        if all(r in out_loops for r in reduced_loops):
            if "msir.exp" in op_names:
                return "softmax", reduced
            if "msir.sqrt" in op_names:
                return "layer_norm", reduced
        elif not any(r in out_loops for r in reduced_loops) and sum(_is_reduce(op) for op in compute) == 1:
            return "reduce", []
        raise PlanningError(f"op '{name}' ({', '.join(sorted(op_names))}) is a composite the planner does not model "
                            f"yet (not a contraction, elementwise op, softmax, layer_norm or single reduction)", loc)

    def _letters(self, kind, contractions, out, uf, ops) -> dict:
        """The letter of each loop (union-find root)."""
        import msir.dialects.msir as M

        letters: dict = {}
        if contractions:
            c = contractions[0]
            terms, out_term = contraction_terms(c)
            for ssa, term in zip((*c.operands, c.result), (*terms, out_term)):
                for d, ch in enumerate(term):
                    if M.shape_of(ssa.type)[d] != 1:
                        letters.setdefault(uf.find((id(ssa), d)), ch)
        else:
            ref = out
            if kind == "reduce":
                ref = next(op for op in ops if _is_reduce(op)).operands[0]
            shape = M.shape_of(ref.type)
            tail = _ALPHABET[len(_ALPHABET) - len(shape):] if len(shape) <= len(_ALPHABET) else _FRESH
            for d in range(len(shape)):
                if shape[d] != 1:
                    letters.setdefault(uf.find((id(ref), d)), tail[d])
        fresh = (ch for ch in _ALPHABET + _FRESH if ch not in letters.values())
        for op in ops:
            for ssa in (*op.operands, *op.results):
                for d, n in enumerate(M.shape_of(ssa.type)):
                    root = uf.find((id(ssa), d))
                    if n != 1 and root not in letters:
                        letters[root] = next(fresh)
        return letters

    def _feeding(self, contractions, ops) -> set[int]:
        """ids of the SSA values that reach the contraction's operands through views."""
        if not contractions:
            return set()
        feeds = {id(v) for v in contractions[0].operands}
        for op in reversed(ops):
            if _is_view(op) and id(op.results[0]) in feeds:
                feeds.add(id(op.operands[0]))
        return feeds

    def _uses(self, ops, op_ids, contractions, feeds, letters_of) -> list[Use]:
        """The node's reads of outside values: per (value, letters), the most
        reads any one of its msir ops makes; in the order of the operands of the
        compute ops they reach through views, the contraction's first."""
        position: dict[int, tuple[int, int]] = {}
        for k, op in enumerate(ops):
            if not _is_view(op):
                rank = -1 if op in contractions else k
                for i, v in enumerate(op.operands):
                    position.setdefault(id(v), (rank, i))
        for op in reversed(ops):
            if _is_view(op) and id(op.results[0]) in position:
                position.setdefault(id(op.operands[0]), position[id(op.results[0])])
        counts: dict[tuple, int] = {}
        order: dict[tuple, tuple] = {}
        for k, op in enumerate(ops):
            per_op: dict[tuple, int] = {}
            for i, v in enumerate(op.operands):
                if getattr(v, "op", None) is not None and id(v.op) in op_ids:
                    continue
                value = self._external(v)
                if value is None:
                    continue
                in_contraction = op in contractions or (_is_view(op) and id(op.results[0]) in feeds)
                key = (value, letters_of(v), in_contraction)
                per_op[key] = per_op.get(key, 0) + 1
                reached = position.get(id(op.results[0]), (k, i)) if _is_view(op) else (k, i)
                if op in contractions:
                    reached = (-1, i)
                order.setdefault(key, reached)
            for key, n in per_op.items():
                counts[key] = max(counts.get(key, 0), n)
        keys = sorted(counts, key=lambda key: order[key])
        return [Use(value, letters, contraction) for (value, letters, contraction) in keys
                for _ in range(counts[(value, letters, contraction)])]


def _key(op) -> str:
    name = op.attributes.get("msir.name")
    if name is not None:
        return name.data
    loc = source_loc(op)
    return f"{os.path.basename(loc.file)}:{loc.line}:{loc.col}" if loc else op.name


def _node_names(keys: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for k in keys:
        n = seen.get(k, 0)
        seen[k] = n + 1
        out.append(k if n == 0 else f"{k}#{n}")
    return out


def _plannable(op) -> bool:
    import msir.dialects.msir as M

    return isinstance(op, (M.ElementwiseBinaryOp, M.ElementwiseUnaryOp, M.CompareOp, M.SelectOp, M.CastOp,
                           M.StopGradientOp, M.BroadcastToOp, M.TransposeOp, M.ReshapeOp, M.ReduceOp,
                           M.MatmulOp, M.EinsumOp))


def _is_view(op) -> bool:
    import msir.dialects.msir as M

    return isinstance(op, (M.BroadcastToOp, M.TransposeOp, M.ReshapeOp))


def _is_contraction(op) -> bool:
    import msir.dialects.msir as M

    return isinstance(op, (M.MatmulOp, M.EinsumOp))


def _views_feeding(run: list, op) -> list:
    """The view ops at the end of `run` that feed `op` (they belong to its call): removed from `run`."""
    moved: list = []
    wanted = {id(v) for v in op.operands}
    while run and _is_view(run[-1]) and id(run[-1].results[0]) in wanted:
        view = run.pop()
        moved.insert(0, view)
        wanted.add(id(view.operands[0]))
    return moved


def _is_reduce(op) -> bool:
    import msir.dialects.msir as M

    return isinstance(op, M.ReduceOp)


class _Loops:
    """Union-find over (id(SSA value), dimension)."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def contraction_terms(op) -> tuple[tuple[str, ...], str]:
    """The operand terms and output term of a matmul (`mk,kn->mn`, batch `b`, `c`, ...) or einsum."""
    import msir.dialects.msir as M

    if isinstance(op, M.EinsumOp):
        return M.parse_einsum(op.spec_string, len(op.inputs))
    ra, rb = len(M.shape_of(op.lhs.type)), len(M.shape_of(op.rhs.type))
    batch_rank = max(ra, rb, 2) - 2
    batch = "bcdefgh"[:batch_rank]
    a = (batch[batch_rank - (ra - 2):] + "mk") if ra >= 2 else "k"
    b = (batch[batch_rank - (rb - 2):] + "kn") if rb >= 2 else "k"
    out = batch + ("m" if ra >= 2 else "") + ("n" if rb >= 2 else "")
    return (a, b), out


def _relate(op, uf: _Loops, name: str, loc) -> list:
    """Union the dimensions `op` relates; return the (value, dim) pairs it reduces."""
    import msir.dialects.msir as M

    def dims(ssa):
        return M.shape_of(ssa.type)

    def tie(a, da, b, db):
        if dims(a)[da] != 1 and dims(b)[db] != 1:
            uf.union((id(a), da), (id(b), db))

    if isinstance(op, (M.MatmulOp, M.EinsumOp)):
        terms, out_term = contraction_terms(op)
        first: dict[str, tuple] = {}
        for ssa, term in zip((*op.operands, op.result), (*terms, out_term)):
            for d, ch in enumerate(term):
                if dims(ssa)[d] == 1:
                    continue
                if ch in first:
                    tie(first[ch][0], first[ch][1], ssa, d)
                else:
                    first[ch] = (ssa, d)
        return []
    if isinstance(op, M.BroadcastToOp):
        src, dst = op.input, op.result
        offset = len(dims(dst)) - len(dims(src))
        for d in range(len(dims(src))):
            tie(src, d, dst, d + offset)
        return []
    if isinstance(op, M.TransposeOp):
        for i, p in enumerate(op.permutation.get_values()):
            tie(op.result, i, op.input, p)
        return []
    if isinstance(op, M.ReshapeOp):
        a = [d for d, n in enumerate(dims(op.input)) if n != 1]
        b = [d for d, n in enumerate(dims(op.result)) if n != 1]
        if [dims(op.input)[d] for d in a] != [dims(op.result)[d] for d in b]:
            raise PlanningError(f"op '{name}': the planner folds only reshapes that insert or remove size-1 "
                                f"dimensions, not {dims(op.input)} to {dims(op.result)}", loc)
        for da, db in zip(a, b):
            tie(op.input, da, op.result, db)
        return []
    if isinstance(op, M.ReduceOp):
        axes = set(op.axes_list)
        keep = len(dims(op.result)) == len(dims(op.input))
        j = 0
        reduced = []
        for d in range(len(dims(op.input))):
            if d in axes:
                if dims(op.input)[d] != 1:
                    reduced.append((id(op.input), d))
                j += keep
                continue
            tie(op.input, d, op.result, j)
            j += 1
        return reduced
    for v in op.operands:  # elementwise, compare, select, cast, stop_gradient: one shape
        for d in range(len(dims(op.results[0]))):
            tie(v, d, op.results[0], d)
    return []
