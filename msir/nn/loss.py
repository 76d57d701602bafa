"""MindSpore's losses as Cells (`mindspore.nn.loss`): `CrossEntropyLoss`,
`SoftmaxCrossEntropyWithLogits`, `MSELoss`, `L1Loss`, and their base `LossBase`.

Each `construct` is ordinary msir code over `msir.ops` (its cross_entropy,
mse_loss and abs bodies), so a loss compiles in GRAPH_MODE, runs op by op in
PYNATIVE_MODE and differentiates in both, exactly like a layer. Constructor
arguments and defaults are MindSpore 2.10's:

* `LossBase(reduction='mean')`: `get_loss(x, weights=1.0)` reduces the
  per-element losses `x` ('mean' over every element, 'sum', or 'none');
* `CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean',
  label_smoothing=0.0)`: `ops.cross_entropy` (class indices or class
  probabilities; msir refuses `weight=` and `label_smoothing=` as
  `ops.cross_entropy` does);
* `SoftmaxCrossEntropyWithLogits(sparse=False, reduction='none')`: logits
  (N, C) and labels one-hot / probabilities (N, C), or with `sparse=True`
  class indices (N,); an index outside 0..C-1 has a zero one-hot row in
  MindSpore, hence a zero loss, and so here;
* `MSELoss(reduction='mean')`: `(logits - labels) ** 2`, broadcast;
* `L1Loss(reduction='mean')`: `|logits - labels|`, broadcast.
"""

from __future__ import annotations

from msir import ops
from msir.nn.cell import Cell

_REDUCTIONS = ("mean", "sum", "none")


class LossBase(Cell):
    """The base of the losses: the reduction (mindspore.nn.LossBase)."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"{type(self).__name__}: reduction must be one of 'mean', 'sum', 'none', got {reduction!r}"
            )
        self.reduction = reduction
        self.average = reduction == "mean"
        self.reduce = reduction != "none"

    def get_loss(self, x, weights=1.0):
        """`x * weights` reduced as `reduction` says (over every axis)."""
        x = x * weights
        if self.reduction == "mean":
            return ops.reduce_mean(x)
        if self.reduction == "sum":
            return ops.reduce_sum(x)
        return x

    def construct(self, logits, labels):
        raise NotImplementedError(f"{type(self).__name__} must define construct()")


class CrossEntropyLoss(LossBase):
    """The cross entropy of logits (class axis 1) and class indices or probabilities."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(reduction)
        self.weight = weight
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def construct(self, logits, labels):
        return ops.cross_entropy(logits, labels, self.weight, self.ignore_index, self.reduction,
                                 self.label_smoothing)


class SoftmaxCrossEntropyWithLogits(LossBase):
    """-sum(labels * log_softmax(logits)) per sample, then the reduction (default 'none')."""

    def __init__(self, sparse: bool = False, reduction: str = "none"):
        super().__init__(reduction)
        if not isinstance(sparse, bool):
            raise TypeError(f"SoftmaxCrossEntropyWithLogits: sparse must be a bool, got {sparse!r}")
        self.sparse = sparse

    def construct(self, logits, labels):
        # Unreduced, cross_entropy gives a sample whose index is outside 0..C-1 (or the
        # ignored -100) a loss of 0: MindSpore's zero one-hot row.
        per_sample = ops.cross_entropy(logits, labels, reduction="none")
        return self.get_loss(per_sample)


class MSELoss(LossBase):
    """(logits - labels) ** 2, reduced."""

    def construct(self, logits, labels):
        return ops.mse_loss(logits, labels, self.reduction)


class L1Loss(LossBase):
    """|logits - labels|, reduced."""

    def construct(self, logits, labels):
        return self.get_loss(ops.abs(ops.sub(logits, labels)))


__all__ = ["CrossEntropyLoss", "L1Loss", "LossBase", "MSELoss", "SoftmaxCrossEntropyWithLogits"]
