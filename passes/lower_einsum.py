"""`msir-lower-einsum`: decompose every `msir.einsum` into msir primitives the CPU
lowering runs natively, its contractions through the BLAS.

Contract
--------
Expects: verified `msir` IR (an einsum's operands have static shapes, as its
verifier demands), anywhere in a module, inside regions too. Run it after
differentiation (the einsum rules emit einsums) and before `msir-fuse`, so the
broadcasts and multiplies it emits fuse.

Rewrites: each `msir.einsum` into the ops of
`msir.passes.einsum_algebra.decompose_einsum`, built in place with the
einsum's location and `msir.name` (if it has one): diagonals as `transpose`,
`reshape`, `slice`; subscripts of one operand only that the output lacks as
`reduce_sum`; a contraction with a free subscript as transpose -> reshape ->
`matmul` (batched over a flattened batch axis) -> reshape -> transpose, each transpose and reshape left out where
it would be the identity, subscript orders chosen to copy the fewest elements
(`convert-msir-to-loops` reads a transpose of a matmul operand's last two axes
in place: the BLAS transpose flag); outer, elementwise and dot products as
`broadcast_to`, `mul` and `reduce_sum`. So `ij,jk->ik`, `ij,kj->ik`,
`ji,jk->ik` and `ij,jk->ki` each become exactly one `msir.matmul`.

Guarantees: no `msir.einsum` remains; every result keeps its type; the
module verifies.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from msir.dialects import msir as M
from msir.passes.ad_ir import IRBuilder, name_of
from msir.passes.einsum_algebra import decompose_einsum


def lower_einsum(op: M.EinsumOp) -> None:
    """Replace `op` by its decomposition, inserted just before it."""
    staging = Block()
    builder = IRBuilder(staging, op.location, name=name_of(op))
    result = decompose_einsum(builder, op.spec_string, list(op.inputs))
    assert result.type == op.result.type, f"{op.spec_string}: decomposed to {result.type}, not {op.result.type}"
    block = op.parent_block()
    assert block is not None
    for new in list(staging.ops):
        new.detach()
        block.insert_op_before(new, op)
    op.result.replace_all_uses_with(result)
    block.erase_op(op)


def lower_all_einsums(module: ModuleOp) -> None:
    """Lower every einsum of `module`."""
    for op in [op for op in module.walk() if isinstance(op, M.EinsumOp)]:
        lower_einsum(op)


@dataclass(frozen=True)
class MsirLowerEinsum(ModulePass):
    """Decompose `msir.einsum` into transposes, reshapes and matmuls (see the module docstring)."""

    name = "msir-lower-einsum"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_all_einsums(op)
