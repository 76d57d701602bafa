"""Boolean-mask reads (`x[mask]`): the shape rule shared by the compiled
frontend and the eager tracer.

A mask is a boolean array of rank >= 1 matching x's leading dims; the result
keeps x's remaining dims after one dim of runtime size, the number of true
elements (`msir.compress`). Nothing here imports xDSL.
"""

from __future__ import annotations

from collections.abc import Sequence

MIXED_INDEX = "a boolean mask index is supported alone (x[mask], x[mask, ...]), not with other indices"


def mask_shape_error(shape: Sequence[int], mask_shape: Sequence[int]) -> str | None:
    """NumPy's IndexError message when `mask_shape` cannot index `shape`, else None."""
    if len(mask_shape) > len(shape):
        return (f"too many indices for array: array is {len(shape)}-dimensional, "
                f"but {len(mask_shape)} were indexed")
    for axis, (size, mask_size) in enumerate(zip(shape, mask_shape)):
        if size != mask_size:
            return (f"boolean index did not match indexed array along axis {axis}; size of axis is "
                    f"{_size(size)} but size of corresponding boolean axis is {_size(mask_size)}")
    return None


def _size(d: int) -> str:
    return "?" if d < 0 else str(d)
