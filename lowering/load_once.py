"""Process-wide runtimes built or loaded once: `load_once` is the thread-safe
guard shared by the thread pool (`msir.lowering.threads`) and the BLAS
(`msir.lowering.blas`)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def load_once(state: dict, lock: threading.Lock, loader: Callable[[], None]) -> bool:
    """Run `loader()` the first time only, under `lock`; record in `state`
    whether it worked (`"ok"`) and, if not, why (`"error"`: the exception's
    type and message). Returns `state["ok"]`, without taking the lock once
    it is known."""
    if "ok" in state:
        return bool(state["ok"])
    with lock:
        if "ok" not in state:
            try:
                loader()
                state["ok"] = True
            except Exception as e:  # a missing library, a dlopen or JIT failure
                state["ok"] = False
                state["error"] = f"{type(e).__name__}: {e}"
    return bool(state["ok"])
