"""`msir.nn`: MindSpore's network layer (`mindspore.nn`): `Cell`, its containers, the layers,
the losses, the optimizers and learning-rate lists, the training wrappers and the metrics.

`msir.nn.cell` holds `Cell`, `SequentialCell` and `CellList`; `msir.nn.layers`
the layers; `msir.nn.conv` `Conv2d`, `MaxPool2d`, `AvgPool2d`;
`msir.nn.normalization` `BatchNorm1d`, `BatchNorm2d`; `msir.nn.loss` the losses; `msir.nn.optim` the optimizers;
`msir.nn.dynamic_lr` the per-step learning rates; `msir.nn.wrap`
`WithLossCell`, `WithEvalCell`, `TrainOneStepCell`; `msir.nn.metrics`
`Accuracy` and `Loss` (also `msir.train`'s). Importing `msir.nn` loads
neither the frontend nor xDSL: a Cell compiles its `construct` at its first
call in GRAPH_MODE.
"""

from msir.common.parameter import Parameter, ParameterTuple
from msir.nn.cell import Cell, CellList, SequentialCell
from msir.nn.conv import AvgPool2d, Conv2d, MaxPool2d
from msir.nn.dynamic_lr import cosine_decay_lr, exponential_decay_lr, piecewise_constant_lr
from msir.nn.layers import GELU, Dense, Dropout, Embedding, Flatten, LayerNorm, ReLU, Sigmoid, Softmax, Tanh
from msir.nn.loss import CrossEntropyLoss, L1Loss, LossBase, MSELoss, SoftmaxCrossEntropyWithLogits
from msir.nn.normalization import BatchNorm1d, BatchNorm2d
from msir.nn.metrics import Accuracy, Loss, Metric
from msir.nn.optim import SGD, Adam, AdamWeightDecay, Momentum, Optimizer
from msir.nn.wrap import TrainOneStepCell, WithEvalCell, WithLossCell

__all__ = [
    "Accuracy", "Adam", "AdamWeightDecay", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Cell", "CellList", "Conv2d", "CrossEntropyLoss", "Dense", "Dropout", "Embedding",
    "Flatten", "GELU", "L1Loss", "LayerNorm", "Loss", "LossBase", "MSELoss", "MaxPool2d", "Metric", "Momentum", "Optimizer",
    "Parameter", "ParameterTuple", "ReLU", "SGD", "SequentialCell", "Sigmoid", "Softmax",
    "SoftmaxCrossEntropyWithLogits", "Tanh", "TrainOneStepCell", "WithEvalCell", "WithLossCell", "cosine_decay_lr",
    "exponential_decay_lr", "piecewise_constant_lr",
]
