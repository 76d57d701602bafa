"""`msir.dataset.vision` (MindSpore's `mindspore.dataset.vision`): the image transforms of
MindSpore's quick start and LeNet tutorials — `Rescale`, `Normalize`, `HWC2CHW`, `Resize`.

Each is a callable on a NumPy image, (H, W) or (H, W, C), given to
`Dataset.map` or called directly, and gives what MindSpore 2.10 gives.
`Rescale`, `Normalize` and `HWC2CHW` also have `apply_block(images)`, the
same on a block of images stacked along a first axis, which `Dataset.batch`
uses to run a map once per batch (`msir.dataset.engine`):

* `Rescale(rescale, shift)`: `image * rescale + shift` in float32.
* `Normalize(mean, std, is_hwc=True)`: `(image - mean) / std` per channel, float32.
* `HWC2CHW()`: (H, W, C) to (C, H, W); a 2-D image is returned as it is.
* `Resize(size, interpolation=Inter.LINEAR)`: `size` (h, w), or an int for
  the shorter side (the other scaled to keep the aspect ratio, truncated).
  Bilinear with pixel centres at half-integers, edges clamped: OpenCV's
  `INTER_LINEAR`, which MindSpore calls. uint8 images are interpolated in
  OpenCV's 11-bit fixed point, so the bytes are MindSpore's; float images
  in float32. `Inter.NEAREST` picks the pixel at `floor(dst * src / dst_size)`.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from msir.errors import MsirValueError


class Inter(enum.Enum):
    """Interpolation modes of `Resize`."""

    NEAREST = 0
    LINEAR = 1
    BILINEAR = 1


def _image(image: Any, what: str) -> np.ndarray:
    array = np.asarray(image)
    if array.ndim not in (2, 3):
        raise MsirValueError(f"{what}: the image must be (H, W) or (H, W, C), got shape {array.shape}")
    return array


def _block(images: Any, what: str) -> np.ndarray:
    """A block of images (N, H, W) or (N, H, W, C), refused as `_image` refuses one of them."""
    array = np.asarray(images)
    if array.ndim not in (3, 4):
        raise MsirValueError(f"{what}: the image must be (H, W) or (H, W, C), got shape {array.shape[1:]}")
    return array


class Rescale:
    """`image * rescale + shift`, float32."""

    def __init__(self, rescale: float, shift: float):
        self.rescale = float(rescale)
        self.shift = float(shift)

    def __call__(self, image: Any) -> np.ndarray:
        array = np.asarray(image).astype(np.float32)
        return array * np.float32(self.rescale) + np.float32(self.shift)

    apply_block = __call__  # elementwise: a block of images is rescaled as each one is


class Normalize:
    """`(image - mean) / std` per channel (the last axis, or the first with `is_hwc=False`), float32."""

    def __init__(self, mean: Any, std: Any, is_hwc: bool = True):
        self.mean = np.asarray(mean, np.float32).reshape(-1)
        self.std = np.asarray(std, np.float32).reshape(-1)
        if self.mean.shape != self.std.shape:
            raise MsirValueError(f"Normalize: mean has {self.mean.size} values but std {self.std.size}")
        if np.any(self.std <= 0):
            raise MsirValueError(f"Normalize: std must be positive, got {self.std.tolist()}")
        self.is_hwc = bool(is_hwc)

    def __call__(self, image: Any) -> np.ndarray:
        return self._normalize(_image(image, "Normalize").astype(np.float32), 0)

    def apply_block(self, images: Any) -> np.ndarray:
        """A block of images (a first axis more), each normalised as `__call__` does it."""
        return self._normalize(_block(images, "Normalize").astype(np.float32), 1)

    def _normalize(self, array: np.ndarray, lead: int) -> np.ndarray:
        image = array.shape[lead:]
        channels = 1 if len(image) == 2 else image[-1 if self.is_hwc else 0]
        if self.mean.size not in (1, channels):
            raise MsirValueError(
                f"Normalize: {self.mean.size} means and stds for an image of {channels} channels (shape {image})"
            )
        shape = (-1,) if self.is_hwc or len(image) == 2 else (-1, 1, 1)
        return (array - self.mean.reshape(shape)) / self.std.reshape(shape)


class HWC2CHW:
    """(H, W, C) to (C, H, W)."""

    def __call__(self, image: Any) -> np.ndarray:
        array = _image(image, "HWC2CHW")
        return array if array.ndim == 2 else np.ascontiguousarray(array.transpose(2, 0, 1))

    def apply_block(self, images: Any) -> np.ndarray:
        """A block of images (a first axis more), each transposed as `__call__` does it."""
        array = _block(images, "HWC2CHW")
        return array if array.ndim == 3 else np.ascontiguousarray(array.transpose(0, 3, 1, 2))


class Resize:
    """The image resized to `size` by `interpolation`."""

    def __init__(self, size: Any, interpolation: Inter = Inter.LINEAR):
        if isinstance(size, int) and not isinstance(size, bool):
            if size <= 0:
                raise MsirValueError(f"Resize: size must be positive, got {size}")
        elif not (isinstance(size, (tuple, list)) and len(size) == 2
                  and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in size)):
            raise MsirValueError(f"Resize: size must be a positive int or a pair (height, width), got {size!r}")
        if not isinstance(interpolation, Inter):
            raise MsirValueError(f"Resize: interpolation must be an Inter, got {interpolation!r}")
        self.size = size
        self.interpolation = interpolation

    def _target(self, height: int, width: int) -> tuple[int, int]:
        if not isinstance(self.size, int):
            return tuple(self.size)
        if height <= width:
            return self.size, int(width * self.size / height)
        return int(height * self.size / width), self.size

    def __call__(self, image: Any) -> np.ndarray:
        array = _image(image, "Resize")
        planar = array.ndim == 2
        if planar:
            array = array[:, :, None]
        out_h, out_w = self._target(*array.shape[:2])
        if self.interpolation is Inter.NEAREST:
            rows = np.arange(out_h) * array.shape[0] // out_h
            cols = np.arange(out_w) * array.shape[1] // out_w
            out = array[rows][:, cols]
        elif array.dtype == np.uint8:
            out = _bilinear_uint8(array, out_h, out_w)
        else:
            out = _bilinear_float(array.astype(np.float32, copy=False), out_h, out_w)
        return out[:, :, 0] if planar else out


def _taps(src: int, dst: int, clamp_weights: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each output position, its two source pixels and the weight of the second, as OpenCV
    computes them: across a row the weight is zeroed beyond the edges, down a column only the
    row indices are clamped (the weight stays)."""
    position = ((np.arange(dst) + 0.5) * (src / dst) - 0.5).astype(np.float32)
    first = np.floor(position).astype(np.int64)
    weight = position - first
    if clamp_weights:
        before = first < 0
        first[before], weight[before] = 0, 0.0
        after = first >= src - 1
        first[after], weight[after] = src - 1, 0.0
    return np.clip(first, 0, src - 1), np.clip(first + 1, 0, src - 1), weight


_COEF_BITS = 11
_COEF_SCALE = 1 << _COEF_BITS


def _bilinear_uint8(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    h, w = image.shape[:2]
    y0, y1, wy = _taps(h, out_h, clamp_weights=False)
    x0, x1, wx = _taps(w, out_w, clamp_weights=True)
    # OpenCV's fixed point: 11-bit weights, the weight of the first tap rounded, rows summed in int32,
    # then its vectorised vertical pass: ((b0 * (S0 >> 4)) >> 16) + ((b1 * (S1 >> 4)) >> 16), rounded >> 2
    ax0 = np.rint((1 - wx) * _COEF_SCALE).astype(np.int64)
    ax1 = _COEF_SCALE - ax0
    ay0 = np.rint((1 - wy) * _COEF_SCALE).astype(np.int64)[:, None, None]
    ay1 = _COEF_SCALE - ay0
    pixels = image.astype(np.int64)
    rows = pixels[:, x0] * ax0[None, :, None] + pixels[:, x1] * ax1[None, :, None]
    total = ((ay0 * (rows[y0] >> 4)) >> 16) + ((ay1 * (rows[y1] >> 4)) >> 16)
    return np.clip((total + 2) >> 2, 0, 255).astype(np.uint8)


def _bilinear_float(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    h, w = image.shape[:2]
    y0, y1, wy = _taps(h, out_h, clamp_weights=False)
    x0, x1, wx = _taps(w, out_w, clamp_weights=True)
    rows = image[:, x0] * (1 - wx)[None, :, None] + image[:, x1] * wx[None, :, None]
    return (rows[y0] * (1 - wy)[:, None, None] + rows[y1] * wy[:, None, None]).astype(np.float32)


__all__ = ["HWC2CHW", "Inter", "Normalize", "Rescale", "Resize"]
