"""`Model`: MindSpore's high-level training and evaluation loop (`mindspore.train.Model`).

`Model(network, loss_fn=None, optimizer=None, metrics=None, eval_network=None,
eval_indexes=None)` builds, as MindSpore does:

* the training network: `TrainOneStepCell(WithLossCell(network, loss_fn),
  optimizer)` (without `loss_fn`, `network` computes the loss itself;
  without an optimizer, `WithLossCell` or the network);
* the evaluation network, when `metrics` are given: `WithEvalCell(network,
  loss_fn)` (or `eval_network`), whose `(loss, outputs, label)` go to the
  metrics (`Loss` gets the loss, the others the outputs and the label; with
  `eval_indexes` those positions instead);
* the prediction network: `network`.

`train(epoch, train_dataset, callbacks=None, dataset_sink_mode=False,
sink_size=-1, initial_epoch=0)` runs `epoch` epochs of one training step
per batch (in GRAPH_MODE each step is one native call, `TrainOneStepCell`),
calling the callbacks (`msir.train.callback`) with MindSpore's run
parameters. `fit(epoch, train_dataset, valid_dataset, valid_frequency=1,
...)` trains the same way and evaluates on `valid_dataset` after every
`valid_frequency`-th epoch (an int, or a list of epochs), before the
callbacks' `on_train_epoch_end`, which find the metrics in
`cb_params.metrics` (LossMonitor prints them, SummaryCollector records
them); as in MindSpore, that evaluation runs the user's callbacks and
TimeMonitor, not msir.train's other own ones. `eval(valid_dataset)` returns
`{name: metric.eval()}`; `predict(*data)` the network's output, in
evaluation mode.

A dataset is an `msir.dataset` pipeline, anything else with
`create_tuple_iterator()` and `get_dataset_size()` (MindSpore's datasets),
or any iterable of `(data, label)` tuples of arrays or Tensors (a list, or a
generator, which is read once and kept for the later epochs). A pipeline is
read through one iterator for the whole run (`num_epochs` the epochs to
train), so its background thread prepares the next batch (the next epoch's
first one too) while a step runs. The time each step waited for its batch
is on the run context: `cb_params.data_wait_time` (the last step, in
seconds) and `cb_params.epoch_data_wait_time` (the current epoch's steps so
far). A batch that is not `(data, label)` while a `loss_fn` is given is
refused, naming the dataset's columns. Dataset sink mode does not exist on
CPU in MindSpore either: `dataset_sink_mode=True` is accepted and trains
step by step, as MindSpore does on CPU. Mixed precision (`amp_level` other
than "O0") and loss-scale managers are refused by name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sized
from typing import Any

import numpy as np

from msir.common.tensor import Tensor
from msir.dataset.engine import Dataset
from msir.errors import MsirValueError, UnsupportedSyntaxError
from msir.nn.cell import Cell
from msir.nn.metrics import Loss, get_metrics
from msir.nn.optim import Optimizer
from msir.nn.wrap import TrainOneStepCell, WithEvalCell, WithLossCell
from msir.train.callback import CallbackManager, InternalCallbackParam, LossMonitor, RunContext
from msir.train.progress import ProgressBar
from msir.train.summary_collector import SummaryCollector

_TRAINING_ONLY_CALLBACKS = (LossMonitor, ProgressBar, SummaryCollector)
"""msir.train's own callbacks that an evaluation inside `fit` does not run
(MindSpore runs none of its own there but TimeMonitor); subclasses are the
user's, and run."""


class _Batches:
    """A dataset read epoch after epoch: its batches as tuples of Tensors, how many there are,
    and the names of its columns where the dataset has them."""

    def __init__(self, dataset: Any, what: str, epochs: int = 1):
        self.dataset = dataset
        self.epochs = epochs
        self.columns = list(dataset.get_col_names()) if callable(getattr(dataset, "get_col_names", None)) else None
        self._iterator = None
        if isinstance(dataset, Dataset):
            # one iterator for all the epochs: its thread prefetches the next epoch's first batch too
            self.size = dataset.get_dataset_size()
            self._read = self._epoch_of_one_iterator
            return
        if hasattr(dataset, "create_tuple_iterator") and hasattr(dataset, "get_dataset_size"):
            self.size = int(dataset.get_dataset_size())
            self._read = dataset.create_tuple_iterator
            return
        if isinstance(dataset, Iterator):  # a generator: read once, kept for the next epochs
            dataset = list(dataset)
        if not isinstance(dataset, Sized) or not hasattr(dataset, "__iter__"):
            raise TypeError(
                f"Model.{what}: the dataset must have create_tuple_iterator() and get_dataset_size(), or be an "
                f"iterable of (data, label) tuples, got {type(self.dataset).__name__}"
            )
        self.size = len(dataset)
        self._read = lambda: iter(dataset)

    def __iter__(self):
        for i, element in enumerate(self._read()):
            if not isinstance(element, (tuple, list)):
                raise TypeError(
                    f"Model: element {i} of the dataset is a {type(element).__name__}; expected a tuple "
                    f"(data, label) of arrays or Tensors"
                )
            yield tuple(x if isinstance(x, Tensor) else Tensor(np.asarray(x)) for x in element)

    def _epoch_of_one_iterator(self):
        if self._iterator is None:
            self._iterator = self.dataset.create_tuple_iterator(num_epochs=self.epochs)
        return self._iterator

    def describe(self, element: tuple) -> str:
        """What a batch holds, for an error: its columns' names when known."""
        if self.columns is not None and len(self.columns) == len(element):
            return f"{len(element)} columns {self.columns}"
        return f"{len(element)} elements"

    def reset(self) -> None:
        reset = getattr(self.dataset, "reset", None)
        if callable(reset):
            reset()

    def close(self) -> None:
        """Stop the prefetching thread of the iterator, if one was made."""
        if self._iterator is not None:
            self._iterator.stop()
            self._iterator = None


class Model:
    """Training, evaluation and prediction of a network (mindspore.train.Model)."""

    def __init__(self, network: Cell, loss_fn: Cell | None = None, optimizer: Optimizer | None = None,
                 metrics: Any = None, eval_network: Cell | None = None, eval_indexes: list[int] | None = None,
                 amp_level: str = "O0", boost_level: str = "O0", **kwargs):
        if not isinstance(network, Cell):
            raise TypeError(f"Model: network must be a Cell, got {type(network).__name__}")
        if amp_level != "O0" or boost_level != "O0":
            raise UnsupportedSyntaxError(
                "Model: mixed precision (amp_level, boost_level other than 'O0') is not supported yet"
            )
        if kwargs.get("loss_scale_manager") is not None:
            raise UnsupportedSyntaxError("Model: loss_scale_manager is not supported yet")
        if optimizer is not None and not isinstance(optimizer, Optimizer):
            raise TypeError(f"Model: optimizer must be an nn optimizer, got {type(optimizer).__name__}")
        self._network = network
        self._loss_fn = loss_fn
        self._optimizer = optimizer
        self._train_network = self._build_train_network()
        self._metric_fns = get_metrics(metrics)
        self._eval_network, self._eval_indexes = self._build_eval_network(eval_network, eval_indexes)
        self._predict_network = network

    def _build_train_network(self) -> Cell:
        network = self._network
        if self._loss_fn is not None:
            network = WithLossCell(network, self._loss_fn)
        if self._optimizer is not None:
            network = TrainOneStepCell(network, self._optimizer)
        return network

    def _build_eval_network(self, eval_network, eval_indexes):
        if eval_indexes is not None and not (isinstance(eval_indexes, list) and len(eval_indexes) == 3):
            raise ValueError(f"Model: eval_indexes must be a list of three positions, got {eval_indexes!r}")
        if not self._metric_fns:
            return eval_network, eval_indexes
        if eval_network is not None:
            return eval_network, eval_indexes
        if self._loss_fn is None:
            raise ValueError(
                "Model: metrics need an eval_network, or a loss_fn to build one (WithEvalCell(network, loss_fn))"
            )
        return WithEvalCell(self._network, self._loss_fn), [0, 1, 2]

    @property
    def train_network(self) -> Cell:
        return self._train_network

    @property
    def eval_network(self) -> Cell | None:
        return self._eval_network

    @property
    def predict_network(self) -> Cell:
        return self._predict_network

    # -- training -------------------------------------------------------------------------

    def train(self, epoch: int, train_dataset: Any, callbacks: Any = None, dataset_sink_mode: bool = False,
              sink_size: int = -1, initial_epoch: int = 0) -> None:
        """Train for epochs `initial_epoch + 1 .. epoch`, one step per batch."""
        self._train(epoch, train_dataset, callbacks, initial_epoch, "train")

    def fit(self, epoch: int, train_dataset: Any, valid_dataset: Any = None, valid_frequency: int | list = 1,
            callbacks: Any = None, dataset_sink_mode: bool = False, valid_dataset_sink_mode: bool = False,
            sink_size: int = -1, initial_epoch: int = 0) -> None:
        """Train as `train` does, evaluating on `valid_dataset` after every
        `valid_frequency`-th epoch (or after the epochs listed)."""
        if isinstance(valid_frequency, bool) or not isinstance(valid_frequency, (int, list)):
            raise TypeError(f"For 'Model.fit', the type of 'valid_frequency' must be a list or an integer, but got "
                            f"type {type(valid_frequency)}.")
        if isinstance(valid_frequency, int) and valid_frequency <= 0:
            raise ValueError(f"Model.fit: valid_frequency must be a positive int, got {valid_frequency}")
        valid = None
        if valid_dataset is not None:
            if not self._metric_fns or self._eval_network is None:
                raise ValueError("For 'Model.fit', if valid_dataset is not None, the model argument 'metrics' can not "
                                 "be None or empty, you should set the argument 'metrics' for model.")
            # one iterator for every evaluation (at most one per epoch)
            valid = (_Batches(valid_dataset, "fit", epoch - initial_epoch), valid_frequency)
        self._train(epoch, train_dataset, callbacks, initial_epoch, "fit", valid)

    def _train(self, epoch: int, train_dataset: Any, callbacks: Any, initial_epoch: int, what: str,
               valid: tuple | None = None) -> None:
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch <= 0:
            raise ValueError(f"Model.{what}: epoch must be a positive int, got {epoch!r}")
        if isinstance(initial_epoch, bool) or not isinstance(initial_epoch, int) or not 0 <= initial_epoch < epoch:
            raise ValueError(f"Model.{what}: initial_epoch must be an int in [0, epoch), got {initial_epoch!r}")
        batches = _Batches(train_dataset, what, epoch - initial_epoch)
        manager = CallbackManager(callbacks)
        cb_params = InternalCallbackParam()
        cb_params.cur_step_num = 0
        cb_params.train_network = self._train_network
        cb_params.epoch_num = epoch - initial_epoch
        cb_params.batch_num = batches.size
        cb_params.mode = "train"
        cb_params.loss_fn = self._loss_fn
        cb_params.optimizer = self._optimizer
        cb_params.parallel_mode = "stand_alone"
        cb_params.device_number = 1
        cb_params.train_dataset = train_dataset
        cb_params.list_callback = manager._callbacks
        cb_params.train_dataset_element = None
        cb_params.network = self._network
        cb_params.last_save_ckpt_step = None
        cb_params.latest_ckpt_file = None
        cb_params.loss_scale_mananger = None  # MindSpore's spelling
        cb_params.initial_step = 0
        cb_params.dataset_sink_mode = False
        cb_params.data_wait_time = 0.0
        cb_params.epoch_data_wait_time = 0.0
        try:
            with manager as callbacks_run:
                self._train_process(epoch, batches, callbacks_run, cb_params, initial_epoch, valid)
        finally:
            batches.close()
            if valid is not None:
                valid[0].close()

    def _train_process(self, epoch: int, batches: _Batches, callbacks, cb_params, initial_epoch: int,
                       valid: tuple | None = None) -> None:
        run_context = RunContext(cb_params)
        callbacks.on_train_begin(run_context)
        self._train_network.set_train(True)
        for i in range(initial_epoch, epoch):
            cb_params.cur_epoch_num = i + 1
            callbacks.on_train_epoch_begin(run_context)
            cb_params.epoch_data_wait_time = 0.0
            elements = iter(batches)
            while True:
                waiting_since = time.perf_counter()
                element = next(elements, None)
                if element is None:
                    break
                cb_params.data_wait_time = time.perf_counter() - waiting_since
                cb_params.epoch_data_wait_time += cb_params.data_wait_time
                if self._loss_fn is not None and len(element) != 2:
                    raise MsirValueError(
                        f"Model.train: with a loss_fn each batch must be (data, label), got {batches.describe(element)}"
                    )
                cb_params.cur_step_num += 1
                cb_params.train_dataset_element = element
                callbacks.on_train_step_begin(run_context)
                cb_params.net_outputs = self._train_network(*element)
                callbacks.on_train_step_end(run_context)
                if run_context.get_stop_requested():
                    break
            if valid is not None:
                self._eval_during_train(*valid, callbacks, cb_params)
            batches.reset()
            callbacks.on_train_epoch_end(run_context)
            cb_params.pop("metrics", None)
            if run_context.get_stop_requested():
                break
        callbacks.on_train_end(run_context)

    def _eval_during_train(self, batches: _Batches, valid_frequency: int | list, callbacks, cb_params) -> None:
        """Evaluate after this epoch if `valid_frequency` says so, in the
        run's parameters (which get the metrics), as MindSpore does."""
        epoch = cb_params.cur_epoch_num
        if not (epoch % valid_frequency == 0 if isinstance(valid_frequency, int) else epoch in valid_frequency):
            return
        eval_callbacks = [cb for cb in callbacks._callbacks if type(cb) not in _TRAINING_ONLY_CALLBACKS]
        saved = {key: cb_params.get(key) for key in ("mode", "cur_step_num", "batch_num", "net_outputs")}
        cb_params.eval_network = self._eval_network
        cb_params.valid_dataset = batches.dataset
        cb_params.batch_num = batches.size
        cb_params.mode = "eval"
        cb_params.cur_step_num = 0
        with CallbackManager(eval_callbacks) as eval_run:
            metrics = self._eval_process(batches, eval_run, cb_params)
        cb_params.update(saved)
        cb_params.metrics = metrics
        self._train_network.set_train(True)

    # -- evaluation and prediction ----------------------------------------------------------

    def eval(self, valid_dataset: Any, callbacks: Any = None, dataset_sink_mode: bool = False) -> dict:
        """The metrics over `valid_dataset`: `{name: value}`."""
        if self._eval_network is None or not self._metric_fns:
            raise ValueError("Model.eval: give metrics (and a loss_fn or an eval_network) to the Model")
        batches = _Batches(valid_dataset, "eval")
        manager = CallbackManager(callbacks)
        cb_params = InternalCallbackParam()
        cb_params.eval_network = self._eval_network
        cb_params.valid_dataset = valid_dataset
        cb_params.batch_num = batches.size
        cb_params.mode = "eval"
        cb_params.cur_step_num = 0
        cb_params.dataset_sink_mode = False
        cb_params.list_callback = manager._callbacks
        cb_params.network = self._network
        try:
            with manager as callbacks_run:
                return self._eval_process(batches, callbacks_run, cb_params)
        finally:
            batches.close()

    def _eval_process(self, batches: _Batches, callbacks_run, cb_params) -> dict:
        for metric in self._metric_fns.values():
            metric.clear()
        run_context = RunContext(cb_params)
        callbacks_run.on_eval_begin(run_context)
        callbacks_run.on_eval_epoch_begin(run_context)
        self._eval_network.set_train(False)
        for element in batches:
            cb_params.cur_step_num += 1
            cb_params.eval_dataset_element = element
            callbacks_run.on_eval_step_begin(run_context)
            outputs = self._eval_network(*element)
            cb_params.net_outputs = outputs
            callbacks_run.on_eval_step_end(run_context)
            self._update_metrics(outputs)
            if run_context.get_stop_requested():
                break
        callbacks_run.on_eval_epoch_end(run_context)
        batches.reset()
        metrics = {name: metric.eval() for name, metric in self._metric_fns.items()}
        cb_params.metrics = metrics
        callbacks_run.on_eval_end(run_context)
        return metrics

    def _update_metrics(self, outputs: Any) -> None:
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        if not isinstance(outputs, tuple):
            raise ValueError(f"Model.eval: the eval network must return a tuple, got {type(outputs).__name__}")
        if self._eval_indexes is not None and len(outputs) < 3:
            raise ValueError(
                f"Model.eval: the eval network must return (loss, outputs, label), got {len(outputs)} values"
            )
        for metric in self._metric_fns.values():
            if self._eval_indexes is None:
                metric.update(*outputs)
            elif isinstance(metric, Loss):
                metric.update(outputs[self._eval_indexes[0]])
            else:
                metric.update(outputs[self._eval_indexes[1]], outputs[self._eval_indexes[2]])

    def predict(self, *predict_data, backend=None):
        """The network's output for `predict_data`, in evaluation mode."""
        self._predict_network.set_train(False)
        data = tuple(x if isinstance(x, Tensor) else Tensor(np.asarray(x)) for x in predict_data)
        return self._predict_network(*data)


__all__ = ["Model"]
