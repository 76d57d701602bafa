"""MindSpore's evaluation metrics (`mindspore.train.metrics`): `Metric`, `Accuracy`, `Loss`.

A metric accumulates over the batches of an evaluation (`clear()`,
`update(*inputs)` per batch, `eval()` at the end) on NumPy arrays; inputs may
be Tensors, arrays or lists. `Model.eval` hands each metric what
`WithEvalCell` returns: `Loss` the loss, the others the outputs and the label.

* `Accuracy(eval_type='classification')`: the fraction of samples whose
  argmax over axis 1 is the label (labels as indices, or one-hot, which is
  turned into indices first); `'multilabel'`: the samples whose every label
  equals the prediction;
* `Loss()`: the mean over the batches of each batch's mean loss.

`eval()` before any `update` is an error, as in MindSpore.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msir.common.tensor import Tensor


class Metric:
    """The base of the metrics (mindspore.train.Metric)."""

    def __init__(self):
        self._indexes = None

    def _convert_data(self, data: Any) -> np.ndarray:
        if isinstance(data, Tensor):
            return data.asnumpy()
        if isinstance(data, (list, np.ndarray)):
            return np.asarray(data)
        raise TypeError(
            f"{type(self).__name__}: inputs must be Tensors, lists or NumPy arrays, got {type(data).__name__}"
        )

    @property
    def indexes(self):
        return self._indexes

    def set_indexes(self, indexes: list[int]) -> "Metric":
        """Use only the inputs at `indexes` (in that order) in `update`."""
        if not isinstance(indexes, list) or not all(isinstance(i, int) for i in indexes):
            raise ValueError(f"{type(self).__name__}.set_indexes: indexes must be a list of ints, got {indexes!r}")
        self._indexes = indexes
        return self

    def _select(self, inputs: tuple) -> tuple:
        return inputs if self._indexes is None else tuple(inputs[i] for i in self._indexes)

    def clear(self) -> None:
        raise NotImplementedError

    def update(self, *inputs) -> None:
        raise NotImplementedError

    def eval(self) -> Any:
        raise NotImplementedError


def _is_one_hot(data: np.ndarray) -> bool:
    if data.ndim > 1 and np.equal(data ** 2, data).all():
        return bool(np.equal(np.ones((data.shape[0],) + data.shape[2:]), data.sum(axis=1)).all())
    return False


class Accuracy(Metric):
    """The fraction of correctly classified samples."""

    def __init__(self, eval_type: str = "classification"):
        super().__init__()
        if eval_type not in ("classification", "multilabel"):
            raise ValueError(f"Accuracy: eval_type must be 'classification' or 'multilabel', got {eval_type!r}")
        self._type = eval_type
        self.clear()

    def clear(self) -> None:
        self._correct_num = 0
        self._total_num = 0
        self._class_num = 0

    def update(self, *inputs) -> None:
        inputs = self._select(inputs)
        if len(inputs) != 2:
            raise ValueError(f"Accuracy.update needs 2 inputs (predicted value, true value), got {len(inputs)}")
        y_pred = self._convert_data(inputs[0])
        y = self._convert_data(inputs[1])
        if self._type == "classification" and y_pred.ndim == y.ndim and _is_one_hot(y):
            y = y.argmax(axis=1)
        if self._type == "classification":
            if y_pred.ndim != y.ndim + 1 or y.shape != (y_pred.shape[0],) + y_pred.shape[2:]:
                raise ValueError(
                    f"Accuracy.update: a prediction of shape {y_pred.shape} needs labels of shape "
                    f"{(y_pred.shape[0],) + y_pred.shape[2:]}, got {y.shape}"
                )
        elif y_pred.shape != y.shape:
            raise ValueError(f"Accuracy.update: multilabel predictions {y_pred.shape} and labels {y.shape} differ")
        if self._class_num == 0:
            self._class_num = y_pred.shape[1]
        elif y_pred.shape[1] != self._class_num:
            raise ValueError(
                f"Accuracy.update: the predictions have {y_pred.shape[1]} classes, earlier ones {self._class_num}"
            )
        if self._type == "classification":
            result = (np.equal(y_pred.argmax(axis=1), y) * 1).reshape(-1)
        else:
            last = y_pred.ndim - 1
            y_pred = y_pred.swapaxes(1, last).reshape(-1, self._class_num)
            y = y.swapaxes(1, last).reshape(-1, self._class_num)
            result = np.equal(y_pred, y).all(axis=1) * 1
        self._correct_num += result.sum()
        self._total_num += result.shape[0]

    def eval(self) -> float:
        if self._total_num == 0:
            raise RuntimeError("Accuracy.eval: no samples yet (call update first)")
        return self._correct_num / self._total_num


class Loss(Metric):
    """The mean over the batches of each batch's mean loss."""

    def __init__(self):
        super().__init__()
        self.clear()

    def clear(self) -> None:
        # a float64 sum, so that eval() is a numpy.float64 as MindSpore documents (its `0 +` a float32 mean is
        # float64 under NumPy 1's promotion; under NumPy 2's it would stay float32)
        self._sum_loss = np.float64(0.0)
        self._total_num = 0

    def update(self, *inputs) -> None:
        inputs = self._select(inputs)
        if len(inputs) != 1:
            raise ValueError(f"Loss.update needs 1 input (the loss), got {len(inputs)}")
        loss = self._convert_data(inputs[0])
        if loss.ndim == 0:
            loss = loss.reshape(1)
        if loss.ndim != 1:
            raise ValueError(f"Loss.update: the loss must be 0-d or 1-D, got shape {loss.shape}")
        self._sum_loss += loss.mean(-1)
        self._total_num += 1

    def eval(self) -> float:
        if self._total_num == 0:
            raise RuntimeError("Loss.eval: no losses yet (call update first)")
        return self._sum_loss / self._total_num


def get_metrics(metrics: Any) -> dict[str, Metric]:
    """A dict of Metric objects from a dict of them or a set / list of names ('accuracy', 'loss')."""
    if metrics is None:
        return {}
    if isinstance(metrics, dict):
        for name, m in metrics.items():
            if not isinstance(m, Metric):
                raise TypeError(f"metrics['{name}'] must be a Metric (nn.Accuracy(), ...), got {type(m).__name__}")
        return dict(metrics)
    if isinstance(metrics, (set, list, tuple)):
        known = {"accuracy": Accuracy, "acc": Accuracy, "loss": Loss}
        out = {}
        for name in metrics:
            if name not in known:
                raise ValueError(f"unknown metric {name!r}; known: {', '.join(sorted(known))}")
            out[name] = known[name]()
        return out
    raise TypeError(f"metrics must be a dict of Metrics or a set of names, got {type(metrics).__name__}")


__all__ = ["Accuracy", "Loss", "Metric", "get_metrics"]
