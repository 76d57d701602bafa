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
