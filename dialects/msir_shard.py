"""The `msir_shard` dialect: meshes, layouts, strategies and collectives of
msir's auto-parallel (`../shared/parallel.md` §2, §3, §5).

    msir_shard.mesh @mesh(shape = 2x4)
    %0 = msir.matmul %x, %w {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,n">} : ...
    %1 = msir_shard.all_reduce %p on @mesh axis 1 kind "sum" : tensor<4x8xf32>

* `msir_shard.mesh` declares a grid of devices (the syntax of xDSL's
  `shard.grid`, whose `DimensionList` directive it reuses).
* `#msir_shard.layout<@mesh, dims=[[0],[]], partial=[1]>` says how a value is
  stored: the mesh axes splitting each dimension (major to minor) and the axes
  over which the local values are partial sums. It is the IR form of
  `msir.parallel.Layout`.
* `#msir_shard.strategy<@mesh, "m,-">` on an op: per mesh axis, the loop letter
  of the op it splits, or `-` (`msir.parallel.mesh_layout`'s text form).
* The collectives act on one mesh axis each and on the local tensors of the
  devices along it, device r being the r-th along the axis: `all_reduce`
  (sum or max; the shape stays), `reduce_scatter` (sum, then device r keeps
  the r-th chunk of `dim`), `all_gather` (the devices' tensors concatenated
  along `dim` in device order), `all_to_all` (`dim` grows n-fold, `to_dim`
  shrinks n-fold: the split moves from one dimension to the other),
  `all_slice` (no communication: device r keeps the r-th chunk of `dim`) and
  `process_index` (the device's index along the axis).

Why not xDSL's `shard` dialect: its sharding has no `partial` field (which
contractions and gradients need), and it has no all_gather, all_slice,
all_to_all or reduce_scatter; its all_reduce takes several grid axes, where
msir's reshard sequence (`msir.parallel.reshard`) is one collective per
axis. A layout with nothing partial is what a `shard.sharding` says.

Verifiers raise only `VerifyException`s, each naming the op, the mesh axis,
the dimension and the types involved. Every op records the position of its
text as its location when parsed (`msir.dialects.ascend.op_definition`), so
that the passes' refusals point into the `.mlir` file.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    i64,
)
from xdsl.dialects.shard import DimensionList
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    operand_def,
    param_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import Pure, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from msir.dialects.ascend import op_definition

STRATEGY_ATTR = "msir_shard.strategy"
"""The attribute of an op that holds its strategy (`StrategyAttr`)."""
LAYOUT_ATTR = "msir_shard.layout"
"""The argument/result attribute of a per-device function holding a value's layout (`LayoutAttr`)."""
MESH_ATTR = "msir_shard.mesh"
"""The attribute of a per-device function naming the mesh it runs on."""
REDUCTION_KINDS = ("sum", "max")


# ---------------------------------------------------------------------------
# The mesh
# ---------------------------------------------------------------------------


@op_definition
class MeshOp(IRDLOperation):
    """A grid of devices, `shape[a]` along mesh axis a.

        msir_shard.mesh @mesh(shape = 2x4)
    """

    name = "msir_shard.mesh"

    sym_name = prop_def(SymbolNameConstraint())
    shape = prop_def(DenseArrayBase[I64])

    traits = traits_def(SymbolOpInterface(), Pure())

    assembly_format = "$sym_name `(` `shape` `=` custom<DimensionList>($shape) `)` attr-dict"
    custom_directives = (DimensionList,)

    def __init__(self, name: str, shape: tuple[int, ...]):
        super().__init__(properties={"sym_name": StringAttr(name),
                                     "shape": DenseArrayBase.from_list(i64, list(shape))})

    @property
    def mesh_shape(self) -> tuple[int, ...]:
        return tuple(self.shape.get_values())

    def verify_(self) -> None:
        shape = self.mesh_shape
        if not shape or any(n < 1 for n in shape):
            raise VerifyException(f"'{self.name}' @{self.sym_name.data} needs one or more axes of size >= 1, "
                                  f"got shape {'x'.join(map(str, shape)) or '()'}")


def mesh_shape_of(op: Operation, mesh: SymbolRefAttr, what: str) -> tuple[int, ...]:
    """The shape of the mesh `op` names, or a VerifyException saying why there is none."""
    target = SymbolTable.lookup_symbol(op, mesh)
    if not isinstance(target, MeshOp):
        found = "is not defined" if target is None else f"is a {target.name}, not a msir_shard.mesh"
        raise VerifyException(f"{what} names mesh {mesh}, which {found}")
    return target.mesh_shape


# ---------------------------------------------------------------------------
# Layouts and strategies
# ---------------------------------------------------------------------------


def _parse_ints(parser: AttrParser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """How a value is stored on a mesh (`msir.parallel.Layout`):

        #msir_shard.layout<@mesh, dims=[[0],[]], partial=[1]>

    `dims[i]` lists the mesh axes splitting dimension i, major to minor;
    `partial` the axes over which the local values are partial sums of the
    global value (`partial=[]` may be left out)."""

    name = "msir_shard.layout"

    mesh: SymbolRefAttr = param_def(SymbolRefAttr)
    dims: ArrayAttr[ArrayAttr[IntAttr]] = param_def(ArrayAttr[ArrayAttr[IntAttr]])
    partial: ArrayAttr[IntAttr] = param_def(ArrayAttr[IntAttr])

    def __init__(self, mesh: str | SymbolRefAttr, dims, partial=()):
        mesh = mesh if isinstance(mesh, SymbolRefAttr) else SymbolRefAttr(mesh)
        super().__init__(mesh, ArrayAttr([ArrayAttr([IntAttr(a) for a in d]) for d in dims]),
                         ArrayAttr([IntAttr(a) for a in sorted(partial)]))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        parser.parse_punctuation("<")
        mesh = SymbolRefAttr(parser.parse_symbol_name())
        parser.parse_punctuation(",")
        parser.parse_keyword("dims")
        parser.parse_punctuation("=")
        dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: _parse_ints(parser))
        partial: list[int] = []
        if parser.parse_optional_punctuation(",") is not None:
            parser.parse_keyword("partial")
            parser.parse_punctuation("=")
            partial = _parse_ints(parser)
        parser.parse_punctuation(">")
        return [mesh, ArrayAttr([ArrayAttr([IntAttr(a) for a in d]) for d in dims]),
                ArrayAttr([IntAttr(a) for a in partial])]

    def print_parameters(self, printer: Printer) -> None:
        dims = ",".join("[" + ",".join(map(str, d)) + "]" for d in self.dims_tuple)
        printer.print_string(f"<{self.mesh}, dims=[{dims}]")
        if self.partial_tuple:
            printer.print_string(f", partial=[{','.join(map(str, self.partial_tuple))}]")
        printer.print_string(">")

    @property
    def dims_tuple(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(a.data for a in d) for d in self.dims)

    @property
    def partial_tuple(self) -> tuple[int, ...]:
        return tuple(a.data for a in self.partial)

    def verify(self) -> None:
        used = [a for d in self.dims_tuple for a in d] + list(self.partial_tuple)
        if any(a < 0 for a in used):
            raise VerifyException(f"layout {self} names a negative mesh axis")
        repeated = sorted({a for a in used if used.count(a) > 1})
        if repeated:
            raise VerifyException(f"layout {self} uses mesh axis {repeated[0]} twice")
        if list(self.partial_tuple) != sorted(self.partial_tuple):
            raise VerifyException(f"layout {self}: partial axes must be listed in ascending order")

    def verify_on(self, op: Operation, shape: tuple[int, ...], what: str) -> None:
        """Check the layout against the mesh it names (looked up from `op`)
        and the global `shape` of the value it describes."""
        mesh = mesh_shape_of(op, self.mesh, what)
        if len(self.dims) != len(shape):
            raise VerifyException(f"{what}: layout {self} has {len(self.dims)} dimensions, the value has rank "
                                  f"{len(shape)}")
        for a in (*[a for d in self.dims_tuple for a in d], *self.partial_tuple):
            if a >= len(mesh):
                raise VerifyException(f"{what}: layout {self} names mesh axis {a}, but mesh {self.mesh} has "
                                      f"{len(mesh)} axes")
        for i, (n, axes) in enumerate(zip(shape, self.dims_tuple)):
            split = 1
            for a in axes:
                split *= mesh[a]
            if n % split:
                raise VerifyException(f"{what}: layout {self} splits dimension {i} (size {n}) {split} ways, "
                                      f"which does not divide it")


@irdl_attr_definition
class StrategyAttr(ParametrizedAttribute):
    """The strategy of an op: per mesh axis, the op's loop letter it splits,
    or `-` (the axis is unused; the work is replicated along it).

        #msir_shard.strategy<@mesh, "m,-">
    """

    name = "msir_shard.strategy"

    mesh: SymbolRefAttr = param_def(SymbolRefAttr)
    text: StringAttr = param_def(StringAttr)

    def __init__(self, mesh: str | SymbolRefAttr, text: str):
        mesh = mesh if isinstance(mesh, SymbolRefAttr) else SymbolRefAttr(mesh)
        super().__init__(mesh, StringAttr(text))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        parser.parse_punctuation("<")
        mesh = SymbolRefAttr(parser.parse_symbol_name())
        parser.parse_punctuation(",")
        text = parser.parse_str_literal()
        parser.parse_punctuation(">")
        return [mesh, StringAttr(text)]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f'<{self.mesh}, "{self.text.data}">')

    @property
    def entries(self) -> tuple[str | None, ...]:
        """One loop letter (None for `-`) per mesh axis."""
        return tuple(None if p.strip() == "-" else p.strip() for p in self.text.data.split(","))

    def verify(self) -> None:
        for p in self.text.data.split(","):
            p = p.strip()
            if p != "-" and not (len(p) == 1 and p.isalpha()):
                raise VerifyException(f"strategy {self}: entry '{p}' is neither '-' nor one loop letter")


# ---------------------------------------------------------------------------
# Collectives
# ---------------------------------------------------------------------------


class _OnMeshAxis(IRDLOperation):
    """A collective on one axis of a mesh: checks the mesh and the axis."""

    mesh = prop_def(SymbolRefAttr)
    axis = prop_def(IntegerAttr[I64])

    def mesh_axis_size(self) -> int:
        """The number of devices along the op's axis (VerifyException if there is no such axis)."""
        shape = mesh_shape_of(self, self.mesh, f"'{self.name}'")
        a = self.axis.value.data
        if not 0 <= a < len(shape):
            raise VerifyException(f"'{self.name}' on axis {a} of mesh {self.mesh}, which has {len(shape)} axes "
                                  f"(shape {'x'.join(map(str, shape))})")
        return shape[a]

    def _check_dim(self, name: str, dim: int, rank: int) -> None:
        if not 0 <= dim < rank:
            raise VerifyException(f"'{self.name}': {name} {dim} is out of range for an operand of rank {rank}")

    def _check_element_types(self, src: TensorType, dst: TensorType) -> None:
        if src.element_type != dst.element_type:
            raise VerifyException(f"'{self.name}': the result {dst} has another element type than the operand {src}")

    def _check_result_shape(self, src: TensorType, dst: TensorType, want: list[int]) -> None:
        if list(dst.get_shape()) != want:
            expected = TensorType(src.element_type, want)
            raise VerifyException(f"'{self.name}' on axis {self.axis.value.data} of mesh {self.mesh}: the result "
                                  f"of operand {src} is {expected}, not {dst}")

    def _check_divides(self, src: TensorType, dim: int, n: int) -> None:
        size = src.get_shape()[dim]
        if size % n:
            raise VerifyException(f"'{self.name}': dimension {dim} of operand {src} (size {size}) is not divisible "
                                  f"by the {n} devices of axis {self.axis.value.data} of mesh {self.mesh}")


@op_definition
class AllReduceOp(_OnMeshAxis):
    """Every device along `axis` gets the sum (or max) of their tensors.

        %r = msir_shard.all_reduce %p on @mesh axis 1 kind "sum" : tensor<4x8xf32>
    """

    name = "msir_shard.all_reduce"

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    kind = prop_def(StringAttr)

    assembly_format = "$input `on` $mesh `axis` $axis `kind` $kind attr-dict `:` type($input)"

    def __init__(self, input, mesh: str, axis: int, kind: str = "sum"):
        super().__init__(operands=[input], result_types=[input.type],
                         properties={"mesh": SymbolRefAttr(mesh), "axis": IntegerAttr(axis, 64),
                                     "kind": StringAttr(kind)})

    def verify_(self) -> None:
        if self.kind.data not in REDUCTION_KINDS:
            raise VerifyException(f"'{self.name}': unknown reduction kind \"{self.kind.data}\" "
                                  f"(known: {', '.join(REDUCTION_KINDS)})")
        self.mesh_axis_size()


class _AlongDim(_OnMeshAxis):
    """A collective that splits or gathers one dimension `dim`."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])

    assembly_format = "$input `on` $mesh `axis` $axis `dim` $dim attr-dict `:` type($input) `to` type($result)"

    GROWS: ClassVar[bool]
    """True: the result's `dim` is n times the operand's (gather); False: 1/n of it (scatter, slice)."""

    def __init__(self, input, mesh: str, axis: int, dim: int, result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"mesh": SymbolRefAttr(mesh), "axis": IntegerAttr(axis, 64),
                                     "dim": IntegerAttr(dim, 64)})

    def verify_(self) -> None:
        n = self.mesh_axis_size()
        src, dst = self.input.type, self.result.type
        dim = self.dim.value.data
        self._check_dim("dim", dim, src.get_num_dims())
        self._check_element_types(src, dst)
        want = list(src.get_shape())
        if self.GROWS:
            want[dim] *= n
        else:
            self._check_divides(src, dim, n)
            want[dim] //= n
        self._check_result_shape(src, dst, want)


@op_definition
class ReduceScatterOp(_AlongDim):
    """The sum over the devices along `axis`, device r keeping the r-th chunk of `dim`.

        %r = msir_shard.reduce_scatter %p on @mesh axis 0 dim 1 : tensor<4x8xf32> to tensor<4x4xf32>
    """

    name = "msir_shard.reduce_scatter"
    GROWS: ClassVar[bool] = False


@op_definition
class AllGatherOp(_AlongDim):
    """The tensors of the devices along `axis`, concatenated along `dim` in device order.

        %g = msir_shard.all_gather %x on @mesh axis 0 dim 0 : tensor<2x8xf32> to tensor<4x8xf32>
    """

    name = "msir_shard.all_gather"
    GROWS: ClassVar[bool] = True


@op_definition
class AllSliceOp(_AlongDim):
    """No communication: device r along `axis` keeps the r-th chunk of `dim` of its tensor.

        %s = msir_shard.all_slice %x on @mesh axis 1 dim 1 : tensor<4x8xf32> to tensor<4x2xf32>
    """

    name = "msir_shard.all_slice"
    GROWS: ClassVar[bool] = False


@op_definition
class AllToAllOp(_OnMeshAxis):
    """Moves the split of axis `axis` from dimension `dim` to `to_dim`: each
    device cuts its tensor into n chunks along `to_dim`, sends the q-th to
    device q, and concatenates what it receives along `dim` in device order.

        %t = msir_shard.all_to_all %x on @mesh axis 0 dims 0 to 1 : tensor<2x8xf32> to tensor<4x4xf32>
    """

    name = "msir_shard.all_to_all"

    input = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    to_dim = prop_def(IntegerAttr[I64])

    assembly_format = ("$input `on` $mesh `axis` $axis `dims` $dim `to` $to_dim attr-dict `:` type($input) `to` "
                       "type($result)")

    def __init__(self, input, mesh: str, axis: int, dim: int, to_dim: int, result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"mesh": SymbolRefAttr(mesh), "axis": IntegerAttr(axis, 64),
                                     "dim": IntegerAttr(dim, 64), "to_dim": IntegerAttr(to_dim, 64)})

    def verify_(self) -> None:
        n = self.mesh_axis_size()
        src, dst = self.input.type, self.result.type
        dim, to_dim = self.dim.value.data, self.to_dim.value.data
        self._check_dim("dim", dim, src.get_num_dims())
        self._check_dim("to_dim", to_dim, src.get_num_dims())
        if dim == to_dim:
            raise VerifyException(f"'{self.name}': dim and to_dim are both {dim}; the split must move")
        self._check_element_types(src, dst)
        self._check_divides(src, to_dim, n)
        want = list(src.get_shape())
        want[dim] *= n
        want[to_dim] //= n
        self._check_result_shape(src, dst, want)


@op_definition
class ProcessIndexOp(_OnMeshAxis):
    """The index of the executing device along `axis` of the mesh.

        %i = msir_shard.process_index on @mesh axis 1 : index
    """

    name = "msir_shard.process_index"

    result = result_def(IndexType)

    assembly_format = "`on` $mesh `axis` $axis attr-dict `:` type($result)"

    def __init__(self, mesh: str, axis: int):
        super().__init__(result_types=[IndexType()],
                         properties={"mesh": SymbolRefAttr(mesh), "axis": IntegerAttr(axis, 64)})

    def verify_(self) -> None:
        self.mesh_axis_size()


COLLECTIVES = (AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp, AllSliceOp)

MsirShard = Dialect(
    "msir_shard",
    [MeshOp, AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp, AllSliceOp, ProcessIndexOp],
    [LayoutAttr, StrategyAttr],
)
