"""`convert-msir-to-ascend`: msir functions to `ascend.kernel`s, synchronised.

Contract
========
Input: an msir module as the frontend prints it (differentiation ops,
calls and fusions allowed). The pass first runs msir's preparation (the CPU
pipeline's passes up to fusion: `msir-grad-jvp`, `msir-symbol-dce`,
`msir-forward-arguments`, `msir-inline`, `msir-lower-einsum`, `dce`), then
turns every public function into one `ascend.kernel` of the same name, for
the chip `chip` (910A or 910B); the module then holds only kernels.

A function lowers when its body is one of:

* **a matmul** `msir.matmul` of two rank-2 f16 or f32 operands. f32 operands are cast to f16 before the kernel (MindSpore's
  `allow_fp32_to_fp16`): the kernel's GM inputs are f16 and the attribute
  `msir.host_casts` lists the dtypes the caller's arrays have; the result
  keeps the function's dtype (f32 straight from the f32 accumulator, f16
  narrowed on the way out of L0C). Output tiles of baseM x baseN (the
  analytic tiler `tile_matmul`) are spread round-robin over `block_dim`
  cube cores; each loops over K in baseK steps: GM -> L1 (nd2nz, MTE2),
  L1 -> L0A / L0B (MTE1), mmad (the first step initialises L0C), then L0C ->
  GM (FixPipe, 910B) or L0C -> UB (V) -> GM (MTE3, 910A). Edge tiles (M or N
  not a multiple of the tile) and the last K step have their own static
  sizes; the cube computes whole 16 x 16 fractals, of which only the valid
  part is copied out. A last K step that is not a multiple of 16 first zeroes
  the last fractal of K of its L1 tiles (`ascend.init_const`, MTE2), which
  its load then partly overwrites: the padding multiplies as zeros. When the tiler chooses it (`matmul_buffers` 2, the
  default), L1 and L0 hold ping-pong buffers: the loads of step s + 1 are
  issued before the compute of step s, and the sync inserter's early sets
  let each wait only for the compute that last read its buffer, so MTE2
  streams while the cube works. A's L1 tile may span several K steps (when
  K is a multiple of 256: its GM bursts are then 512 B, which the timing
  model moves at full rate), loaded a step before its first step and
  copied to L0A a step's slice at a time. On the 910A a double-buffered
  tile leaves L0C through UB in bands of rows, MTE3 writing one while V
  copies the next. The tiler ranks tilings by a closed-form estimate,
  then scores the best few again step by step (`tile_matmul`).
* **an elementwise chain**: f16 or f32 elementwise ops (`add sub mul div
  maximum minimum neg abs exp log sqrt`, inside `msir.fusion` bodies or not)
  on tensors of one shape, with splat constants (`broadcast_to` of a
  constant) as scalar operands. The tensors are flattened and cut in tiles
  that fit UB (one buffer per input and per intermediate); each tile:
  GM -> UB (MTE2), the vector instructions (<= 255 repeats each, the tail
  repeat masked), UB -> GM (MTE3). The tiler (`plan_elementwise`, scored
  by a pipeline recurrence of the timing model) chooses single buffering
  (the largest tiles, round-robin over the vector cores) or, with
  `elementwise_buffers` 2 (the default), double buffering: two UB buffer
  sets, each core's tiles software-pipelined (the load of tile t + 1 and
  the store of tile t - 1 around the compute of tile t, early sets), then
  the whole tiles left over round-robin and the tail on core 0.

* **a row reduction**: `msir.reduce_sum` or `msir.reduce_max` over the last
  axis of a rank-2 f16 or f32 argument (keepdims or not). Tiles of rows
  (`plan_row_reduction`: as many as UB holds, and `rows_per_tile`: the
  least time on the busiest core) go GM -> UB (MTE2); the padding of a row to whole repeats
  holds the reduction's identity (`vdup`); f16 sums are converted to f32
  first (`vconv`), as the vector unit accumulates in f32, and back at the
  end (a maximum is exact in f16). `vcadd` / `vcmax` reduce each repeat to
  one partial, level after level, until the last level's masked, strided
  repeat per row gives the row's result; UB -> GM (MTE3). A row longer than
  a tile's UB share (or 240 repeats) goes one row per tile in chunks whose
  partials the next levels combine.

* **a softmax** over the last axis of a rank-2 f16 or f32 argument, as
  `msir.ops.softmax` writes it (reduce_max, stop_gradient, broadcast_to,
  sub, exp, reduce_sum, broadcast_to, div): one kernel, one pass over UB
  per tile of rows, in f32 (f16 converted in and out). The rows' maxima
  and sums are the row reduction's levels; `vbrcb` turns each row's
  scalar into a block that `vsub` / `vmul` read with strides 0; rows are
  padded with -inf, which exp turns into zeros for the sum; the division
  is a multiplication by `vrec` of the sum.

* **a layer norm** over the last axis of a rank-2 f16 or f32 argument, as
  `msir.ops.layer_norm` (and the `nn.LayerNorm` Cell) writes it, with or
  without gamma and beta ((N,) arguments broadcast over the rows;
  `match_layer_norm`): one kernel in f32. Per tile of rows: the means
  (vcadd levels times 1 / N), x - mean (vbrcb, strides 0), the padding
  zeroed again (vdup through a bit mask), the squares' means, + eps,
  vsqrt, vrec, times that; gamma and beta go to UB once, before the tile
  loop, and are read with repeat stride 0 down the tile's columns.

  Row reduction (rows fitting UB whole), softmax and layer norm tiles go
  double-buffered when the timing model says so (`plan_double_buffering`,
  which counts a reduction's store of one element a row; pass option
  `row_buffers`): each core
  takes consecutive tiles in ping-pong UB buffer sets, the load of tile
  i + 1 issued before the vector work of tile i (early sets, a flag pair
  per load); rows left over go single-buffered after them.

* **a softmax or layer norm whose row does not fit UB** (or one
  instruction's 240 repeats, or a tile of `tile_elements`): one row per
  tile, streamed twice through UB in chunks (`lower_long_rows`). Softmax
  is online (Milakov & Gimelshein): pass 1 keeps the running maximum and
  the rescaled running sum, pass 2 writes exp(x - max) / sum. Layer norm
  combines each chunk's mean and centred sum of squares with the earlier
  chunks' (Chan et al., static weights), then pass 2 normalises, gamma and
  beta streamed with x. The statistics are single f32 elements in UB,
  operated on one lane at a time.

Anything else (another op, a broadcast of a tensor, an integer dtype) is a
`CompileError` naming the op and its source location.

Synchronisation is inserted by `msir.ascend.sync` from the data dependencies
only. Output: a module of kernels that verify; running each on the emulator
raises no race and gives the function's values at the target's precision.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntAttr,
    ModuleOp,
)
from xdsl.passes import ModulePass

from msir.ascend.errors import source_loc
from msir.ascend.kernel_builder import dtype_of, refuse
from msir.ascend.lower_elementwise import lower_elementwise
from msir.ascend.lower_layernorm import fits_ub, lower_layer_norm, match_layer_norm
from msir.ascend.lower_long_rows import lower_long_layer_norm, lower_long_softmax
from msir.ascend.lower_matmul import lower_matmul
from msir.ascend.lower_rows import (
    ROW_REDUCTIONS,
    lower_row_reduction,
    lower_softmax,
    match_softmax,
    softmax_fits_ub,
)
from msir.dialects import ascend as A
from msir.errors import CompileError

PREPARATION = ("msir-grad-jvp", "msir-symbol-dce", "msir-forward-arguments", "msir-inline", "msir-lower-einsum",
               "dce")
"""msir's passes run first (as the CPU pipeline runs them before fusion)."""

# ---------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------


def _compute_ops(fn: func.FuncOp) -> list:
    return [op for op in fn.body.block.ops if op.name not in ("func.return", "msir.constant", "msir.broadcast_to")]


@dataclass(frozen=True)
class ConvertMsirToAscend(ModulePass):
    """msir functions to synchronised `ascend.kernel`s (see the module docstring)."""

    name = "convert-msir-to-ascend"

    chip: str = "910A"
    """The target chip: 910A (coupled) or 910B (separated cube and vector cores)."""
    tile_elements: int = 0
    """The largest UB tile of an elementwise kernel or of a row reduction's
    or softmax's input, in elements (0: as UB allows)."""
    max_block_dim: int = 0
    """The most cores a kernel runs on (0: every core of its kind on the chip)."""
    matmul_buffers: int = 2
    """The most L1 / L0 buffers per matmul operand: 2 lets the tiler choose
    ping-pong buffering, 1 keeps a matmul single-buffered."""
    elementwise_buffers: int = 2
    """The most UB buffer sets of an elementwise kernel: 2 lets its tiler
    choose double buffering, 1 keeps it single-buffered."""
    row_buffers: int = 2
    """The most UB buffer sets of a row reduction, softmax or layer norm whose rows fit UB:
    2 lets `plan_double_buffering` choose ping-pong tiles, 1 keeps them
    single-buffered."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from msir.pipeline import pass_class

        if self.matmul_buffers not in (1, 2):
            raise CompileError(f"convert-msir-to-ascend: matmul_buffers is 1 or 2, not {self.matmul_buffers}")
        if self.elementwise_buffers not in (1, 2):
            raise CompileError("convert-msir-to-ascend: elementwise_buffers is 1 or 2, not "
                               f"{self.elementwise_buffers}")
        if self.row_buffers not in (1, 2):
            raise CompileError(f"convert-msir-to-ascend: row_buffers is 1 or 2, not {self.row_buffers}")
        if self.chip not in A.TARGETS:
            raise CompileError(f"unknown Ascend chip '{self.chip}' (known: {', '.join(A.TARGETS)})")
        spec = A.TARGETS[self.chip]
        if self.max_block_dim:
            spec = dataclasses.replace(spec, cube_cores=min(spec.cube_cores, self.max_block_dim),
                                       vector_cores=min(spec.vector_cores, self.max_block_dim))
        for name in PREPARATION:
            pass_class(name)().apply(ctx, op)
        kernels = []
        for fn in list(op.ops):
            if not isinstance(fn, func.FuncOp) or not fn.body.blocks:
                continue
            if fn.sym_visibility is not None and fn.sym_visibility.data == "private":
                continue
            kernel = self._lower(fn, spec)
            # the caller's view of the flat GM outputs (msir.ascend.target)
            kernel.attributes["msir.result_shapes"] = ArrayAttr(
                [ArrayAttr([IntAttr(d) for d in t.get_shape()]) for t in fn.function_type.outputs.data])
            kernels.append(kernel)
        for old in list(op.ops):
            old.detach()
            old.erase()
        for kernel in kernels:
            op.body.block.add_op(kernel)

    def _lower(self, fn: func.FuncOp, spec: A.TargetSpec) -> A.KernelOp:
        name = fn.sym_name.data
        for inner in fn.walk():
            if inner.name == "func.call":
                raise refuse(inner, "calls have no Ascend lowering: a kernel is one straight-line function")
        softmax = match_softmax(fn)
        if softmax is not None:
            x = softmax.input
            if softmax_fits_ub(spec, x.type.get_shape()[1], dtype_of(softmax, x.type), self.tile_elements):
                return lower_softmax(name, spec, fn, softmax, self.tile_elements, self.row_buffers)
            return lower_long_softmax(name, spec, fn, softmax, self.tile_elements)
        layer_norm = match_layer_norm(fn)
        if layer_norm is not None:
            params = (layer_norm.gamma is not None) + (layer_norm.beta is not None)
            N, dtype = layer_norm.x.type.get_shape()[1], dtype_of(layer_norm.anchor, layer_norm.x.type)
            if fits_ub(spec, N, dtype, params, self.tile_elements):
                return lower_layer_norm(name, spec, fn, layer_norm, self.tile_elements, self.row_buffers)
            return lower_long_layer_norm(name, spec, fn, layer_norm, self.tile_elements)
        ops = _compute_ops(fn)
        matmuls = [o for o in ops if o.name == "msir.matmul"]
        if matmuls:
            if len(ops) != 1:
                other = next(o for o in ops if o is not matmuls[0])
                raise refuse(other, "the Ascend target lowers a matmul as a kernel of its own; this op in the "
                             f"same function as the matmul at {source_loc(matmuls[0])} has no lowering there yet")
            return lower_matmul(name, spec, fn, matmuls[0], self.matmul_buffers)
        reductions = [o for o in ops if o.name in ROW_REDUCTIONS]
        if reductions:
            if len(ops) != 1:
                other = next(o for o in ops if o is not reductions[0])
                raise refuse(other, "the Ascend target lowers a row reduction as a kernel of its own; this op in "
                             f"the same function as the reduction at {source_loc(reductions[0])} has no lowering "
                             "there yet")
            return lower_row_reduction(name, spec, fn, reductions[0], self.tile_elements, self.row_buffers)
        return lower_elementwise(name, spec, fn, self.tile_elements, self.elementwise_buffers)

