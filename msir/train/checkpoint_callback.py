"""`ModelCheckpoint` and `CheckpointConfig`: checkpoints saved while `Model.train` runs
(MindSpore's `mindspore.train.ModelCheckpoint`, `CheckpointConfig`).

`ModelCheckpoint(prefix="CKP", directory=None, config=None)` saves the
training network (`cb_params.train_network`, or `config.saved_network`),
optimizer state included, with `msir.save_checkpoint`, as MindSpore does:

* every `save_checkpoint_steps` steps (or, with `save_checkpoint_steps=None`,
  every `save_checkpoint_seconds`), and once more at the end of training if
  the last step was not saved;
* to `{directory}/{prefix}-{epoch}_{step in epoch}.ckpt`; when files of that
  prefix are already in the directory, the prefix becomes `prefix_1`,
  `prefix_2`, ... so an earlier run's checkpoints are kept;
* keeping the newest `keep_checkpoint_max` files of the prefix (the oldest by
  modification time removed first);
* with `append_info=["epoch_num", "step_num"]`, those counts are saved too (a
  dict in `append_info` is saved as it is).

MindSpore also writes `{prefix}-graph.meta` (its graph, a MindIR file): msir
has no MindIR and does not write it. `keep_checkpoint_per_n_minutes`,
`exception_save`, `async_save` and encryption are not supported (the last
refused).
"""

from __future__ import annotations

import os
import time
from typing import Any

from msir.errors import MsirValueError
from msir.train.callback import Callback
from msir.train.serialization import save_checkpoint

_APPEND_INFO = ("epoch_num", "step_num")


def _optional_non_negative(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MsirValueError(f"CheckpointConfig: {what} must be a non-negative int or None, got {value!r}")
    return value


class CheckpointConfig:
    """When to save checkpoints, how many to keep, and what to add to them."""

    def __init__(self, save_checkpoint_steps: int | None = 1, save_checkpoint_seconds: int = 0,
                 keep_checkpoint_max: int | None = 5, keep_checkpoint_per_n_minutes: int = 0,
                 integrated_save: bool = True, async_save: bool = False, saved_network: Any = None,
                 append_info: list | None = None, enc_key: bytes | None = None, enc_mode: str = "AES-GCM",
                 exception_save: bool = False, crc_check: bool = False, **kwargs: Any):
        steps = _optional_non_negative(save_checkpoint_steps, "save_checkpoint_steps")
        seconds = _optional_non_negative(save_checkpoint_seconds, "save_checkpoint_seconds")
        keep = _optional_non_negative(keep_checkpoint_max, "keep_checkpoint_max")
        per_minutes = _optional_non_negative(keep_checkpoint_per_n_minutes, "keep_checkpoint_per_n_minutes")
        if not steps and not seconds:
            raise MsirValueError(
                "CheckpointConfig: save_checkpoint_steps and save_checkpoint_seconds cannot both be None or 0"
            )
        if not keep and not per_minutes:
            raise MsirValueError(
                "CheckpointConfig: keep_checkpoint_max and keep_checkpoint_per_n_minutes cannot both be None or 0"
            )
        if per_minutes and not keep:
            raise MsirValueError("CheckpointConfig: keep_checkpoint_per_n_minutes is not supported yet")
        if enc_key is not None:
            raise MsirValueError("CheckpointConfig: encrypted checkpoints (enc_key) are not supported")
        if exception_save:
            raise MsirValueError("CheckpointConfig: exception_save is not supported")
        from msir.nn.cell import Cell

        if saved_network is not None and not isinstance(saved_network, Cell):
            raise TypeError(f"CheckpointConfig: saved_network must be a Cell, got {type(saved_network).__name__}")
        self.save_checkpoint_steps = steps
        self.save_checkpoint_seconds = seconds if not steps else 0
        self.keep_checkpoint_max = keep
        self.keep_checkpoint_per_n_minutes = per_minutes
        self.integrated_save = integrated_save
        self.async_save = async_save
        self.saved_network = saved_network
        self.crc_check = bool(crc_check)
        self.append_dict = _append_dict(append_info)

    def get_checkpoint_policy(self) -> dict:
        """The saving policy, as MindSpore reports it."""
        return {
            "save_checkpoint_steps": self.save_checkpoint_steps,
            "save_checkpoint_seconds": self.save_checkpoint_seconds,
            "keep_checkpoint_max": self.keep_checkpoint_max,
            "keep_checkpoint_per_n_minutes": self.keep_checkpoint_per_n_minutes,
            "saved_network": self.saved_network,
        }


def _append_dict(append_info: list | None) -> dict:
    if append_info is None:
        return {}
    if not isinstance(append_info, list):
        raise TypeError(f"CheckpointConfig: append_info must be a list, got {type(append_info).__name__}")
    out: dict = {}
    for item in append_info:
        if item in _APPEND_INFO:
            out[item] = 0
        elif isinstance(item, dict):
            out.update(item)
        else:
            raise MsirValueError(
                f"CheckpointConfig: append_info holds 'epoch_num', 'step_num' or a dict, got {item!r}"
            )
    return out


def _prefix_not_taken(directory: str, prefix: str) -> str:
    """MindSpore's rule: the prefix, or prefix_N past the highest N of checkpoints already there."""
    suffix = 0
    for filename in os.listdir(directory):
        if not filename.endswith(".ckpt") or not filename.startswith(prefix) or len(filename) == len(prefix):
            continue
        rest = filename[len(prefix):]
        if rest[0].isalpha():
            continue
        dash = rest.find("-")
        if dash == 0:
            suffix = max(suffix, 1)
        elif dash > 0 and rest[1:dash].isdigit():
            suffix = max(suffix, int(rest[1:dash]) + 1)
    return f"{prefix}_{suffix}" if suffix else prefix


class ModelCheckpoint(Callback):
    """Save checkpoints while training (mindspore.train.ModelCheckpoint)."""

    def __init__(self, prefix: str = "CKP", directory: str | None = None, config: CheckpointConfig | None = None):
        super().__init__()
        if not isinstance(prefix, str) or not prefix or "/" in prefix:
            raise MsirValueError(f"ModelCheckpoint: prefix must be a non-empty str without '/', got {prefix!r}")
        if config is not None and not isinstance(config, CheckpointConfig):
            raise TypeError(f"ModelCheckpoint: config must be a CheckpointConfig, got {type(config).__name__}")
        self._directory = os.path.abspath(directory if directory is not None else os.getcwd())
        os.makedirs(self._directory, exist_ok=True)
        self._config = config if config is not None else CheckpointConfig()
        self._prefix = _prefix_not_taken(self._directory, prefix)
        self._append_dict = dict(self._config.append_dict)
        self._last_triggered_step = 0
        self._last_time = time.time()
        self._latest_ckpt_file_name = ""
        self._saved: list[str] = []

    @property
    def latest_ckpt_file_name(self) -> str:
        """The path of the last checkpoint saved."""
        return self._latest_ckpt_file_name

    def step_end(self, run_context):
        self._save(run_context.original_args(), force=False)

    def end(self, run_context):
        self._save(run_context.original_args(), force=True)

    def _due(self, cb_params, force: bool) -> bool:
        if self._config.save_checkpoint_steps:
            return force or cb_params.cur_step_num >= self._last_triggered_step + self._config.save_checkpoint_steps
        now = time.time()
        if force or now - self._last_time > self._config.save_checkpoint_seconds:
            self._last_time = now
            return True
        return False

    def _save(self, cb_params, force: bool) -> None:
        if cb_params.cur_step_num == self._last_triggered_step or not self._due(cb_params, force):
            return
        step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        path = os.path.join(self._directory, f"{self._prefix}-{cb_params.cur_epoch_num}_{step_in_epoch}.ckpt")
        self._remove_beyond_the_limit(path)
        self._last_triggered_step = cb_params.cur_step_num
        if "epoch_num" in self._append_dict:
            self._append_dict["epoch_num"] = cb_params.cur_epoch_num
        if "step_num" in self._append_dict:
            self._append_dict["step_num"] = cb_params.cur_step_num
        network = self._config.saved_network if self._config.saved_network is not None else cb_params.train_network
        save_checkpoint(network, path, append_dict=self._append_dict or None, crc_check=self._config.crc_check)
        self._saved = [p for p in self._saved if p != path] + [path]
        self._latest_ckpt_file_name = path
        cb_params.latest_ckpt_file = path
        cb_params.last_save_ckpt_step = cb_params.cur_step_num

    def _checkpoints_of_prefix(self) -> list[str]:
        found = []
        for filename in os.listdir(self._directory):
            if not filename.endswith(".ckpt") or not filename.startswith(self._prefix + "-"):
                continue
            if not any(c.isalpha() for c in filename[len(self._prefix):-len(".ckpt")]):
                found.append(os.path.join(self._directory, filename))
        return found

    def _remove_beyond_the_limit(self, new_path: str) -> None:
        """Make room for one more file: the oldest go (by modification time, then the order saved)."""
        keep = self._config.keep_checkpoint_max
        existing = [p for p in self._checkpoints_of_prefix() if p != new_path]
        order = {p: i for i, p in enumerate(self._saved)}
        existing.sort(key=lambda p: (os.stat(p).st_mtime_ns, order.get(p, -1)))
        while len(existing) >= keep:
            os.remove(existing.pop(0))


__all__ = ["CheckpointConfig", "ModelCheckpoint"]
