"""The compilation pipeline from a traced `msir` module to a native function.

    msir (value semantics)
      -- msir-grad, msir-jvp, msir-specialize   differentiation ops into ordinary functions
      -- msir-forward-arguments    callers reuse their arguments a callee returns
      -- msir-inline               private straight-line functions called once
      -- msir-lower-einsum         einsums into transposes, reshapes and (batched) matmuls
      -- dce
      -- msir-fuse                 elementwise chains into one loop nest each
      -- convert-msir-to-loops      memref buffers, scf loops, arith, math
      -- msir-lower-to-llvm         the llvm dialect, with an entry wrapper per function
      -- llvmlite                   O3 for the host CPU, MCJIT

`MSIR_DUMP=1` prints the IR after each stage on stderr (and bypasses the
persistent cache's lookup, so that the stages run). `MSIR_VERIFY=1` verifies
the module after each stage down to the loops level (the test suite sets it),
so that a pass producing invalid IR fails at once, naming the stage.

Before the stages, `compile_module` looks the traced module up in the
persistent compile cache (`msir.cache`): on a hit it loads the cached object
code and skips every stage below the frontend. `MSIR_CACHE=0` disables it.
xDSL and the passes are imported when a module is compiled, not with this
module (a call that hits the trace cache, `msir.trace_cache`, never needs them).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from msir.errors import CompileError, SourceLoc

if TYPE_CHECKING:
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp

_lock = threading.Lock()


def make_context() -> Context:
    """A context with every dialect msir's pipeline produces."""
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, llvm, math, memref, scf

    from msir.dialects.msir import Msir

    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, memref.MemRef, scf.Scf, llvm.LLVM, Msir):
        ctx.load_dialect(d)
    return ctx


def _dump(stage: str, module: ModuleOp) -> None:
    if os.environ.get("MSIR_DUMP"):
        print(f"// ----- IR after {stage} -----\n{module}\n", file=sys.stderr)
    if os.environ.get("MSIR_VERIFY") and stage not in ("the frontend", "msir-lower-to-llvm"):
        try:
            module.verify()
        except Exception as e:
            raise CompileError(f"internal error: the module does not verify after {stage}: {e}") from e


def _sites(module: ModuleOp) -> list[SourceLoc | None]:
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


@dataclass
class Compiled:
    native: object  # the NativeFunction of msir.lowering.jit
    native_module: object
    functions: dict = field(default_factory=dict)
    cache_key: str | None = None
    """The key of the object code in `msir.cache` (None: not cached)."""
    locations: list = field(default_factory=list)
    """The module's table of source locations (`msir.cache.module_key`)."""


PIPELINE = "msir-grad,msir-jvp,msir-specialize,msir-forward-arguments,msir-inline,msir-lower-einsum,dce,msir-fuse,convert-msir-to-loops,msir-lower-to-llvm,llvm-O3"


def pipeline_options() -> dict:
    """What, besides the module and msir's source, decides the generated code
    (part of the persistent cache key)."""
    options: dict = {"pipeline": PIPELINE}
    blas = sys.modules.get("msir.lowering.blas")
    if blas is not None:
        options["blas"] = bool(getattr(blas, "enabled", False))
    else:  # what msir.lowering.blas will read at import (importing it costs ms)
        options["blas"] = os.environ.get("MSIR_BLAS", "1").strip().lower() not in ("0", "false", "no", "off")
    return options


def preload() -> None:
    """Import every module a first `msir.jit` call may need (the API, xDSL,
    the passes, the lowerings, LLVM export), so that a later first call pays no import time
    (the benchmark harness calls it; a call that hits the persistent trace
    cache needs none of them)."""
    import importlib

    for name in (
        "msir.api",
        "xdsl.backend.llvm.convert",
        "xdsl.transforms.dead_code_elimination",
        "msir.frontend.driver",
        "msir.passes.jvp",
        "msir.passes.specialize",
        "msir.passes.forward_arguments",
        "msir.passes.inline",
        "msir.passes.lower_einsum",
        "msir.passes.fuse",
        "msir.lowering.to_loops",
        "msir.lowering.to_llvm",
        "msir.lowering.jit",
    ):
        importlib.import_module(name)
    make_context()


def _mangled(name: str) -> str:
    """The native symbol of msir function `name`: prefixed, so that a user's
    function called `expf` or `log` never clashes with the C library's."""
    return f"msir.{name}"


def _mangle_functions(module: ModuleOp) -> None:
    from xdsl.dialects import func
    from xdsl.dialects.builtin import StringAttr, SymbolRefAttr

    renamed = {}
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.body.blocks:
            renamed[op.sym_name.data] = _mangled(op.sym_name.data)
            op.sym_name = StringAttr(renamed[op.sym_name.data])
    for op in module.walk():
        if isinstance(op, func.CallOp) and op.callee.string_value() in renamed:
            op.callee = SymbolRefAttr(renamed[op.callee.string_value()])


def compile_module(module: ModuleOp, entry: str, also: tuple[str, ...] = (), known_miss: str | None = None) -> Compiled:
    """Lower a verified msir module and JIT-compile function `entry` (and the
    public functions `also`, in `Compiled.functions`).

    The persistent cache (`msir.cache`) is consulted first, unless the key is
    `known_miss` (the trace cache just failed to load it); on a miss the
    module goes through the stages and the object code is stored."""
    from msir import cache

    key = locs = None
    if cache.enabled():
        try:
            key, locs = cache.module_key(module, entry, tuple(also), pipeline_options())
        except Exception as e:  # never fail a compile because of the cache
            cache._log(f"no key: {type(e).__name__}: {e}")
            key = None
        if key is not None and key != known_miss and not os.environ.get("MSIR_DUMP"):
            hit = cache.load(key, locs)
            if hit is not None:
                native_module, sites = hit
                try:
                    native = native_module.function(_mangled(entry), sites=sites)
                    functions = {name: native_module.function(_mangled(name), sites=sites) for name in also}
                    return Compiled(native, native_module, functions, key, locs)
                except CompileError as e:  # an entry without the function: compile
                    cache._log(f"unusable entry {key[:12]}: {e}")

    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    from msir.dialects import msir as M
    from msir.lowering.jit import compile_llvm_module
    from msir.lowering.to_llvm import MsirLowerToLlvm
    from msir.lowering.to_loops import ConvertMsirToLoops
    from msir.passes.forward_arguments import forward_arguments
    from msir.passes.inline import inline_functions
    from msir.passes.lower_einsum import lower_all_einsums
    from msir.passes.fuse import MsirFuse
    from msir.passes.specialize import remove_unreachable_functions

    ctx = make_context()
    _dump("the frontend", module)
    try:
        module.verify()
    except Exception as e:  # a frontend bug: the frontend types what it builds
        raise CompileError(f"internal error: the traced module does not verify: {e}") from e
    if any(isinstance(op, M._TransformOp) for op in module.walk()):
        # (the AD passes are imported only when there is something to differentiate)
        from msir.passes.jvp import differentiate_all

        differentiate_all(module)
    remove_unreachable_functions(module)
    forward_arguments(module)
    inline_functions(module)
    lower_all_einsums(module)
    _dump("msir-grad", module)
    DeadCodeElimination().apply(ctx, module)
    MsirFuse().apply(ctx, module)
    _dump("msir-fuse", module)
    ConvertMsirToLoops().apply(ctx, module)
    _mangle_functions(module)
    _dump("convert-msir-to-loops", module)
    sites = _sites(module)
    MsirLowerToLlvm().apply(ctx, module)
    _dump("msir-lower-to-llvm", module)
    objects: list[bytes] = []
    with _lock:
        native_module = compile_llvm_module(
            module, object_sink=objects.append if key is not None else None
        )
    native = native_module.function(_mangled(entry), sites=sites)
    functions = {name: native_module.function(_mangled(name), sites=sites) for name in also}
    stored = False
    if key is not None:
        if len(objects) == 1:
            try:
                stored = cache.store(key, locs, objects[0], native_module.llvm_ir, native_module._metadata, sites)
            except Exception as e:  # never fail a compile because of the cache
                cache._log(f"not caching {key[:12]}: {type(e).__name__}: {e}")
        else:
            cache._log(f"not caching {key[:12]}: MCJIT produced {len(objects)} objects")
    return Compiled(native, native_module, functions, key if stored else None, locs or [])
