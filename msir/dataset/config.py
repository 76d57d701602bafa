"""`msir.dataset.config`: the pipeline's global settings (MindSpore's `mindspore.dataset.config`).

`set_seed(seed)` fixes the order of every shuffle (`Dataset.shuffle`, and the
sources' `shuffle=True`) from then on; `msir.set_seed` sets it too, as
`mindspore.set_seed` does. Until a seed is set, shuffles differ from run to
run, as MindSpore's do (while its `get_seed()` reports 5489, the Mersenne
Twister's default seed, which msir's reports as well). The orders are
msir's own (NumPy's PCG64), not MindSpore's, whose generator is not
reproduced: the same seed gives a different, but equally reproducible,
order. `set_prefetch_size(n)` bounds how many finished rows (batches,
after `.batch`) the background thread of an iterator prepares ahead of the
training step (MindSpore's default: 16).
"""

from __future__ import annotations

import secrets

_DEFAULT_SEED = 5489
_seed: int | None = None
_unseeded_entropy = secrets.randbits(64)
"""What the shuffles of a run draw from until a seed is set: new in every process."""
_prefetch_size = 16


def set_seed(seed: int) -> None:
    """Seed every shuffle of the pipeline from now on."""
    global _seed
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"dataset.config.set_seed: the seed must be an int in [0, 2**32), got {seed!r}")
    _seed = seed


def get_seed() -> int:
    """The seed set, or MindSpore's default 5489 when none was."""
    return _DEFAULT_SEED if _seed is None else _seed


def shuffle_seed() -> int:
    """What the shuffles draw from: the seed set, or this process's own random one."""
    return _unseeded_entropy if _seed is None else _seed


def set_prefetch_size(size: int) -> None:
    """How many rows an iterator's background thread prepares ahead."""
    global _prefetch_size
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"dataset.config.set_prefetch_size: the size must be a positive int, got {size!r}")
    _prefetch_size = size


def get_prefetch_size() -> int:
    """The number of rows an iterator prepares ahead."""
    return _prefetch_size
