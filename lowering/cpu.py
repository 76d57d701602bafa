"""The `cpu` target: msir through loops and the llvm dialect to native code by llvmlite.

    msir-grad-jvp            differentiation ops into ordinary functions (both modes)
    msir-symbol-dce          the private functions nothing reaches any more
    msir-forward-arguments   callers reuse the arguments a callee returns
    msir-inline              private straight-line functions called once
    msir-lower-einsum        einsums into transposes, reshapes and matmuls
    msir-lower-windows       conv2d and pooling into im2col gathers and matmuls
    cse                      repeated pure ops merged: a gradient's im2col columns
                             and index tables are the forward's (xDSL's pass)
    dce
    msir-fuse                elementwise chains into one loop nest each
    convert-msir-to-loops    memref buffers, scf loops, arith, math
    mangle-symbols           (step) function @f becomes native symbol "msir.f"
    msir-lower-to-llvm       the llvm dialect, with an entry wrapper per function
    llvmlite-O3-mcjit        (native step) LLVM IR, O3 for the host CPU, MCJIT

`msir-opt -p` runs the same passes from `CPU.pipeline.text()`; the steps are
the JIT's: native symbols are prefixed so that a user's function called
`expf` or `log` never clashes with the C library's, and the engine's object
code is what the persistent caches keep (`object_code`). This module imports
neither xDSL nor llvmlite (the steps import them when they run).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from msir.errors import SourceLoc
from msir.pipeline import Pass, Pipeline, Step
from msir.targets import Target

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

_compile_lock = threading.Lock()
"""LLVM code generation is serialised across the process (see msir.lowering.jit)."""


def native_symbol(name: str) -> str:
    """The native symbol of msir function `name`."""
    return f"msir.{name}"


def mangle_symbols(module: ModuleOp) -> None:
    """Rename every function with a body, and the calls of it, to its native symbol."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import StringAttr, SymbolRefAttr

    renamed = {}
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.body.blocks:
            renamed[op.sym_name.data] = native_symbol(op.sym_name.data)
            op.sym_name = StringAttr(renamed[op.sym_name.data])
    for op in module.walk():
        if isinstance(op, func.CallOp) and op.callee.string_value() in renamed:
            op.callee = SymbolRefAttr(renamed[op.callee.string_value()])


def _sites(module: ModuleOp) -> list[SourceLoc | None]:
    """The runtime error sites convert-msir-to-loops recorded in `msir.sites`."""
    from xdsl.dialects.builtin import ArrayAttr, StringAttr

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


def jit_module(module: ModuleOp, object_sink: Callable[[bytes], None] | None) -> tuple[Any, list[SourceLoc | None]]:
    """The llvm-dialect module as a `msir.lowering.jit.NativeModule`, and its error sites."""
    from msir.lowering.jit import compile_llvm_module

    sites = _sites(module)
    with _compile_lock:
        native = compile_llvm_module(module, object_sink=object_sink)
    return native, sites


def prepare() -> None:
    """The target's `prepare`: the allocator and the thread pool are built in
    the background while the first compilation traces (`msir.lowering.jit.start_runtimes`)."""
    from msir.lowering.jit import start_runtimes

    start_runtimes()


def key_options() -> dict[str, Any]:
    """Whether convert-msir-to-loops calls BLAS for matmuls, and fuses their
    epilogues (read without importing msir.lowering.blas, which costs milliseconds)."""
    blas = sys.modules.get("msir.lowering.blas")
    if blas is not None:
        return {"blas": bool(getattr(blas, "enabled", False)), "gemm_epilogue": bool(blas.fuse_epilogues)}
    return {name: os.environ.get(var, "1").strip().lower() not in ("0", "false", "no", "off")
            for name, var in (("blas", "MSIR_BLAS"), ("gemm_epilogue", "MSIR_GEMM_EPILOGUE"))}


CPU = Target(
    name="cpu",
    # MSIR_VERIFY checks after each group of passes rather than after every
    # one: a verification costs about what a pass does, and the test suite
    # verifies every compilation. The llvm-dialect module (three times the
    # loops level's ops) is left to LLVM's verifier, when llvmlite parses it.
    pipeline=Pipeline((
        Pass("msir-grad-jvp", verify=False),
        Pass("msir-symbol-dce", verify=False),
        Pass("msir-forward-arguments", verify=False),
        Pass("msir-inline"),
        Pass("msir-lower-einsum", verify=False),
        Pass("msir-lower-windows", verify=False),
        Pass("cse", verify=False),
        Pass("dce", verify=False),
        Pass("msir-fuse"),
        Pass("convert-msir-to-loops"),
        Step("mangle-symbols", mangle_symbols),
        Pass("msir-lower-to-llvm", verify=False),
    )),
    native=Step("llvmlite-O3-mcjit", jit_module),
    symbol=native_symbol,
    key_options=key_options,
    object_code=True,
    prepare=prepare,
)
"""msir's CPU target (registered as `cpu` in msir.targets)."""
