"""What people look at: msir's pictures.

* `graph(f, *example_args, stage=...)`: the function's IR at a stage of the
  pipeline as a graph (DOT text; SVG through Graphviz's `dot` when installed),
  see `msir.viz.ir_graph`; `msir-opt ... --emit-dot` prints the same.
"""

from msir.viz.ir_graph import IRGraph, VizError, dot_available, graph, stage_names, to_dot

__all__ = ["IRGraph", "VizError", "dot_available", "graph", "stage_names", "to_dot"]
