"""`ProgressBar`: a tqdm progress bar for `Model.train` and `Model.eval`.

Given in the callbacks (`model.train(3, data, callbacks=[LossMonitor(),
ProgressBar()])`), it draws one bar for the whole training run on stderr::

    epoch 2/3 step 17/32 |██████▏       | 49/96, loss 0.4127, 2150 samples/s, 00:03 left

(the epoch of epochs, the step within the epoch of its steps, the steps of
the run done and in all, the current loss as LossMonitor reads it, samples
per second over the last `RATE_WINDOW` steps, the time the run has left).
Given to `Model.eval`, it draws `eval step 12/40 |...| ...` once the
evaluation has taken longer than `eval_delay` seconds, so a short evaluation
shows nothing. (`Model.fit`'s evaluations between epochs draw no bar of
their own, as MindSpore runs none of its own callbacks there but
TimeMonitor: the training's bar stays.)

When it draws is chosen as tqdm chooses (its `disable`): by default
(`disable=None`) only when the bar's file (stderr, or `file=`) is a
terminal, so a run logged to a file or a pipe, and every test, shows no bar;
`disable=False` asks for the bar anywhere (a notebook, a log that wants it);
`disable=True` turns it off. While the bar is drawn on a terminal, lines
printed to stdout (LossMonitor's, TimeMonitor's, the user's) when it is a
terminal too, and to stderr (warnings), are written whole above the bar —
the bar is cleared, the line written unchanged, the bar drawn again —
instead of running into it.

tqdm (the `viz` extra: `pip install 'msir[viz]'`) is imported when a
`ProgressBar` is made, not with `msir.train`.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import IO, Any

import numpy as np

from msir.common.tensor import Tensor
from msir.train.callback import Callback, _handle_loss

RATE_WINDOW = 20
"""Samples per second and the time left are measured over this many recent
steps (the first steps, which compile, would otherwise weigh on both for the
whole run: tqdm's own estimate, refreshed a few times an epoch, kept the
compilation's minutes in it)."""

BAR_FORMAT = "{desc} |{bar}| {n_fmt}/{total_fmt}{postfix}"


def _tqdm():
    try:
        from tqdm import tqdm
    except ImportError as e:
        raise ImportError("msir.train.ProgressBar draws with tqdm, which is not installed: "
                          "pip install 'msir[viz]' (or tqdm>=4.66)") from e
    return tqdm


def _batch_size(element: Any) -> int:
    """The samples in one batch: the leading dimension of its first array (1 for a scalar)."""
    if not isinstance(element, (tuple, list)) or not element:
        return 1
    first = element[0]
    shape = first.shape if isinstance(first, (Tensor, np.ndarray)) else np.shape(first)
    return int(shape[0]) if len(shape) > 0 else 1


def _format_rate(samples_per_second: float) -> str:
    return f"{samples_per_second:.0f}" if samples_per_second >= 100 else f"{samples_per_second:.3g}"


class _LinesAboveBar:
    """Stands in for sys.stdout or sys.stderr while a bar is drawn on the same terminal:
    whole lines are written above the bar; a line's start waits for its end,
    so that the bar is never drawn in the middle of a line."""

    def __init__(self, stream: IO[str], bar):
        self._stream = stream
        self._bar = bar
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        end = self._pending.rfind("\n") + 1
        if end:
            lines, self._pending = self._pending[:end], self._pending[end:]
            self._bar.clear()
            self._stream.write(lines)
            self._stream.flush()
            self._bar.refresh()
        return len(text)

    def flush(self) -> None:
        """A line's start is held until its end (see the class docstring)."""

    def finish(self) -> None:
        """Write a last line that never ended."""
        if self._pending:
            self._stream.write(self._pending)
            self._stream.flush()
            self._pending = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class ProgressBar(Callback):
    """A progress bar for `Model.train` and `Model.eval` (see the module docstring).

    `file`: where to draw (default: sys.stderr at the run's start);
    `disable`: None (draw only on a terminal), False (always), True (never);
    `eval_delay`: seconds an evaluation runs before its bar appears;
    `mininterval`: the least seconds between two redraws.
    """

    def __init__(self, file: IO[str] | None = None, disable: bool | None = None, eval_delay: float = 1.0,
                 mininterval: float = 0.1):
        super().__init__()
        if disable is not None and not isinstance(disable, bool):
            raise TypeError(f"ProgressBar: disable must be None, True or False, got {disable!r}")
        for name, value in (("eval_delay", eval_delay), ("mininterval", mininterval)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"ProgressBar: {name} must be a number of seconds at least 0, got {value!r}")
        self._tqdm = _tqdm()
        self._file = file
        self._disable = disable
        self._eval_delay = float(eval_delay)
        self._mininterval = float(mininterval)
        self._bar = None
        self._element_key = "train_dataset_element"
        self._redirected: dict[str, _LinesAboveBar] = {}
        """The sys streams ("stdout", "stderr") that write above the bar while it is drawn."""
        self._recent: deque[tuple[float, int]] = deque(maxlen=RATE_WINDOW + 1)

    # -- the bar's life ---------------------------------------------------------------

    def _open(self, total: int, delay: float, desc: str) -> None:
        file = self._file if self._file is not None else sys.stderr
        disable = self._disable
        if disable is None:
            disable = not (hasattr(file, "isatty") and file.isatty())
        self._bar = self._tqdm(total=total, desc=desc, file=file, disable=disable, delay=delay, leave=True,
                               dynamic_ncols=True, mininterval=self._mininterval, bar_format=BAR_FORMAT)
        self._recent.clear()
        self._recent.append((time.perf_counter(), 0))
        if disable or not file.isatty():
            return
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            # the bar's own stream (warnings go there), or another stream on a terminal, which is the same one
            if stream is file or (hasattr(stream, "isatty") and stream.isatty()):
                self._redirected[name] = _LinesAboveBar(stream, self._bar)
                setattr(sys, name, self._redirected[name])

    def _close(self) -> None:
        if self._bar is None:
            return
        for name, proxy in self._redirected.items():
            if getattr(sys, name) is proxy:
                setattr(sys, name, proxy._stream)
            proxy.finish()
        self._redirected = {}
        self._bar.close()
        self._bar = None

    def __exit__(self, *err):
        self._close()  # a run that raised leaves no bar behind, nor stdout redirected
        return None

    def _advance(self, desc: str, cb_params) -> None:
        """One step done: describe it and move the bar on."""
        now = time.perf_counter()
        self._recent.append((now, self._recent[-1][1] + _batch_size(cb_params.get(self._element_key))))
        postfix = []
        loss = _handle_loss(cb_params.get("net_outputs"))
        if isinstance(loss, Tensor):  # the first of a tuple of outputs
            loss = float(np.mean(loss.asnumpy()))
        if isinstance(loss, (float, int, np.floating)):
            postfix.append(f"loss {float(loss):.4g}")
        (t0, n0), (t1, n1) = self._recent[0], self._recent[-1]
        if t1 > t0:
            postfix.append(f"{_format_rate((n1 - n0) / (t1 - t0))} samples/s")
            steps_left = self._bar.total - self._bar.n - 1
            seconds_per_step = (t1 - t0) / (len(self._recent) - 1)
            postfix.append(f"{self._tqdm.format_interval(steps_left * seconds_per_step)} left")
        self._bar.set_description_str(desc, refresh=False)
        self._bar.set_postfix_str(", ".join(postfix), refresh=False)
        self._bar.update(1)

    # -- training ---------------------------------------------------------------------

    def on_train_epoch_begin(self, run_context):
        cb_params = run_context.original_args()
        desc = self._train_step_desc(cb_params, 0)
        if self._bar is None:  # the run's first epoch: drawn from here, with its epoch number
            self._element_key = "train_dataset_element"
            self._open(total=cb_params.epoch_num * cb_params.batch_num, delay=0.0, desc=desc)
        else:
            self._bar.set_description_str(desc)

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        self._advance(self._train_step_desc(cb_params, (cb_params.cur_step_num - 1) % cb_params.batch_num + 1),
                      cb_params)

    @staticmethod
    def _train_step_desc(cb_params, step_in_epoch: int) -> str:
        # epochs count from `initial_epoch + 1`, as LossMonitor prints them
        steps_before_epoch = cb_params.cur_step_num - step_in_epoch
        last_epoch = cb_params.cur_epoch_num - 1 - steps_before_epoch // cb_params.batch_num + cb_params.epoch_num
        return f"epoch {cb_params.cur_epoch_num}/{last_epoch} step {step_in_epoch}/{cb_params.batch_num}"

    def on_train_end(self, run_context):
        self._close()

    # -- evaluation -------------------------------------------------------------------

    def on_eval_begin(self, run_context):
        cb_params = run_context.original_args()
        self._element_key = "eval_dataset_element"
        self._open(total=cb_params.batch_num, delay=self._eval_delay, desc=f"eval step 0/{cb_params.batch_num}")

    def on_eval_step_end(self, run_context):
        cb_params = run_context.original_args()
        self._advance(f"eval step {cb_params.cur_step_num}/{cb_params.batch_num}", cb_params)

    def on_eval_end(self, run_context):
        self._close()


__all__ = ["ProgressBar"]
