"""`msir.dataset.config`: the pipeline's global settings (MindSpore's `mindspore.dataset.config`).

`set_seed(seed)` fixes the order of every shuffle (`Dataset.shuffle`, and the
sources' `shuffle=True`) from then on; `get_seed()` reads it. As in
MindSpore, the seed starts at 5489 (the Mersenne Twister's default), so an
unseeded pipeline shuffles the same way in every run. The orders are msir's
own (NumPy's PCG64), not MindSpore's: the same seed gives a different, but
equally reproducible, order. `set_prefetch_size(n)` bounds how many
finished rows (batches, after `.batch`) the background thread of an
iterator prepares ahead of the training step (MindSpore's default: 16).
"""

from __future__ import annotations

_DEFAULT_SEED = 5489
_seed = _DEFAULT_SEED
_prefetch_size = 16


def set_seed(seed: int) -> None:
    """Seed every shuffle of the pipeline from now on."""
    global _seed
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"dataset.config.set_seed: the seed must be an int in [0, 2**32), got {seed!r}")
    _seed = seed


def get_seed() -> int:
    """The seed of the pipeline's shuffles."""
    return _seed


def set_prefetch_size(size: int) -> None:
    """How many rows an iterator's background thread prepares ahead."""
    global _prefetch_size
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"dataset.config.set_prefetch_size: the size must be a positive int, got {size!r}")
    _prefetch_size = size


def get_prefetch_size() -> int:
    """The number of rows an iterator prepares ahead."""
    return _prefetch_size
