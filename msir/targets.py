"""Compile targets: what a module is compiled for, chosen by name.

A `Target` is what the compile driver (`msir.compiler.compile_module`) needs
to know of a backend:

* `name`: how users choose it (`msir.jit(f, target="cpu")`, `msir-run
  --target cpu`; `msir.set_context(device_target="CPU")` in MindSpore's
  spelling, matched case-insensitively);
* `pipeline`: the declared stages (`msir.pipeline.Pipeline`) from a verified
  msir module to the target's lowered module, run with `MSIR_DUMP`,
  `MSIR_VERIFY` and `MSIR_TIME_PASSES` applying to each stage;
* `native`: the step (`msir.pipeline.Step`) that turns the lowered module
  into a native module: `native.run(module, object_sink)` returns
  `(native_module, sites)`, where `native_module.function(symbol, sites=sites)`
  is a callable taking NumPy arrays and returning a tuple of them, and
  `sites` the source locations runtime errors are reported at;
* `symbol(name)`: the symbol of msir function `name` in the native module;
* `key_options()`: what else decides the generated code (e.g. whether BLAS
  is used), joined with the target's name and pipeline text into the
  persistent cache keys (`msir.compiler.pipeline_options`);
* `object_code`: the native modules are llvmlite object code, which the
  persistent caches (`msir.cache`, `msir.trace_cache`) store and reload;
  a target without (False) is compiled once per process, cached in memory;
* `prepare()` (optional): called when a compilation for the target starts
  (`msir.jit`'s first call of a signature, before the caches are probed);
  it may start building the process-wide runtimes the native step needs in
  the background, so that building them overlaps tracing and the passes.
  Idempotent and thread-safe; the native step must wait for what it starts.

`TARGETS` registers each target by name with MindSpore's spelling of it and
the "module:attribute" of its `Target`: the target's package is imported
when something is compiled for it, never by `import msir` (this module and
`msir.pipeline` import nothing heavy). A name that is not registered is an
`UnknownTargetError` listing the known ones (also for `device_target="GPU"`:
msir has no GPU target).

Adding a target
===============
A new package and one entry in `TARGETS`. The Ascend target is one: its
package (`msir.ascend.target:ASCEND`) declares the pipeline
(`convert-msir-to-ascend`, registered in `msir.pipeline.PASSES`) and a native
step that runs the kernels on the emulator (`object_code=False`: compiled
once per process); `msir.set_context(device_target="Ascend")` compiles for
it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from msir.errors import UnknownTargetError

if TYPE_CHECKING:
    from msir.pipeline import Pipeline, Step


# NamedTuples rather than frozen dataclasses: msir.api imports this module,
# and creating a frozen dataclass class costs ~5x more.


class Target(NamedTuple):
    """A backend msir compiles for (see the module docstring)."""

    name: str
    pipeline: Pipeline
    native: Step
    symbol: Callable[[str], str]
    key_options: Callable[[], dict[str, Any]]
    object_code: bool
    prepare: Callable[[], None] | None = None


class Registered(NamedTuple):
    """A target's entry in `TARGETS`: MindSpore's spelling of its name and
    where its `Target` is defined."""

    device_target: str
    location: str


TARGETS: dict[str, Registered] = {
    "cpu": Registered("CPU", "msir.lowering.cpu:CPU"),
    "ascend": Registered("Ascend", "msir.ascend.target:ASCEND"),
}
"""Every target by name (see the module docstring)."""

DEFAULT = "cpu"
"""The target of `msir.jit` and `msir-run` unless chosen otherwise."""


def canonical(name: Any) -> str:
    """The registered name `name` matches, case-insensitively
    (`UnknownTargetError` listing the known targets when none does)."""
    key = name.lower() if isinstance(name, str) else None
    if key not in TARGETS:
        known = ", ".join(f"'{n}' (device_target '{r.device_target}')" for n, r in TARGETS.items())
        raise UnknownTargetError(f"unknown compile target {name!r}; the known targets are {known}")
    return key


def device_target(name: str) -> str:
    """MindSpore's spelling of a target's name (`msir.get_context("device_target")`)."""
    return TARGETS[canonical(name)].device_target


def get(name: str) -> Target:
    """The target `name` matches, its package imported."""
    key = canonical(name)
    module, _, attribute = TARGETS[key].location.partition(":")
    package = sys.modules.get(module)  # every call looks its target up: skip the import machinery
    if package is not None:
        target = getattr(package, attribute)
    else:
        from msir.pipeline import load  # (msir.api imports this module, and needs no pipeline)

        target = load(TARGETS[key].location)
    assert target.name == key, f"{TARGETS[key].location} defines target '{target.name}', registered as '{key}'"
    return target


def options_key(name: str) -> tuple:
    """The `key_options` of the target `name` matches, now, as a hashable
    key: the in-memory caches of compiled functions key on it, so that code
    compiled for other options (another Ascend chip, BLAS switched off) is
    never reused."""
    return tuple(sorted(get(name).key_options().items()))
