"""The sources of a pipeline (MindSpore's): `NumpySlicesDataset`, `GeneratorDataset`, `MnistDataset`.

Each is a `Dataset` (`msir.dataset.engine`) at the bottom of a chain, with
MindSpore's columns and dtypes, as MindSpore 2.10 gives them:

* `NumpySlicesDataset(data, column_names=None, shuffle=None)` slices `data`
  along its first axis: a dict gives one column per key (in the dict's
  order), a tuple one column per element, anything else (an array, a list)
  one column; unnamed columns are `column_0`, `column_1`, ... Python lists
  become arrays as NumPy makes them (ints int64, floats float64).
* `GeneratorDataset(source, column_names, shuffle=None)` reads `source`: a
  random-access object (`__getitem__` and `__len__`), an iterable, or a
  callable returning an iterator (a generator function), read anew every
  epoch. Each item is a tuple (one element per column) or one value; a
  callable source is read once to count its rows.
* `MnistDataset(dataset_dir, usage=None, num_samples=None, shuffle=None)`
  reads the idx files of MNIST (`train-images-idx3-ubyte`,
  `train-labels-idx1-ubyte`, `t10k-*`): columns `image` (H, W, 1) uint8 and
  `label` () uint32; `usage` is "train", "test" or "all" (the default, train
  then test).

`shuffle=None` shuffles every epoch, as `True` does, except a source that is
not random-access (an iterable or a generator), which is read in its order
(MindSpore accepts `shuffle=True` there too and reads it in order).
`num_samples` keeps the first rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from msir.dataset.engine import Dataset, Row, _column_list, shuffle_generator
from msir.errors import MsirValueError


class _IndexedSource(Dataset):
    """A source whose rows are known by index: read in order or in a new random order every epoch."""

    def __init__(self, column_names: list[str], num_rows: int, shuffle: bool | None, num_samples: int | None,
                 what: str):
        if shuffle is not None and not isinstance(shuffle, bool):
            raise TypeError(f"{what}: shuffle must be a bool or None, got {shuffle!r}")
        if num_samples is not None and (isinstance(num_samples, bool) or not isinstance(num_samples, int)
                                        or num_samples < 0):
            raise MsirValueError(f"{what}: num_samples must be a non-negative int or None, got {num_samples!r}")
        super().__init__(None, column_names)
        self._num_rows = num_rows if not num_samples else min(num_rows, num_samples)
        self._shuffle = shuffle is not False

    def get_dataset_size(self) -> int:
        return self._num_rows

    def _row(self, index: int) -> Row:
        raise NotImplementedError

    def _order(self, epoch: int) -> Any:
        return (shuffle_generator(epoch, self._depth).permutation(self._num_rows) if self._shuffle
                else range(self._num_rows))

    def _rows(self, epoch: int) -> Iterator[Row]:
        for i in self._order(epoch):
            yield self._row(int(i))


def _default_names(count: int) -> list[str]:
    return [f"column_{i}" for i in range(count)]


def _named_columns(column_names: Any, count: int, what: str) -> list[str]:
    if column_names is None:
        return _default_names(count)
    names = _column_list(column_names, f"{what}: column_names")
    if len(names) != count:
        raise MsirValueError(f"{what}: {len(names)} column names {names} for {count} columns of data")
    return names


class NumpySlicesDataset(_IndexedSource):
    """Rows sliced from arrays along their first axis (mindspore.dataset.NumpySlicesDataset)."""

    def __init__(self, data: Any, column_names: Any = None, num_samples: int | None = None,
                 num_parallel_workers: int = 1, shuffle: bool | None = None, sampler: Any = None,
                 num_shards: int | None = None, shard_id: int | None = None):
        what = "NumpySlicesDataset"
        if sampler is not None or num_shards is not None or shard_id is not None:
            raise MsirValueError(f"{what}: sampler and sharding are not supported yet")
        if isinstance(data, dict):
            names = list(data) if column_names is None else _named_columns(column_names, len(data), what)
            arrays = [np.asarray(v) for v in data.values()]
        elif isinstance(data, tuple):
            arrays = [np.asarray(v) for v in data]
            names = _named_columns(column_names, len(arrays), what)
        else:
            arrays = [np.asarray(data)]
            names = _named_columns(column_names, 1, what)
        for name, array in zip(names, arrays):
            if array.ndim == 0:
                raise MsirValueError(f"{what}: column '{name}' is a scalar; each column needs a first axis to slice")
        lengths = {name: len(a) for name, a in zip(names, arrays)}
        if len(set(lengths.values())) > 1:
            raise MsirValueError(f"{what}: the columns have different numbers of rows: {lengths}")
        self._arrays = arrays
        super().__init__(names, len(arrays[0]), shuffle, num_samples, what)

    def _row(self, index: int) -> Row:
        return tuple(a[index] for a in self._arrays)

    def _blocks(self, epoch: int, size: int) -> Iterator[Row]:
        order = np.asarray(self._order(epoch), dtype=np.int64)
        for start in range(0, len(order), size):
            picked = order[start:start + size]
            yield tuple(a[picked] for a in self._arrays)


class GeneratorDataset(Dataset):
    """Rows read from a Python source (mindspore.dataset.GeneratorDataset)."""

    def __init__(self, source: Any, column_names: Any = None, column_types: Any = None, schema: Any = None,
                 num_samples: int | None = None, num_parallel_workers: int = 1, shuffle: bool | None = None,
                 sampler: Any = None, num_shards: int | None = None, shard_id: int | None = None,
                 python_multiprocessing: bool = True, max_rowsize: Any = None):
        what = "GeneratorDataset"
        if column_names is None:
            raise MsirValueError(f"{what}: give column_names (the schema= form is not supported)")
        if sampler is not None or num_shards is not None or shard_id is not None or schema is not None:
            raise MsirValueError(f"{what}: sampler, sharding and schema are not supported yet")
        names = _column_list(column_names, f"{what}: column_names")
        random_access = hasattr(source, "__getitem__") and hasattr(source, "__len__")
        if not random_access and not callable(source) and not hasattr(source, "__iter__"):
            raise TypeError(
                f"{what}: source must be random-access (__getitem__ and __len__), iterable, or a callable "
                f"returning an iterator, got {type(source).__name__}"
            )
        self.source = source
        self._column_types = column_types
        if random_access:
            self._indexed: _IndexedSource | None = _RandomAccessRows(source, names, shuffle, num_samples, self)
        else:
            self._indexed = None
            self._num_samples = num_samples
        super().__init__(None, names)
        self._size: int | None = None

    def get_dataset_size(self) -> int:
        if self._indexed is not None:
            return self._indexed.get_dataset_size()
        if self._size is None:
            self._size = sum(1 for _ in self._read_iterable())
        return self._size

    def _read_iterable(self) -> Iterator[Any]:
        items = self.source() if callable(self.source) and not hasattr(self.source, "__iter__") else self.source
        try:
            iterator = iter(items)
        except TypeError:
            raise TypeError(
                f"GeneratorDataset: the source returned a {type(items).__name__}, not an iterator"
            ) from None
        for i, item in enumerate(iterator):
            if self._num_samples and i >= self._num_samples:
                return
            yield item

    def _rows(self, epoch: int) -> Iterator[Row]:
        if self._indexed is not None:
            yield from self._indexed._rows(epoch)
            return
        for i, item in enumerate(self._read_iterable()):
            yield self.convert(item, i)

    def convert(self, item: Any, index: int) -> Row:
        """One item of the source as a row: as many arrays as columns."""
        values = tuple(item) if isinstance(item, (tuple, list)) else (item,)
        if len(values) != len(self._column_names):
            raise MsirValueError(
                f"GeneratorDataset: the source gave {len(values)} value{'s' if len(values) != 1 else ''} in row "
                f"{index}, for the {len(self._column_names)} columns {self._column_names}"
            )
        arrays = tuple(np.asarray(v) for v in values)
        if self._column_types is not None:
            from msir.common.dtype import as_type

            arrays = tuple(a.astype(as_type(t).np_dtype, copy=False) for a, t in zip(arrays, self._column_types))
        return arrays


class _RandomAccessRows(_IndexedSource):
    """The rows of a random-access `GeneratorDataset` source."""

    def __init__(self, source: Any, names: list[str], shuffle: bool | None, num_samples: int | None,
                 owner: GeneratorDataset):
        self.source = source
        self.owner = owner
        super().__init__(names, len(source), shuffle, num_samples, "GeneratorDataset")

    def _row(self, index: int) -> Row:
        return self.owner.convert(self.source[index], index)


_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_IDX_IMAGES, _IDX_LABELS = 2051, 2049


def _read_idx(path: str, magic: int, dims: int) -> np.ndarray:
    """An idx file of unsigned bytes: big-endian magic, `dims` sizes, then the data."""
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError as err:
        raise MsirValueError(f"MnistDataset: cannot read '{path}': {err.strerror}") from None
    header = 4 * (1 + dims)
    if len(content) < header:
        raise MsirValueError(f"MnistDataset: '{path}' is truncated: {len(content)} bytes, shorter than its header")
    fields = np.frombuffer(content, ">u4", count=1 + dims)
    if int(fields[0]) != magic:
        raise MsirValueError(
            f"MnistDataset: '{path}' is not an MNIST idx file of {'images' if dims == 3 else 'labels'}: magic number "
            f"{int(fields[0])}, expected {magic}"
        )
    shape = tuple(int(d) for d in fields[1:])
    expected = int(np.prod(shape))
    if len(content) - header != expected:
        raise MsirValueError(
            f"MnistDataset: '{path}' holds {len(content) - header} bytes of data, its header {shape} says {expected}"
        )
    return np.frombuffer(content, np.uint8, offset=header).reshape(shape)


class MnistDataset(_IndexedSource):
    """MNIST read from its idx files (mindspore.dataset.MnistDataset)."""

    def __init__(self, dataset_dir: str, usage: str | None = None, num_samples: int | None = None,
                 num_parallel_workers: int | None = None, shuffle: bool | None = None, sampler: Any = None,
                 num_shards: int | None = None, shard_id: int | None = None, cache: Any = None):
        what = "MnistDataset"
        usage = "all" if usage is None else usage
        if usage not in ("train", "test", "all"):
            raise MsirValueError(f"{what}: usage must be 'train', 'test' or 'all', got {usage!r}")
        if sampler is not None or num_shards is not None or shard_id is not None or cache is not None:
            raise MsirValueError(f"{what}: sampler, sharding and cache are not supported yet")
        if not os.path.isdir(dataset_dir):
            raise MsirValueError(f"{what}: the dataset directory '{dataset_dir}' does not exist")
        images, labels = [], []
        for part in (("train", "test") if usage == "all" else (usage,)):
            image_file, label_file = (os.path.join(dataset_dir, f) for f in _MNIST_FILES[part])
            if usage == "all" and not os.path.exists(image_file):
                continue
            part_images = _read_idx(image_file, _IDX_IMAGES, 3)
            part_labels = _read_idx(label_file, _IDX_LABELS, 1)
            if len(part_images) != len(part_labels):
                raise MsirValueError(
                    f"{what}: '{image_file}' holds {len(part_images)} images but '{label_file}' "
                    f"{len(part_labels)} labels"
                )
            images.append(part_images)
            labels.append(part_labels)
        if not images:
            raise MsirValueError(f"{what}: no MNIST idx files in '{dataset_dir}'")
        self._images = np.concatenate(images)[..., None]
        self._labels = np.concatenate(labels).astype(np.uint32)
        super().__init__(["image", "label"], len(self._labels), shuffle, num_samples, what)

    def _row(self, index: int) -> Row:
        return self._images[index], self._labels[index]
