"""`msir.nn`: MindSpore's network layer (`mindspore.nn`): `Cell`, its containers and the layers.

`msir.nn.cell` holds `Cell`, `SequentialCell` and `CellList`. Importing
`msir.nn` loads neither the frontend nor xDSL: a Cell compiles its
`construct` at its first call in GRAPH_MODE.
"""

from msir.common.parameter import Parameter, ParameterTuple
from msir.nn.cell import Cell, CellList, SequentialCell

__all__ = ["Cell", "CellList", "Parameter", "ParameterTuple", "SequentialCell"]
