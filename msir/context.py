"""The execution context (MindSpore's `set_context`): PyNative or Graph mode,
and the device target functions are compiled for.

Near the bottom of msir's import graph: the API, the frontend and the eager
engine read the context here; this module imports only the target registry
(`msir.targets`, which imports no target until one is used).
"""

from __future__ import annotations

from typing import Any

from msir import targets

GRAPH_MODE = 0
"""Compile functions (and their derivatives) to native code."""
PYNATIVE_MODE = 1
"""Run functions eagerly, op by op (`jit` still compiles)."""

_context: dict[str, Any] = {"mode": GRAPH_MODE, "device_target": targets.device_target(targets.DEFAULT)}


def set_context(mode: int | None = None, device_target: str | None = None) -> None:
    """Set the execution mode, `msir.set_context(mode=msir.PYNATIVE_MODE)`, and
    the target functions are compiled for, `msir.set_context(device_target="CPU")`.

    `device_target` takes MindSpore's spellings ("CPU", "GPU", "Ascend"),
    matched case-insensitively to msir's targets (`msir.targets`); one that
    names no target raises `msir.errors.UnknownTargetError` listing the known
    ones. A jitted function called after the switch is compiled for the new
    target (`msir.jit(f, target=...)` keeps its own)."""
    spelling = None if device_target is None else targets.device_target(device_target)
    if mode is not None:
        if mode not in (GRAPH_MODE, PYNATIVE_MODE):
            raise ValueError(f"mode must be msir.GRAPH_MODE or msir.PYNATIVE_MODE, got {mode!r}")
        _context["mode"] = mode
    if spelling is not None:
        _context["device_target"] = spelling


def set_device(device_target: str, device_id: int | None = None) -> None:
    """MindSpore's `set_device("CPU")` (its successor of `set_context(device_target=...)`):
    the target functions are compiled for. msir drives one device of a
    target, so `device_id` is None or 0."""
    if device_id not in (None, 0):
        raise ValueError(f"set_device: msir drives one device of a target, so device_id must be 0, got {device_id!r}")
    set_context(device_target=device_target)


def get_context(key: str) -> Any:
    if key not in _context:
        raise ValueError(f"unknown context key {key!r} (known: {', '.join(_context)})")
    return _context[key]


def device_target() -> str:
    """The context's device target, in MindSpore's spelling ("CPU")."""
    return _context["device_target"]


def pynative() -> bool:
    """Is the current mode PYNATIVE_MODE?"""
    return _context["mode"] == PYNATIVE_MODE


# -- the auto-parallel context (MindSpore's `set_auto_parallel_context`) ---------

PARALLEL_MODES = ("stand_alone", "data_parallel", "semi_auto_parallel", "auto_parallel")
"""`stand_alone`: serial; `data_parallel`: the data arguments split along their
batch dimension over every device, the parameters replicated; `semi_auto_parallel`:
the strategies of the primitives' `.shard(...)` (`msir.ops.MatMul`), the other
ops' chosen by the search; `auto_parallel`: every strategy chosen by the search
(`msir.parallel.auto_shard`)."""

_AUTO_PARALLEL_DEFAULTS: dict[str, Any] = {"parallel_mode": "stand_alone", "mesh": None, "device_num": 1,
                                           "cost_model": None}
_auto_parallel: dict[str, Any] = dict(_AUTO_PARALLEL_DEFAULTS)


def set_auto_parallel_context(parallel_mode: str | None = None, mesh: Any = None, device_num: int | None = None,
                              cost_model: Any = None) -> None:
    """MindSpore's one line: `msir.set_auto_parallel_context(parallel_mode="auto_parallel", mesh=(2, 4))`
    makes every `msir.jit` function called afterwards run sharded on emulated devices, or under an MPI
    job on its ranks (`msir.parallel.context_plan`), forward and, for a training step, backward.

    `mesh` is the device mesh's shape; `device_num=n` alone means the mesh `(n,)`
    (both: their sizes must agree). `cost_model` (a `msir.parallel.CostModel`)
    is what `auto_parallel` and `semi_auto_parallel` minimise. Keys not given
    keep their values."""
    from msir.errors import PlanningError

    if parallel_mode is not None and parallel_mode not in PARALLEL_MODES:
        raise PlanningError(f"set_auto_parallel_context: unknown parallel_mode {parallel_mode!r} "
                            f"(known: {', '.join(PARALLEL_MODES)})")
    shape = None
    if mesh is not None:
        shape = (mesh,) if isinstance(mesh, int) and not isinstance(mesh, bool) else mesh
        if not (isinstance(shape, (tuple, list)) and shape
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape)):
            raise PlanningError(f"set_auto_parallel_context: mesh must be a shape of positive ints like (2, 4), "
                                f"got {mesh!r}")
        shape = tuple(shape)
    if device_num is not None and (not isinstance(device_num, int) or isinstance(device_num, bool) or device_num < 1):
        raise PlanningError(f"set_auto_parallel_context: device_num must be a positive int, got {device_num!r}")
    if shape is not None and device_num is not None and _product(shape) != device_num:
        raise PlanningError(f"set_auto_parallel_context: mesh {shape} has {_product(shape)} devices, "
                            f"not device_num={device_num}")
    if parallel_mode is not None:
        _auto_parallel["parallel_mode"] = parallel_mode
    if shape is not None:
        _auto_parallel["mesh"], _auto_parallel["device_num"] = shape, _product(shape)
    elif device_num is not None:
        _auto_parallel["mesh"], _auto_parallel["device_num"] = (device_num,), device_num
    if cost_model is not None:
        _auto_parallel["cost_model"] = cost_model


def reset_auto_parallel_context() -> None:
    """Back to `stand_alone` on one device (MindSpore's `reset_auto_parallel_context`)."""
    _auto_parallel.clear()
    _auto_parallel.update(_AUTO_PARALLEL_DEFAULTS)


def get_auto_parallel_context(key: str) -> Any:
    """One key of the auto-parallel context: parallel_mode, mesh, device_num, cost_model."""
    if key not in _auto_parallel:
        raise ValueError(f"unknown auto-parallel context key {key!r} (known: {', '.join(_auto_parallel)})")
    return _auto_parallel[key]


primitive_strategies: dict[str, Any] = {}
"""op name -> the strategy a primitive's `.shard(...)` gave it (`msir.ops.MatMul`), for semi_auto_parallel."""
_strategies_set = [0]  # how many times a primitive's strategy was set: part of the plans' cache key


def set_primitive_strategy(name: str, strategy: Any) -> None:
    primitive_strategies[name] = strategy
    _strategies_set[0] += 1


def auto_parallel_key() -> tuple | None:
    """The auto-parallel context as a cache key; None when `msir.jit` runs serially
    (stand_alone, or a mesh of one device)."""
    ctx = _auto_parallel
    if ctx["parallel_mode"] == "stand_alone" or ctx["mesh"] is None or ctx["device_num"] == 1:
        return None
    return ctx["parallel_mode"], ctx["mesh"], id(ctx["cost_model"]), _strategies_set[0]


def _product(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
