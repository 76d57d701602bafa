"""Where msir keeps native code between processes, and whether it may.

The directory and the switch of the persistent compile cache (`msir.cache`,
whose docstring describes them), read both by that cache and by the runtimes
that keep their own object code beside its entries (the thread pool,
`msir.lowering.threads`). They live below both, so that the thread pool needs
nothing of the cache, which loads modules that need the thread pool.
"""

from __future__ import annotations

import os
from pathlib import Path


def enabled() -> bool:
    """False when `MSIR_CACHE` is 0/off/false/no (read on every compile)."""
    return os.environ.get("MSIR_CACHE", "1").strip().lower() not in ("0", "off", "false", "no")


def cache_dir() -> Path:
    """The cache directory (it may not exist yet)."""
    d = os.environ.get("MSIR_CACHE_DIR")
    if d:
        return Path(d).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "msir"
