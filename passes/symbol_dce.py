"""`msir-symbol-dce`: erase the private functions no public function reaches.

Contract
--------
Expects: a module of `func.func`s; references between them are `func.call`
and `msir.closure`.

Rewrites: a private function that no public function reaches through calls
and closures, transitively, is erased (e.g. a differentiated function once
only its derivative is called). MLIR's `symbol-dce`, for the references msir
makes: ops at the module's top level outside any function are roots too.

Guarantees: public functions, top-level ops, and everything they can call,
stay as they are; no reference is left dangling.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from msir.passes.specialize import remove_unreachable_functions


@dataclass(frozen=True)
class MsirSymbolDce(ModulePass):
    """Erase the private functions that no public function reaches."""

    name = "msir-symbol-dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        remove_unreachable_functions(op)
