"""The compilation pipeline from a traced `msir` module to a native function.

    msir (value semantics)
      -- msir-grad, msir-jvp, msir-specialize   differentiation ops into ordinary functions
      -- dce
      -- msir-fuse                 elementwise chains into one loop nest each
      -- convert-msir-to-loops      memref buffers, scf loops, arith, math
      -- msir-lower-to-llvm         the llvm dialect, with an entry wrapper per function
      -- llvmlite                   O3 for the host CPU, MCJIT

`MSIR_DUMP=1` prints the IR after each stage on stderr.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, llvm, math, memref, scf
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from msir.dialects.msir import Msir
from msir.errors import CompileError, SourceLoc

_lock = threading.Lock()


def make_context() -> Context:
    """A context with every dialect msir's pipeline produces."""
    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, memref.MemRef, scf.Scf, llvm.LLVM, Msir):
        ctx.load_dialect(d)
    return ctx


def _dump(stage: str, module: ModuleOp) -> None:
    if os.environ.get("MSIR_DUMP"):
        print(f"// ----- IR after {stage} -----\n{module}\n", file=sys.stderr)


def _sites(module: ModuleOp) -> list[SourceLoc | None]:
    attr = module.attributes.get("msir.sites")
    out: list[SourceLoc | None] = []
    if isinstance(attr, ArrayAttr):
        for s in attr.data:
            text = s.data if isinstance(s, StringAttr) else ""
            parts = text.rsplit(":", 2)
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                out.append(SourceLoc(parts[0], int(parts[1]), int(parts[2])))
            else:
                out.append(None)
    return out


@dataclass
class Compiled:
    native: object  # the NativeFunction of msir.lowering.jit
    native_module: object
    functions: dict = field(default_factory=dict)


def compile_module(module: ModuleOp, entry: str, also: tuple[str, ...] = ()) -> Compiled:
    """Lower a verified msir module and JIT-compile function `entry` (and the
    public functions `also`, in `Compiled.functions`)."""
    from msir.lowering.jit import compile_llvm_module
    from msir.lowering.to_llvm import MsirLowerToLlvm
    from msir.lowering.to_loops import ConvertMsirToLoops
    from msir.passes.fuse import MsirFuse
    from msir.passes.jvp import differentiate_all
    from msir.passes.specialize import remove_unreachable_functions

    ctx = make_context()
    _dump("the frontend", module)
    try:
        module.verify()
    except Exception as e:  # a frontend bug: the frontend types what it builds
        raise CompileError(f"internal error: the traced module does not verify: {e}") from e
    differentiate_all(module)
    remove_unreachable_functions(module)
    _dump("msir-grad", module)
    DeadCodeElimination().apply(ctx, module)
    MsirFuse().apply(ctx, module)
    _dump("msir-fuse", module)
    ConvertMsirToLoops().apply(ctx, module)
    _dump("convert-msir-to-loops", module)
    sites = _sites(module)
    MsirLowerToLlvm().apply(ctx, module)
    _dump("msir-lower-to-llvm", module)
    with _lock:
        native_module = compile_llvm_module(module)
    native = native_module.function(entry, sites=sites)
    functions = {name: native_module.function(name, sites=sites) for name in also}
    return Compiled(native, native_module, functions)
