"""MindSpore's training callbacks (`mindspore.train.callback`): `Callback`, `RunContext`,
`LossMonitor`, `TimeMonitor`, and the list runner `Model` uses.

`Model.train` and `Model.eval` call each callback at the stages MindSpore
calls them (`on_train_begin`, `on_train_epoch_begin`, `on_train_step_begin`,
`on_train_step_end`, `on_train_epoch_end`, `on_train_end`, and the
`on_eval_*` ones), each with a `RunContext` whose `original_args()` are the
run's parameters (`cb_params`: a dict whose keys read as attributes, with
MindSpore's fields: `cur_epoch_num`, `cur_step_num`, `batch_num`,
`epoch_num`, `net_outputs`, `train_network`, `optimizer`, `loss_fn`,
`mode`, ...). The `on_*` methods call the older names (`begin`,
`epoch_begin`, `step_begin`, `step_end`, `epoch_end`, `end`) by default, so a
callback may define either. `run_context.request_stop()` ends training after
the current step.

`LossMonitor(per_print_times=1)` prints `epoch: E step: S, loss is L` (S
counted within the epoch, L the loss as a Python float, the mean of a
Tensor loss) every `per_print_times` steps, and refuses a NaN or infinite
loss; `TimeMonitor(data_size=None)` prints `Train epoch time: T ms, per step
time: t ms` at each epoch's end. Both print what MindSpore 2.10 prints, in
its format.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

import numpy as np

from msir.common.tensor import Tensor


class Callback:
    """The base of callbacks (mindspore.train.Callback): override the stages needed."""

    def __enter__(self):
        return self

    def __exit__(self, *err):
        return None

    def begin(self, run_context):
        """Before training (or evaluation) starts."""

    def epoch_begin(self, run_context):
        """Before each epoch."""

    def epoch_end(self, run_context):
        """After each epoch."""

    def step_begin(self, run_context):
        """Before each step."""

    def step_end(self, run_context):
        """After each step."""

    def end(self, run_context):
        """After training (or evaluation)."""

    def on_train_begin(self, run_context):
        self.begin(run_context)

    def on_train_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_train_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_train_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_train_step_end(self, run_context):
        self.step_end(run_context)

    def on_train_end(self, run_context):
        self.end(run_context)

    def on_eval_begin(self, run_context):
        self.begin(run_context)

    def on_eval_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_eval_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_eval_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_eval_step_end(self, run_context):
        self.step_end(run_context)

    def on_eval_end(self, run_context):
        self.end(run_context)


_STAGES = (
    "begin", "epoch_begin", "epoch_end", "step_begin", "step_end", "end",
    "on_train_begin", "on_train_epoch_begin", "on_train_epoch_end", "on_train_step_begin", "on_train_step_end",
    "on_train_end", "on_eval_begin", "on_eval_epoch_begin", "on_eval_epoch_end", "on_eval_step_begin",
    "on_eval_step_end", "on_eval_end",
)


class CallbackManager(Callback):
    """A list of callbacks run as one, each entered as a context manager for the run."""

    def __init__(self, callbacks: Any):
        if callbacks is None:
            callbacks = []
        elif isinstance(callbacks, Callback):
            callbacks = [callbacks]
        elif not isinstance(callbacks, list):
            raise TypeError(f"callbacks must be a Callback or a list of them, got {type(callbacks).__name__}")
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"every element of callbacks must be a Callback, got {type(cb).__name__}")
        self._callbacks = list(callbacks)
        self._stack: ExitStack | None = None

    def __enter__(self):
        self._stack = ExitStack().__enter__()
        self._callbacks = [self._stack.enter_context(cb) for cb in self._callbacks]
        return self

    def __exit__(self, *err):
        return self._stack.__exit__(*err)


def _run_all(stage: str):
    def run(self, run_context):
        for cb in self._callbacks:
            getattr(cb, stage)(run_context)

    run.__name__ = stage
    return run


for _stage in _STAGES:
    setattr(CallbackManager, _stage, _run_all(_stage))


class InternalCallbackParam(dict):
    """The run's parameters: a dict whose keys read and write as attributes."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"the run's parameters have no field {key!r}") from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value


class RunContext:
    """What a callback receives: the run's parameters, and a way to stop the run."""

    def __init__(self, original_args: dict):
        if not isinstance(original_args, dict):
            raise TypeError(f"RunContext needs a dict of the run's parameters, got {type(original_args).__name__}")
        self._original_args = original_args
        self._stop_requested = False

    def original_args(self) -> dict:
        return self._original_args

    def request_stop(self) -> None:
        self._stop_requested = True

    def get_stop_requested(self) -> bool:
        return self._stop_requested


def _handle_loss(loss: Any) -> Any:
    """The loss as LossMonitor prints it: a Tensor's mean as a float, the first of a tuple."""
    if isinstance(loss, (tuple, list)):
        if isinstance(loss[0], Tensor):
            loss = loss[0]
    elif isinstance(loss, Tensor):
        loss = float(np.mean(loss.asnumpy()))
    return loss


class LossMonitor(Callback):
    """Print the loss every `per_print_times` steps (mindspore.train.LossMonitor)."""

    def __init__(self, per_print_times: int = 1):
        super().__init__()
        if isinstance(per_print_times, bool) or not isinstance(per_print_times, int) or per_print_times < 0:
            raise ValueError(f"LossMonitor: per_print_times must be an int at least 0, got {per_print_times!r}")
        self._per_print_times = per_print_times
        self._last_print_time = 0

    def step_end(self, run_context):
        cb_params = run_context.original_args()
        cur_epoch_num = cb_params.get("cur_epoch_num", 1)
        loss = _handle_loss(cb_params.net_outputs)
        cur_step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        if isinstance(loss, float) and (np.isnan(loss) or np.isinf(loss)):
            raise ValueError(
                f"In epoch: {cur_epoch_num} step: {cur_step_in_epoch}, loss is NAN or INF, "
                f"training process cannot continue, terminating training."
            )
        if self._per_print_times != 0 and cb_params.cur_step_num <= self._last_print_time:
            # a new run (or a repeated dataset) started counting again
            while cb_params.cur_step_num <= self._last_print_time:
                self._last_print_time -= max(
                    self._per_print_times, cb_params.batch_num if cb_params.get("dataset_sink_mode") else 1
                )
        if self._per_print_times != 0 and cb_params.cur_step_num - self._last_print_time >= self._per_print_times:
            self._last_print_time = cb_params.cur_step_num
            print("epoch: %s step: %s, loss is %s" % (cur_epoch_num, cur_step_in_epoch, loss), flush=True)

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        metrics = cb_params.get("metrics")
        if metrics:
            # NumPy scalars as MindSpore prints them (it runs on NumPy 1: `0.4375`, not `np.float64(0.4375)`)
            with np.printoptions(legacy="1.25"):
                print("Eval result: epoch %d, metrics: %s" % (cb_params.cur_epoch_num, metrics))


class TimeMonitor(Callback):
    """Print each epoch's time and the time per step (mindspore.train.TimeMonitor)."""

    def __init__(self, data_size: int | None = None, data_time: bool = False):
        super().__init__()
        if not isinstance(data_time, bool):
            raise TypeError(f"TimeMonitor: data_time must be a bool, got {data_time!r}")
        self.data_size = data_size
        self.data_time = data_time
        self.epoch_time = time.time()
        self.data_time_sum = 0.0
        self.data_time_start = 0.0

    def on_train_step_begin(self, run_context):
        if self.data_time:
            self.data_time_sum += time.time() - self.data_time_start

    def on_train_step_end(self, run_context):
        if self.data_time:
            self.data_time_start = time.time()

    def epoch_begin(self, run_context):
        self.epoch_time = time.time()
        if self.data_time:
            self.data_time_sum = 0.0
            self.data_time_start = time.time()

    def epoch_end(self, run_context):
        epoch_ms = (time.time() - self.epoch_time) * 1000
        cb_params = run_context.original_args()
        step_size = self.data_size
        batch_num = cb_params.get("batch_num")
        if isinstance(batch_num, int) and batch_num > 0:
            step_size = batch_num
        if not isinstance(step_size, int) or step_size <= 0:
            raise ValueError(f"TimeMonitor: the number of steps per epoch must be a positive int, got {step_size!r}")
        log = "{} epoch time: {:5.3f} ms, per step time: {:5.3f} ms".format(
            cb_params.get("mode", "").title(), epoch_ms, epoch_ms / step_size
        )
        if self.data_time:
            log += " (data time: {:5.3f} ms)".format(self.data_time_sum * 1000 / step_size)
        print(log, flush=True)


__all__ = ["Callback", "CallbackManager", "InternalCallbackParam", "LossMonitor", "RunContext", "TimeMonitor"]
