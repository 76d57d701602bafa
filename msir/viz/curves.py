"""Training curves: a run's (or several runs') scalars drawn as PNG.

`curves(summary_dir, path=...)` reads the run in `summary_dir`, or every run
under it when it is a folder of runs (`msir.viz.summary.load_runs`), and
draws one panel per quantity, side by side — loss, accuracy, learning rate by
default — with steps on x and one line per run (the same colour for a run in
every panel; values recorded in eval mode dashed). A quantity is found under
its usual tags (`msir.viz.summary.QUANTITY_TAGS`: accuracy is also "acc",
the learning rate "lr"); a quantity no run recorded has no panel. A learning rate spanning more
than a factor of 20 is drawn on a log scale.

matplotlib (the `viz` extra: `pip install 'msir[viz]'`) is imported only
here, through its object API and the Agg canvas, so that drawing changes no
global pyplot state of the caller's. `curves_figure(runs)` returns the
Figure instead of saving it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from msir.viz.ir_graph import VizError
from msir.viz.summary import Run, SummaryError, load_runs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DEFAULT_QUANTITIES = ("loss", "accuracy", "learning_rate")

TITLES = {"loss": "loss", "accuracy": "accuracy", "learning_rate": "learning rate"}

LOG_SCALE_RATIO = 20.0


def _matplotlib():
    """matplotlib's Figure, its Agg canvas and its rcParams (for the colour cycle)."""
    try:
        from matplotlib import rcParams
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise VizError("msir.viz.curves draws with matplotlib, which is not installed: "
                       "pip install 'msir[viz]' (or matplotlib>=3.7)") from e
    return Figure, FigureCanvasAgg, rcParams


def curves_figure(runs: Sequence[Run], *, quantities: Sequence[str] = DEFAULT_QUANTITIES,
                  title: str | None = None, dpi: int = 100) -> Figure:
    """The matplotlib Figure of `runs`' curves (see the module docstring),
    for a notebook or further drawing; `curves` saves one."""
    figure_class, canvas_class, rc_params = _matplotlib()
    panels = [q for q in quantities if any(r.tag_of(q) for r in runs)]
    if not panels:
        recorded = sorted({t for r in runs for t in r.tags})
        raise SummaryError(f"no run of {', '.join(r.name for r in runs)} recorded {', '.join(quantities)}; "
                           "the tags recorded are: " + (", ".join(recorded) if recorded else "none"))
    figure = figure_class(figsize=(4.2 * len(panels), 3.4), dpi=dpi, layout="constrained")
    canvas_class(figure)
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    cycle = [c["color"] for c in rc_params["axes.prop_cycle"]]
    for ax, quantity in zip(axes, panels, strict=True):
        drawn: list[float] = []
        for i, run in enumerate(runs):
            tag = run.tag_of(quantity)
            if tag is None:
                continue
            for mode, style in (("train", "-"), ("eval", "--")):
                steps, values = run.series(tag, mode)
                if not steps:
                    continue
                label = run.name if mode == "train" else f"{run.name} (eval)"
                ax.plot(steps, values, style, color=cycle[i % len(cycle)], label=label, linewidth=1.4,
                        marker="o" if len(steps) == 1 else None)
                drawn.extend(v for v in values if math.isfinite(v))
        if quantity == "learning_rate" and drawn and min(drawn) > 0 and max(drawn) > LOG_SCALE_RATIO * min(drawn):
            ax.set_yscale("log")
        ax.set_title(TITLES.get(quantity, quantity))
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
        if len(ax.lines) > 1:
            ax.legend(fontsize=8)
    if title:
        figure.suptitle(title)
    return figure


def curves(summary_dir: str | os.PathLike[str], path: str | os.PathLike[str] | None = None, *,
           quantities: Sequence[str] = DEFAULT_QUANTITIES, title: str | None = None, dpi: int = 100) -> Path:
    """Draw the curves of the runs in `summary_dir` to the PNG `path`
    (default: `summary_dir/curves.png`) and return its path."""
    figure = curves_figure(load_runs(summary_dir), quantities=quantities, title=title, dpi=dpi)
    out = Path(path) if path is not None else Path(summary_dir) / "curves.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
    return out
