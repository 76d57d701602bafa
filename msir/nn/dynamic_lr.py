"""MindSpore's learning-rate lists (`mindspore.nn.dynamic_lr`): one learning rate per step.

`piecewise_constant_lr`, `exponential_decay_lr` and `cosine_decay_lr` return
Python lists of floats, computed as MindSpore 2.10 computes them; an
optimizer given a list (or a 1-D Tensor) uses entry `global_step` at each
step (`msir.nn.optim.Optimizer.get_lr`).
"""

from __future__ import annotations

import math


def _positive_int(value, what: str, fn: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{fn}: {what} must be a positive int, got {value!r}")
    return value


def _positive_float(value, what: str, fn: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{fn}: {what} must be a positive number, got {value!r}")
    return float(value)


def piecewise_constant_lr(milestone, learning_rates) -> list[float]:
    """`learning_rates[t]` for the steps in [milestone[t-1], milestone[t]); `milestone[-1]` steps."""
    if len(milestone) != len(learning_rates):
        raise ValueError(
            f"piecewise_constant_lr: milestone has {len(milestone)} entries, learning_rates {len(learning_rates)}; "
            f"they must have as many"
        )
    lr: list[float] = []
    last = 0
    for i, item in enumerate(milestone):
        _positive_int(item, f"milestone[{i}]", "piecewise_constant_lr")
        if item < last:
            raise ValueError(
                f"piecewise_constant_lr: milestone must increase, got milestone[{i}] = {item} after {last}"
            )
        lr += [learning_rates[i]] * (item - last)
        last = item
    return lr


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair: bool = False) -> list[float]:
    """learning_rate * decay_rate ** (epoch / decay_epoch), `epoch = floor(i / step_per_epoch)`
    (the exponent floored too with `is_stair`), for `total_step` steps."""
    fn = "exponential_decay_lr"
    learning_rate = _positive_float(learning_rate, "learning_rate", fn)
    decay_rate = _positive_float(decay_rate, "decay_rate", fn)
    for value, what in ((total_step, "total_step"), (step_per_epoch, "step_per_epoch"), (decay_epoch, "decay_epoch")):
        _positive_int(value, what, fn)
    lr = []
    for i in range(total_step):
        epoch = math.floor(i / step_per_epoch)
        exponent = math.floor(epoch / decay_epoch) if is_stair else epoch / decay_epoch
        lr.append(learning_rate * decay_rate ** exponent)
    return lr


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch) -> list[float]:
    """min_lr + (max_lr - min_lr) / 2 * (1 + cos(pi * min(epoch, decay_epoch) / decay_epoch)),
    `epoch = floor(i / step_per_epoch)`, for `total_step` steps."""
    fn = "cosine_decay_lr"
    if not isinstance(min_lr, float):
        raise TypeError(f"{fn}: min_lr must be a float, got {type(min_lr).__name__}")
    if min_lr < 0:
        raise ValueError(f"{fn}: min_lr must be at least 0, got {min_lr}")
    max_lr = _positive_float(max_lr, "max_lr", fn)
    if min_lr >= max_lr:
        raise ValueError(f"{fn}: max_lr ({max_lr}) must be greater than min_lr ({min_lr})")
    for value, what in ((total_step, "total_step"), (step_per_epoch, "step_per_epoch"), (decay_epoch, "decay_epoch")):
        _positive_int(value, what, fn)
    delta = 0.5 * (max_lr - min_lr)
    lr = []
    for i in range(total_step):
        epoch = min(math.floor(i / step_per_epoch), decay_epoch)
        lr.append(min_lr + delta * (1 + math.cos(math.pi * epoch / decay_epoch)))
    return lr


__all__ = ["cosine_decay_lr", "exponential_decay_lr", "piecewise_constant_lr"]
