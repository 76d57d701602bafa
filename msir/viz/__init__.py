"""What people look at: msir's pictures.

* `graph(f, *example_args, stage=...)`: the function's IR at a stage of the
  pipeline as a graph (DOT text; SVG through Graphviz's `dot` when installed),
  see `msir.viz.ir_graph`; `msir-opt ... --emit-dot` prints the same.
* `SummaryRecord(log_dir)` writes a training run's summary (scalars,
  hyper-parameters, model facts, the network's IR) as JSON lines, and
  `load_run(dir)` / `load_runs(root)` read runs back, see `msir.viz.summary`
  (the format: docs/summary-format.md).
* `curves(summary_dir, path=...)`: loss, accuracy and learning-rate curves of
  one run or of every run under a folder, as PNG (matplotlib, the `viz`
  extra; `curves_figure(runs)` gives the matplotlib Figure), see `msir.viz.curves`.
* `lineage(summary_root, path=...)`: one self-contained HTML page comparing
  every run under a folder, a sortable table and a parallel-coordinates
  picture (MindInsight's model lineage), see `msir.viz.lineage`;
  `msir-lineage DIR` writes it from the command line.
"""

from msir.viz.curves import curves, curves_figure
from msir.viz.ir_graph import IRGraph, VizError, dot_available, graph, stage_names, to_dot
from msir.viz.lineage import lineage
from msir.viz.summary import Run, Scalar, SummaryError, SummaryRecord, load_run, load_runs

__all__ = ["IRGraph", "Run", "Scalar", "SummaryError", "SummaryRecord", "VizError", "curves", "curves_figure",
           "dot_available", "graph", "lineage", "load_run", "load_runs", "stage_names", "to_dot"]
