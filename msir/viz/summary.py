"""A training run's summary: what `SummaryRecord` writes and `load_run` reads.

A run is a directory of JSON-lines files (UTF-8, one JSON object per line,
standard JSON: non-finite numbers are the strings "NaN", "Infinity" and
"-Infinity"). Every file opens with a header line::

    {"format": 1, "file": "scalars", "writer": "msir 0.1.0", "wall_time": 1764630000.5}

* ``scalars.jsonl``: one line per scalar value recorded at a step::

      {"tag": "loss", "step": 120, "epoch": 2, "wall_time": 1764630012.25, "value": 0.4127, "mode": "train"}

  (``epoch`` is null when the writer was given none; ``mode`` is "train" or
  "eval", `SummaryRecord.set_mode`).
* ``lineage.jsonl``: what a run is, as records whose later values of a key
  replace earlier ones::

      {"kind": "hyper_params", "wall_time": ..., "values": {"learning_rate": 0.01, "batch_size": 32,
                                                            "optimizer": "Momentum", "epochs": 10}}
      {"kind": "model_info", "wall_time": ..., "values": {"param_count": 203530, "size_bytes": 814120}}
      {"kind": "end", "wall_time": ...}

  The header's wall time is the run's start; an "end" record is written by
  `SummaryRecord.close` (a run without one ended without closing its writer).
* ``graphs.jsonl`` (only when a graph was recorded): the network's IR text::

      {"name": "train_network", "step": 0, "wall_time": ..., "text": "builtin.module { ... }"}

Writing is append-only and each `record`/`set_*` call ends with a flush, so
a process that dies loses at most the line it was writing; that half-written
last line (it has no newline) is ignored by the reader, and a writer opening
the directory again cuts it off before appending. A reader refuses a file of
a newer format than `FORMAT` with a message naming it.

`SummaryRecord` follows MindSpore 2.x's `mindspore.SummaryRecord`: a context
manager whose `add_value(plugin, name, value)` collects values ("scalar" or
"graph") that `record(step)` writes, with `set_mode`, `flush` and `close`;
`set_hyper_params` and `set_model_info` hold what MindSpore's lineage
collects from the training callback (learning rate, batch size, optimizer,
epochs, any user key; parameter count and model size). `load_run(dir)`
reads one run back as a `Run`; `load_runs(root)` every run under a folder.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msir.errors import MsirError, SourceLoc

FORMAT = 1
"""The version of the layout above that this module writes and the newest it reads."""

SCALARS_FILE = "scalars.jsonl"
LINEAGE_FILE = "lineage.jsonl"
GRAPHS_FILE = "graphs.jsonl"
RUN_FILES = (SCALARS_FILE, LINEAGE_FILE)
"""A directory holding either of these is a run."""

QUANTITY_TAGS = {
    "loss": ("loss", "train_loss"),
    "accuracy": ("accuracy", "acc", "Accuracy", "top_1_accuracy"),
    "learning_rate": ("learning_rate", "lr"),
}
"""The tags under which the quantities that curves and lineage know are
recorded (`Run.tag_of`: the first one a run has)."""

PLUGINS = ("scalar", "graph")
MODES = ("train", "eval")

_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class SummaryError(MsirError, ValueError):
    """A summary that cannot be written or read: a value of the wrong kind, a
    closed writer, a corrupt or too new file, a folder without runs."""


def _caller_loc() -> SourceLoc | None:
    """Where the user called into this module from (the first frame outside it)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return None
    return SourceLoc(frame.f_code.co_filename, frame.f_lineno, 1)


def _encode_number(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _decode_number(value: Any) -> Any:
    return _NON_FINITE.get(value, value) if isinstance(value, str) else value


def _scalar_value(tag: str, value: Any) -> float:
    """`value` as a Python float: a number, a NumPy scalar or a one-element array."""
    import numpy as np

    if isinstance(value, bool):
        return float(value)
    array = np.asarray(value)
    if array.dtype.kind not in "biuf" or array.size != 1:
        what = f"an array of shape {array.shape}" if array.dtype.kind in "biuf" else f"a {type(value).__name__}"
        raise SummaryError(f"scalar '{tag}' must be a number or a one-element array, not {what}", _caller_loc())
    return float(array.reshape(()))


def _plain_value(key: str, value: Any) -> Any:
    """A hyper-parameter or model fact as JSON holds it: numbers, strings, booleans
    and lists of them as they are; a class or function by its name; any other
    object by its class's name (an optimizer instance is recorded as "Momentum",
    as MindSpore's lineage does)."""
    import numpy as np

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _encode_number(value)
    if isinstance(value, (np.generic, np.ndarray)) and np.asarray(value).size == 1:
        return _plain_value(key, np.asarray(value).reshape(()).item())
    if isinstance(value, (list, tuple)):
        return [_plain_value(key, v) for v in value]
    if isinstance(value, np.ndarray):
        return [_plain_value(key, v) for v in value.tolist()]
    if isinstance(value, Mapping):
        raise SummaryError(f"hyper-parameter '{key}' is a mapping; give its entries as keys of their own",
                           _caller_loc())
    if isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        return value.__qualname__
    return type(value).__name__


def _header(kind: str) -> dict[str, Any]:
    from msir import __version__

    return {"format": FORMAT, "file": kind, "writer": f"msir {__version__}", "wall_time": time.time()}


class _JsonLinesAppender:
    """An append-only JSON-lines file whose first line is its header."""

    def __init__(self, path: Path, kind: str):
        self.path = path
        self._cut_half_written_line()
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        if self.file.tell() == 0:
            self.write(_header(kind))

    def _cut_half_written_line(self) -> None:
        """A writer that died mid-line left bytes after the last newline: drop
        them, so that the next line does not run into them."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)

    def write(self, record: Mapping[str, Any]) -> None:
        self.file.write(json.dumps(record, allow_nan=False, separators=(", ", ": ")) + "\n")

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class SummaryRecord:
    """Writes a run's summary into `log_dir` (created if missing), in the
    layout of this module's docstring. One writer per directory at a time; a
    new writer on an existing run appends to it.

        with SummaryRecord("runs/lr0.01") as summary:
            summary.set_hyper_params({"learning_rate": 0.01, "batch_size": 32, "optimizer": "Momentum"})
            summary.set_model_info(parameters=[w1, b1, w2, b2])
            for step in range(steps):
                ...
                summary.add_value("scalar", "loss", loss)
                summary.record(step, epoch=epoch)

    Values given to `add_value` wait for the next `record(step)`; `close`
    does not write values that no `record` took (MindSpore's semantics).
    """

    def __init__(self, log_dir: str | os.PathLike[str]):
        self.log_dir = Path(log_dir)
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._scalars = _JsonLinesAppender(self.log_dir / SCALARS_FILE, "scalars")
            self._lineage = _JsonLinesAppender(self.log_dir / LINEAGE_FILE, "lineage")
        except OSError as e:
            raise SummaryError(f"cannot write a summary to '{log_dir}': {e.strerror or e}", _caller_loc()) from e
        self._graphs: _JsonLinesAppender | None = None
        self._pending_scalars: dict[str, float] = {}
        self._pending_graphs: dict[str, str] = {}
        self._mode = "train"
        self._closed = False

    # -- MindSpore's interface ------------------------------------------------

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        """Keep `value` under `name` for the next `record`: `plugin` "scalar"
        takes a number or a one-element array (loss, learning rate, a metric),
        "graph" the network's IR (text, or an xDSL module)."""
        self._check_open()
        if not isinstance(name, str) or not name:
            raise SummaryError(f"a summary value's name must be a non-empty string, not {name!r}", _caller_loc())
        if plugin == "scalar":
            self._pending_scalars[name] = _scalar_value(name, value)
        elif plugin == "graph":
            self._pending_graphs[name] = value if isinstance(value, str) else str(value)
        else:
            raise SummaryError(f"unknown summary plugin '{plugin}': the plugins are {', '.join(PLUGINS)}",
                               _caller_loc())

    def record(self, step: int, epoch: int | None = None) -> bool:
        """Write the values `add_value` collected since the last call, at `step`
        (and `epoch`, if given), and flush. Returns True, as MindSpore's does."""
        self._check_open()
        step = self._check_count("step", step)
        epoch = None if epoch is None else self._check_count("epoch", epoch)
        now = time.time()
        for tag, value in self._pending_scalars.items():
            self._scalars.write({"tag": tag, "step": step, "epoch": epoch, "wall_time": now,
                                 "value": _encode_number(value), "mode": self._mode})
        for name, text in self._pending_graphs.items():
            if self._graphs is None:
                self._graphs = _JsonLinesAppender(self.log_dir / GRAPHS_FILE, "graphs")
            self._graphs.write({"name": name, "step": step, "wall_time": now, "text": text})
        self._pending_scalars.clear()
        self._pending_graphs.clear()
        self.flush()
        return True

    def set_mode(self, mode: str) -> None:
        """Mark the scalars recorded from now on as "train" or "eval" values."""
        if mode not in MODES:
            raise SummaryError(f"unknown summary mode '{mode}': the modes are {', '.join(MODES)}", _caller_loc())
        self._mode = mode

    def flush(self) -> None:
        """Hand every written line to the operating system."""
        for appender in (self._scalars, self._lineage, self._graphs):
            if appender is not None:
                appender.flush()

    def close(self) -> None:
        """Write the run's end and close its files (a second call does nothing)."""
        if self._closed:
            return
        self._lineage.write({"kind": "end", "wall_time": time.time()})
        for appender in (self._scalars, self._lineage, self._graphs):
            if appender is not None:
                appender.close()
        self._closed = True

    def __enter__(self) -> SummaryRecord:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- lineage ------------------------------------------------------------

    def set_hyper_params(self, params: Mapping[str, Any]) -> None:
        """Record hyper-parameters (learning_rate, batch_size, optimizer, epochs,
        or any key of the user's); a key given again replaces its value."""
        self._check_open()
        if not isinstance(params, Mapping):
            raise SummaryError(f"hyper-parameters must be a mapping of names to values, not a "
                               f"{type(params).__name__}", _caller_loc())
        self._write_lineage("hyper_params", params)

    def set_model_info(self, parameters: Iterable[Any] | None = None, *, param_count: int | None = None,
                       size_bytes: int | None = None, **facts: Any) -> None:
        """Record what the model is: its parameter count and size in bytes,
        counted from `parameters` (the arrays of its weights) or given, and
        any other fact by keyword (`network="LeNet5"`)."""
        import numpy as np

        self._check_open()
        values: dict[str, Any] = {}
        if parameters is not None:
            arrays = [np.asarray(p) for p in parameters]
            values["param_count"] = sum(int(a.size) for a in arrays)
            values["size_bytes"] = sum(int(a.nbytes) for a in arrays)
        for key, given in (("param_count", param_count), ("size_bytes", size_bytes)):
            if given is not None:
                values[key] = self._check_count(key, given)
        values.update(facts)
        self._write_lineage("model_info", values)

    # -- helpers ------------------------------------------------------------

    def _write_lineage(self, kind: str, values: Mapping[str, Any]) -> None:
        plain = {}
        for key, value in values.items():
            if not isinstance(key, str) or not key:
                raise SummaryError(f"a {kind.replace('_', '-')} key must be a non-empty string, not {key!r}",
                                   _caller_loc())
            plain[key] = _plain_value(key, value)
        self._lineage.write({"kind": kind, "wall_time": time.time(), "values": plain})
        self._lineage.flush()

    def _check_open(self) -> None:
        if self._closed:
            raise SummaryError(f"the SummaryRecord of '{self.log_dir}' is closed", _caller_loc())

    @staticmethod
    def _check_count(what: str, value: Any) -> int:
        import numpy as np

        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise SummaryError(f"{what} must be a non-negative integer, not {value!r}", _caller_loc())
        return int(value)


# -- reading ------------------------------------------------------------------


@dataclass(frozen=True)
class Scalar:
    """One recorded scalar value."""

    tag: str
    step: int
    epoch: int | None
    wall_time: float
    value: float
    mode: str


@dataclass
class Run:
    """A run read back from its directory (see the module docstring)."""

    path: Path
    name: str
    scalars: list[Scalar] = field(default_factory=list)
    hyper_params: dict[str, Any] = field(default_factory=dict)
    model_info: dict[str, Any] = field(default_factory=dict)
    graphs: dict[str, str] = field(default_factory=dict)
    start_time: float | None = None
    end_time: float | None = None
    ignored_lines: int = 0
    """Half-written last lines skipped (a writer that did not finish its line)."""

    @property
    def tags(self) -> list[str]:
        return sorted({s.tag for s in self.scalars})

    @property
    def complete(self) -> bool:
        """Did the writer close the run?"""
        return self.end_time is not None

    def series(self, tag: str, mode: str | None = None) -> tuple[list[int], list[float]]:
        """The steps and values of `tag` (of one mode, or all), in recording order."""
        points = [s for s in self.scalars if s.tag == tag and (mode is None or s.mode == mode)]
        return [s.step for s in points], [s.value for s in points]

    def tag_of(self, quantity: str) -> str | None:
        """The tag under which this run recorded `quantity` (`QUANTITY_TAGS`;
        another quantity is its own tag), None if it did not."""
        recorded = {s.tag for s in self.scalars}
        return next((t for t in QUANTITY_TAGS.get(quantity, (quantity,)) if t in recorded), None)

    def final(self, tag: str) -> float | None:
        """The last value recorded for `tag`, None when it never was."""
        for s in reversed(self.scalars):
            if s.tag == tag:
                return s.value
        return None

    @property
    def duration(self) -> float | None:
        """Seconds from the start to the end (or to the last value of a run that did not close)."""
        last = self.end_time
        if last is None and self.scalars:
            last = max(s.wall_time for s in self.scalars)
        if self.start_time is None or last is None:
            return None
        return last - self.start_time


def _read_json_lines(path: Path) -> tuple[dict[str, Any] | None, list[tuple[int, dict[str, Any]]], int]:
    """A file's header, its records with their line numbers, and how many
    half-written last lines were skipped (0 or 1)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SummaryError(f"cannot read '{path}': {e.strerror or e}") from e
    lines = data.split(b"\n")
    ignored = 0
    if lines[-1]:
        ignored = 1  # no newline after it: a writer stopped in the middle of this line
    lines = lines[:-1]
    records: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(lines, start=1):
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise SummaryError("a summary line that is not UTF-8", SourceLoc(str(path), number, e.start + 1)) from e
        except json.JSONDecodeError as e:
            raise SummaryError(f"a summary line that is not JSON ({e.msg})",
                               SourceLoc(str(path), number, e.colno)) from e
        if not isinstance(record, dict):
            raise SummaryError("a summary line must be a JSON object", SourceLoc(str(path), number, 1))
        records.append((number, record))
    if not records:
        return None, [], ignored
    number, header = records[0]
    version = header.get("format")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SummaryError(f"'{path.name}' does not start with a summary header (\"format\": {FORMAT})",
                           SourceLoc(str(path), number, 1))
    if version > FORMAT:
        raise SummaryError(f"'{path.name}' has summary format {version}, newer than this msir reads "
                           f"(format {FORMAT}): upgrade msir", SourceLoc(str(path), number, 1))
    _field(path, number, header, "wall_time", (int, float))
    return header, records[1:], ignored


def _field(path: Path, number: int, record: Mapping[str, Any], key: str, kinds: tuple[type, ...]) -> Any:
    value = record.get(key)
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise SummaryError(f"a summary record without a valid '{key}'", SourceLoc(str(path), number, 1))
    return value


def _number_field(path: Path, number: int, record: Mapping[str, Any], key: str) -> float:
    """A number, or one of the strings the format writes for non-finite numbers."""
    value = _decode_number(_field(path, number, record, key, (int, float, str)))
    if isinstance(value, str):
        raise SummaryError(f"a summary record whose '{key}' is not a number", SourceLoc(str(path), number, 1))
    return float(value)


def _plain_values(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: [_decode_number(x) for x in v] if isinstance(v, list) else _decode_number(v)
            for k, v in values.items()}


def is_run(path: str | os.PathLike[str]) -> bool:
    """Does `path` hold a run (a scalars or lineage file)?"""
    return any((Path(path) / name).is_file() for name in RUN_FILES)


def load_run(path: str | os.PathLike[str], name: str | None = None) -> Run:
    """Read the run in directory `path` (its name: `name`, else the directory's)."""
    path = Path(path)
    if not path.is_dir():
        raise SummaryError(f"no such summary directory: '{path}'")
    if not is_run(path):
        raise SummaryError(f"'{path}' holds no msir summary ({' or '.join(RUN_FILES)}, "
                           f"written by msir.viz.SummaryRecord)")
    run = Run(path=path, name=name if name is not None else path.resolve().name)
    scalars_path = path / SCALARS_FILE
    if scalars_path.is_file():
        header, records, ignored = _read_json_lines(scalars_path)
        run.ignored_lines += ignored
        for number, r in records:
            epoch = r.get("epoch")
            run.scalars.append(Scalar(
                tag=_field(scalars_path, number, r, "tag", (str,)),
                step=_field(scalars_path, number, r, "step", (int,)),
                epoch=epoch if isinstance(epoch, int) else None,
                wall_time=float(_field(scalars_path, number, r, "wall_time", (int, float))),
                value=_number_field(scalars_path, number, r, "value"),
                mode=_field(scalars_path, number, r, "mode", (str,)),
            ))
        if header is not None:
            run.start_time = float(header["wall_time"])
    lineage_path = path / LINEAGE_FILE
    if lineage_path.is_file():
        header, records, ignored = _read_json_lines(lineage_path)
        run.ignored_lines += ignored
        if header is not None:
            start = float(header["wall_time"])
            run.start_time = start if run.start_time is None else min(run.start_time, start)
        for number, r in records:
            kind = _field(lineage_path, number, r, "kind", (str,))
            if kind == "hyper_params":
                run.hyper_params.update(_plain_values(_field(lineage_path, number, r, "values", (dict,))))
            elif kind == "model_info":
                run.model_info.update(_plain_values(_field(lineage_path, number, r, "values", (dict,))))
            elif kind == "end":
                run.end_time = float(_field(lineage_path, number, r, "wall_time", (int, float)))
            # other kinds are left for newer writers of format 1 to add
    graphs_path = path / GRAPHS_FILE
    if graphs_path.is_file():
        _, records, ignored = _read_json_lines(graphs_path)
        run.ignored_lines += ignored
        for number, r in records:
            run.graphs[_field(graphs_path, number, r, "name", (str,))] = _field(graphs_path, number, r, "text", (str,))
    return run


def load_runs(root: str | os.PathLike[str]) -> list[Run]:
    """Every run under `root` (`root` itself, if it is one), named by its path
    relative to `root`, in name order. No run at all is an error."""
    root = Path(root)
    if not root.is_dir():
        raise SummaryError(f"no such summary directory: '{root}'")
    found = []
    for folder, dirs, _ in os.walk(root):
        dirs.sort()
        if is_run(folder):
            relative = Path(folder).relative_to(root).as_posix()
            found.append(load_run(folder, name=root.resolve().name if relative == "." else relative))
    if not found:
        raise SummaryError(f"no msir summary runs under '{root}' (a run is a directory holding "
                           f"{' or '.join(RUN_FILES)}, written by msir.viz.SummaryRecord)")
    return sorted(found, key=lambda r: r.name)
