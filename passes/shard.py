"""`msir-shard`: the SPMD partitioner. A function whose ops carry strategies
becomes one per-device function with local shapes and explicit collectives
(`../shared/parallel.md` §2, §3, §5).

Contract
--------
Expects: a module holding a `msir_shard.mesh` and functions whose ops carry
`msir_shard.strategy = #msir_shard.strategy<@mesh, "m,-">` attributes (the
strategy in the op's own loop letters, below); function arguments may carry
`msir_shard.layout` attributes. Every strategy of a function names the same
mesh. Functions without a strategy or a layout, and per-device functions
(those with a `msir_shard.mesh` attribute: the pass is idempotent), are left
as they are.

Loop letters of an op:

* `msir.matmul`: `mk,kn->mn` (leading batch dimensions `b`, `c`, ...; a 1-D
  operand has only `k`); `msir.einsum`: the user's letters;
* elementwise ops (unary, binary, compare, select, cast, stop_gradient): the
  last letters of `abcdefghijklmn`, one per dimension (rank 2: `mn`);
* reductions: their input's letters in the same way; the reduced ones are
  the op's reduction loops.

Rewrites, in program order:

* an op with a strategy reads each operand in the layout its letters give
  (never partial) and produces its result split by its output letters and
  partial over the mesh axes on its reduction loops (§2). A `reduce_mean`
  whose reduced loop is split n ways scales its local mean by 1/n (a partial
  sum again), a `reduce_max` all-reduces (max) its result at once; the other
  reductions (prod, min) refuse such a split;
* an op without a strategy runs replicated (the strategy `-,-,...`): every
  device computes all of it from replicated operands; with
  `propagate=true`, it takes the strategy its operands' layouts imply
  instead (sharding propagation, as MindSpore's): each mesh axis goes to the
  loop of the first operand dimension it splits (looking through views), if
  that keeps every loop's split dividing its size; a reduced loop of a
  reduction other than sum, mean and max is never split. This is how the
  backward ops of a planned training step (`msir.parallel`) follow their
  forward ops, whose strategies the plan sets: they read the forward's
  values and cotangents in the forward's layouts;
* views (`broadcast_to`, `transpose`, `reshape` inserting or removing size-1
  dimensions) carry no strategy: they take the layout their consumer asks of
  their result, ask their operand for the matching layout and are rebuilt
  with local shapes (a bias add reads the bias split as its `n`);
* a splat constant is built at the local shape each layout a consumer
  wants gives (once per layout, before its first such consumer): it has the
  same value everywhere, so slicing a full-size one would be wasted work;
  other constants are replicated, and split locally (`all_slice`) where a
  consumer wants them split;
* a function argument without a layout attribute is stored as its first use
  needs it (a tied leaf); one never used is replicated;
* the returned values are resolved (partial sums all-reduced), their splits
  kept.

Between a value's layout and the one a consumer needs, the collectives are
`msir.parallel.reshard`'s sequence (§3), the one the cost model prices, one op
per mesh axis; each (value, layout) pair is resharded once and shared by all
its consumers.

Guarantees: each rewritten function keeps its name; its arguments and
results have local types and a `msir_shard.layout` attribute each (the
global value of an argument or result is the concatenation of the devices'
pieces along their splits), it carries `msir_shard.mesh = @mesh`, no op in
it carries a strategy, and it verifies. A strategy that names a letter the op
does not have, has the wrong number of entries or does not divide a loop,
and ops the pass cannot partition (regions), are `CompileError`s at the op's
location.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FunctionType,
    ModuleOp,
    SymbolRefAttr,
    TensorType,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

import msir.dialects.msir as M
import msir.dialects.msir_shard as S
from msir.errors import CompileError
from msir.parallel.mesh_layout import Layout, Mesh, axes_on, format_strategy, split_of
from msir.parallel.op_graph import contraction_terms
from msir.parallel.reshard import reshard
from msir.passes.ad_ir import source_loc

_ALPHABET = "abcdefghijklmn"
_ELEMENTWISE = (M.ElementwiseBinaryOp, M.ElementwiseUnaryOp, M.CompareOp, M.SelectOp, M.CastOp, M.StopGradientOp)
_VIEWS = (M.BroadcastToOp, M.TransposeOp, M.ReshapeOp)
_CONSTANTS = (M.ConstantOp, M.IotaOp)


@dataclass(frozen=True)
class MsirShard(ModulePass):
    """Partition the functions whose ops carry strategies into per-device functions (see the module docstring)."""

    name = "msir-shard"

    propagate: bool = False
    """Ops without a strategy take the one their operands' layouts imply (else they run replicated)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [f for f in op.ops if isinstance(f, func.FuncOp) and S.MESH_ATTR not in f.attributes]:
            mesh = _mesh_of(f)
            if mesh is not None:
                _Partitioner(f, *mesh, propagate=self.propagate).run()


def _mesh_of(f: func.FuncOp) -> tuple[SymbolRefAttr, Mesh] | None:
    """The mesh `f`'s strategies and argument layouts name (None: `f` is not sharded)."""
    named: list[tuple[SymbolRefAttr, Operation]] = []
    for op in f.body.walk():
        s = op.attributes.get(S.STRATEGY_ATTR)
        if isinstance(s, S.StrategyAttr):
            named.append((s.mesh, op))
    for attrs in f.arg_attrs or ():
        layout = attrs.data.get(S.LAYOUT_ATTR)
        if isinstance(layout, S.LayoutAttr):
            named.append((layout.mesh, f))
    if not named:
        return None
    mesh = named[0][0]
    for other, op in named:
        if other != mesh:
            raise CompileError(f"msir-shard: function @{f.sym_name.data} uses two meshes, {mesh} and {other}",
                               source_loc(op))
    target = SymbolTable.lookup_symbol(f, mesh)
    if not isinstance(target, S.MeshOp):
        raise CompileError(f"msir-shard: function @{f.sym_name.data} names mesh {mesh}, which is not a "
                           f"msir_shard.mesh of the module", source_loc(named[0][1]))
    return mesh, Mesh(target.mesh_shape)


def _tail_letters(rank: int) -> str:
    return _ALPHABET[len(_ALPHABET) - rank:]


def letter_terms(op: Operation) -> tuple[list[str], str]:
    """The loop letters of each operand and of the result of `op` (module docstring)."""
    if isinstance(op, (M.MatmulOp, M.EinsumOp)):
        terms, out = contraction_terms(op)
        return list(terms), out
    if isinstance(op, M.ReduceOp):
        letters = _tail_letters(len(M.shape_of(op.input.type)))
        axes = set(op.axes_list)
        keep = len(M.shape_of(op.result.type)) == len(letters)
        out = "".join(("1" if keep else "") if d in axes else c for d, c in enumerate(letters))
        return [letters], out
    if isinstance(op, _ELEMENTWISE):
        letters = _tail_letters(len(M.shape_of(op.results[0].type)))
        return [letters] * len(op.operands), letters
    raise CompileError(f"msir-shard does not partition '{op.name}' by a strategy yet (matmul, einsum, elementwise "
                       f"ops and reductions it does)", source_loc(op))


def _local_type(t: TensorType, layout: Layout, mesh: Mesh) -> TensorType:
    return TensorType(t.element_type, list(layout.local_shape(M.shape_of(t), mesh)))


class _Partitioner:
    """Rewrites one function in place (module docstring)."""

    def __init__(self, f: func.FuncOp, mesh_ref: SymbolRefAttr, mesh: Mesh, propagate: bool = False):
        self.f, self.mesh_ref, self.mesh = f, mesh_ref, mesh
        self.propagate = propagate
        self.mesh_name = mesh_ref.root_reference.data
        self.block: Block = f.body.block
        self.layout: dict[SSAValue, Layout] = {}  # original value -> the layout of its local value
        self.local: dict[SSAValue, SSAValue] = {}  # original value -> its local value
        self.resharded: dict[tuple[SSAValue, Layout], SSAValue] = {}
        self.splats: set[SSAValue] = set()  # splat constants, built where used at each consumer's local shape
        self.at: Operation | None = None  # the original op new ops go before
        self.args = list(self.block.args)  # the original arguments, each replaced by one of its local type
        for i, arg in enumerate(self.args):
            given = (f.arg_attrs.data[i].data.get(S.LAYOUT_ATTR) if f.arg_attrs else None)
            if isinstance(given, S.LayoutAttr):
                self._check_layout(given, arg, i)
                self._adopt(arg, Layout(given.dims_tuple, given.partial_tuple))

    # -- driving ---------------------------------------------------------------

    def run(self) -> None:
        old = list(self.block.ops)
        results: list[tuple[SSAValue, Layout]] = []
        for op in old:
            self.at = op
            if isinstance(op, func.ReturnOp):
                results = [self._returned(v) for v in op.operands]
                self._insert(func.ReturnOp(*[v for v, _ in results]), op)
            elif isinstance(op, _VIEWS):
                if S.STRATEGY_ATTR in op.attributes:
                    raise CompileError(f"msir-shard: '{op.name}' is a view, which takes its consumer's layout; "
                                       f"put the strategy on the op that reads it", source_loc(op))
            elif isinstance(op, M.ConstantOp) and op.is_splat():
                self.splats.add(op.result)
            elif isinstance(op, _CONSTANTS):
                self._replicated(op)
            elif op.regions:
                raise CompileError(f"msir-shard does not partition '{op.name}', an op with regions", source_loc(op))
            elif S.STRATEGY_ATTR in op.attributes:
                self._partition(op)
            elif self.propagate and (implied := self._implied_strategy(op)) is not None:
                self._partition(op, implied)
            else:
                self._replicated(op)
        for op in reversed(old):
            op.detach()
            op.erase(safe_erase=False)
        for arg in self.args:
            if arg not in self.layout:
                self._adopt(arg, Layout(((),) * len(M.shape_of(arg.type))))
            self.block.erase_arg(arg)
        self._signature(results)

    def _signature(self, results: list[tuple[SSAValue, Layout]]) -> None:
        f = self.f
        f.function_type = FunctionType.from_lists([a.type for a in self.block.args], [v.type for v, _ in results])
        f.arg_attrs = ArrayAttr([self._with_layout(f.arg_attrs.data[i] if f.arg_attrs else None, self.layout[a])
                                 for i, a in enumerate(self.args)])
        f.res_attrs = ArrayAttr([self._with_layout(f.res_attrs.data[i] if f.res_attrs else None, layout)
                                 for i, (_, layout) in enumerate(results)])
        f.attributes[S.MESH_ATTR] = self.mesh_ref

    def _with_layout(self, attrs: DictionaryAttr | None, layout: Layout) -> DictionaryAttr:
        data = dict(attrs.data) if attrs is not None else {}
        data[S.LAYOUT_ATTR] = S.LayoutAttr(self.mesh_ref, layout.dims, layout.partial)
        return DictionaryAttr(data)

    def _insert(self, new: Operation, before: Operation) -> Operation:
        new.location = before.location
        Rewriter.insert_op(new, InsertPoint.before(before))
        return new

    # -- ops ---------------------------------------------------------------------

    def _replicated(self, op: Operation) -> None:
        """`op` run whole on every device."""
        operands = [self._get(v, Layout(((),) * len(M.shape_of(v.type)))) if isinstance(v.type, TensorType)
                    else self.local.get(v, v) for v in op.operands]
        new = self._insert(op.clone(), op)
        for i, v in enumerate(operands):
            new.operands[i] = v
        for r, nr in zip(op.results, new.results):
            nr.name_hint = r.name_hint
            self.local[r] = nr
            if isinstance(r.type, TensorType):
                self.layout[r] = Layout(((),) * len(M.shape_of(r.type)))

    def _partition(self, op: Operation, implied: tuple | None = None) -> None:
        """`op` split by its strategy attribute, or by the `implied` strategy (propagation)."""
        attr = op.attributes.get(S.STRATEGY_ATTR)
        terms, out_term = letter_terms(op)
        sizes = _loop_sizes(op, terms, out_term)
        s = implied if implied is not None else self._strategy(op, attr, sizes, out_term)
        attr = attr if attr is not None else S.StrategyAttr(self.mesh_name, format_strategy(s))
        operands = [self._get(v, Layout(tuple(axes_on(s, c) for c in term))) for v, term in zip(op.operands, terms)]
        reduced = [a for a, c in enumerate(s) if c is not None and c not in out_term]
        out = Layout(tuple(axes_on(s, c) for c in out_term), tuple(reduced))
        result = op.results[0]
        attributes = {k: v for k, v in op.attributes.items() if k != S.STRATEGY_ATTR}
        new = self._insert(type(op).create(operands=operands, result_types=[_local_type(result.type, out, self.mesh)],
                                           properties=dict(op.properties), attributes=attributes), op)
        local = new.results[0]
        local.name_hint = result.name_hint
        if reduced and isinstance(op, M.ReduceMeanOp):
            # the mean of 1/n of the elements, divided by n: the devices' values sum to the global mean
            n = math.prod(self.mesh.shape[a] for a in reduced)
            shape, dtype = M.shape_of(local.type), M.dtype_of(local.type)
            scale = self._insert(M.ConstantOp(DenseIntOrFPElementsAttr.from_list(M.tensor_type(shape, dtype),
                                                                                  [1.0 / n])), op).result
            local = self._insert(M.ELEMENTWISE_OPS["mul"](local, scale), op).results[0]
        elif reduced and isinstance(op, M.ReduceOp) and not isinstance(op, M.ReduceSumOp):
            if not isinstance(op, M.ReduceMaxOp):
                raise CompileError(f"msir-shard: strategy {attr} splits a reduced loop of '{op.name}', which only "
                                   f"a reduce_sum, reduce_mean or reduce_max can combine across devices",
                                   source_loc(op))
            for a in reduced:
                local = self._insert(S.AllReduceOp(local, self.mesh_name, a, "max"), op).result
            out = out.resolved()
        self.local[result] = local
        self.layout[result] = out

    def _implied_strategy(self, op: Operation) -> tuple | None:
        """The strategy `op`'s operands' layouts imply (module docstring), None if they split nothing it can."""
        if not isinstance(op, (M.MatmulOp, M.EinsumOp, M.ReduceOp, *_ELEMENTWISE)) or len(op.results) != 1:
            return None
        terms, out_term = letter_terms(op)
        sizes = _loop_sizes(op, terms, out_term)
        reduced = {c for t in terms for c in t if c != "1" and c not in out_term}
        if isinstance(op, M.ReduceOp) and not isinstance(op, (M.ReduceSumOp, M.ReduceMeanOp, M.ReduceMaxOp)):
            sizes = {c: n for c, n in sizes.items() if c not in reduced}
        strategy: list[str | None] = [None] * self.mesh.rank
        for v, term in zip(op.operands, terms):
            layout = self._layout_hint(v)
            if layout is None:
                continue
            for d, axes in enumerate(layout.dims):
                for a in axes:
                    c = term[d]
                    if strategy[a] is not None or c not in sizes:
                        continue
                    strategy[a] = c
                    if sizes[c] % split_of(strategy, c, self.mesh):
                        strategy[a] = None
        return tuple(strategy) if any(strategy) else None

    def _layout_hint(self, v: SSAValue) -> Layout | None:
        """The layout `v` has (or, made by views, would have from their operand's), None if not decided yet."""
        if v in self.layout:
            return self.layout[v]
        owner = v.owner
        if not isinstance(owner, _VIEWS):
            return None
        src = self._layout_hint(owner.input)
        if src is None:
            return None
        src_shape, dst_shape = M.shape_of(owner.input.type), M.shape_of(owner.result.type)
        dims: list[tuple[int, ...]] = [()] * len(dst_shape)
        if isinstance(owner, M.BroadcastToOp):
            offset = len(dst_shape) - len(src_shape)
            for d, axes in enumerate(src.dims):
                if src_shape[d] == dst_shape[d + offset]:
                    dims[d + offset] = axes
        elif isinstance(owner, M.TransposeOp):
            for i, p in enumerate(owner.permutation.get_values()):
                dims[i] = src.dims[p]
        else:
            a = [d for d, n in enumerate(src_shape) if n != 1]
            b = [d for d, n in enumerate(dst_shape) if n != 1]
            if [src_shape[d] for d in a] != [dst_shape[d] for d in b]:
                return None
            for da, db in zip(a, b):
                dims[db] = src.dims[da]
        return Layout(tuple(dims))

    def _strategy(self, op: Operation, attr: S.StrategyAttr, sizes: dict[str, int], out_term: str):
        entries = attr.entries
        loops = "".join(dict.fromkeys(c for c in (*out_term, *sizes) if c != "1"))
        where = source_loc(op)
        if len(entries) != self.mesh.rank:
            raise CompileError(f"msir-shard: strategy {attr} of '{op.name}' has {len(entries)} entries; the mesh "
                               f"{self.mesh_ref} has {self.mesh.rank} axes", where)
        for a, c in enumerate(entries):
            if c is not None and c not in sizes:
                raise CompileError(f"msir-shard: strategy {attr} of '{op.name}' puts {self.mesh.axis_label(a)} on "
                                   f"loop '{c}', which is not one of the op's loops {', '.join(loops)}", where)
        for c in dict.fromkeys(c for c in entries if c):
            n = split_of(entries, c, self.mesh)
            if sizes[c] % n:
                raise CompileError(f"msir-shard: strategy {attr} of '{op.name}' splits loop '{c}' (size {sizes[c]}) "
                                   f"{n} ways, which does not divide it", where)
        return entries

    def _returned(self, v: SSAValue) -> tuple[SSAValue, Layout]:
        """A returned value keeps its splits; partial sums are resolved (a view's result is replicated)."""
        dst = self.layout[v].resolved() if v in self.layout else Layout(((),) * len(M.shape_of(v.type)))
        return self._get(v, dst), dst

    # -- values in a layout --------------------------------------------------------

    def _get(self, v: SSAValue, dst: Layout) -> SSAValue:
        """The local value of `v` in layout `dst` (never partial), resharding once per (value, layout)."""
        key = (v, dst)
        if key in self.resharded:
            return self.resharded[key]
        if v not in self.layout:
            if isinstance(v, BlockArgument):
                self._check_split(dst, v)
                self._adopt(v, dst)
            elif isinstance(v.owner, _VIEWS):
                self.resharded[key] = self._view(v.owner, dst)
                return self.resharded[key]
            elif v in self.splats:
                self._check_split(dst, v)
                self.resharded[key] = self._local_splat(v.owner, dst)
                return self.resharded[key]
            else:
                raise CompileError(f"msir-shard: '{v.owner.name}' is used before it is partitioned",
                                   source_loc(self.at))
        local = self.local[v]
        shape = M.shape_of(v.type)
        if self.layout[v] != dst:
            self._check_split(dst, v)
            # the byte counts of the steps price them (cost model); the IR needs only their kinds
            for c in reshard(self.layout[v], dst, shape, 1, self.mesh):
                local = self._collective(local, c)
        self.resharded[key] = local
        return local

    def _check_split(self, layout: Layout, v: SSAValue) -> None:
        for d, (n, axes) in enumerate(zip(M.shape_of(v.type), layout.dims)):
            split = 1
            for a in axes:
                split *= self.mesh.shape[a]
            if n % split:
                raise CompileError(f"msir-shard: {self.mesh.axis_label(axes[-1])} splits dimension {d} (size {n}) "
                                   f"of {v.type} {split} ways for '{self.at.name}', which does not divide it",
                                   source_loc(self.at))

    def _check_layout(self, given: S.LayoutAttr, arg: BlockArgument, i: int) -> None:
        from xdsl.utils.exceptions import VerifyException

        try:
            given.verify_on(self.f, M.shape_of(arg.type), f"argument {i} of @{self.f.sym_name.data}")
        except VerifyException as e:
            raise CompileError(f"msir-shard: {e}", source_loc(self.f)) from None
        if given.partial_tuple:
            raise CompileError(f"msir-shard: argument {i} of @{self.f.sym_name.data} cannot be partial ({given})",
                               source_loc(self.f))

    def _adopt(self, arg: BlockArgument, layout: Layout) -> None:
        local = self.block.insert_arg(_local_type(arg.type, layout, self.mesh), arg.index)
        local.name_hint = arg.name_hint
        self.layout[arg] = layout
        self.local[arg] = local

    def _collective(self, local: SSAValue, c) -> SSAValue:
        n = self.mesh.shape[c.axis]
        t = local.type
        shape = list(M.shape_of(t))
        if c.kind == "all_reduce":
            return self._insert(S.AllReduceOp(local, self.mesh_name, c.axis, "sum"), self.at).result
        if c.kind == "all_to_all":
            shape[c.dim] *= n
            shape[c.to_dim] //= n
            new = S.AllToAllOp(local, self.mesh_name, c.axis, c.dim, c.to_dim, TensorType(t.element_type, shape))
            return self._insert(new, self.at).result
        cls = {"reduce_scatter": S.ReduceScatterOp, "all_gather": S.AllGatherOp, "all_slice": S.AllSliceOp}[c.kind]
        shape[c.dim] = shape[c.dim] * n if c.kind == "all_gather" else shape[c.dim] // n
        return self._insert(cls(local, self.mesh_name, c.axis, c.dim, TensorType(t.element_type, shape)),
                            self.at).result

    def _local_splat(self, constant: M.ConstantOp, dst: Layout) -> SSAValue:
        """Splat `constant` at the local shape of layout `dst`."""
        local_type = _local_type(constant.result.type, dst, self.mesh)
        data = constant.value.data.data
        element = data[:len(data) // math.prod(M.shape_of(constant.result.type))]
        value = DenseIntOrFPElementsAttr(local_type, BytesAttr(element * math.prod(M.shape_of(local_type))))
        new = M.ConstantOp(value)
        new.attributes.update({k: v for k, v in constant.attributes.items() if k != S.STRATEGY_ATTR})
        local = self._insert(new, self.at).result
        local.name_hint = constant.result.name_hint
        return local

    def _view(self, view: Operation, dst: Layout) -> SSAValue:
        """`view` rebuilt on the devices, its result in layout `dst`."""
        src_shape, dst_shape = M.shape_of(view.input.type), M.shape_of(view.result.type)
        if isinstance(view, M.BroadcastToOp):
            offset = len(dst_shape) - len(src_shape)
            dims = tuple(dst.dims[d + offset] if src_shape[d] == dst_shape[d + offset] else ()
                         for d in range(len(src_shape)))
        elif isinstance(view, M.TransposeOp):
            dims = [()] * len(src_shape)
            for i, p in enumerate(view.permutation.get_values()):
                dims[p] = dst.dims[i]
            dims = tuple(dims)
        else:
            dims = _reshape_dims(src_shape, dst_shape, dst, view)
        operand = self._get(view.input, Layout(dims))
        result_type = _local_type(view.result.type, dst, self.mesh)
        new = type(view).create(operands=[operand], result_types=[result_type], properties=dict(view.properties),
                                attributes=dict(view.attributes))
        return self._insert(new, self.at).results[0]


def _loop_sizes(op: Operation, terms, out_term: str) -> dict[str, int]:
    sizes = {}
    for v, term in zip((*op.operands, op.results[0]), (*terms, out_term)):
        for c, n in zip(term, M.shape_of(v.type)):
            if c != "1":
                sizes[c] = n
    return sizes


def _reshape_dims(src_shape, dst_shape, dst: Layout, view: Operation) -> tuple[tuple[int, ...], ...]:
    """The operand layout of a reshape whose result is wanted in `dst`."""
    if not any(dst.dims):
        return ((),) * len(src_shape)
    a = [d for d, n in enumerate(src_shape) if n != 1]
    b = [d for d, n in enumerate(dst_shape) if n != 1]
    if [src_shape[d] for d in a] != [dst_shape[d] for d in b]:
        raise CompileError(f"msir-shard: a consumer wants the result of a reshape of {view.input.type} to "
                           f"{view.result.type} split as {dst}; msir-shard splits only reshapes that insert or "
                           f"remove size-1 dimensions", source_loc(view))
    dims = [()] * len(src_shape)
    for da, db in zip(a, b):
        dims[da] = dst.dims[db]
    return tuple(dims)

