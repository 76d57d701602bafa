"""msir's passes by name, and declared pipelines of them.

The registry
============
`PASSES` holds every msir pass once, by its command-line name, as
"module:Class". Nothing is imported to register a pass: `pass_class` imports a
pass's module when the pass is first asked for, so `import msir`, a cache hit
and every lit RUN line pay nothing for the passes they do not run. `msir-opt`
registers exactly these names (beside xDSL's passes); the compile driver
(`msir.compiler`) resolves the stages of a target's pipeline through them.
A name that is not msir's is looked up among xDSL's passes (`dce`).

Pipelines
=========
A `Pipeline` is the declared list of stages a target (`msir.targets`) runs
on a verified msir module: `Pass` stages (a registered name and its options)
and, where a target needs glue that is no pass, named `Step`s (a function of
the module). Everything else is derived from that one declaration:

* `Pipeline.text()`: the passes as `xdsl-opt -p` / `msir-opt -p` reads them
  (`msir-fuse,convert-msir-to-loops,msir-lower-to-llvm{math_impl="libm"}`),
  also the pipeline's part of the persistent cache keys;
* `Pipeline.labels()`: one label per stage, for `MSIR_DUMP`, `MSIR_VERIFY`
  (`Pass.verify`) and timing rows;
* `run`: applies the stages in order and reports each one's duration to a
  callback (the driver dumps, verifies and times there);
* `timing_report`: the table `MSIR_TIME_PASSES=1` and `msir-opt
  --time-passes` print on stderr.

Target dialects
===============
msir's passes and the CPU pipeline work on `msir` and the dialects below it
on the way to LLVM. A target's own dialect (`TARGET_DIALECTS`: `ascend`, `msir_shard`) is
foreign to them: `refuse_target_ops` rejects its ops, naming the first one and
its location, before `run` applies a pipeline and before `msir-opt` applies
an msir pass (passes that do work on the dialect are listed with it), so
that no pass silently skips or mangles them.

This module imports neither xDSL nor any pass (the cache key of a trace-cache
hit is computed from it).
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.passes import ModulePass

PASSES: dict[str, str] = {
    "msir-grad": "msir.passes.grad:MsirGrad",
    "msir-jvp": "msir.passes.jvp:MsirJvp",
    "msir-grad-jvp": "msir.passes.grad_jvp:MsirGradJvp",
    "msir-specialize": "msir.passes.specialize:MsirSpecialize",
    "msir-symbol-dce": "msir.passes.symbol_dce:MsirSymbolDce",
    "msir-forward-arguments": "msir.passes.forward_arguments:MsirForwardArguments",
    "msir-inline": "msir.passes.inline:MsirInline",
    "msir-lower-einsum": "msir.passes.lower_einsum:MsirLowerEinsum",
    "msir-lower-windows": "msir.passes.lower_windows:MsirLowerWindows",
    "msir-fuse": "msir.passes.fuse:MsirFuse",
    "msir-shard": "msir.passes.shard:MsirShard",
    "convert-msir-to-loops": "msir.lowering.to_loops:ConvertMsirToLoops",
    "msir-lower-to-llvm": "msir.lowering.to_llvm:MsirLowerToLlvm",
    "convert-msir-to-ascend": "msir.ascend.convert_msir_to_ascend:ConvertMsirToAscend",
}
"""Every msir pass: command-line name -> "module:Class" (imported on first use)."""


TARGET_DIALECTS: dict[str, tuple[frozenset[str], str]] = {
    "ascend": (frozenset(), "ascend kernels run on the emulator: msir-run --target ascend"),
    "msir_shard": (frozenset({"msir-shard", "msir-grad", "msir-jvp", "msir-grad-jvp", "msir-inline"}),
                   "a sharded function runs on a mesh of devices: msir.parallel's Plan.run"),
}
"""Target dialect -> (the msir passes that accept its ops, how to run them)."""


def refuse_target_ops(module: ModuleOp, stage: str | Sequence[str]) -> None:
    """A `CompileError` at the first op of a target dialect that `stage`
    does not accept (given the stages of a pipeline: the first of them
    that does not accept it)."""
    from msir.errors import CompileError, SourceLoc

    stages = (stage,) if isinstance(stage, str) else tuple(stage)
    for op in module.walk():
        dialect = op.name.partition(".")[0]
        if dialect not in TARGET_DIALECTS:
            continue
        stage = next((s for s in stages if s not in TARGET_DIALECTS[dialect][0]), None)
        if stage is not None:
            loc = op.location
            where = (SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
                     if hasattr(loc, "filename") else None)
            raise CompileError(f"{stage} cannot run on {op.name}, an op of the {dialect} target dialect; "
                               f"{TARGET_DIALECTS[dialect][1]}", where)


def load(location: str) -> Any:
    """The object a "module:attribute" location names (importing the module)."""
    module, _, attribute = location.partition(":")
    return getattr(importlib.import_module(module), attribute)


def pass_class(name: str) -> type[ModulePass]:
    """The pass class registered as `name`: msir's, else xDSL's."""
    location = PASSES.get(name)
    if location is not None:
        return load(location)
    from xdsl.transforms import get_all_passes

    factory = get_all_passes().get(name)
    if factory is None:
        raise KeyError(f"no pass is registered as '{name}'")
    return factory()


def summary(name: str) -> str:
    """The first line of a pass's docstring (imports the pass)."""
    lines = (pass_class(name).__doc__ or "").strip().splitlines()
    # msir's pass classes point at their module's docstring, which a
    # one-line listing (msir-opt --help) cannot show
    return re.sub(r"\s*\((see the )?module docstring\)", "", lines[0]) if lines else ""


def _option_text(value: Any) -> str:
    # xDSL's pipeline syntax (xdsl.utils.arg_spec.ArgSpec): lowercase
    # booleans, quoted strings, comma-separated lists
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return ",".join(_option_text(v) for v in value)
    return str(value)


# The stage types are NamedTuples, not frozen dataclasses: creating a frozen
# dataclass class costs ~5x more, and every process that compiles or looks
# its trace cache up imports this module.


class Pass(NamedTuple):
    """A registered pass and its options (fields of the pass class, as
    `name{key=value}` sets them); `verify`: the module verifies after it
    (checked under `MSIR_VERIFY`)."""

    name: str
    options: Mapping[str, Any] = MappingProxyType({})
    verify: bool = True

    @property
    def label(self) -> str:
        return self.text()

    def text(self) -> str:
        if not self.options:
            return self.name
        return self.name + "{" + " ".join(f"{k}={_option_text(v)}" for k, v in self.options.items()) + "}"

    def instance(self) -> ModulePass:
        return pass_class(self.name)(**self.options)

    def apply(self, ctx: Context, module: ModuleOp) -> None:
        self.instance().apply(ctx, module)


class Step(NamedTuple):
    """A target's glue that is not a pass, by name: inside a `Pipeline`,
    `run(module)` rewrites the module in place; a target's `native` step is
    `run(module, object_sink)` (see `msir.targets.Target`). Steps are not
    verified: they rename or hand over, they build no IR."""

    name: str
    run: Callable[..., Any]
    verify = False

    @property
    def label(self) -> str:
        return self.name

    def apply(self, ctx: Context, module: ModuleOp) -> None:
        self.run(module)


Stage = Pass | Step


class Pipeline(NamedTuple):
    """The stages a target runs, in order (see the module docstring)."""

    stages: tuple[Stage, ...]

    def passes(self) -> list[Pass]:
        return [s for s in self.stages if isinstance(s, Pass)]

    def steps(self) -> list[Step]:
        return [s for s in self.stages if isinstance(s, Step)]

    def text(self) -> str:
        """The passes as `msir-opt -p` takes them (steps are the target's)."""
        return ",".join(p.text() for p in self.passes())

    def labels(self) -> list[str]:
        return [s.label for s in self.stages]


def run(
    pipeline: Pipeline,
    ctx: Context,
    module: ModuleOp,
    after: Callable[[Stage, ModuleOp, float], None],
) -> None:
    """Apply the stages in order; `after(stage, module, seconds)` follows each.
    The module, which comes from the frontend, holds no target dialect op
    (`refuse_target_ops`; no msir pass makes one)."""
    if pipeline.stages:
        refuse_target_ops(module, [stage.label for stage in pipeline.stages])
    for stage in pipeline.stages:
        start = time.perf_counter()
        stage.apply(ctx, module)
        after(stage, module, time.perf_counter() - start)


_RULE = "===" + "-" * 73 + "==="


def timing_report(rows: Sequence[tuple[str, float]], title: str = "Pass execution timing report") -> str:
    """`rows` (label, seconds) as a table in the manner of `mlir-opt --mlir-timing`."""
    total = sum(seconds for _, seconds in rows)
    lines = [_RULE, f"... {title} ...".center(len(_RULE)).rstrip(), _RULE,
             f"  Total Execution Time: {total:.4f} seconds", "", "  ----Wall Time----  ----Name----"]
    for label, seconds in [*rows, ("Total", total)]:
        share = 100.0 * seconds / total if total > 0 else 0.0
        lines.append(f"  {seconds:8.4f} ({share:5.1f}%)  {label}")
    return "\n".join(lines)
