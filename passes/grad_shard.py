"""Reverse mode of per-device functions: what `msir-grad` adds when the
function it differentiates is one `msir-shard` made (`msir_shard.mesh` on it).

A per-device function runs on every device of a mesh; per device, the
cotangent of a value *invariant* along a mesh axis (every device along it
holds the same value) is the whole cotangent, that of a value *varying* along
it (split, partial, or computed from such) the device's own part. The
collectives' rules (`msir.passes.grad_rules`) follow that convention (JAX's
`psum`/`pvary`, Megatron's f/g). Two things are not rules of one op:

* **An invariant operand of a varying op** (a replicated weight read by a
  batch-split matmul): each device's cotangent of it is a part, and the
  whole is their sum along the axes the result varies on and the operand
  does not: data-parallel gradient synchronisation, an all_reduce of the
  partial cotangent (`../shared/parallel.md` §4). `ShardedAdjoint` keeps
  such cotangents partial while linear rules carry them and sums them where
  that ends, so the sum is taken on the smallest cotangent.
* **Equal copies of a varying value** (an all_gather's result, and what is
  computed from it on every device): only the sum of the devices' cotangents
  counts, so where a collective makes the whole cotangent on every device of
  such a value (all_slice's adjoint), each takes 1/n of it.
* **A seed of a varying result stored replicated** (an all_gather's result
  returned as it is): its devices hold equal values of one global result,
  so each gets 1/n of its cotangent (`seed`); a result invariant along an
  axis gets the whole cotangent on each device, one split along it its part.

`varying_axes` is the analysis: a function argument varies along the axes of
its layout (dims and partial); all_reduce makes its result invariant along
its axis; the other collectives and process_index make it vary along theirs;
every other op's results vary along the union of its operands' axes
(constants along none).
"""

from __future__ import annotations

import math

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

# msir_shard (and the ascend dialect it builds on) is imported only for a per-device function: reverse mode of
# ordinary functions does not pay for it
MESH_ATTR = "msir_shard.mesh"
"""`msir.dialects.msir_shard.MESH_ATTR`."""
_COLLECTIVE_NAMES = frozenset({"msir_shard.all_reduce", "msir_shard.reduce_scatter", "msir_shard.all_gather",
                               "msir_shard.all_to_all", "msir_shard.all_slice"})

Varying = dict[SSAValue, frozenset[int]]


def varying_axes(f: func.FuncOp) -> tuple[Varying, tuple[int, ...]] | None:
    """The mesh axes each value of per-device function `f` varies along, and
    the mesh shape; None if `f` is not a per-device function."""
    mesh_ref = f.attributes.get(MESH_ATTR)
    if mesh_ref is None:
        return None
    import msir.dialects.msir_shard as S

    shape = S.mesh_shape_of(f, mesh_ref, f"function @{f.sym_name.data}")
    varying: Varying = {}
    for i, arg in enumerate(f.body.block.args):
        layout = f.arg_attrs.data[i].data.get(S.LAYOUT_ATTR) if f.arg_attrs else None
        axes = set(layout.partial_tuple) if isinstance(layout, S.LayoutAttr) else set()
        if isinstance(layout, S.LayoutAttr):
            axes.update(a for dim in layout.dims_tuple for a in dim)
        varying[arg] = frozenset(axes)
    for op in f.body.walk():
        if op is f:
            continue
        axes = frozenset().union(*(varying.get(v, frozenset()) for v in op.operands))
        if isinstance(op, S.AllReduceOp):
            axes = axes - {op.axis.value.data}
        elif isinstance(op, (*S.COLLECTIVES, S.ProcessIndexOp)):
            axes = axes | {op.axis.value.data}
        for r in op.results:
            varying[r] = axes
    return varying, shape


def is_collective(op: Operation) -> bool:
    return op.name in _COLLECTIVE_NAMES


class ShardedAdjoint:
    """The per-device bookkeeping of one adjoint: which cotangents are still
    partial sums, and along which axes (module docstring).

    A contribution to the cotangent of an operand invariant along axes the
    op's result varies along is a part of the whole; it stays partial
    (`pending`) as long as the rules that carry it are linear and read only
    values invariant along those axes — every op with an invariant result,
    whose operands are invariant too — and is all-reduced where that ends:
    before a collective's rule, where two contributions partial along other
    axes meet, and for the gradients returned. So the sum is taken on the
    smallest cotangent the adjoint has (a bias's gradient after its
    `reduce_sum`, not the batch of rows before it)."""

    def __init__(self, f: func.FuncOp, varying: Varying, shape: tuple[int, ...]):
        self.f, self.varying, self.shape = f, varying, shape
        self.mesh = f.attributes[MESH_ATTR].root_reference.data
        self.pending: dict[SSAValue, frozenset[int]] = {}

    @classmethod
    def of(cls, f: func.FuncOp) -> ShardedAdjoint | None:
        """The bookkeeping for `f` if it is a per-device function, else None."""
        found = varying_axes(f)
        return None if found is None else cls(f, *found)

    def seed(self, B, position: int, value: SSAValue, ct: SSAValue) -> SSAValue:
        return seed(B, self.f, position, ct, self.varying[value], self.shape)

    def params(self, op: Operation, params: dict) -> dict:
        """A collective's rule parameters with what its input varies along (`grad_rules`' all_slice rule)."""
        if not is_collective(op):
            return params
        axis = params["axis"]
        return {**params, "input_varying": axis in self.varying[op.operands[0]], "axis_size": self.shape[axis]}

    def partial_of(self, op: Operation, operand: SSAValue, result: SSAValue) -> frozenset[int]:
        """The axes along which `op`'s cotangent contribution to `operand` is partial."""
        if is_collective(op):
            return frozenset()
        return self.pending.get(result, frozenset()) | (self.varying[result] - self.varying[operand])

    def resolve(self, B, value: SSAValue, ct: dict) -> None:
        """Make `value`'s cotangent whole (all-reduce its partial axes)."""
        axes = self.pending.pop(value, frozenset())
        if axes and value in ct:
            ct[value] = self._sum(B, ct[value], axes)

    def merge(self, B, value: SSAValue, c: SSAValue, partial: frozenset[int], ct: dict) -> SSAValue:
        """A new contribution `c`, partial along `partial`, made addable to `value`'s cotangent so far."""
        if value not in ct:
            self.pending[value] = partial
            return c
        old = self.pending.get(value, frozenset())
        if old - partial:
            ct[value] = self._sum(B, ct[value], old - partial)
        self.pending[value] = old & partial
        return self._sum(B, c, partial - old)

    def _sum(self, B, c: SSAValue, axes) -> SSAValue:
        for a in sorted(axes):  # ascending, as §3 resolves partial axes
            c = B.collective("all_reduce", c, {"mesh": self.mesh, "axis": a, "kind": "sum"})
        return c


def seed(B, f: func.FuncOp, position: int, ct: SSAValue, axes: frozenset[int], shape: tuple[int, ...]) -> SSAValue:
    """The cotangent seed of result `position` of `f`, varying along `axes`: scaled by 1/n for the n devices
    holding equal replicas of a varying result."""
    import msir.dialects.msir_shard as S

    layout = f.res_attrs.data[position].data.get(S.LAYOUT_ATTR) if f.res_attrs else None
    split = {a for dim in layout.dims_tuple for a in dim} if isinstance(layout, S.LayoutAttr) else set()
    n = math.prod(shape[a] for a in axes - split)
    if n == 1:
        return ct
    return B.binary("mul", ct, B.constant(1.0 / n, B.dtype(ct), B.shape(ct)))
