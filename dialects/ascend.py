"""The `ascend` dialect: a DaVinci-style AI Core, one level below AscendNPU-IR's HIVM.

A kernel (`ascend.kernel`) runs on `block_dim` AI cores at once; each core
executes the same body, telling itself apart by `ascend.block_idx`. Scalar
control is ordinary `scf`/`arith` on `index` values. Everything the hardware
makes explicit is explicit here, so that the emulator (`msir.ascend`) can check
it: on-chip buffers (`ascend.alloc`) live at static byte offsets of their
memory (l1, l0a, l0b, l0c, ub), data moves on a named pipe (`ascend.copy`:
MTE1/MTE2/MTE3/FIX, and V for L0C->UB on coupled chips; `ascend.init_const`
sets a tile of L1/L0A/L0B to a constant on MTE2), the cube multiplies
fractal tiles (`ascend.mmad`), vector instructions carry their mask, repeat
count and block/repeat strides (`ascend.vadd`, ...), and the pipes are ordered
only by the sync ops named as Ascend C names them (`ascend.set_flag`,
`ascend.wait_flag`, `ascend.pipe_barrier`).

Buffers are `!ascend.buf<space, shape x dtype[, layout]>`: the logical shape of
the data (a matrix is rows x cols whatever its layout) and how it is stored.
Layout names: the lower-case letter is the order inside one fractal, the
upper-case one the order of the fractals (z/Z row-major, n/N column-major); a
fractal is 16 rows x C0 columns, C0 = 32 bytes of the element type (16 for
f16), except in L0C where it is 16 x 16:

* `nd`: row-major, any rank;
* `zN`: fractals column-major, each row-major: (C/C0, R/16, 16, C0), CANN's
  FRACTAL_NZ; the cube's format in L1 and its result format in L0C;
* `zZ`: fractals row-major, each row-major: (R/16, C/C0, 16, C0); L0A (the
  left matrix);
* `nZ`: fractals row-major, each column-major, a fractal being C0 rows (k) x 16
  columns (n): (R/C0, C/16, 16, C0); L0B (the right matrix);
* `nc1hwc0`: a logical NCHW tensor stored as (N, C/C0, H, W, C0).

`#ascend.target<"910A">` / `<"910B">` (a property of every kernel) selects the
chip's facts (`TARGETS`: capacities, alignments, data paths, event ids, core
counts) and the timing model's constants. Verifiers check everything static:
spaces and layouts of buffer types, alignment, capacity and overlap of
allocations, the pipe of each data path, cube shapes and dtypes, vector
masks, repeats and strides, event ids. Each failure raises an
`AscendVerifyException` (a `VerifyException`) that names the op and the
`kind` of rule broken, which the emulator reports as the matching msir error.
Every op records the position of its text as its location when parsed, so
that errors about hand-written kernels point into the `.mlir` file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    FileLineColLoc,
    Float16Type,
    Float32Type,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    param_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator, Pure, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

# ---------------------------------------------------------------------------
# The chips
# ---------------------------------------------------------------------------

SPACES = ("gm", "l1", "l0a", "l0b", "l0c", "ub")
LAYOUTS = ("nd", "zN", "zZ", "nZ", "nc1hwc0")
LAYOUTS_OF_SPACE = {
    "gm": ("nd", "zN", "nc1hwc0"),
    "l1": ("nd", "zN", "nc1hwc0"),
    "ub": ("nd", "zN", "nc1hwc0"),
    "l0a": ("zZ",),
    "l0b": ("nZ",),
    "l0c": ("zN",),
}
"""Where each layout may live: L0A/L0B/L0C hold only the cube's own formats."""


@dataclass(frozen=True)
class PipeCost:
    """A pipe's timing-model constants: an instruction occupies the pipe for
    `bytes / bytes_per_cycle` cycles and its result is ready `latency` cycles
    later."""

    bytes_per_cycle: int
    latency: int


@dataclass(frozen=True)
class TargetSpec:
    """The facts of one chip (`../shared/ascend.md` §1) and the constants of the
    timing model. Sizes are bytes per AI core.

    The hardware does not publish per-pipe bandwidths; `pipes`,
    `gm_bytes_per_cycle`, `vector_cpi` and `vector_latency` are model
    constants (the proposal's, GM bandwidth from the HBM bandwidth at the
    cube's clock), to be calibrated."""

    name: str
    coupled: bool
    """Cube and vector share one core (910A); else a core is a cube core (AIC)
    or a vector core (AIV), exchanging data only through GM (910B)."""
    capacity: dict[str, int]
    alignment: dict[str, int]
    paths: dict[tuple[str, str], str]
    """(source space, destination space) -> the pipe that moves the data."""
    events: int
    """Event ids of set_flag/wait_flag: 0 .. events - 1."""
    cube_cores: int
    vector_cores: int
    cube_dtypes: tuple[tuple[str, str], ...]
    """(operand dtype, accumulator dtype) pairs that mmad takes."""
    pipes: dict[str, PipeCost]
    gm_bytes_per_cycle: int
    """GM bandwidth of the whole chip, shared by the cores that run a kernel."""
    cube_macs_per_cycle: int = 4096
    """One 16x16x16 fp16 step per cycle (Hot Chips 31); 16x16x32 for int8."""
    cube_latency: int = 10
    vector_latency: int = 5
    vector_cpi: dict[str, int] = field(default_factory=lambda: {"vexp": 4, "vln": 4, "vdiv": 4, "vrec": 2, "vsqrt": 2})
    """Cycles per repeat of the vector ops that take more than one."""
    gm_unaligned_penalty: float = 1 / 0.7
    """A GM burst not 512-byte aligned reaches ~70 % of the bandwidth (C11)."""

    def cores(self, kind: str) -> int:
        return {"cube": self.cube_cores, "vector": self.vector_cores, "mix": self.cube_cores}[kind]


_DMA = {
    "mte2": PipeCost(64, 100),
    "mte3": PipeCost(64, 100),
    "mte1": PipeCost(256, 10),
    "fix": PipeCost(128, 20),
    "v": PipeCost(256, 10),
}

TARGETS: dict[str, TargetSpec] = {
    "910A": TargetSpec(
        name="910A",
        coupled=True,
        capacity={"l1": 1 << 20, "l0a": 64 << 10, "l0b": 64 << 10, "l0c": 256 << 10, "ub": 256 << 10},
        alignment={"gm": 1, "l1": 32, "l0a": 512, "l0b": 512, "l0c": 512, "ub": 32},
        paths={
            ("gm", "l1"): "mte2", ("gm", "l0a"): "mte2", ("gm", "l0b"): "mte2", ("gm", "ub"): "mte2",
            ("l1", "l0a"): "mte1", ("l1", "l0b"): "mte1", ("l1", "ub"): "mte1",
            ("ub", "gm"): "mte3", ("ub", "l1"): "mte3",
            ("l0c", "ub"): "v",
        },
        events=4,
        cube_cores=32,
        vector_cores=32,
        cube_dtypes=(("f16", "f32"), ("i8", "i32")),
        pipes=_DMA,
        gm_bytes_per_cycle=1200,  # ~1.2 TB/s HBM at the 1 GHz that 32 x 4096 MACs x 2 = 256 TFLOPS implies
    ),
    "910B": TargetSpec(
        name="910B",
        coupled=False,
        capacity={"l1": 512 << 10, "l0a": 64 << 10, "l0b": 64 << 10, "l0c": 128 << 10, "ub": 192 << 10},
        alignment={"gm": 1, "l1": 32, "l0a": 512, "l0b": 512, "l0c": 512, "ub": 32},
        paths={
            ("gm", "l1"): "mte2", ("gm", "l0a"): "mte2", ("gm", "l0b"): "mte2", ("gm", "ub"): "mte2",
            ("l1", "l0a"): "mte1", ("l1", "l0b"): "mte1",
            ("ub", "gm"): "mte3",
            ("l0c", "gm"): "fix", ("l0c", "l1"): "fix",
        },
        events=8,
        cube_cores=24,
        vector_cores=48,
        cube_dtypes=(("f16", "f32"), ("bf16", "f32"), ("i8", "i32")),
        pipes=_DMA,
        gm_bytes_per_cycle=1000,  # ~1.6 TB/s HBM at ~1.6 GHz
    ),
}

CUBE_SPACES = ("l1", "l0a", "l0b", "l0c")
MAX_CUBE_DIM = 4095
MAX_REPEAT = 255
REPEAT_BYTES = 256
BLOCK_BYTES = 32
BLOCKS_PER_REPEAT = REPEAT_BYTES // BLOCK_BYTES
FRACTAL_ROWS = 16

DTYPE_NAMES = {Float16Type(): "f16", BFloat16Type(): "bf16", Float32Type(): "f32",
               IntegerType(8): "i8", IntegerType(32): "i32"}
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i8": 1, "i32": 4}


def dtype_name(t: Attribute) -> str:
    return DTYPE_NAMES[t]


class AscendVerifyException(VerifyException):
    """A verification failure of an `ascend` op; `kind` names the rule broken
    ("capacity", "alignment", "path", "cube", "vector", "sync", "kernel",
    "type"), `op` the op (the emulator reports both)."""

    def __init__(self, op: Operation, kind: str, message: str):
        super().__init__(f"'{op.name}' {message}")
        self.op = op
        self.kind = kind


# ---------------------------------------------------------------------------
# Attributes and types
# ---------------------------------------------------------------------------


@irdl_attr_definition
class TargetAttr(ParametrizedAttribute):
    """`#ascend.target<"910A">`: the chip a kernel is written for (`TARGETS`)."""

    name = "ascend.target"
    chip: StringAttr = param_def(StringAttr)

    def __init__(self, chip: str):
        super().__init__(StringAttr(chip))

    def verify(self) -> None:
        if self.chip.data not in TARGETS:
            raise VerifyException(f"unknown Ascend target \"{self.chip.data}\" (known: {', '.join(TARGETS)})")

    @property
    def spec(self) -> TargetSpec:
        return TARGETS[self.chip.data]


class Pipe(StrEnum):
    S = "s"
    V = "v"
    M = "m"
    MTE1 = "mte1"
    MTE2 = "mte2"
    MTE3 = "mte3"
    FIX = "fix"
    ALL = "all"


@irdl_attr_definition
class PipeAttr(EnumAttribute[Pipe]):
    """A pipe of the AI Core: `s` (scalar), `v` (vector), `m` (cube), `mte1`,
    `mte2`, `mte3` (memory transfer engines), `fix` (FixPipe); `all` only in
    `ascend.pipe_barrier`. Printed bare in op syntax: `ascend.pipe_barrier v`."""

    name = "ascend.pipe"


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """`!ascend.buf<ub, 64x128xf16>`, `!ascend.buf<l0a, 128x64xf16, zZ>`: a
    buffer in one memory space, its logical shape and element type, and its
    layout (`nd` when omitted). Fractal layouts need a 2-D shape whose rows
    and columns are whole fractals; `nc1hwc0` an NCHW shape whose C is whole
    C0 groups."""

    name = "ascend.buf"
    space: StringAttr = param_def(StringAttr)
    shape: ArrayAttr[IntAttr] = param_def(ArrayAttr[IntAttr])
    element_type: Attribute = param_def(AnyAttr())
    layout: StringAttr = param_def(StringAttr)

    def __init__(self, space: str, shape: tuple[int, ...] | list[int], element_type: Attribute, layout: str = "nd"):
        super().__init__(StringAttr(space), ArrayAttr([IntAttr(d) for d in shape]), element_type, StringAttr(layout))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        parser.parse_punctuation("<")
        space = parser.parse_identifier()
        parser.parse_punctuation(",")
        shape, element_type = parser.parse_ranked_shape()
        layout = "nd"
        if parser.parse_optional_punctuation(",") is not None:
            layout = parser.parse_identifier()
        parser.parse_punctuation(">")
        return [StringAttr(space), ArrayAttr([IntAttr(d) for d in shape]), element_type, StringAttr(layout)]

    def print_parameters(self, printer: Printer) -> None:
        dims = "".join(f"{d if d >= 0 else '?'}x" for d in self.dims)
        printer.print_string(f"<{self.space.data}, {dims}")
        printer.print_attribute(self.element_type)
        if self.layout.data != "nd":
            printer.print_string(f", {self.layout.data}")
        printer.print_string(">")

    def verify(self) -> None:
        space, layout = self.space.data, self.layout.data
        if space not in SPACES:
            raise VerifyException(f"unknown memory space '{space}' of {self} (known: {', '.join(SPACES)})")
        if layout not in LAYOUTS:
            raise VerifyException(f"unknown layout '{layout}' of {self} (known: {', '.join(LAYOUTS)})")
        if layout not in LAYOUTS_OF_SPACE[space]:
            raise VerifyException(f"{self}: {space} holds layout{'s' * (len(LAYOUTS_OF_SPACE[space]) > 1)} "
                                  f"{', '.join(LAYOUTS_OF_SPACE[space])}, not {layout}")
        if self.element_type not in DTYPE_NAMES:
            raise VerifyException(f"{self}: element type {self.element_type} is not one of "
                                  f"{', '.join(DTYPE_NAMES.values())}")
        if not self.dims or any(d <= 0 for d in self.dims):
            raise VerifyException(f"{self}: a buffer needs a static, non-empty shape")
        if layout in ("zN", "zZ", "nZ"):
            if len(self.dims) != 2:
                raise VerifyException(f"{self}: layout {layout} needs a 2-D shape")
            rows, cols = self.fractal
            if self.dims[0] % rows or self.dims[1] % cols:
                raise VerifyException(f"{self}: layout {layout} stores whole {rows}x{cols} fractals, "
                                      f"but the shape is {self.dims[0]}x{self.dims[1]}")
        if layout == "nc1hwc0":
            if len(self.dims) != 4 or self.dims[1] % self.c0:
                raise VerifyException(f"{self}: layout nc1hwc0 needs an NCHW shape with C a multiple of C0 = {self.c0}")

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def dtype(self) -> str:
        return DTYPE_NAMES[self.element_type]

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def c0(self) -> int:
        """Elements of one 32-byte row of a fractal (16 for f16)."""
        return BLOCK_BYTES // self.element_bytes

    @property
    def fractal(self) -> tuple[int, int]:
        """(rows, cols) of one fractal of this buffer's logical matrix."""
        if self.space.data == "l0c":
            return FRACTAL_ROWS, FRACTAL_ROWS
        if self.layout.data == "nZ":
            return self.c0, FRACTAL_ROWS
        return FRACTAL_ROWS, self.c0

    @property
    def size_bytes(self) -> int:
        return math.prod(self.dims) * self.element_bytes


# ---------------------------------------------------------------------------
# Helpers of the verifiers
# ---------------------------------------------------------------------------


def value_name(value: SSAValue) -> str:
    """`%a_l1 ` as written, or nothing for an unnamed value."""
    return f"%{value.name_hint} " if value.name_hint else ""


def kernel_of(op: Operation) -> KernelOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        parent = parent.parent_op()
    return parent


def target_of(op: Operation) -> TargetSpec:
    kernel = kernel_of(op)
    if kernel is None:
        raise AscendVerifyException(op, "kernel", "must be inside an ascend.kernel")
    return kernel.target.spec


def _record_location(cls: type[IRDLOperation]) -> type[IRDLOperation]:
    """Make `cls`'s parser record where the op's text starts as its location
    (xDSL's parser only sets the locations written as `loc(...)`)."""
    parse = cls.parse

    def parse_located(parser: Parser) -> Operation:
        name_end = parser.pos
        op = parse.__func__(cls, parser)
        content = parser.lexer.input.content
        start = content.rfind(cls.name, 0, name_end)
        if start >= 0:
            line = content.count("\n", 0, start) + 1
            col = start - content.rfind("\n", 0, start)
            op.location = FileLineColLoc(StringAttr(parser.lexer.input.name), IntAttr(line), IntAttr(col))
        return op

    cls.parse = classmethod(lambda c, parser: parse_located(parser))
    return cls


def op_definition(cls: type[IRDLOperation]) -> type[IRDLOperation]:
    """`irdl_op_definition`, and the op's parse records its location."""
    return _record_location(irdl_op_definition(cls))


# ---------------------------------------------------------------------------
# Kernel structure
# ---------------------------------------------------------------------------


@op_definition
class KernelOp(IRDLOperation):
    """A kernel: the body every AI core runs, on GM buffers.

    `ins` are the kernel's inputs, `outs` the GM buffers it writes (the runner
    allocates them zero-filled and returns them). `block_dim` cores run the
    body at once; each reads its number with `ascend.block_idx`. On a
    separated chip (910B) a kernel is a cube kernel (it uses L1/L0) or a
    vector kernel (it uses UB), not both, and `block_dim` is bounded by the
    cores of its kind.

        ascend.kernel @add #ascend.target<"910B"> block_dim 2 ins(%x : !ascend.buf<gm, 256xf16>) outs(%y : !ascend.buf<gm, 256xf16>) {
          ...
        }
    """

    name = "ascend.kernel"
    sym_name = prop_def(SymbolNameConstraint())
    target = prop_def(TargetAttr)
    block_dim = prop_def(IntegerAttr[I64])
    num_ins = prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), NoTerminator(), SymbolOpInterface())

    @property
    def ins(self):
        return self.body.block.args[: self.num_ins.value.data]

    @property
    def outs(self):
        return self.body.block.args[self.num_ins.value.data:]

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name()
        target = parser.parse_attribute()
        parser.parse_keyword("block_dim")
        block_dim = parser.parse_integer()
        parser.parse_keyword("ins")
        ins = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        parser.parse_keyword("outs")
        outs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region([*ins, *outs])
        op = cls.create(
            properties={"sym_name": name, "target": target, "block_dim": IntegerAttr(block_dim, i64),
                        "num_ins": IntegerAttr(len(ins), i64)},
            attributes=attrs.data if attrs is not None else {},
            regions=[body],
        )
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" @")
        printer.print_string(self.sym_name.data)
        printer.print_string(" ")
        printer.print_attribute(self.target)
        printer.print_string(f" block_dim {self.block_dim.value.data}")
        for keyword, args in (("ins", self.ins), ("outs", self.outs)):
            printer.print_string(f" {keyword}")
            with printer.in_parens():
                printer.print_list(args, printer.print_block_argument)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    def kind(self) -> str:
        """"cube", "vector" or "mix": which units the kernel's buffers need."""
        spaces = {op.buffer.type.space.data for op in self.body.walk() if isinstance(op, AllocOp)}
        cube, vector = bool(spaces & set(CUBE_SPACES)), "ub" in spaces
        return "mix" if cube and vector else "cube" if cube else "vector"

    def verify_(self) -> None:
        spec = self.target.spec
        for arg in self.body.block.args:
            if not isinstance(arg.type, BufferType) or arg.type.space.data != "gm":
                raise AscendVerifyException(self, "kernel", f"arguments must be gm buffers, got {arg.type}")
        kind = self.kind()
        if kind == "mix" and not spec.coupled:
            raise AscendVerifyException(self, "kernel", f"{spec.name} separates cube and vector cores: a kernel "
                                        "uses L1/L0 buffers or UB buffers, not both (they exchange data through gm)")
        block_dim = self.block_dim.value.data
        if not 1 <= block_dim <= spec.cores(kind):
            raise AscendVerifyException(self, "kernel", f"block_dim {block_dim} is outside [1, {spec.cores(kind)}], "
                                        f"the {kind} cores of {spec.name}")
        self._verify_disjoint_allocations()

    def _verify_disjoint_allocations(self) -> None:
        # Every allocation lives for the whole kernel, so two that overlap
        # would alias: reuse of memory is one buffer used twice, which the
        # emulator's happens-before checks keep safe.
        by_space: dict[str, list[AllocOp]] = {}
        for op in self.body.walk():
            if isinstance(op, AllocOp):
                by_space.setdefault(op.buffer.type.space.data, []).append(op)
        for space, allocs in by_space.items():
            allocs.sort(key=lambda a: a.start)
            for a, b in zip(allocs, allocs[1:]):
                if b.start < a.end:
                    raise AscendVerifyException(b, "capacity", f"{space} buffer {value_name(b.buffer)}at "
                                                f"[{b.start}, {b.end}) overlaps {space} buffer "
                                                f"{value_name(a.buffer)}at [{a.start}, {a.end})")


@op_definition
class BlockIdxOp(IRDLOperation):
    """The number of the AI core running this instance of the kernel, in
    [0, block_dim) (Ascend C's `GetBlockIdx()`).

        %i = ascend.block_idx : index
    """

    name = "ascend.block_idx"
    result = result_def(IndexType)
    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(Pure())


@op_definition
class AllocOp(IRDLOperation):
    """A buffer at a static byte offset of its on-chip memory, live for the
    whole kernel. The offset is aligned to its memory's alignment, the buffer
    fits the memory's capacity, and no two buffers of a kernel overlap.

        %a = ascend.alloc at 0 : !ascend.buf<l0a, 128x64xf16, zZ>
    """

    name = "ascend.alloc"
    offset = prop_def(IntegerAttr[I64])
    buffer = result_def(BufferType)
    assembly_format = "`at` $offset attr-dict `:` type($buffer)"

    @property
    def start(self) -> int:
        return self.offset.value.data

    @property
    def end(self) -> int:
        return self.start + self.buffer.type.size_bytes

    def verify_(self) -> None:
        spec = target_of(self)
        t = self.buffer.type
        space = t.space.data
        if space == "gm":
            raise AscendVerifyException(self, "kernel", "gm buffers are kernel arguments, not allocations")
        name = value_name(self.buffer)
        if self.start < 0 or self.start % spec.alignment[space]:
            raise AscendVerifyException(self, "alignment", f"{space} offset {self.start} of {name}is not a multiple "
                                        f"of {spec.alignment[space]} bytes, the {space} alignment of {spec.name}")
        if self.end > spec.capacity[space]:
            raise AscendVerifyException(self, "capacity", f"{space} overflow: {name}({t}) requires {t.size_bytes} "
                                        f"bytes at offset {self.start}, {spec.capacity[space]} available on "
                                        f"{spec.name}")


# ---------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------

LAYOUT_CONVERSIONS = {
    ("nd", "zN"): "nd2nz", ("zN", "nd"): "nz2nd", ("zN", "zZ"): "load2d", ("zN", "nZ"): "load2d",
    ("nd", "nc1hwc0"): "nchw2nc1hwc0", ("nc1hwc0", "nd"): "nc1hwc02nchw",
}
"""Layout changes a copy performs on the way, besides keeping the layout."""


@op_definition
class CopyOp(IRDLOperation):
    """Move a tile of `sizes` (logical elements) from `src` at logical
    coordinates `src_offsets` to `dst` at `dst_offsets`, on `pipe`, which must
    be the pipe of that data path on the kernel's target (Ascend C's
    `DataCopy`, `LoadData`, `Fixpipe`). The copy converts between the layouts
    of its buffers where the hardware does (nd -> zN on the way to L1, zN ->
    zZ / nZ into L0A / L0B, zN -> nd out of L0C or UB, nd <-> nc1hwc0);
    `transpose` (into L0B) transposes the tile, `sizes` being the source's.
    Out of L0C the element type may narrow (f32 -> f16 / bf16, i32 -> i8), as
    FixPipe and the L0C -> UB path quantise.

        ascend.copy mte2 %a[%i, %c0] to %a_l1[%c0, %c0] sizes [128, 64] : !ascend.buf<gm, 512x512xf16> to !ascend.buf<l1, 128x64xf16, zN>
    """

    name = "ascend.copy"
    pipe = prop_def(PipeAttr)
    src = operand_def(BufferType)
    src_offsets = var_operand_def(IndexType)
    dst = operand_def(BufferType)
    dst_offsets = var_operand_def(IndexType)
    sizes = prop_def(DenseArrayBase.constr(i64))
    transpose = opt_prop_def(UnitAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$pipe $src `[` $src_offsets `]` `to` $dst `[` $dst_offsets `]` `sizes` $sizes (`transpose` $transpose^)? "
        "attr-dict `:` type($src) `to` type($dst)"
    )

    @property
    def tile(self) -> tuple[int, ...]:
        return tuple(self.sizes.get_values())

    def verify_(self) -> None:
        spec = target_of(self)
        s, d = self.src.type, self.dst.type
        path = (s.space.data, d.space.data)
        pipe = spec.paths.get(path)
        if pipe is None:
            both = self.src.name_hint and self.dst.name_hint
            names = f" (%{self.src.name_hint} to %{self.dst.name_hint})" if both else ""
            raise AscendVerifyException(self, "path", f"{path[0]} -> {path[1]}{names} is not a data path of "
                                        f"{spec.name}")
        if pipe != self.pipe.data.value:
            raise AscendVerifyException(self, "path", f"{path[0]} -> {path[1]} runs on pipe {pipe} on {spec.name}, "
                                        f"not {self.pipe.data.value}")
        layouts = (s.layout.data, d.layout.data)
        if layouts[0] != layouts[1] and layouts not in LAYOUT_CONVERSIONS:
            raise AscendVerifyException(self, "path", f"cannot convert layout {layouts[0]} to {layouts[1]}")
        if s.dtype != d.dtype and not (path[0] == "l0c" and (s.dtype, d.dtype) in
                                       (("f32", "f16"), ("f32", "bf16"), ("i32", "i8"))):
            raise AscendVerifyException(self, "type", f"copies {s.dtype} to {d.dtype}: only the way out of l0c "
                                        "converts (f32 -> f16/bf16, i32 -> i8)")
        tile = self.tile
        if len(tile) != len(s.dims) or len(self.src_offsets) != len(s.dims):
            raise AscendVerifyException(self, "type", f"needs {len(s.dims)} sizes and source offsets for {s}")
        if self.transpose is not None:
            if d.layout.data != "nZ":
                raise AscendVerifyException(self, "path", "transposes only on the way into l0b")
            tile = tile[::-1]
        if len(tile) != len(d.dims) or len(self.dst_offsets) != len(d.dims):
            raise AscendVerifyException(self, "type", f"needs {len(d.dims)} destination offsets and a tile of rank "
                                        f"{len(d.dims)} for {d}")
        for buf, t in ((s, self.tile), (d, tile)):
            if any(n <= 0 or n > dim for n, dim in zip(t, buf.dims)):
                raise AscendVerifyException(self, "type", f"tile {list(t)} does not fit {buf}")


INIT_CONST_SPACES = ("l1", "l0a", "l0b")
"""Where `init_const` writes: Ascend C's InitConstValue fills A1/B1 (L1) and A2/B2 (L0A, L0B)."""


@op_definition
class InitConstOp(IRDLOperation):
    """Set a tile of `sizes` (logical elements) of `dst` at logical
    coordinates `dst_offsets` to the scalar `value`, on MTE2 (Ascend C's
    `InitConstValue`), in L1, L0A or L0B: the zero padding of a K that is not
    a multiple of the cube's fractal depth. `value` has `dst`'s element type.

        ascend.init_const %a_l1[%c0, %c48] sizes [64, 16], %zero : !ascend.buf<l1, 64x64xf16, zN>, f16
    """

    name = "ascend.init_const"
    dst = operand_def(BufferType)
    dst_offsets = var_operand_def(IndexType)
    value = operand_def(AnyAttr())
    sizes = prop_def(DenseArrayBase.constr(i64))
    assembly_format = "$dst `[` $dst_offsets `]` `sizes` $sizes `,` $value attr-dict `:` type($dst) `,` type($value)"

    @property
    def tile(self) -> tuple[int, ...]:
        return tuple(self.sizes.get_values())

    def verify_(self) -> None:
        target_of(self)
        d = self.dst.type
        if d.space.data not in INIT_CONST_SPACES:
            raise AscendVerifyException(self, "path", f"init_const fills {', '.join(INIT_CONST_SPACES)} (Ascend C's "
                                        f"InitConstValue), not {d.space.data}")
        if self.value.type != d.element_type:
            raise AscendVerifyException(self, "type", f"value has type {self.value.type}, expected {d.element_type}")
        tile = self.tile
        if len(tile) != len(d.dims) or len(self.dst_offsets) != len(d.dims):
            raise AscendVerifyException(self, "type", f"needs {len(d.dims)} sizes and offsets for {d}")
        if any(n <= 0 or n > dim for n, dim in zip(tile, d.dims)):
            raise AscendVerifyException(self, "type", f"tile {list(tile)} does not fit {d}")


# ---------------------------------------------------------------------------
# The cube
# ---------------------------------------------------------------------------


@op_definition
class MmadOp(IRDLOperation):
    """`c[:m, :n] (=|+=) a[:m, :k] x b[:k, :n]` on the cube (Ascend C's
    `Mmad`): `a` in L0A (zZ), `b` in L0B (nZ), `c` in L0C (zN), accumulating in
    f32 (f16/bf16 operands) or i32 (i8). `init` starts from zero
    (`cmatrixInitVal`), else the product is added to `c`. The cube computes
    whole 16-row, 16-column fractals, so m and n need not be multiples of 16;
    k must be a multiple of the fractal depth C0 (K padded with zeros), as a
    partial fractal would add garbage. m, n, k <= 4095.

        ascend.mmad %c, %a, %b m 128 n 128 k 64 init : !ascend.buf<l0c, 128x128xf32, zN>, !ascend.buf<l0a, 128x64xf16, zZ>, !ascend.buf<l0b, 64x128xf16, nZ>
    """

    name = "ascend.mmad"
    c = operand_def(BufferType)
    a = operand_def(BufferType)
    b = operand_def(BufferType)
    m = prop_def(IntegerAttr[I64])
    n = prop_def(IntegerAttr[I64])
    k = prop_def(IntegerAttr[I64])
    init = opt_prop_def(UnitAttr)
    assembly_format = "$c `,` $a `,` $b `m` $m `n` $n `k` $k (`init` $init^)? attr-dict `:` type($c) `,` type($a) `,` type($b)"

    @property
    def mnk(self) -> tuple[int, int, int]:
        return self.m.value.data, self.n.value.data, self.k.value.data

    def verify_(self) -> None:
        spec = target_of(self)
        c, a, b = self.c.type, self.a.type, self.b.type
        for t, space, layout in ((a, "l0a", "zZ"), (b, "l0b", "nZ"), (c, "l0c", "zN")):
            if t.space.data != space:
                raise AscendVerifyException(self, "cube", f"operand {t} must be in {space} ({layout})")
        if a.dtype != b.dtype or (a.dtype, c.dtype) not in spec.cube_dtypes:
            pairs = ", ".join(f"({x}, {x}) -> {y}" for x, y in spec.cube_dtypes)
            raise AscendVerifyException(self, "cube", f"takes {pairs} on {spec.name}, not ({a.dtype}, {b.dtype}) -> "
                                        f"{c.dtype}")
        m, n, k = self.mnk
        for dim, value in (("m", m), ("n", n), ("k", k)):
            if not 1 <= value <= MAX_CUBE_DIM:
                raise AscendVerifyException(self, "cube", f"{dim} = {value} is outside [1, {MAX_CUBE_DIM}]")
        k0 = a.c0
        if k % k0:
            raise AscendVerifyException(self, "cube", f"k = {k} is not a multiple of the fractal depth {k0}: "
                                        f"pad K with zeros to {-(-k // k0) * k0}")
        mp, np_ = -(-m // FRACTAL_ROWS) * FRACTAL_ROWS, -(-n // FRACTAL_ROWS) * FRACTAL_ROWS
        if mp > a.dims[0] or k > a.dims[1] or k > b.dims[0] or np_ > b.dims[1] or mp > c.dims[0] or np_ > c.dims[1]:
            raise AscendVerifyException(self, "cube", f"m = {m}, n = {n}, k = {k} (fractals {mp}x{np_}x{k}) do not "
                                        f"fit a {a.dims[0]}x{a.dims[1]}, b {b.dims[0]}x{b.dims[1]}, "
                                        f"c {c.dims[0]}x{c.dims[1]}")


# ---------------------------------------------------------------------------
# Vector instructions
# ---------------------------------------------------------------------------


_VECTOR_MODIFIERS = ("(`mask` $mask^)? (`mask_bits` $mask_bits^)? (`repeat` $repeat^)? "
                     "(`blk_stride` $blk_stride^)? (`rep_stride` $rep_stride^)? attr-dict")


class VectorOp(IRDLOperation):
    """Common part of the vector instructions (Ascend C's level-0 API): one
    instruction runs `repeat` (<= 255) repeats; a repeat processes 8 blocks of
    32 bytes of each operand. An operand's offset is an element index into
    its buffer's storage, whatever the buffer's layout (the vector unit sees
    addresses). Operand `x`'s block `b` of repeat `r` starts
    `offset + (r * rep_stride[x] + b * blk_stride[x]) * 32` bytes into its
    buffer (strides in 32-byte blocks, operands in the order written, the
    destination first; defaults 1 and 8, i.e. contiguous). `mask` enables the
    first n elements of each repeat; `mask_bits [hi, lo]` enables element i
    where bit i of the 128-bit value is set (only `lo` for 32-bit types). A
    repeat has 128 elements of a 16-bit type, 64 of a 32-bit one (for vconv:
    of the wider type). Every operand is in UB."""

    mask = opt_prop_def(IntegerAttr[I64])
    mask_bits = opt_prop_def(DenseArrayBase.constr(i64))
    repeat = opt_prop_def(IntegerAttr[I64])
    blk_stride = opt_prop_def(DenseArrayBase.constr(i64))
    rep_stride = opt_prop_def(DenseArrayBase.constr(i64))

    OPERANDS: ClassVar[tuple[str, ...]]
    """Names of the (buffer, offset) operand pairs, the destination first."""

    def operand_buffers(self) -> list[tuple[SSAValue, SSAValue]]:
        return [(getattr(self, n), getattr(self, n + "_offset")) for n in self.OPERANDS]

    @property
    def repeats(self) -> int:
        return self.repeat.value.data if self.repeat is not None else 1

    def strides(self) -> tuple[list[int], list[int]]:
        count = len(self.OPERANDS)
        blk = list(self.blk_stride.get_values()) if self.blk_stride is not None else [1] * count
        rep = list(self.rep_stride.get_values()) if self.rep_stride is not None else [BLOCKS_PER_REPEAT] * count
        return blk, rep

    def elements_per_repeat(self) -> int:
        widest = max(v.type.element_bytes for v, _ in self.operand_buffers())
        return REPEAT_BYTES // widest

    def lanes(self) -> list[int]:
        """The enabled element positions of one repeat."""
        per_repeat = self.elements_per_repeat()
        if self.mask_bits is not None:
            hi, lo = self.mask_bits.get_values()
            bits = (hi << 64) | (lo & ((1 << 64) - 1))
            return [i for i in range(per_repeat) if bits >> i & 1]
        n = self.mask.value.data if self.mask is not None else per_repeat
        return list(range(n))

    def verify_(self) -> None:
        target_of(self)
        names = self.OPERANDS
        for (value, _), name in zip(self.operand_buffers(), names):
            t = value.type
            if t.space.data != "ub":
                raise AscendVerifyException(self, "vector", f"operand {name} must be in ub, got {t}")
        per_repeat = self.elements_per_repeat()
        if self.mask is not None and self.mask_bits is not None:
            raise AscendVerifyException(self, "vector", "takes mask or mask_bits, not both")
        if self.mask is not None and not 1 <= self.mask.value.data <= per_repeat:
            raise AscendVerifyException(self, "vector", f"mask {self.mask.value.data} is outside [1, {per_repeat}] "
                                        f"for {per_repeat} elements per repeat")
        if self.mask_bits is not None:
            bits = self.mask_bits.get_values()
            if len(bits) != 2 or (per_repeat <= 64 and bits[0] != 0) or not any(bits):
                raise AscendVerifyException(self, "vector", f"mask_bits must be [hi, lo], not all zero, with hi = 0 "
                                            f"for {per_repeat} elements per repeat; got {list(bits)}")
        if not 1 <= self.repeats <= MAX_REPEAT:
            raise AscendVerifyException(self, "vector", f"repeat {self.repeats} is outside [1, {MAX_REPEAT}]")
        blk, rep = self.strides()
        for what, strides in (("blk_stride", blk), ("rep_stride", rep)):
            if len(strides) != len(names) or any(s < 0 or s > 255 for s in strides):
                raise AscendVerifyException(self, "vector", f"{what} needs {len(names)} values in [0, 255] "
                                            f"({', '.join(names)}), got {strides}")
        self.verify_dtypes()

    def verify_dtypes(self) -> None:
        dtypes = {getattr(self, n).type.dtype for n in self.OPERANDS}
        if len(dtypes) != 1:
            raise AscendVerifyException(self, "vector", f"operands must have one element type, got {sorted(dtypes)}")
        if self.DTYPES and next(iter(dtypes)) not in self.DTYPES:
            raise AscendVerifyException(self, "vector", f"takes {', '.join(self.DTYPES)}, not {dtypes.pop()}")

    DTYPES: ClassVar[tuple[str, ...]] = ("f16", "f32")


def _binary_format(ops: str) -> str:
    return ops + _VECTOR_MODIFIERS


class VectorBinaryOp(VectorOp):
    dst = operand_def(BufferType)
    dst_offset = operand_def(IndexType)
    lhs = operand_def(BufferType)
    lhs_offset = operand_def(IndexType)
    rhs = operand_def(BufferType)
    rhs_offset = operand_def(IndexType)
    OPERANDS: ClassVar = ("dst", "lhs", "rhs")
    assembly_format = _binary_format(
        "$dst `[` $dst_offset `]` `,` $lhs `[` $lhs_offset `]` `,` $rhs `[` $rhs_offset `]` ") + \
        " `:` type($dst) `,` type($lhs) `,` type($rhs)"


class VectorUnaryOp(VectorOp):
    dst = operand_def(BufferType)
    dst_offset = operand_def(IndexType)
    src = operand_def(BufferType)
    src_offset = operand_def(IndexType)
    OPERANDS: ClassVar = ("dst", "src")
    assembly_format = _binary_format("$dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` ") + \
        " `:` type($dst) `,` type($src)"


class VectorScalarOp(VectorOp):
    dst = operand_def(BufferType)
    dst_offset = operand_def(IndexType)
    src = operand_def(BufferType)
    src_offset = operand_def(IndexType)
    scalar = operand_def(AnyAttr())
    OPERANDS: ClassVar = ("dst", "src")
    assembly_format = _binary_format("$dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $scalar ") + \
        " `:` type($dst) `,` type($src) `,` type($scalar)"

    def verify_dtypes(self) -> None:
        super().verify_dtypes()
        if self.scalar.type != self.dst.type.element_type:
            raise AscendVerifyException(self, "vector", f"scalar has type {self.scalar.type}, expected "
                                        f"{self.dst.type.element_type}")


def _vector(base: type, name: str, doc: str, dtypes: tuple[str, ...] = ("f16", "f32")) -> type:
    cls = type(name.title().replace("_", ""), (base,), {"name": f"ascend.{name}", "__doc__": doc,
                                                        "DTYPES": dtypes,
                                                        "__annotations__": {"DTYPES": ClassVar[tuple[str, ...]]}})
    return op_definition(cls)


_BIN_EX = "ascend.{0} %z[%c0], %x[%c0], %y[%c0] mask 64 repeat 2 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>"
_UN_EX = "ascend.{0} %z[%c0], %x[%c128] repeat 4 rep_stride [8, 8] : !ascend.buf<ub, 512xf16>, !ascend.buf<ub, 1024xf16>"
_SC_EX = "ascend.{0} %z[%c0], %x[%c0], %s repeat 2 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16"

VBINARY = {"vadd": "z = x + y", "vsub": "z = x - y", "vmul": "z = x * y", "vdiv": "z = x / y",
           "vmax": "z = max(x, y)", "vmin": "z = min(x, y)"}
VUNARY = {"vexp": "z = exp(x)", "vln": "z = log(x)", "vabs": "z = |x|", "vrelu": "z = max(x, 0)",
          "vrec": "z = 1 / x", "vsqrt": "z = sqrt(x)"}
VSCALAR = {"vadds": "z = x + s", "vmuls": "z = x * s", "vmaxs": "z = max(x, s)", "vmins": "z = min(x, s)"}

VECTOR_OPS = (
    [_vector(VectorBinaryOp, n, f"Elementwise {f} per enabled lane (see `VectorOp`).\n\n    {_BIN_EX.format(n)}\n")
     for n, f in VBINARY.items()]
    + [_vector(VectorUnaryOp, n, f"Elementwise {f} per enabled lane (see `VectorOp`).\n\n    {_UN_EX.format(n)}\n")
       for n, f in VUNARY.items()]
    + [_vector(VectorScalarOp, n, f"Elementwise {f} with a scalar s of the element type (see `VectorOp`).\n\n"
               f"    {_SC_EX.format(n)}\n") for n, f in VSCALAR.items()]
)


@op_definition
class VdupOp(VectorOp):
    """Fill the enabled lanes of `dst` with a scalar (Ascend C's `Duplicate`).

        ascend.vdup %z[%c0], %s repeat 2 : !ascend.buf<ub, 256xf16>, f16
    """

    name = "ascend.vdup"
    dst = operand_def(BufferType)
    dst_offset = operand_def(IndexType)
    scalar = operand_def(AnyAttr())
    OPERANDS: ClassVar = ("dst",)
    assembly_format = _binary_format("$dst `[` $dst_offset `]` `,` $scalar ") + " `:` type($dst) `,` type($scalar)"
    DTYPES: ClassVar = ("f16", "f32", "i32")

    def verify_dtypes(self) -> None:
        super().verify_dtypes()
        if self.scalar.type != self.dst.type.element_type:
            raise AscendVerifyException(self, "vector", f"scalar has type {self.scalar.type}, expected "
                                        f"{self.dst.type.element_type}")


@op_definition
class VconvOp(VectorUnaryOp):
    """Convert each enabled lane to the destination's element type, rounding
    to nearest even (Ascend C's `Cast`); a repeat holds 64 elements when
    either type is 32-bit.

        ascend.vconv %z[%c0], %x[%c0] repeat 2 : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 128xf16>
    """

    name = "ascend.vconv"
    CONVERSIONS: ClassVar = {("f16", "f32"), ("f32", "f16"), ("bf16", "f32"), ("f32", "bf16"), ("i32", "f32"),
                             ("f32", "i32"), ("f16", "i8"), ("i8", "f16")}

    def verify_dtypes(self) -> None:
        pair = (self.src.type.dtype, self.dst.type.dtype)
        if pair not in self.CONVERSIONS:
            raise AscendVerifyException(self, "vector", f"does not convert {pair[0]} to {pair[1]}")


class VectorReduceOp(VectorUnaryOp):
    """Reduce the enabled lanes of each repeat of `src` to one element:
    repeat r writes `dst[dst_offset + r]` (Ascend C's `WholeReduceSum` /
    `WholeReduceMax`, the `vcadd` / `vcmax` instructions). The destination is
    written one element per repeat, contiguous: its strides keep their
    defaults (1, 8). `src` follows `VectorOp`'s strides and mask."""

    def verify_dtypes(self) -> None:
        super().verify_dtypes()
        blk, rep = self.strides()
        if (blk[0], rep[0]) != (1, BLOCKS_PER_REPEAT):
            raise AscendVerifyException(self, "vector", f"writes one element per repeat: the strides of dst are "
                                        f"blk_stride 1 and rep_stride {BLOCKS_PER_REPEAT}, got {blk[0]} and {rep[0]}")


_RED_EX = ("ascend.{0} %z[%c0], %x[%c0] mask 16 repeat 4 rep_stride [8, 2] : !ascend.buf<ub, 8xf32>, "
           "!ascend.buf<ub, 64xf32>")

VREDUCE = {"vcadd": "the sum (accumulated in f32, rounded once to the element type)", "vcmax": "the maximum"}

VECTOR_REDUCE_OPS = [
    _vector(VectorReduceOp, n, f"Each repeat's enabled lanes of x to {f}, one element of z per repeat (see "
            f"`VectorReduceOp`): here rows of 16 f32 stored 16 apart.\n\n    {_RED_EX.format(n)}\n")
    for n, f in VREDUCE.items()]


@op_definition
class VbrcbOp(VectorUnaryOp):
    """Broadcast each element to a 32-byte block (Ascend C's `Brcb`): repeat
    r reads 8 consecutive elements `src[src_offset + 8 r + b]` and fills
    block b of the destination's repeat r (placed by dst's strides) with
    copies of element b. A row's scalar as a block, which a vector op then
    reads with blk_stride 0 and rep_stride 0 (subtract a row's maximum).
    Every lane is written: no mask.

        ascend.vbrcb %z[%c0], %x[%c0] repeat 2 : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 16xf32>
    """

    name = "ascend.vbrcb"

    def verify_dtypes(self) -> None:
        super().verify_dtypes()
        if self.mask is not None or self.mask_bits is not None:
            raise AscendVerifyException(self, "vector", "fills whole repeats: it takes no mask")


# ---------------------------------------------------------------------------
# Synchronisation
# ---------------------------------------------------------------------------

FLAG_PIPES = ("v", "m", "mte1", "mte2", "mte3", "fix")


class _FlagOp(IRDLOperation):
    src_pipe = prop_def(PipeAttr)
    dst_pipe = prop_def(PipeAttr)
    event = prop_def(IntegerAttr[I64])
    assembly_format = "$src_pipe `to` $dst_pipe `event` $event attr-dict"

    @property
    def key(self) -> tuple[str, str, int]:
        return self.src_pipe.data.value, self.dst_pipe.data.value, self.event.value.data

    def verify_(self) -> None:
        spec = target_of(self)
        src, dst, event = self.key
        for pipe in (src, dst):
            if pipe not in FLAG_PIPES:
                raise AscendVerifyException(self, "sync", f"pipe {pipe} cannot take part in a flag "
                                            f"(one of {', '.join(FLAG_PIPES)})")
        if src == dst:
            raise AscendVerifyException(self, "sync", f"flags order two different pipes: use ascend.pipe_barrier "
                                        f"{src} within one pipe")
        if not 0 <= event < spec.events:
            raise AscendVerifyException(self, "sync", f"event {event} is outside [0, {spec.events - 1}], the event "
                                        f"ids of {spec.name}")


@op_definition
class SetFlagOp(_FlagOp):
    """Signal event `event` from `src_pipe` to `dst_pipe` once every earlier
    instruction of `src_pipe` has finished (Ascend C's
    `SetFlag<HardEvent::MTE2_V>(id)`). Each set is consumed by exactly one
    matching `ascend.wait_flag`; setting a flag that is still set is an error.

        ascend.set_flag mte2 to v event 0
    """

    name = "ascend.set_flag"


@op_definition
class WaitFlagOp(_FlagOp):
    """Block `dst_pipe` until the matching `ascend.set_flag` has fired, then
    consume it (Ascend C's `WaitFlag<HardEvent::MTE2_V>(id)`): every
    instruction of `dst_pipe` after the wait sees everything `src_pipe` did
    before the set.

        ascend.wait_flag mte2 to v event 0
    """

    name = "ascend.wait_flag"


@op_definition
class PipeBarrierOp(IRDLOperation):
    """Later instructions of `pipe` start only after every earlier instruction
    of `pipe` has finished (Ascend C's `PipeBarrier<PIPE_V>()`): what orders a
    data dependency within one pipe. `all` waits for every pipe. The scalar
    pipe keeps its own order; a barrier on it is a hardware error.

        ascend.pipe_barrier v
    """

    name = "ascend.pipe_barrier"
    pipe = prop_def(PipeAttr)
    assembly_format = "$pipe attr-dict"

    def verify_(self) -> None:
        target_of(self)
        if self.pipe.data == Pipe.S:
            raise AscendVerifyException(self, "sync", "pipe_barrier s is a hardware error: the scalar unit keeps "
                                        "its own order")


Ascend = Dialect(
    "ascend",
    [KernelOp, BlockIdxOp, AllocOp, CopyOp, InitConstOp, MmadOp, *VECTOR_OPS, *VECTOR_REDUCE_OPS, VdupOp, VconvOp,
     VbrcbOp, SetFlagOp, WaitFlagOp,
     PipeBarrierOp],
    [TargetAttr, PipeAttr, BufferType],
)
