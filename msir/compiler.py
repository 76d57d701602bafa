"""The compile driver: a traced `msir` module to native functions, for a target.

`compile_module` runs the declared pipeline of the target it is asked for
(`msir.targets`; `cpu` by default, whose stages `msir.lowering.cpu` lists),
then the target's native step, and wraps the entry functions. From the
declared stages (`msir.pipeline`), not from code of their own, come:

* `MSIR_DUMP=1`: the IR after the frontend and after each stage, on stderr,
  each preceded by `// ----- IR after <stage> -----` (the persistent cache's
  lookup is bypassed, so that the stages run);
* `MSIR_VERIFY=1`: the traced module verified after the frontend, and the
  module after each stage that declares it (`Pass.verify`; on cpu, after
  each group of passes down to the loops level; the test suite sets it), so
  that a frontend or pass producing invalid IR fails at once, naming the
  stage (without it nothing is verified: a cold compile's verifications cost
  ~7% of it);
* `MSIR_TIME_PASSES=1`: a table of each stage's time, the native step's
  included, on stderr after each compilation (a cache hit runs none; the
  first compilation in a process includes importing each pass);
* `pipeline_options`: the target's name, its pipeline text and its own
  options, in both persistent cache keys.

Before the stages, `compile_module` looks the traced module up in the
persistent compile cache (`msir.cache`): on a hit it loads the cached object
code and skips every stage below the frontend. `MSIR_CACHE=0` disables it.
xDSL and the passes are imported when a module is compiled, not with this
module (a call that hits the trace cache, `msir.trace_cache`, never needs them).
"""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from msir import pipeline, targets
from msir.errors import CompileError

if TYPE_CHECKING:
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp


def make_context() -> Context:
    """A context with every dialect msir's pipeline produces: a new copy of
    one built once per process (loading the dialects checks each of their
    ~600 classes, ~1.4 ms in a first compile)."""
    return _base_context().clone()


@functools.cache
def _base_context() -> Context:
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, llvm, math, memref, scf

    from msir.dialects.msir import Msir

    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, memref.MemRef, scf.Scf, llvm.LLVM, Msir):
        ctx.load_dialect(d)
    # loaded only when a module holds ascend or msir_shard ops, for the
    # pipeline to refuse them at their location (msir.pipeline.refuse_target_ops)
    ctx.register_dialect("ascend", _ascend_dialect)
    ctx.register_dialect("msir_shard", _shard_dialect)
    return ctx


def _ascend_dialect():
    from msir.dialects.ascend import Ascend

    return Ascend


def _shard_dialect():
    from msir.dialects.msir_shard import MsirShard

    return MsirShard


@dataclass
class Compiled:
    native: object  # what the target's native module returns for the entry (a NativeFunction on cpu)
    native_module: object
    symbol: str
    """The entry's symbol in the native module (what the trace cache records)."""
    functions: dict = field(default_factory=dict)
    cache_key: str | None = None
    """The key of the object code in `msir.cache` (None: not cached)."""
    locations: list = field(default_factory=list)
    """The module's table of source locations (`msir.cache.module_key`)."""


def pipeline_options(target: str = targets.DEFAULT) -> dict:
    """What, besides the module and msir's source, decides the code generated
    for `target` (part of both persistent cache keys)."""
    t = targets.get(target)
    return {
        "target": t.name,
        "pipeline": t.pipeline.text(),
        "steps": [s.name for s in (*t.pipeline.steps(), t.native)],
        **t.key_options(),
    }


def preload(target: str = targets.DEFAULT) -> None:
    """Import every module a first `msir.jit` call for `target` may need (the
    API, the frontend, xDSL, every pass of the pipeline, the differentiation
    passes, the JIT), so that a later first call pays no import time (the
    benchmark harness calls it; a call that hits the persistent trace cache
    needs none of them)."""
    import importlib

    for name in ("msir.api", "msir.frontend.driver", "msir.passes.jvp", "msir.lowering.jit",
                 "msir.lowering.llvm_text", "msir.verify"):
        importlib.import_module(name)
    for stage in targets.get(target).pipeline.passes():
        pipeline.pass_class(stage.name)
    make_context()


class _Observer:
    """What `MSIR_DUMP`, `MSIR_VERIFY` and `MSIR_TIME_PASSES` ask of each stage
    of one compilation (read once per compilation)."""

    def __init__(self):
        self.dump = bool(os.environ.get("MSIR_DUMP"))
        self.verify = bool(os.environ.get("MSIR_VERIFY"))
        self.timings: list[tuple[str, float]] | None = [] if os.environ.get("MSIR_TIME_PASSES") else None

    def frontend(self, module: ModuleOp) -> None:
        if self.dump:
            _dump("the frontend", module)
        if self.verify:  # ~7% of a cold 200-op compile, so only when asked, as after the stages
            try:
                module.verify()
            except Exception as e:  # a frontend bug: the frontend types what it builds
                raise CompileError(f"internal error: the traced module does not verify: {e}") from e

    def __call__(self, stage: pipeline.Stage, module: ModuleOp, seconds: float) -> None:
        if self.timings is not None:
            self.timings.append((stage.label, seconds))
        if self.dump:
            _dump(stage.label, module)
        if self.verify and stage.verify:
            from msir.verify import IRVerificationError, verify_module

            try:
                verify_module(module)  # xDSL's verifier and SSA dominance
            except IRVerificationError as e:
                raise CompileError(f"internal error: the module does not verify after {stage.label}: {e}") from e

    def native(self, step: pipeline.Step, seconds: float) -> None:
        if self.timings is not None:
            self.timings.append((step.label, seconds))

    def report(self, entry: str, target: targets.Target) -> None:
        if self.timings is not None:
            title = f"msir.jit timing report: @{entry} for {target.name}"
            print(pipeline.timing_report(self.timings, title), file=sys.stderr)


def _dump(label: str, module: ModuleOp) -> None:
    from xdsl.printer import Printer

    # as msir-opt prints it, so that each stage can be fed back to msir-opt
    print(f"// ----- IR after {label} -----", file=sys.stderr)
    Printer(stream=sys.stderr).print_op(module)
    print("\n", file=sys.stderr)


def compile_module(
    module: ModuleOp,
    entry: str,
    also: tuple[str, ...] = (),
    known_miss: str | None = None,
    target: str = targets.DEFAULT,
) -> Compiled:
    """Lower a verified msir module for `target` and compile function `entry`
    (and the public functions `also`, in `Compiled.functions`) to native code.

    The persistent cache (`msir.cache`) is consulted first, unless the key is
    `known_miss` (the trace cache just failed to load it); on a miss the
    module goes through the stages and the object code is stored."""
    from msir import cache

    t = targets.get(target)
    key = locs = None
    if t.object_code and cache.enabled():
        try:
            key, locs = cache.module_key(module, entry, tuple(also), pipeline_options(t.name))
        except Exception as e:  # never fail a compile because of the cache
            cache._log(f"no key: {type(e).__name__}: {e}")
            key = None
        if key is not None and key != known_miss and not os.environ.get("MSIR_DUMP"):
            hit = cache.load(key, locs)
            if hit is not None:
                native_module, sites = hit
                try:
                    native = native_module.function(t.symbol(entry), sites=sites)
                    functions = {name: native_module.function(t.symbol(name), sites=sites) for name in also}
                    return Compiled(native, native_module, t.symbol(entry), functions, key, locs)
                except CompileError as e:  # an entry without the function: compile
                    cache._log(f"unusable entry {key[:12]}: {e}")

    observe = _Observer()
    observe.frontend(module)
    pipeline.run(t.pipeline, make_context(), module, observe)
    objects: list[bytes] = []
    start = time.perf_counter()
    native_module, sites = t.native.run(module, objects.append if key is not None else None)
    observe.native(t.native, time.perf_counter() - start)
    observe.report(entry, t)
    native = native_module.function(t.symbol(entry), sites=sites)
    functions = {name: native_module.function(t.symbol(name), sites=sites) for name in also}
    stored = False
    if key is not None:
        if len(objects) == 1:
            try:
                stored = cache.store(key, locs, objects[0], native_module.llvm_ir, native_module._metadata, sites)
            except Exception as e:  # never fail a compile because of the cache
                cache._log(f"not caching {key[:12]}: {type(e).__name__}: {e}")
        else:
            cache._log(f"not caching {key[:12]}: MCJIT produced {len(objects)} objects")
    return Compiled(native, native_module, t.symbol(entry), functions, key if stored else None, locs or [])
