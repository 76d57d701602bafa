"""`msir.dataset.transforms` (MindSpore's `mindspore.dataset.transforms`): `TypeCast`, `Compose`.

Each is a callable on NumPy arrays, given to `Dataset.map` (or called
directly, as in MindSpore's eager mode).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class TypeCast:
    """The array cast to `data_type` (an msir dtype such as `ms.int32`, or a NumPy dtype)."""

    def __init__(self, data_type: Any):
        from msir.common.dtype import as_type

        self.np_dtype = as_type(data_type).np_dtype

    def __call__(self, array: Any) -> np.ndarray:
        return np.asarray(array).astype(self.np_dtype)

    apply_block = __call__  # elementwise: a block of rows is cast as each one is


class Compose:
    """The transforms applied one after another: each gets what the previous returned."""

    def __init__(self, transforms: list[Callable]):
        if not isinstance(transforms, (list, tuple)) or not transforms or not all(callable(t) for t in transforms):
            raise TypeError(f"Compose: transforms must be a non-empty list of callables, got {transforms!r}")
        self.transforms = list(transforms)

    def __call__(self, *values: Any) -> Any:
        for transform in self.transforms:
            result = transform(*values)
            values = result if isinstance(result, tuple) else (result,)
        return values[0] if len(values) == 1 else values


__all__ = ["Compose", "TypeCast"]
