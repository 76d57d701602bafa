"""The IR side of the differentiation rules: `op_params` reads an `msir` op as
(primitive name, parameters), and `IRBuilder` implements the rules' `Builder`
interface by appending `msir` ops to a block.

An `IRBuilder` with a `name` gives each op it emits that `msir.name`
(`M.NAME_ATTR`): the differentiation passes name the ops that differentiate a
named op after it (`derived_name`), and `msir-lower-einsum` names an einsum's
decomposition after the einsum.

Values handed to a rule may be `Lazy`: a primal value of the function being
differentiated that the adjoint can only use once it is made available (as a
residual argument, or by recomputing a constant). `IRBuilder.val` resolves them
on first use, so only the primal values the rules actually read become residuals.

Also here, shared by reverse mode's function and control-flow halves
(`msir.passes.grad`, `msir.passes.grad_control`): `Pair`, the names of a
function's augmented forward and adjoint, `is_float_type` and `source_loc`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FileLineColLoc, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue

from msir.dialects import msir as M
from msir.dialects import primitives as P
from msir.errors import SourceLoc


@dataclass(eq=False)
class Lazy:
    """A primal value, resolved by the builder's `resolve` callback on first use."""

    value: SSAValue


def op_params(op: Operation) -> tuple[str, dict[str, Any]]:
    """The primitive name of an msir op and the parameters its rules need."""
    name = op.name.removeprefix("msir.")
    p: dict[str, Any] = {}
    match op:
        case M.ReduceOp():
            p = {"axes": op.axes_list, "keepdims": op.keepdims}
        case M.TransposeOp():
            p = {"perm": tuple(op.permutation.get_values())}
        case M.SliceOp() | M.ScatterSliceOp():
            p = {"starts": tuple(op.starts.get_values()), "steps": tuple(op.steps.get_values())}
        case M.TakeOp() | M.ScatterAddOp() | M.ConcatenateOp() | M.StackOp():
            p = {"axis": op.axis.value.data}
        case M.CompareOp():
            p = {"predicate": op.predicate_name}
        case M.ArgReduceOp():
            p = {"axis": op.axis_value}
        case M.EinsumOp():
            p = {"spec": op.spec_string}
        case M.Conv2dOp():
            p = {"stride": M._ints(op.stride), "padding": M._ints(op.padding), "dilation": M._ints(op.dilation),
                 "groups": op.groups.value.data}
        case M.MaxPool2dOp():
            p = {"kernel": M._ints(op.kernel), "stride": M._ints(op.stride), "padding": M._ints(op.padding)}
        case M.AvgPool2dOp():
            p = {"kernel": M._ints(op.kernel), "stride": M._ints(op.stride), "padding": M._ints(op.padding),
                 "count_include_pad": op.includes_padding}
    if name.startswith("msir_shard."):  # a collective: its mesh axis and dimensions
        p = {k: getattr(op, k).data if k in ("mesh", "kind") else getattr(op, k).value.data
             for k in ("axis", "dim", "to_dim", "kind") if k in op.properties}
        p["mesh"] = op.mesh.root_reference.data
    if op.results and isinstance(op.results[0].type, M.TensorType):
        p["shape"] = M.shape_of(op.results[0].type)
        p["dtype"] = M.dtype_of(op.results[0].type)
    return name, p


def name_of(op: Operation) -> str | None:
    """The op's `msir.name`, if it has one."""
    attr = op.attributes.get(M.NAME_ATTR)
    return attr.data if isinstance(attr, StringAttr) else None


def derived_name(op: Operation, suffix: str) -> str | None:
    """The name of the ops derived from `op` by a transformation (`"fc1"` ->
    `"fc1/grad"`), None if `op` has no name."""
    name = name_of(op)
    return None if name is None else f"{name}/{suffix}"


class IRBuilder:
    """Builds msir ops at the end of `block`, each with location `loc` and, if
    `name` is set, that `msir.name` (an op that has one already keeps its own)."""

    def __init__(
        self, block: Block, loc: Attribute, resolve: Callable[[Lazy], SSAValue] | None = None, name: str | None = None
    ):
        self.block = block
        self.loc = loc
        self.resolve = resolve
        self.name = name

    def val(self, x: Any) -> SSAValue:
        if isinstance(x, Lazy):
            assert self.resolve is not None
            return self.resolve(x)
        return x

    def emit(self, op: Operation) -> SSAValue:
        op.location = self.loc
        if self.name is not None and M.NAME_ATTR not in op.attributes:
            op.attributes[M.NAME_ATTR] = StringAttr(self.name)
        self.block.add_op(op)
        return op.results[0]

    # -- types ----------------------------------------------------------------

    def shape(self, x: Any) -> tuple[int, ...]:
        v = x.value if isinstance(x, Lazy) else x
        return M.shape_of(v.type)

    def dtype(self, x: Any) -> str:
        v = x.value if isinstance(x, Lazy) else x
        return M.dtype_of(v.type)

    # -- ops ------------------------------------------------------------------

    def constant(self, value: float, dtype: str, shape: Sequence[int] = ()) -> SSAValue:
        v = float(value) if M.is_float(dtype) else int(value)
        attr = DenseIntOrFPElementsAttr.from_list(M.tensor_type(shape, dtype), [v])
        return self.emit(M.ConstantOp(attr))

    def iota(self, dtype: str, shape: Sequence[int], axis: int) -> SSAValue:
        return self.emit(M.IotaOp(axis, M.tensor_type(shape, dtype)))

    _UNARY = {**{p.name: M.ELEMENTWISE_OPS[p.name] for p in P.UNARY}, "stop_gradient": M.StopGradientOp}
    _BINARY = {p.name: M.ELEMENTWISE_OPS[p.name] for p in P.BINARY}
    _REDUCE = {
        "sum": M.ReduceSumOp, "max": M.ReduceMaxOp, "min": M.ReduceMinOp, "prod": M.ReduceProdOp,
        "mean": M.ReduceMeanOp,
    }

    def unary(self, name: str, x: Any) -> SSAValue:
        return self.emit(self._UNARY[name](self.val(x)))

    def binary(self, name: str, a: Any, b: Any) -> SSAValue:
        return self.emit(self._BINARY[name](self.val(a), self.val(b)))

    def compare(self, pred: str, a: Any, b: Any) -> SSAValue:
        return self.emit(M.CompareOp(pred, self.val(a), self.val(b)))

    def select(self, c: Any, a: Any, b: Any) -> SSAValue:
        return self.emit(M.SelectOp(self.val(c), self.val(a), self.val(b)))

    def cast(self, x: Any, dtype: str) -> SSAValue:
        v = self.val(x)
        return v if M.dtype_of(v.type) == dtype else self.emit(M.CastOp(v, dtype))

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> SSAValue:
        v = self.val(x)
        return v if M.shape_of(v.type) == tuple(shape) else self.emit(M.BroadcastToOp(v, shape))

    def reshape(self, x: Any, shape: Sequence[int]) -> SSAValue:
        v = self.val(x)
        return v if M.shape_of(v.type) == tuple(shape) else self.emit(M.ReshapeOp(v, shape))

    def transpose(self, x: Any, perm: Sequence[int]) -> SSAValue:
        v = self.val(x)
        return v if list(perm) == list(range(len(perm))) else self.emit(M.TransposeOp(v, perm))

    def reduce(self, name: str, x: Any, axes: Sequence[int], keepdims: bool) -> SSAValue:
        v = self.val(x)
        if not axes:
            return v
        return self.emit(self._REDUCE[name](v, sorted(axes), keepdims))

    def matmul(self, a: Any, b: Any) -> SSAValue:
        return self.emit(M.MatmulOp(self.val(a), self.val(b)))

    def einsum(self, spec: str, xs: Sequence[Any]) -> SSAValue:
        vs = [self.val(x) for x in xs]
        terms, output = M.parse_einsum(spec, len(vs))
        return vs[0] if terms == (output,) else self.emit(M.EinsumOp(spec, vs))

    def slice(self, x: Any, starts, sizes, steps) -> SSAValue:
        v = self.val(x)
        if M.shape_of(v.type) == tuple(sizes) and all(s == 0 for s in starts) and all(t == 1 for t in steps):
            return v
        return self.emit(M.SliceOp(v, starts, sizes, steps))

    def scatter_slice(self, x: Any, starts, steps, shape) -> SSAValue:
        v = self.val(x)
        if M.shape_of(v.type) == tuple(shape) and all(s == 0 for s in starts) and all(t == 1 for t in steps):
            return v
        return self.emit(M.ScatterSliceOp(v, starts, steps, shape))

    def take(self, x: Any, idx: Any, axis: int) -> SSAValue:
        return self.emit(M.TakeOp(self.val(x), self.val(idx), axis))

    def scatter_add(self, u: Any, idx: Any, axis: int, shape) -> SSAValue:
        return self.emit(M.ScatterAddOp(self.val(u), self.val(idx), axis, shape))

    def compress(self, x: Any, mask: Any) -> SSAValue:
        return self.emit(M.CompressOp(self.val(x), self.val(mask)))

    def expand(self, u: Any, mask: Any, shape) -> SSAValue:
        v, m = self.val(u), self.val(mask)
        if isinstance(v.owner, M.BroadcastToOp) and M.DYNAMIC not in M.shape_of(v.owner.input.type):
            # A reduction's cotangent spread over a runtime length (no buffer can be sized
            # for that broadcast alone): the same values where the mask is true, from a
            # broadcast to the static result instead.
            return self._expand_broadcast(v.owner.input, m, tuple(shape))
        return self.emit(M.ExpandOp(v, m, shape))

    def _expand_broadcast(self, small: SSAValue, mask: SSAValue, shape: tuple[int, ...]) -> SSAValue:
        """`expand(broadcast_to(small, (?, *rows)), mask)` without the runtime-length broadcast."""
        k = len(M.shape_of(mask.type))
        rows = shape[k:]
        s_shape = M.shape_of(small.type)
        if len(s_shape) == len(rows) + 1:  # its first dim is 1: the same for every selected row
            small = self.reshape(small, s_shape[1:])
        full = self.broadcast_to(small, shape)
        where = self.broadcast_to(self.reshape(mask, (*M.shape_of(mask.type), *[1] * len(rows))), shape)
        return self.select(where, full, self.constant(0.0, M.dtype_of(small.type), shape))

    def concatenate(self, xs: Sequence[Any], axis: int) -> SSAValue:
        return self.emit(M.ConcatenateOp([self.val(x) for x in xs], axis))

    def stack(self, xs: Sequence[Any], axis: int) -> SSAValue:
        return self.emit(M.StackOp([self.val(x) for x in xs], axis))

    def tape_set(self, tape: Any, k: Any, v: Any) -> SSAValue:
        return self.emit(M.TapeSetOp(self.val(tape), self.val(k), self.val(v)))

    def tape_push(self, tape: Any, v: Any) -> SSAValue:
        return self.emit(M.TapePushOp(self.val(tape), self.val(v)))

    def tape_get(self, tape: Any, k: Any) -> SSAValue:
        return self.emit(M.TapeGetOp(self.val(tape), self.val(k)))

    def tape_add(self, tape: Any, k: Any, v: Any) -> SSAValue:
        return self.emit(M.TapeAddOp(self.val(tape), self.val(k), self.val(v)))

    def tape_zeros(self, like: Any) -> SSAValue:
        return self.emit(M.TapeZerosOp(self.val(like)))

    # -- collectives (in per-device functions, after msir-shard) ---------------------

    def collective(self, kind: str, x: Any, p: dict, shape: Sequence[int] = ()) -> SSAValue:
        """The `msir_shard` collective `kind` of `x` on mesh axis `p["axis"]` of
        mesh `p["mesh"]` (`p` as `op_params` reads a collective: `dim`,
        `to_dim`, `kind` where the op has them); `shape` is the local result
        shape of those that change it."""
        from msir.dialects import msir_shard as S

        v = self.val(x)
        mesh, axis = p["mesh"], p["axis"]
        if kind == "all_reduce":
            return self.emit(S.AllReduceOp(v, mesh, axis, p["kind"]))
        result = M.tensor_type(shape, M.dtype_of(v.type))
        if kind == "all_to_all":
            return self.emit(S.AllToAllOp(v, mesh, axis, p["dim"], p["to_dim"], result))
        cls = {"reduce_scatter": S.ReduceScatterOp, "all_gather": S.AllGatherOp, "all_slice": S.AllSliceOp}[kind]
        return self.emit(cls(v, mesh, axis, p["dim"], result))

    def apply(self, name: str, p: dict, xs: Sequence[Any]) -> SSAValue:
        """Apply a (linear) primitive by name with the parameters `op_params` gives."""
        if name in self._UNARY:
            return self.unary(name, xs[0])
        if name in self._BINARY:
            return self.binary(name, xs[0], xs[1])
        if name.startswith("reduce_"):
            return self.reduce(name.removeprefix("reduce_"), xs[0], p["axes"], p["keepdims"])
        match name:
            case "broadcast_to":
                return self.broadcast_to(xs[0], p["shape"])
            case "reshape":
                return self.reshape(xs[0], p["shape"])
            case "transpose":
                return self.transpose(xs[0], p["perm"])
            case "slice":
                return self.slice(xs[0], p["starts"], p["shape"], p["steps"])
            case "scatter_slice":
                return self.scatter_slice(xs[0], p["starts"], p["steps"], p["shape"])
            case "concatenate":
                return self.concatenate(xs, p["axis"])
            case "stack":
                return self.stack(xs, p["axis"])
            case "conv2d":
                return self.emit(M.Conv2dOp(self.val(xs[0]), self.val(xs[1]), p["stride"], p["padding"],
                                            p["dilation"], p["groups"]))
            case "max_pool2d":
                return self.emit(M.MaxPool2dOp(self.val(xs[0]), p["kernel"], p["stride"], p["padding"]))
            case "ramp":
                return self.emit(M.RampOp(*(self.val(x) for x in xs)))
            case "avg_pool2d":
                return self.emit(M.AvgPool2dOp(self.val(xs[0]), p["kernel"], p["stride"], p["padding"],
                                               p["count_include_pad"]))
        raise KeyError(f"IRBuilder.apply: no builder for '{name}'")


def source_loc(op: Operation) -> SourceLoc | None:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
    return None


def is_float_type(t: Attribute) -> bool:
    return isinstance(t, TensorType) and M.is_float(M.dtype_of(t))


@dataclass
class Pair:
    """The augmented forward and adjoint of one function."""

    fwd: str
    bwd: str
    n_results: int
    residual_types: list[Attribute]
    float_results: list[int]  # result positions that take a cotangent
    float_args: list[int]  # parameter positions that get a cotangent
