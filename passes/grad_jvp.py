"""`msir-grad-jvp`: reverse and forward mode together, innermost first.

Contract
--------
Expects: what `msir-grad` and `msir-jvp` expect (differentiation ops taking a
function value made by `msir.closure`), nested in any order.

Rewrites: every `msir.grad`, `msir.value_and_grad`, `msir.vjp` and `msir.jvp`
is expanded as those two passes expand it, innermost first whichever its
mode (`msir.passes.jvp.differentiate_all`). Running the two passes one after
the other cannot do that: `msir-grad,msir-jvp` meets a gradient of a function
that still holds an `msir.jvp`, and `msir-jvp,msir-grad` a tangent of one that
still holds an `msir.grad`. A module without differentiation ops is left as it
is, and the differentiation passes are not even imported (the compile driver
runs this pass on every module).

Guarantees: no differentiation op remains; the module verifies.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from msir.dialects import msir as M


@dataclass(frozen=True)
class MsirGradJvp(ModulePass):
    """Expand every differentiation op, reverse and forward mode, innermost first."""

    name = "msir-grad-jvp"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if any(isinstance(inner, M._TransformOp) for inner in op.walk()):
            from msir.passes.jvp import differentiate_all

            differentiate_all(op)
