"""Where each logical element of an `!ascend.buf` is stored.

`storage_index(t, coords)` maps logical coordinates (NumPy integer arrays,
broadcast together) to the flat element index in the buffer's storage, for
every layout of the dialect (see `msir.dialects.ascend`); `tile_index` does so
for a whole tile at once. The emulator gathers and scatters through these
indices, so one NumPy operation moves a tile whatever its layout.
"""

from __future__ import annotations

import numpy as np


def storage_index(t, coords: list[np.ndarray]) -> np.ndarray:
    layout = t.layout.data
    dims = t.dims
    if layout == "nd":
        index = np.zeros((), dtype=np.int64)
        for c, d in zip(coords, dims):
            index = index * d + c
        return index
    if layout == "nc1hwc0":
        n, c, h, w = coords
        _, channels, height, width = dims
        c0 = t.c0
        return (((n * (channels // c0) + c // c0) * height + h) * width + w) * c0 + c % c0
    r, c = coords
    rows, cols = dims
    fr, fc = t.fractal
    fractal = fr * fc
    if layout == "zN":  # fractals column-major, each row-major
        return (c // fc) * (rows * fc) + (r // fr) * fractal + (r % fr) * fc + c % fc
    if layout == "zZ":  # fractals row-major, each row-major
        return (r // fr) * (cols * fr) + (c // fc) * fractal + (r % fr) * fc + c % fc
    if layout == "nZ":  # fractals row-major, each column-major
        return (r // fr) * (cols * fr) + (c // fc) * fractal + (c % fc) * fr + r % fr
    raise ValueError(f"unknown layout {layout}")


def tile_index(t, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> np.ndarray:
    """Storage indices of the tile at logical `offsets` of `sizes`, shaped `sizes`."""
    rank = len(sizes)
    coords = [
        (np.arange(n, dtype=np.int64) + o).reshape((1,) * d + (n,) + (1,) * (rank - d - 1))
        for d, (o, n) in enumerate(zip(offsets, sizes))
    ]
    return np.broadcast_to(storage_index(t, coords), sizes)
