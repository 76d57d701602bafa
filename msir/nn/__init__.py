"""`msir.nn`: MindSpore's network layer (`mindspore.nn`): `Cell`, its containers and the layers.

`msir.nn.cell` holds `Cell`, `SequentialCell` and `CellList`; `msir.nn.layers`
the layers. Importing `msir.nn` loads neither the frontend nor xDSL: a Cell
compiles its `construct` at its first call in GRAPH_MODE.
"""

from msir.common.parameter import Parameter, ParameterTuple
from msir.nn.cell import Cell, CellList, SequentialCell
from msir.nn.layers import GELU, Dense, Dropout, Embedding, Flatten, LayerNorm, ReLU, Sigmoid, Softmax, Tanh

__all__ = [
    "Cell", "CellList", "Dense", "Dropout", "Embedding", "Flatten", "GELU", "LayerNorm", "Parameter",
    "ParameterTuple", "ReLU", "SequentialCell", "Sigmoid", "Softmax", "Tanh",
]
