"""The execution context: PyNative or Graph mode (MindSpore's `set_context`).

A leaf of msir's import graph: the API, the frontend and the eager engine all
read the mode here, and this module imports nothing of msir but its errors.
"""

from __future__ import annotations

from typing import Any

GRAPH_MODE = 0
"""Compile functions (and their derivatives) to native code."""
PYNATIVE_MODE = 1
"""Run functions eagerly, op by op (`jit` still compiles)."""

_context: dict[str, Any] = {"mode": GRAPH_MODE}


def set_context(mode: int | None = None) -> None:
    """Set the execution mode: `msir.set_context(mode=msir.PYNATIVE_MODE)`."""
    if mode is not None:
        if mode not in (GRAPH_MODE, PYNATIVE_MODE):
            raise ValueError(f"mode must be msir.GRAPH_MODE or msir.PYNATIVE_MODE, got {mode!r}")
        _context["mode"] = mode


def get_context(key: str) -> Any:
    if key not in _context:
        raise ValueError(f"unknown context key {key!r} (known: {', '.join(_context)})")
    return _context[key]


def pynative() -> bool:
    """Is the current mode PYNATIVE_MODE?"""
    return _context["mode"] == PYNATIVE_MODE
