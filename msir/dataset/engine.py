"""The dataset pipeline (MindSpore's `mindspore.dataset.engine`): `Dataset`, its
operations, and the prefetching iterators.

A `Dataset` is a node of a chain: a source (`msir.dataset.sources`) at the
bottom, then `shuffle`, `map`, `batch`, `repeat` nodes, each a new `Dataset`
over the previous one. Every node knows its column names and its size
without reading data (`get_col_names()`, `get_dataset_size()`), so a column
that does not exist is refused when the pipeline is built, naming the
columns. A row is a tuple of NumPy arrays, one per column; a node turns the
rows of its child into its own rows for one epoch (`_rows(epoch)`), lazily.

What MindSpore does, and msir therefore does:

* `batch(n, drop_remainder=False)` stacks `n` rows column by column (the last,
  shorter batch kept unless `drop_remainder`); rows of different shapes in a
  column are refused, naming the column and both shapes. The batch asks its
  child for blocks of `n` rows (`_blocks`): an array source gathers a block
  with one index per column, and a map whose operations all have a block form
  (`apply_block(*columns)`, each row's result stacked: `Rescale`, `Normalize`,
  `HWC2CHW`, `TypeCast`) applies them once per block, so the pipeline costs no
  Python call per row (W10: 15 us a row before, for the digits' Rescale).
* `map(operations, input_columns, output_columns)` calls the operations in
  turn on the input columns (the first column by default). When there are as
  many output columns as input columns, each output takes its input's place;
  otherwise the output columns come first, then the untouched columns.
* `repeat(count)` reads its child `count` times (`None` or -1: forever, while
  `get_dataset_size()` reports one pass, as MindSpore's does); every pass is
  shuffled anew.
* Iterators (`create_tuple_iterator`, `create_dict_iterator`, iterating the
  dataset itself) give `msir.Tensor`s, or NumPy arrays with
  `output_numpy=True`. One iterator serves `num_epochs` epochs (-1: any
  number): each `for` loop over it reads one epoch, reshuffled.

Prefetching: an iterator reads its epochs on a background thread into a
bounded queue (`config.get_prefetch_size()` rows), so that the next batch is
ready when a training step ends; a full queue is refilled once it is down to
half, in one burst (`_Prefetcher._put`); when an epoch ends and another may follow
(`num_epochs` not reached; -1 always), the next one is read at once, so its
first batch is ready too. After an exception the iterator gives no more rows. An exception raised in the pipeline (in a
map function, say) is raised again in the thread that iterates, the same
exception object with its traceback, so the user's frame is in it, and a
note naming the map. The thread stops when the iterator is exhausted,
closed (`stop()`) or collected.
"""

from __future__ import annotations

import queue
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

import msir.dataset.config as config
from msir.errors import MsirValueError

Row = tuple[np.ndarray, ...]


def _column_list(columns: Any, what: str) -> list[str]:
    """`columns` (a name or a list of names) as a list of names."""
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, (list, tuple)) or not columns or not all(isinstance(c, str) and c for c in columns):
        raise TypeError(f"{what} must be a column name or a non-empty list of them, got {columns!r}")
    if len(set(columns)) != len(columns):
        raise MsirValueError(f"{what} names a column twice: {list(columns)}")
    return list(columns)


def _caller_location() -> str:
    """`file:line` of the user's code that called into the dataset package."""
    frame = sys._getframe(1)
    package_dir = __file__.rsplit("/", 1)[0]
    while frame is not None and frame.f_code.co_filename.startswith(package_dir):
        frame = frame.f_back
    return "<unknown>" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def shuffle_generator(epoch: int, salt: int) -> np.random.Generator:
    """The random numbers of one shuffle in one epoch: fixed by the pipeline's seed."""
    return np.random.default_rng([config.shuffle_seed(), salt, epoch])


class Dataset:
    """A node of the pipeline: its columns, its size, and its rows epoch by epoch."""

    def __init__(self, child: Dataset | None, column_names: list[str]):
        self.child = child
        self._column_names = list(column_names)
        self._depth = 0 if child is None else child._depth + 1

    # -- what every node provides -------------------------------------------------------------

    def get_col_names(self) -> list[str]:
        """The names of the columns, in the order the rows hold them."""
        return list(self._column_names)

    def get_dataset_size(self) -> int:
        """The number of rows (batches, after `batch`) in one epoch."""
        raise NotImplementedError

    def _rows(self, epoch: int) -> Iterator[Row]:
        raise NotImplementedError

    def _blocks(self, epoch: int, size: int) -> Iterator[Row]:
        """The rows of one epoch `size` at a time, each column stacked along a new
        first axis (the last block may be shorter): what `batch` yields. Nodes
        that can make a block at once (an array source, a map of block-wise
        operations) override it; this default stacks the rows."""
        pending: list[Row] = []
        for row in self._rows(epoch):
            pending.append(row)
            if len(pending) == size:
                yield _stack(self._column_names, pending)
                pending = []
        if pending:
            yield _stack(self._column_names, pending)

    # -- building the pipeline ----------------------------------------------------------------

    def shuffle(self, buffer_size: int) -> Dataset:
        """Rows in a random order, drawn from a buffer of `buffer_size` rows."""
        return ShuffleDataset(self, buffer_size)

    def batch(self, batch_size: int, drop_remainder: bool = False, num_parallel_workers: int | None = None,
              **kwargs: Any) -> Dataset:
        """Rows stacked `batch_size` at a time along a new first axis."""
        _refuse_unsupported("batch", kwargs, ("per_batch_map", "input_columns", "output_columns", "pad_info"))
        return BatchDataset(self, batch_size, drop_remainder)

    def map(self, operations: Any, input_columns: Any = None, output_columns: Any = None,
            num_parallel_workers: int | None = None, python_multiprocessing: bool = False, **kwargs: Any) -> Dataset:
        """`operations` (a callable or a list of them, applied in turn) on `input_columns`."""
        _refuse_unsupported("map", kwargs, ("callbacks", "max_rowsize", "offload"))
        return MapDataset(self, operations, input_columns, output_columns, _caller_location())

    def repeat(self, count: int | None = None) -> Dataset:
        """The rows `count` times over (`None` or -1: without end)."""
        return RepeatDataset(self, count)

    # -- reading ------------------------------------------------------------------------------

    def create_tuple_iterator(self, columns: Any = None, num_epochs: int = -1, output_numpy: bool = False,
                              do_copy: bool = True) -> TupleIterator:
        """An iterator of rows as lists (one element per column, in `columns`' order if given)."""
        indices = None
        if columns is not None:
            names = _column_list(columns, "create_tuple_iterator: columns")
            _check_columns_exist(names, self._column_names, "create_tuple_iterator")
            indices = [self._column_names.index(c) for c in names]
        return TupleIterator(self, num_epochs, output_numpy, indices)

    def create_dict_iterator(self, num_epochs: int = -1, output_numpy: bool = False,
                             do_copy: bool = True) -> DictIterator:
        """An iterator of rows as dicts `{column name: value}`."""
        return DictIterator(self, num_epochs, output_numpy)

    def __iter__(self) -> TupleIterator:
        return self.create_tuple_iterator(num_epochs=1)


def _refuse_unsupported(method: str, kwargs: dict, known: Sequence[str]) -> None:
    for key, value in kwargs.items():
        if key not in known:
            raise TypeError(f"Dataset.{method}() got an unexpected keyword argument {key!r}")
        if value is not None:
            raise MsirValueError(f"Dataset.{method}: {key}= is not supported yet")


def _check_columns_exist(names: list[str], columns: list[str], what: str) -> None:
    missing = [c for c in names if c not in columns]
    if missing:
        raise MsirValueError(
            f"{what}: the column{'s' if len(missing) > 1 else ''} {missing} {'are' if len(missing) > 1 else 'is'} "
            f"not among the dataset's columns {columns}"
        )


class ShuffleDataset(Dataset):
    """MindSpore's buffered shuffle: a row drawn at random from the buffer leaves it and
    the next row of the child takes its place; at the end the buffer empties in a random order."""

    def __init__(self, child: Dataset, buffer_size: int):
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 2:
            raise MsirValueError(f"Dataset.shuffle: buffer_size must be an int at least 2, got {buffer_size!r}")
        super().__init__(child, child.get_col_names())
        self.buffer_size = buffer_size

    def get_dataset_size(self) -> int:
        return self.child.get_dataset_size()

    def _rows(self, epoch: int) -> Iterator[Row]:
        rng = shuffle_generator(epoch, self._depth)
        buffer: list[Row] = []
        for row in self.child._rows(epoch):
            if len(buffer) < self.buffer_size:
                buffer.append(row)
                continue
            i = int(rng.integers(len(buffer)))
            yield buffer[i]
            buffer[i] = row
        for i in rng.permutation(len(buffer)):
            yield buffer[i]


class BatchDataset(Dataset):
    """`batch_size` rows stacked into one, column by column."""

    def __init__(self, child: Dataset, batch_size: int, drop_remainder: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise MsirValueError(f"Dataset.batch: batch_size must be a positive int, got {batch_size!r}")
        if not isinstance(drop_remainder, bool):
            raise TypeError(f"Dataset.batch: drop_remainder must be a bool, got {drop_remainder!r}")
        super().__init__(child, child.get_col_names())
        self.batch_size = batch_size
        self.drop_remainder = drop_remainder

    def get_dataset_size(self) -> int:
        rows = self.child.get_dataset_size()
        return rows // self.batch_size if self.drop_remainder else -(-rows // self.batch_size)

    def _rows(self, epoch: int) -> Iterator[Row]:
        for block in self.child._blocks(epoch, self.batch_size):
            if len(block[0]) == self.batch_size or not self.drop_remainder:
                yield block


def _stack(names: list[str], rows: list[Row]) -> Row:
    """`rows` stacked column by column; rows of different shapes in a column are refused."""
    out = []
    for c, name in enumerate(names):
        first = rows[0][c].shape
        for row in rows[1:]:
            if row[c].shape != first:
                raise MsirValueError(
                    f"Dataset.batch: cannot batch column '{name}': its rows have the shapes {first} and "
                    f"{row[c].shape}"
                )
        out.append(np.stack([row[c] for row in rows]))
    return tuple(out)


class MapDataset(Dataset):
    """The rows with `operations` applied to their input columns."""

    def __init__(self, child: Dataset, operations: Any, input_columns: Any, output_columns: Any, location: str):
        columns = child.get_col_names()
        self.operations = _operation_list(operations)
        self.input_columns = columns[:1] if input_columns is None else _column_list(input_columns,
                                                                                      "Dataset.map: input_columns")
        _check_columns_exist(self.input_columns, columns, "Dataset.map: input_columns")
        self.output_columns = (list(self.input_columns) if output_columns is None
                               else _column_list(output_columns, "Dataset.map: output_columns"))
        self.location = location
        untouched = [c for c in columns if c not in self.input_columns]
        if len(self.output_columns) == len(self.input_columns):
            renamed = dict(zip(self.input_columns, self.output_columns))
            names = [renamed.get(c, c) for c in columns]
        else:
            names = self.output_columns + untouched
        clash = sorted({c for c in names if names.count(c) > 1})
        if clash:
            raise MsirValueError(
                f"Dataset.map: the output columns {self.output_columns} clash with the columns {clash} the map "
                f"keeps (the dataset's columns are {columns})"
            )
        super().__init__(child, names)
        self._inputs = [columns.index(c) for c in self.input_columns]
        self._untouched = [columns.index(c) for c in untouched]
        self._in_place = len(self.output_columns) == len(self.input_columns)

    def get_dataset_size(self) -> int:
        return self.child.get_dataset_size()

    def _rows(self, epoch: int) -> Iterator[Row]:
        for row in self.child._rows(epoch):
            yield self._apply(row, False)

    def _blocks(self, epoch: int, size: int) -> Iterator[Row]:
        # operations with a block form (`apply_block`, the vision and transforms
        # operations that act on each row alike) run once per block instead of
        # once per row: the same values, without a Python call per row
        if not all(callable(getattr(op, "apply_block", None)) for op in self.operations):
            yield from super()._blocks(epoch, size)
            return
        for block in self.child._blocks(epoch, size):
            yield self._apply(block, True)

    def _apply(self, row: Row, block: bool) -> Row:
        values: tuple = tuple(row[i] for i in self._inputs)
        try:
            for op in self.operations:
                result = op.apply_block(*values) if block else op(*values)
                values = tuple(result) if isinstance(result, tuple) else (result,)
        except Exception as err:
            err.add_note(f"raised in the Dataset.map on the columns {self.input_columns} made at {self.location}")
            raise
        if len(values) != len(self.output_columns):
            raise MsirValueError(
                f"Dataset.map (made at {self.location}): the operations returned {len(values)} value"
                f"{'s' if len(values) != 1 else ''} for the output columns {self.output_columns}"
            )
        values = tuple(np.asarray(v) for v in values)
        if self._in_place:
            out = list(row)
            for i, v in zip(self._inputs, values):
                out[i] = v
            return tuple(out)
        return values + tuple(row[i] for i in self._untouched)


def _operation_list(operations: Any) -> list[Callable]:
    ops = list(operations) if isinstance(operations, (list, tuple)) else [operations]
    if not ops or not all(callable(op) for op in ops):
        raise TypeError(f"Dataset.map: operations must be a callable or a non-empty list of them, got {operations!r}")
    return ops


class RepeatDataset(Dataset):
    """The child's rows `count` times over, each pass a new epoch of the child (reshuffled)."""

    def __init__(self, child: Dataset, count: int | None):
        if count is None:
            count = -1
        if isinstance(count, bool) or not isinstance(count, int) or count == 0 or count < -1:
            raise MsirValueError(f"Dataset.repeat: count must be a positive int, or None or -1, got {count!r}")
        super().__init__(child, child.get_col_names())
        self.count = count

    def get_dataset_size(self) -> int:
        size = self.child.get_dataset_size()
        return size if self.count == -1 else size * self.count

    def _rows(self, epoch: int) -> Iterator[Row]:
        # pass r of epoch e is the child's epoch e * passes + r: every pass of every epoch shuffles anew
        passes = self.count if self.count != -1 else _ENDLESS_PASSES
        for r in range(passes):
            yield from self.child._rows(epoch * passes + r)


_ENDLESS_PASSES = 1 << 62
"""The passes of `repeat()` without a count: more than any run reads."""


# -- iterators ------------------------------------------------------------------------------------

_END = object()


class _Prefetcher:
    """One epoch of a dataset read on a background thread into a bounded queue."""

    def __init__(self, dataset: Dataset, epoch: int):
        self._queue: queue.Queue = queue.Queue(maxsize=config.get_prefetch_size())
        self._low = self._queue.maxsize // 2
        self._drained = threading.Event()  # set by the consumer when the queue is down to `_low`
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, args=(dataset, epoch), daemon=True,
                                        name="msir-dataset-prefetch")
        self._thread.start()

    def _produce(self, dataset: Dataset, epoch: int) -> None:
        try:
            for row in dataset._rows(epoch):
                if not self._put(row):
                    return
        except BaseException as err:  # handed to the iterating thread, which raises it
            self._put((_END, err))
            return
        self._put((_END, None))

    def _put(self, item: Any) -> bool:
        # A full queue is refilled only once the consumer has drained it to half:
        # the producer then wakes (and takes the GIL from the training thread)
        # once per half a queue, not once per row. Measured on the loaded 2-core
        # host (digits CNN, GRAPH_MODE, 3 interleaved pairs): the steps' wait for
        # their batch 5.2-7.5% of the epoch against 11.8-18.3% refilling per row.
        while not self._stop.is_set():
            try:
                self._queue.put_nowait(item)
                return True
            except queue.Full:
                self._drained.clear()
                if self._queue.qsize() > self._low:  # not drained since the check: wait for it
                    self._drained.wait(0.05)
        return False

    def get(self) -> Any:
        item = self._queue.get()
        if self._queue.qsize() <= self._low and not self._drained.is_set():
            self._drained.set()
        return item

    def stop(self) -> None:
        self._stop.set()
        self._drained.set()  # a producer waiting for room sees the stop at once
        self._thread.join()


class TupleIterator:
    """Rows as lists of Tensors (or arrays), epoch after epoch, prefetched on a background thread."""

    def __init__(self, dataset: Dataset, num_epochs: int, output_numpy: bool, indices: list[int] | None = None):
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs == 0 or num_epochs < -1:
            raise MsirValueError(f"create_tuple_iterator: num_epochs must be a positive int or -1, got {num_epochs!r}")
        self.dataset = dataset
        self.num_epochs = num_epochs
        self.output_numpy = output_numpy
        self._indices = indices
        self._epoch = 0
        self._stopped = False
        self._prefetcher: _Prefetcher | None = None
        self._finalizer: weakref.finalize | None = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._prefetcher is None:
            if not self._epochs_remain():
                raise StopIteration
            self._start_epoch()
        item = self._prefetcher.get()
        if isinstance(item, tuple) and item and item[0] is _END:
            failed = item[1] is not None
            self._end_epoch(read_ahead=not failed)
            if failed:
                raise item[1]
            raise StopIteration
        return self._convert(item)

    def _epochs_remain(self) -> bool:
        return not self._stopped and (self.num_epochs == -1 or self._epoch < self.num_epochs)

    def _start_epoch(self) -> None:
        self._prefetcher = _Prefetcher(self.dataset, self._epoch)
        self._finalizer = weakref.finalize(self, self._prefetcher.stop)

    def _end_epoch(self, read_ahead: bool) -> None:
        """Finish the epoch; with another one to come, start reading it now, so that its
        first batch is ready when the caller's work at the epoch's end is done."""
        self._finalizer()
        self._prefetcher = None
        self._epoch += 1
        if not read_ahead:
            self._stopped = True
        elif self._epochs_remain():
            self._start_epoch()

    def stop(self) -> None:
        """End the background thread now (the iterator gives no more rows)."""
        self._stopped = True
        if self._prefetcher is not None:
            self._finalizer()
            self._prefetcher = None

    def get_epoch_num(self) -> int:
        """How many epochs the iterator has finished."""
        return self._epoch

    def _value(self, array: np.ndarray) -> Any:
        if self.output_numpy:
            return array
        from msir.common.tensor import Tensor

        return Tensor(array)

    def _convert(self, row: Row) -> Any:
        if self._indices is not None:
            row = tuple(row[i] for i in self._indices)
        return [self._value(v) for v in row]


class DictIterator(TupleIterator):
    """Rows as dicts `{column name: Tensor (or array)}`."""

    def _convert(self, row: Row) -> Any:
        return {name: self._value(v) for name, v in zip(self.dataset.get_col_names(), row)}
