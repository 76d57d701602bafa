"""`ms.set_seed` / `ms.get_seed`: the global seed of initializers and random layers.

As in MindSpore, `set_seed(seed)` also seeds NumPy's global generator, which
msir's initializers (`msir.common.initializer`) and `nn.Dropout` draw from: a
program that sets the seed draws the same numbers in every run and in both
modes (compiled Dropout reads its random numbers from NumPy at every call,
as PyNative does). It seeds the dataset pipeline's shuffles too
(`msir.dataset.config.set_seed`), as MindSpore's does.
"""

from __future__ import annotations

import numpy as np

import msir.dataset.config as dataset_config

_seed: int | None = None


def set_seed(seed: int) -> None:
    """Seed msir's random numbers (and NumPy's global generator)."""
    global _seed
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"set_seed: the seed must be a non-negative int, got {seed!r}")
    _seed = seed
    np.random.seed(seed)
    dataset_config.set_seed(seed)


def get_seed() -> int | None:
    """The seed `set_seed` set (None if none was)."""
    return _seed
