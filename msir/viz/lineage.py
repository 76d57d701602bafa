"""Model lineage: every run under a folder side by side, on one HTML page.

`lineage(summary_root, path=...)` (and `msir-lineage DIR`) reads every run
under `summary_root` (`msir.viz.summary.load_runs`) and writes one
self-contained page — inline CSS and JS, no network, no server; it opens
from disk — in the manner of MindInsight's model lineage:

* a parallel-coordinates picture, an SVG written here: one vertical axis per
  hyper-parameter that some run has (learning rate, batch size, optimizer,
  epochs first, then the user's keys), the model size, the final loss and,
  last, the target metric (the final accuracy where runs recorded one, else
  the final loss); one line per run crossing each axis at its value, coloured
  by the target (a legend gives the scale). Numeric axes are linear, or
  logarithmic when every value is positive and they span more than a factor
  of `LOG_SCALE_RATIO`; text values (an optimizer's name) are categories
  spaced evenly. A run without a value for an axis has a gap there;
* a table, one row per run: its name, hyper-parameters, final loss and
  accuracy (and the final value of any other scalar it recorded), parameter
  count, model size and duration. Clicking a header sorts the rows by it
  (again: the other way); blanks stay last. `#sort=<key>` or
  `#sort=<key>:desc` in the page's address sorts on opening, and sorting
  writes it there, so a sorted view can be shared. Hovering a row or a line
  highlights the run in both.

A run without some key shows a blank cell and a gap, never an error; a
folder holding no run is a `SummaryError`.
"""

from __future__ import annotations

import html
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msir.viz.summary import QUANTITY_TAGS, Run, load_runs

STANDARD_HYPER_PARAMS = ("learning_rate", "batch_size", "optimizer", "epochs")
"""MindInsight's lineage columns, shown first and always (blank where unknown)."""

LOG_SCALE_RATIO = 20.0

# the colour scale of the target metric (viridis, sampled; its last yellow is too pale on white)
_SCALE = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (189, 223, 38))
_NO_TARGET_COLOUR = "#9e9e9e"

# picture geometry, in SVG user units
_AXIS_GAP = 130
_MARGIN_X = 70
_TOP = 56
_BOTTOM = 300
_HEIGHT = 350


# -- the lineage of one run ----------------------------------------------------


def _final(run: Run, quantity: str) -> float | None:
    tag = run.tag_of(quantity)
    return run.final(tag) if tag is not None else None


def hyper_params(run: Run) -> dict[str, Any]:
    """The run's hyper-parameters; where it set no learning rate or epoch
    count, the first learning rate it recorded and the last epoch it reached."""
    values = dict(run.hyper_params)
    if values.get("learning_rate") is None:
        tag = run.tag_of("learning_rate")
        if tag is not None:
            values["learning_rate"] = run.series(tag)[1][0]
    if values.get("epochs") is None:
        epochs = [s.epoch for s in run.scalars if s.epoch is not None]
        if epochs:
            values["epochs"] = max(epochs)
    return values


@dataclass
class Column:
    """A table column (and maybe an axis of the picture): a key for `#sort=`,
    a title, each run's value (None: blank) and how a value is written."""

    key: str
    title: str
    values: list[Any]
    text: Callable[[Any], str]
    on_axis: bool = False

    @property
    def numeric(self) -> bool:
        return all(_is_number(v) for v in self.values if v is not None)

    @property
    def present(self) -> bool:
        return any(v is not None for v in self.values)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)


def format_bytes(value: Any) -> str:
    if not _is_number(value):
        return format_value(value)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:g} B"


def format_seconds(value: Any) -> str:
    if not _is_number(value):
        return format_value(value)
    if value < 60:
        return f"{value:.3g} s"
    minutes, seconds = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    return f"{minutes // 60} h {minutes % 60} min"


def columns(runs: Sequence[Run]) -> list[Column]:
    """The table's columns for `runs`, in order (see the module docstring)."""
    params = [hyper_params(r) for r in runs]
    extra_params = sorted({k for p in params for k in p} - set(STANDARD_HYPER_PARAMS))
    out = [Column("run", "run", [r.name for r in runs], str)]
    for key in (*STANDARD_HYPER_PARAMS, *extra_params):
        out.append(Column(key, key.replace("_", " "), [p.get(key) for p in params], format_value, on_axis=True))
    named = {tag for tags in QUANTITY_TAGS.values() for tag in tags}
    out.append(Column("final_loss", "final loss", [_final(r, "loss") for r in runs], format_value, on_axis=True))
    out.append(Column("final_accuracy", "final accuracy", [_final(r, "accuracy") for r in runs], format_value,
                      on_axis=True))
    for tag in sorted({t for r in runs for t in r.tags} - named):
        out.append(Column(f"final_{tag}", f"final {tag}", [r.final(tag) for r in runs], format_value))
    out.append(Column("param_count", "parameters", [r.model_info.get("param_count") for r in runs], format_value))
    out.append(Column("size_bytes", "model size", [r.model_info.get("size_bytes") for r in runs], format_bytes,
                      on_axis=True))
    for key in sorted({k for r in runs for k in r.model_info} - {"param_count", "size_bytes"}):
        out.append(Column(key, key.replace("_", " "), [r.model_info.get(key) for r in runs], format_value))
    out.append(Column("time", "time", [r.duration for r in runs], format_seconds))
    return out


def target_column(cols: Sequence[Column]) -> Column | None:
    """The metric the picture ends with and colours by: accuracy, else loss."""
    by_key = {c.key: c for c in cols}
    for key in ("final_accuracy", "final_loss"):
        if by_key[key].present:
            return by_key[key]
    return None


# -- the picture ----------------------------------------------------------------


@dataclass
class Axis:
    """A vertical axis of the picture: where each run crosses it (None: a gap) and its tick labels."""

    column: Column
    x: float
    ys: list[float | None]
    ticks: list[tuple[float, str]]
    log: bool = False


def _position(t: float) -> float:
    """A fraction of an axis's range (0 at the bottom) as a y coordinate."""
    return _BOTTOM - t * (_BOTTOM - _TOP)


def _numeric_axis(column: Column, x: float) -> Axis:
    finite = [float(v) for v in column.values if v is not None and math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    log = low > 0 and high > LOG_SCALE_RATIO * low
    scale: Callable[[float], float] = math.log10 if log else float
    span = scale(high) - scale(low)

    def fraction(v: float) -> float:
        return 0.5 if span == 0 else (scale(v) - scale(low)) / span

    ys = [None if v is None or not math.isfinite(v) else _position(fraction(float(v))) for v in column.values]
    distinct = sorted(set(finite))
    if len(distinct) <= 5:  # label the values the runs have (a batch size of 32, not 40.5)
        marks = distinct
    elif log:
        marks = [10 ** (scale(low) + span * k / 4) for k in range(5)]
    else:
        marks = [low + (high - low) * k / 4 for k in range(5)]
    return Axis(column, x, ys, [(_position(fraction(m)), column.text(m)) for m in marks], log)


def _category_axis(column: Column, x: float) -> Axis:
    names = sorted({format_value(v) for v in column.values if v is not None})
    place = {n: (0.5 if len(names) == 1 else i / (len(names) - 1)) for i, n in enumerate(names)}
    ys = [None if v is None else _position(place[format_value(v)]) for v in column.values]
    return Axis(column, x, ys, [(_position(place[n]), n) for n in names])


def _colour(t: float) -> str:
    """The colour at fraction `t` of the scale."""
    t = min(max(t, 0.0), 1.0) * (len(_SCALE) - 1)
    i = min(int(t), len(_SCALE) - 2)
    a, b = _SCALE[i], _SCALE[i + 1]
    rgb = (round(a[k] + (b[k] - a[k]) * (t - i)) for k in range(3))
    return "#" + "".join(f"{c:02x}" for c in rgb)


def axes(cols: Sequence[Column]) -> list[Axis]:
    """The picture's axes: each column meant for one that some run has a
    value for, the target metric moved last."""
    target = target_column(cols)
    chosen = [c for c in cols if c.on_axis and c.present and c is not target]
    if target is not None:
        chosen.append(target)
    return [(_numeric_axis if c.numeric else _category_axis)(c, _MARGIN_X + i * _AXIS_GAP)
            for i, c in enumerate(chosen)]


def run_colours(cols: Sequence[Column]) -> list[str]:
    """Each run's line colour: its place on the target metric's range."""
    target = target_column(cols)
    if target is None or not target.numeric:
        return [_NO_TARGET_COLOUR] * len(cols[0].values)
    finite = [v for v in target.values if v is not None and math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    return [_NO_TARGET_COLOUR if v is None or not math.isfinite(v)
            else _colour(0.5 if high == low else (v - low) / (high - low)) for v in target.values]


def parallel_coordinates_svg(runs: Sequence[Run], cols: Sequence[Column]) -> str:
    """The SVG of the picture (see the module docstring)."""
    drawn = axes(cols)
    colours = run_colours(cols)
    width = _MARGIN_X * 2 + max(len(drawn) - 1, 1) * _AXIS_GAP + 60
    out = [f'<svg id="lineage-picture" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_HEIGHT}" '
           f'viewBox="0 0 {width} {_HEIGHT}" role="img" aria-label="parallel coordinates of the runs">']
    for axis in drawn:
        out.append(f'<g class="axis" data-key="{html.escape(axis.column.key)}">')
        out.append(f'<line x1="{axis.x}" y1="{_TOP}" x2="{axis.x}" y2="{_BOTTOM}" />')
        title = axis.column.title + (" (log)" if axis.log else "")
        out.append(f'<text class="axis-title" x="{axis.x}" y="{_TOP - 22}">{html.escape(title)}</text>')
        for y, label in axis.ticks:
            out.append(f'<line class="tick" x1="{axis.x - 4}" y1="{y:.1f}" x2="{axis.x}" y2="{y:.1f}" />'
                       f'<text class="tick-label" x="{axis.x - 7}" y="{y + 3.5:.1f}">{html.escape(label)}</text>')
        out.append("</g>")
    for i, run in enumerate(runs):
        points = [(a.x, a.ys[i]) for a in drawn]
        d, previous = [], None
        for x, y in points:
            if y is not None:
                d.append(f"{'L' if previous is not None else 'M'}{x:.1f} {y:.1f}")
            previous = y
        out.append(f'<g class="run" data-run="{i}" style="--run-colour: {colours[i]}">'
                   f"<title>{html.escape(run.name)}</title>")
        if d:
            out.append(f'<path class="run-line" d="{" ".join(d)}" />')
        out.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" />' for x, y in points if y is not None)
        out.append("</g>")
    out.append(_legend(cols, width))
    out.append("</svg>")
    return "\n".join(out)


def _legend(cols: Sequence[Column], width: float) -> str:
    target = target_column(cols)
    if target is None or not target.numeric:
        return ""
    finite = [v for v in target.values if v is not None and math.isfinite(v)]
    if not finite:
        return ""
    x = width - 36
    stops = "".join(f'<stop offset="{k / 10:.1f}" stop-color="{_colour(1 - k / 10)}" />' for k in range(11))
    return (f'<g class="legend"><defs><linearGradient id="target-scale" x1="0" y1="0" x2="0" y2="1">{stops}'
            f'</linearGradient></defs><rect x="{x}" y="{_TOP}" width="10" height="{_BOTTOM - _TOP}" '
            f'fill="url(#target-scale)" /><text class="tick-label legend-label" x="{x + 5}" y="{_TOP - 8}">'
            f'{html.escape(format_value(max(finite)))}</text><text class="tick-label legend-label" x="{x + 5}" '
            f'y="{_BOTTOM + 16}">{html.escape(format_value(min(finite)))}</text></g>')


# -- the page ---------------------------------------------------------------------

_CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; }
p.about { color: #666; margin: 0 0 16px; }
figure { margin: 0 0 20px; overflow-x: auto; }
figcaption { color: #666; font-size: 12px; }
svg .axis line { stroke: #555; stroke-width: 1; }
svg .axis-title { font-size: 12px; font-weight: 600; text-anchor: middle; fill: #222; }
svg .tick-label { font-size: 10px; text-anchor: end; fill: #555; paint-order: stroke; stroke: #fff; stroke-width: 3px; }
svg .legend-label { text-anchor: middle; }
svg .run path { fill: none; stroke: var(--run-colour); stroke-width: 2.5; opacity: 0.85; }
svg .run circle { fill: var(--run-colour); }
svg .run.highlight path { stroke-width: 5; opacity: 1; }
svg.has-highlight .run:not(.highlight) { opacity: 0.2; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { cursor: pointer; user-select: none; background: #f3f3f3; position: sticky; top: 0; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
td.swatch { border-left: 6px solid var(--run-colour); }
tr.highlight td { background: #fff6d5; }
"""

_JS = """
(function () {
  "use strict";
  var table = document.getElementById("runs");
  var body = table.tBodies[0];
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var picture = document.getElementById("lineage-picture");

  // a cell's sort key; null (a blank, or NaN) sorts last in either direction
  function key(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell.hasAttribute("data-value")) return null;
    var text = cell.getAttribute("data-value");
    if (!numeric) return text;
    var value = Number(text);
    return isNaN(value) ? null : value;
  }

  function sortBy(index, descending) {
    var numeric = headers[index].getAttribute("data-kind") === "number";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, index, numeric), y = key(b, index, numeric);
      if (x === null || y === null) return (x === null ? 1 : 0) - (y === null ? 1 : 0);
      var order = numeric ? x - y : x.localeCompare(y, undefined, {numeric: true});
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    headers.forEach(function (h, i) {
      h.setAttribute("aria-sort", i === index ? (descending ? "descending" : "ascending") : "none");
    });
    var hash = "#sort=" + headers[index].getAttribute("data-key") + (descending ? ":desc" : "");
    try { history.replaceState(null, "", hash); } catch (e) { /* some file:// views refuse it */ }
  }

  headers.forEach(function (h, i) {
    h.addEventListener("click", function () { sortBy(i, h.getAttribute("aria-sort") === "ascending"); });
  });

  function highlight(run, on) {
    document.querySelectorAll('[data-run="' + run + '"]').forEach(function (el) {
      el.classList.toggle("highlight", on);
    });
    if (picture) picture.classList.toggle("has-highlight", on);
  }
  document.querySelectorAll("[data-run]").forEach(function (el) {
    var run = el.getAttribute("data-run");
    el.addEventListener("mouseenter", function () { highlight(run, true); });
    el.addEventListener("mouseleave", function () { highlight(run, false); });
  });

  var wanted = /^#sort=([^:]+)(:desc)?$/.exec(decodeURIComponent(location.hash));
  if (wanted) {
    for (var i = 0; i < headers.length; i++) {
      if (headers[i].getAttribute("data-key") === wanted[1]) { sortBy(i, !!wanted[2]); break; }
    }
  }
  document.body.setAttribute("data-sorted-by", wanted ? wanted[1] : "");
})();
"""


def _sort_value(value: Any) -> str | None:
    """What a cell sorts by (None: a blank): numbers as JSON writes them, other values as shown."""
    if value is None:
        return None
    if _is_number(value):
        return repr(float(value)) if not (isinstance(value, float) and math.isnan(value)) else "NaN"
    return format_value(value)


def table_html(runs: Sequence[Run], cols: Sequence[Column]) -> str:
    colours = run_colours(cols)
    out = ['<table id="runs">', "<thead><tr>"]
    for c in cols:
        kind = "number" if c.numeric else "text"
        out.append(f'<th data-key="{html.escape(c.key)}" data-kind="{kind}" aria-sort="none">'
                   f"{html.escape(c.title)}</th>")
    out.append("</tr></thead>")
    out.append("<tbody>")
    for i in range(len(runs)):
        cells = []
        for j, c in enumerate(cols):
            value = c.values[i]
            sort = _sort_value(value)
            attrs = "" if sort is None else f' data-value="{html.escape(sort)}"'
            if j == 0:
                attrs += f' class="swatch" style="--run-colour: {colours[i]}"'
            cells.append(f"<td{attrs}>{html.escape(c.text(value)) if value is not None else ''}</td>")
        out.append(f'<tr data-run="{i}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def lineage_html(runs: Sequence[Run], title: str) -> str:
    """The page for `runs` (see the module docstring)."""
    cols = columns(runs)
    target = target_column(cols)
    caption = (f"Each line is a run; each axis a hyper-parameter or result; colour: {target.title}."
               if target is not None else "Each line is a run; each axis a hyper-parameter or result.")
    written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    plural = "run" if len(runs) == 1 else "runs"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="about">{len(runs)} {plural}, written by msir on {written}. '
        "Click a column's header to sort by it; hover a row or a line to find its run.</p>",
        "<figure>",
        parallel_coordinates_svg(runs, cols),
        f"<figcaption>{html.escape(caption)}</figcaption>",
        "</figure>",
        table_html(runs, cols),
        f"<script>{_JS}</script>",
        "</body></html>",
        "",
    ])


def lineage(summary_root: str | os.PathLike[str], path: str | os.PathLike[str] | None = None, *,
            title: str | None = None) -> Path:
    """Write the lineage page of every run under `summary_root` to `path`
    (default: `summary_root/lineage.html`) and return its path."""
    runs = load_runs(summary_root)
    out = Path(path) if path is not None else Path(summary_root) / "lineage.html"
    page = lineage_html(runs, title or f"Model lineage of {Path(summary_root).resolve().name}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
