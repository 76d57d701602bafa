"""`msir-lower-windows`: decompose `msir.conv2d`, `msir.max_pool2d` and
`msir.avg_pool2d` into msir primitives the CPU lowering runs natively, a
convolution's products through the BLAS.

Contract
--------
Expects: verified `msir` IR, anywhere in a module, inside regions too. Run it
after differentiation (the window ops' rules emit convolutions) and before
`msir-fuse`, so the slices, maxima and sums it emits fuse.

Rewrites: each window op into the ops of `msir.passes.window_algebra`, built in
place with the op's location and `msir.name` (if it has one): the columns of
im2col as one `take` along the flattened spatial axis through an index table
(KH*KW, OH*OW) computed from `iota`s (rows and columns clamped into the
input, a mask zeroing the taps in the padding); then

* `conv2d`: one (batched) `matmul` of the weight reshaped to (groups,
  O/groups, C/groups*KH*KW) with the columns, reshaped to NCHW;
* `max_pool2d`: `reduce_max` over the taps of the clamped columns (a clamped
  tap repeats an element of its own window: padding never wins);
* `avg_pool2d`: `reduce_sum` of the masked columns over the window size or,
  without `count_include_pad`, over the mask's sum.

Guarantees: no window op remains; every result keeps its type; the module verifies.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from msir.dialects import msir as M
from msir.passes import window_algebra as W
from msir.passes.ad_ir import IRBuilder, name_of, op_params

WINDOW_OPS = (M.Conv2dOp, M.MaxPool2dOp, M.AvgPool2dOp)


def lower_window(op: Operation) -> None:
    """Replace window op `op` by its decomposition, inserted just before it."""
    staging = Block()
    B = IRBuilder(staging, op.location, name=name_of(op))
    _, p = op_params(op)
    match op:
        case M.Conv2dOp():
            result = W.decompose_conv2d(B, op.input, op.weight, p)
        case M.MaxPool2dOp():
            result = W.decompose_max_pool2d(B, op.input, p)
        case _:
            result = W.decompose_avg_pool2d(B, op.input, p)
    assert result.type == op.results[0].type, f"{op.name}: decomposed to {result.type}, not {op.results[0].type}"
    block = op.parent_block()
    assert block is not None
    for new in list(staging.ops):
        new.detach()
        block.insert_op_before(new, op)
    op.results[0].replace_all_uses_with(result)
    block.erase_op(op)


@dataclass(frozen=True)
class MsirLowerWindows(ModulePass):
    """Decompose convolutions and poolings into gathers (im2col), matmuls and reductions (see the module docstring)."""

    name = "msir-lower-windows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for window in [o for o in op.walk() if isinstance(o, WINDOW_OPS)]:
            lower_window(window)
