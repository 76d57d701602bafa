"""`SummaryCollector`: MindSpore's summary callback, writing msir's summary format.

`SummaryCollector(summary_dir, collect_freq=10, ...)` given to `Model.train`
or `Model.fit` (and, to add an evaluation's metrics to the same run, to
`Model.eval`) writes the run into `summary_dir` through `msir.viz.SummaryRecord`, in the
format of docs/summary-format.md, which `msir.viz.curves` and
`msir.viz.lineage` draw. What it records, under the names MindSpore's
`mindspore.train.SummaryCollector` (2.10) uses where it has one:

* scalars (`collect_metric`), mode "train": `loss` (the network's first
  output, averaged, as MindSpore takes it) and `learning_rate` (the rate the
  step used) at the first step and at every step that is a multiple of
  `collect_freq`; at each epoch's end `epoch_loss`, the mean loss of the
  epoch's steps (msir's addition: MindSpore keeps no per-epoch loss);
* scalars, mode "eval" (`collect_eval_lineage`): each metric `Model.eval`
  returns (`accuracy`, `loss`, ...) at its end, at the last training step
  this collector recorded, and the metrics of `Model.fit`'s evaluations
  (`cb_params.metrics`) at the end of their epoch;
* the graph (`collect_graph`): the training network's IR as text, under
  "train_network" (MindSpore's `train_network/auto`), traced at the first
  step; the whole training step for a `TrainOneStepCell` (forward, gradient,
  update), else the network's `construct`;
* the lineage (`collect_train_lineage`), at the first step (when the batch
  size and the step's rate are known): hyper-parameters `learning_rate` (the first step's rate),
  `batch_size`, `optimizer` and `loss_function` (class names), `epochs`
  (MindSpore's lineage key `epoch`; msir's format says `epochs`), and every
  key of `custom_lineage_data`; model facts `param_count` and `size_bytes`
  (the network's parameters: MindSpore's `model_size` is the size of a
  checkpoint file, which msir does not write), `network` (its class name)
  and `train_dataset_size` (MindSpore's lineage also has the step count,
  the parallel mode and the device count: a lineage page compares runs, and
  those are the same for every run msir trains today).

Wall times are in every line; the run ends when the collector's run ends
(`SummaryRecord.close`, at the end of each `Model.train` or `Model.eval`).

The arguments are MindSpore's. `collect_specified_data` takes MindSpore's
keys; with `keep_default_action=True` keys not given keep their default
(collected), with False only the keys given to be True are collected. What
msir's format has no place for is refused by name when asked for:
`collect_input_data`, `collect_dataset_graph`, `histogram_regular`,
`collect_landscape` (left at their defaults, they are not collected),
`collect_tensor_freq`, `max_file_size`, `export_options` (TensorSummary,
file rotation and tensor export). `num_process` is accepted and checked:
the writer is one appending file per kind, which needs no pool.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from msir.common.tensor import Tensor, unwrap
from msir.errors import MsirError, UnsupportedSyntaxError
from msir.nn.cell import Cell
from msir.nn.loss import LossBase
from msir.nn.optim import Optimizer
from msir.train.callback import Callback

_DEFAULT_SPECIFIED_DATA = {
    "collect_metric": True,
    "collect_graph": True,
    "collect_train_lineage": True,
    "collect_eval_lineage": True,
    "collect_input_data": True,
    "collect_dataset_graph": True,
    "histogram_regular": None,
    "collect_landscape": None,
}
"""MindSpore's keys of `collect_specified_data` (its default landscape is a
dict of options; any landscape is refused here, so None stands for it)."""

_COLLECTED = ("collect_metric", "collect_graph", "collect_train_lineage", "collect_eval_lineage")
_NOT_COLLECTED = {
    "collect_input_data": "input images",
    "collect_dataset_graph": "the dataset graph",
    "histogram_regular": "parameter histograms",
    "collect_landscape": "the loss landscape",
}


def _check_positive(name: str, value: Any, allow_none: bool = False) -> None:
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"For 'SummaryCollector', the type of '{name}' should be int, but got "
                        f"{type(value).__name__}.")
    if value <= 0:
        raise ValueError(f"For 'SummaryCollector', the value of `{name}` should be greater than 0, but got `{value}`.")


def _process_specified_data(specified: Any, keep_default_action: bool) -> dict[str, bool]:
    """Which of the collected kinds are on (MindSpore's rules for the two arguments)."""
    if specified is not None and not isinstance(specified, dict):
        raise TypeError(f"For 'SummaryCollector', the type of 'collect_specified_data' should be dict or None, "
                        f"but got {type(specified).__name__}.")
    specified = dict(specified or {})
    for key in specified:
        if not isinstance(key, str):
            raise TypeError(f"For 'SummaryCollector', the keys of 'collect_specified_data' should be str, "
                            f"but got {key!r}.")
    unexpected = sorted(set(specified) - set(_DEFAULT_SPECIFIED_DATA))
    if unexpected:
        raise ValueError(f"For 'SummaryCollector', the keys {unexpected} of `collect_specified_data` are "
                         f"unsupported, expect the follow keys: {list(_DEFAULT_SPECIFIED_DATA)}")
    for key in ("collect_input_data", "collect_dataset_graph", *_COLLECTED):
        if key in specified and not isinstance(specified[key], bool):
            raise TypeError(f"For 'SummaryCollector', the type of '{key}' should be bool, but got "
                            f"{type(specified[key]).__name__}.")
    for key, what in _NOT_COLLECTED.items():
        value = specified.get(key)
        if value is not None and value is not False:
            raise UnsupportedSyntaxError(f"SummaryCollector: collect_specified_data['{key}'] asks for {what}, "
                                         f"which msir's summary format does not hold")
    if keep_default_action:
        return {key: specified.get(key, True) for key in _COLLECTED}
    return {key: specified.get(key) is True for key in _COLLECTED}


def _check_custom_lineage_data(data: Any) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TypeError(f"For 'SummaryCollector', the type of 'custom_lineage_data' should be dict or None, "
                        f"but got {type(data).__name__}.")
    for key, value in data.items():
        if not isinstance(key, str):
            raise TypeError(f"For 'SummaryCollector', the key of custom_lineage_data should be str, got {key!r}.")
        if isinstance(value, bool) or not isinstance(value, (int, str, float)):
            raise TypeError(f"For 'SummaryCollector', the value of custom_lineage_data -> {key} should be int, str "
                            f"or float, but got {type(value).__name__}.")
    return dict(data)


def _first_output_mean(outputs: Any) -> float | None:
    """The loss as MindSpore's collector takes it: the first output, averaged."""
    if isinstance(outputs, (list, tuple)):
        outputs = outputs[0] if outputs else None
    if outputs is None:
        return None
    array = np.asarray(unwrap(outputs), dtype=np.float64)
    return float(np.mean(array))


def _find_optimizer(cb_params) -> Optimizer | None:
    optimizer = cb_params.get("optimizer")
    if isinstance(optimizer, Optimizer):
        return optimizer
    network = cb_params.get("train_network")
    if isinstance(network, Cell):
        for _, cell in network.cells_and_names():
            if isinstance(cell, Optimizer):
                return cell
    return None


def _find_loss_fn(cb_params) -> Cell | None:
    loss_fn = cb_params.get("loss_fn")
    if loss_fn is not None:
        return loss_fn
    network = cb_params.get("train_network")
    if isinstance(network, Cell):
        for _, cell in network.cells_and_names():
            if isinstance(cell, LossBase):
                return cell
    return None


def _step_learning_rate(optimizer: Optimizer) -> float:
    """The rate of the step that just ran (a list of rates: the entry of the
    step before `global_step`, which the step advanced)."""
    rates = optimizer.learning_rate.asnumpy()
    if rates.ndim > 0:
        step = int(optimizer.global_step.asnumpy()[0]) - 1
        rates = rates[min(max(step, 0), rates.shape[0] - 1)]
    # the shortest decimal of the float32 (0.1, not 0.10000000149011612): the rate as the user wrote it
    return float(str(np.float32(rates)))


def _batch_size(cb_params) -> int | None:
    dataset = cb_params.get("train_dataset")
    get_batch_size = getattr(dataset, "get_batch_size", None)
    if callable(get_batch_size):
        return int(get_batch_size())
    element = cb_params.get("train_dataset_element")
    if isinstance(element, (tuple, list)) and element:
        shape = np.shape(unwrap(element[0]))
        return int(shape[0]) if shape else 1
    return None


def _network_ir(cb_params) -> str:
    """The training network's msir IR, traced for the current batch."""
    from msir.api import JitFunction
    from msir.nn.wrap import TrainOneStepCell

    network = cb_params.train_network
    inputs = tuple(unwrap(cb_params.train_dataset_element))
    if isinstance(network, TrainOneStepCell):
        optimizer = network.optimizer
        return network._compiled_step().lower(optimizer._weight_arrays(), optimizer._state_arrays(),
                                              optimizer._current_lr(), inputs)
    return JitFunction(network).lower(*inputs)


class SummaryCollector(Callback):
    """Collect a run's loss, learning rate, metrics, graph and lineage into
    `summary_dir` (see the module docstring)."""

    def __init__(self, summary_dir: str | os.PathLike[str], collect_freq: int = 10, num_process: int = 32,
                 collect_specified_data: dict | None = None, keep_default_action: bool = True,
                 custom_lineage_data: dict | None = None, collect_tensor_freq: int | None = None,
                 max_file_size: int | None = None, export_options: dict | None = None):
        super().__init__()
        if not isinstance(summary_dir, (str, os.PathLike)) or not os.fspath(summary_dir):
            raise TypeError(f"For 'SummaryCollector', 'summary_dir' should be a non-empty str, got {summary_dir!r}.")
        _check_positive("collect_freq", collect_freq)
        _check_positive("num_process", num_process)
        _check_positive("collect_tensor_freq", collect_tensor_freq, allow_none=True)
        _check_positive("max_file_size", max_file_size, allow_none=True)
        if not isinstance(keep_default_action, bool):
            raise TypeError(f"For 'SummaryCollector', the type of 'keep_default_action' should be bool, but got "
                            f"{type(keep_default_action).__name__}.")
        for name, value, what in (("collect_tensor_freq", collect_tensor_freq, "TensorSummary values"),
                                  ("max_file_size", max_file_size, "summary file rotation"),
                                  ("export_options", export_options, "tensor export")):
            if value is not None:
                raise UnsupportedSyntaxError(f"SummaryCollector: {name} asks for {what}, which msir's summary "
                                             f"format does not hold")
        self._summary_dir = os.fspath(summary_dir)
        self._collect_freq = collect_freq
        self._collect = _process_specified_data(collect_specified_data, keep_default_action)
        self._custom_lineage_data = _check_custom_lineage_data(custom_lineage_data)
        self._record = None
        self._first_step_done = False
        self._last_train_step = 0
        self._last_train_epoch: int | None = None
        self._first_lr: float | None = None
        self._epoch_losses: list[float] = []

    @property
    def summary_dir(self) -> str:
        return self._summary_dir

    # -- the writer, one per run of Model.train or Model.eval ------------------------------

    def __enter__(self):
        from msir.viz.summary import SummaryRecord

        self._record = SummaryRecord(self._summary_dir)
        self._first_step_done = False
        return self

    def __exit__(self, *err):
        if self._record is not None:
            self._record.close()
            self._record = None
        return None

    def _writer(self):
        if self._record is None:
            raise RuntimeError("SummaryCollector: give it to Model.train or Model.eval in `callbacks`; its summary "
                               "is open only during their run")
        return self._record

    def begin(self, run_context):
        cb_params = run_context.original_args()
        collectors = [cb for cb in cb_params.get("list_callback", []) if isinstance(cb, SummaryCollector)]
        if len(collectors) > 1:
            raise ValueError("There are more than one SummaryCollector instance in callback list, but expected "
                             "only one SummaryCollector instance.")
        if cb_params.mode not in ("train", "eval"):
            raise ValueError(f"SummaryCollector: only `train` (model.train) and `eval` (model.eval) are supported, "
                             f"got {cb_params.mode!r}")
        self._writer().set_mode(cb_params.mode)

    # -- training -----------------------------------------------------------------------

    def epoch_begin(self, run_context):
        self._epoch_losses = []

    def step_end(self, run_context):
        cb_params = run_context.original_args()
        if cb_params.mode != "train":
            return
        record = self._writer()
        loss = _first_output_mean(cb_params.get("net_outputs"))
        if loss is not None:
            self._epoch_losses.append(loss)
        optimizer = _find_optimizer(cb_params)
        lr = _step_learning_rate(optimizer) if optimizer is not None else None
        step = cb_params.cur_step_num
        if not self._first_step_done:
            self._first_step_done = True
            self._first_lr = lr
            if self._collect["collect_graph"]:
                self._collect_graph(cb_params)
            if self._collect["collect_train_lineage"]:
                self._collect_train_lineage(cb_params)
        elif step % self._collect_freq != 0:
            return
        if self._collect["collect_metric"]:
            if loss is not None:
                record.add_value("scalar", "loss", loss)
            if lr is not None:
                record.add_value("scalar", "learning_rate", lr)
        record.record(step, epoch=cb_params.cur_epoch_num)
        self._last_train_step, self._last_train_epoch = step, cb_params.cur_epoch_num

    def epoch_end(self, run_context):
        cb_params = run_context.original_args()
        if cb_params.mode != "train":
            return
        record = self._writer()
        step, epoch = cb_params.cur_step_num, cb_params.cur_epoch_num
        if self._collect["collect_metric"] and self._epoch_losses:
            record.add_value("scalar", "epoch_loss", float(np.mean(self._epoch_losses)))
            record.record(step, epoch=epoch)
        self._last_train_step, self._last_train_epoch = step, epoch
        metrics = cb_params.get("metrics")
        if metrics and self._collect["collect_eval_lineage"]:
            self._record_metrics(metrics, step, epoch)

    def end(self, run_context):
        cb_params = run_context.original_args()
        if cb_params.mode == "eval" and self._collect["collect_eval_lineage"]:
            self._record_metrics(cb_params.get("metrics") or {}, self._last_train_step, self._last_train_epoch)

    # -- what is collected ------------------------------------------------------------------

    def _collect_graph(self, cb_params) -> None:
        try:
            text = _network_ir(cb_params)
        except MsirError as e:
            warnings.warn(f"SummaryCollector: the training network's IR could not be traced, so no graph is "
                          f"recorded: {e}", stacklevel=2)
            return
        self._writer().add_value("graph", "train_network", text)

    def _collect_train_lineage(self, cb_params) -> None:
        record = self._writer()
        optimizer = _find_optimizer(cb_params)
        loss_fn = _find_loss_fn(cb_params)
        hyper_params = {
            "learning_rate": self._first_lr,
            "batch_size": _batch_size(cb_params),
            "optimizer": type(optimizer).__name__ if optimizer is not None else None,
            "epochs": cb_params.epoch_num,
            "loss_function": type(loss_fn).__name__ if loss_fn is not None else None,
        }
        hyper_params.update(self._custom_lineage_data)
        record.set_hyper_params(hyper_params)
        network = cb_params.get("network") or cb_params.train_network
        batch_size = hyper_params["batch_size"]
        record.set_model_info(
            parameters=[p.asnumpy() for p in network.get_parameters()],
            network=type(network).__name__,
            train_dataset_size=cb_params.batch_num * batch_size if batch_size is not None else None,
        )

    def _record_metrics(self, metrics: dict, step: int, epoch: int | None) -> None:
        record = self._writer()
        record.set_mode("eval")
        recorded = False
        for name, value in metrics.items():
            array = np.asarray(unwrap(value)) if isinstance(value, Tensor) else np.asarray(value)
            if array.dtype.kind not in "biuf" or array.size != 1:
                warnings.warn(f"SummaryCollector: metric '{name}' is not a number ({value!r}), so it is not "
                              f"recorded", stacklevel=2)
                continue
            record.add_value("scalar", str(name), array.reshape(()))
            recorded = True
        if recorded:
            record.record(step, epoch=epoch)
        record.set_mode("train")


__all__ = ["SummaryCollector"]
