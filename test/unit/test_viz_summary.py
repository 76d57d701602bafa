"""`msir.viz.SummaryRecord` and `load_run`: the summary files' schema
(docs/summary-format.md) line by line, values read back as written, and what
an interrupted or damaged run reads as."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import msir
from msir.viz import SummaryError, SummaryRecord, load_run, load_runs
from msir.viz.summary import FORMAT


def json_lines(path: Path) -> list[dict]:
    """Every line of `path` as standard JSON (a bare NaN or Infinity fails)."""
    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant} in {path}")

    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


class Momentum:
    """Stands for an optimizer object, recorded by its class name."""


def write_run(log_dir: Path) -> None:
    w = np.zeros((784, 10), np.float32)
    b = np.zeros(10, np.float64)
    with SummaryRecord(log_dir) as summary:
        summary.set_hyper_params({"learning_rate": 0.01, "batch_size": np.int64(32), "optimizer": Momentum(),
                                  "epochs": 2, "layers": (784, 10), "seed": None})
        summary.set_model_info(parameters=[w, b], network="Linear")
        summary.add_value("graph", "train_network", "builtin.module {\n}")
        for step in range(4):
            summary.add_value("scalar", "loss", np.float32(1.0 / (step + 1)))
            summary.add_value("scalar", "learning_rate", np.array([0.01 * 0.5 ** step]))
            summary.record(step, epoch=step // 2 + 1)
        summary.set_mode("eval")
        summary.add_value("scalar", "accuracy", 0.75)
        summary.record(3, epoch=2)
        summary.set_hyper_params({"learning_rate": 0.02})


def test_each_file_is_json_lines_with_a_versioned_header(tmp_path):
    write_run(tmp_path / "run")
    for name, kind in (("scalars.jsonl", "scalars"), ("lineage.jsonl", "lineage"), ("graphs.jsonl", "graphs")):
        header = json_lines(tmp_path / "run" / name)[0]
        assert header["format"] == FORMAT == 1
        assert header["file"] == kind
        assert header["writer"] == f"msir {msir.__version__}"
        assert isinstance(header["wall_time"], float)

    scalars = json_lines(tmp_path / "run" / "scalars.jsonl")[1:]
    assert [(s["tag"], s["step"], s["epoch"], s["mode"]) for s in scalars] == [
        ("loss", 0, 1, "train"), ("learning_rate", 0, 1, "train"), ("loss", 1, 1, "train"),
        ("learning_rate", 1, 1, "train"), ("loss", 2, 2, "train"), ("learning_rate", 2, 2, "train"),
        ("loss", 3, 2, "train"), ("learning_rate", 3, 2, "train"), ("accuracy", 3, 2, "eval")]
    assert all(set(s) == {"tag", "step", "epoch", "wall_time", "value", "mode"} for s in scalars)
    times = [s["wall_time"] for s in scalars]
    assert times == sorted(times)
    assert scalars[2]["value"] == pytest.approx(0.5)

    lineage = json_lines(tmp_path / "run" / "lineage.jsonl")[1:]
    assert [r["kind"] for r in lineage] == ["hyper_params", "model_info", "hyper_params", "end"]
    assert lineage[0]["values"] == {"learning_rate": 0.01, "batch_size": 32, "optimizer": "Momentum",
                                    "epochs": 2, "layers": [784, 10], "seed": None}
    assert lineage[1]["values"] == {"param_count": 7850, "size_bytes": 784 * 10 * 4 + 10 * 8, "network": "Linear"}

    graphs = json_lines(tmp_path / "run" / "graphs.jsonl")[1:]
    assert [(g["name"], g["step"], g["text"]) for g in graphs] == [("train_network", 0, "builtin.module {\n}")]


def test_a_run_reads_back_as_written(tmp_path):
    write_run(tmp_path / "run")
    run = load_run(tmp_path / "run")
    assert run.name == "run" and run.complete and run.ignored_lines == 0
    assert run.tags == ["accuracy", "learning_rate", "loss"]
    steps, values = run.series("loss")
    assert steps == [0, 1, 2, 3]
    np.testing.assert_allclose(values, [1.0, 0.5, 1 / 3, 0.25], rtol=1e-7)  # float32 values, exactly widened
    assert run.series("learning_rate")[1] == [0.01, 0.005, 0.0025, 0.00125]
    assert run.series("accuracy", mode="train") == ([], [])
    assert run.series("accuracy", mode="eval") == ([3], [0.75])
    assert run.final("loss") == pytest.approx(0.25) and run.final("missing") is None
    assert run.hyper_params["learning_rate"] == 0.02  # the later record replaces the key
    assert run.hyper_params["optimizer"] == "Momentum" and run.hyper_params["layers"] == [784, 10]
    assert run.model_info == {"param_count": 7850, "size_bytes": 31440, "network": "Linear"}
    assert run.graphs == {"train_network": "builtin.module {\n}"}
    assert 0 <= run.duration < 60 and run.start_time <= run.scalars[0].wall_time <= run.end_time


def test_non_finite_values_are_standard_json_and_read_back(tmp_path):
    with SummaryRecord(tmp_path) as summary:
        for step, value in enumerate([math.nan, math.inf, -math.inf, 1.5]):
            summary.add_value("scalar", "loss", value)
            summary.record(step)
    values = [r["value"] for r in json_lines(tmp_path / "scalars.jsonl")[1:]]
    assert values == ["NaN", "Infinity", "-Infinity", 1.5]
    read = load_run(tmp_path).series("loss")[1]
    assert math.isnan(read[0]) and read[1:] == [math.inf, -math.inf, 1.5]


def test_a_half_written_last_line_is_ignored_then_cut_off_by_the_next_writer(tmp_path):
    write_run(tmp_path)
    scalars = tmp_path / "scalars.jsonl"
    with open(scalars, "a") as f:
        f.write('{"tag": "loss", "step": 4, "epo')  # the process died here
    run = load_run(tmp_path)
    assert run.ignored_lines == 1 and run.series("loss")[0] == [0, 1, 2, 3]

    with SummaryRecord(tmp_path) as summary:  # a resumed run appends
        summary.add_value("scalar", "loss", 0.125)
        summary.record(4)
    lines = json_lines(scalars)
    assert sum(1 for line in lines if "format" in line) == 1  # one header: the file was not started again
    run = load_run(tmp_path)
    assert run.ignored_lines == 0 and run.series("loss") == ([0, 1, 2, 3, 4], [1.0, 0.5, pytest.approx(1 / 3),
                                                                               0.25, 0.125])


def test_a_run_cut_at_any_byte_reads_as_the_lines_before_the_cut(tmp_path):
    write_run(tmp_path / "whole")
    data = (tmp_path / "whole" / "scalars.jsonl").read_bytes()
    steps, values = load_run(tmp_path / "whole").series("loss")
    cut = tmp_path / "cut"
    cut.mkdir()
    for size in range(len(data) + 1):
        (cut / "scalars.jsonl").write_bytes(data[:size])
        run = load_run(cut)
        complete_lines = data[:size].count(b"\n")
        assert run.ignored_lines == (0 if size == 0 or data[size - 1:size] == b"\n" else 1)
        assert len(run.scalars) == max(complete_lines - 1, 0)  # the header is not a value
        n = len(run.series("loss")[0])
        assert run.series("loss") == (steps[:n], values[:n])


def test_a_killed_writer_loses_nothing_it_recorded(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from msir.viz import SummaryRecord
        summary = SummaryRecord({str(tmp_path)!r})
        summary.set_hyper_params({{"learning_rate": 0.1}})
        for step in range(5):
            summary.add_value("scalar", "loss", 1.0 + step)
            summary.record(step)
        summary.add_value("scalar", "loss", 99.0)  # never recorded
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    run = load_run(tmp_path)
    assert run.series("loss") == ([0, 1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0, 5.0])
    assert run.hyper_params == {"learning_rate": 0.1}
    assert not run.complete and run.duration is not None and run.duration >= 0


def test_a_damaged_line_is_an_error_at_its_file_line_and_column(tmp_path):
    write_run(tmp_path)
    scalars = tmp_path / "scalars.jsonl"
    lines = scalars.read_text().splitlines(keepends=True)
    lines[2] = '{"tag": "loss", "step": 1,, "value": 2}\n'
    scalars.write_text("".join(lines))
    with pytest.raises(SummaryError) as e:
        load_run(tmp_path)
    assert (e.value.loc.file, e.value.loc.line, e.value.loc.col) == (str(scalars), 3, 27)  # the second comma
    assert e.value.message.startswith("a summary line that is not JSON (Expecting property name")
    assert str(e.value).startswith(f"{scalars}:3:27: error: a summary line that is not JSON")

    for line, message in (('{"tag": "loss", "value": 2}', "a summary record without a valid 'step'"),
                          ('{"tag": "loss", "step": 1, "wall_time": 0, "value": "low", "mode": "train"}',
                           "a summary record whose 'value' is not a number"),
                          ('[1, 2]', "a summary line must be a JSON object")):
        lines[2] = line + "\n"
        scalars.write_text("".join(lines))
        with pytest.raises(SummaryError) as e:
            load_run(tmp_path)
        assert e.value.message == message and (e.value.loc.file, e.value.loc.line) == (str(scalars), 3)


def test_a_newer_format_is_refused_by_name(tmp_path):
    (tmp_path / "scalars.jsonl").write_text('{"format": 2, "file": "scalars", "wall_time": 0}\n')
    with pytest.raises(SummaryError, match=r"'scalars.jsonl' has summary format 2, newer than this msir reads "
                                           r"\(format 1\): upgrade msir"):
        load_run(tmp_path)
    (tmp_path / "scalars.jsonl").write_text('{"tag": "loss"}\n')
    with pytest.raises(SummaryError, match="does not start with a summary header"):
        load_run(tmp_path)
    (tmp_path / "scalars.jsonl").write_text('{"format": 1, "file": "scalars"}\n')
    with pytest.raises(SummaryError, match="a summary record without a valid 'wall_time'"):
        load_run(tmp_path)


def test_wrong_values_are_errors_at_the_callers_line(tmp_path):
    summary = SummaryRecord(tmp_path)
    cases = [
        (lambda: summary.add_value("scaler", "loss", 1.0),
         "unknown summary plugin 'scaler': the plugins are scalar, graph"),
        (lambda: summary.add_value("scalar", "loss", np.ones(3)),
         "scalar 'loss' must be a number or a one-element array, not an array of shape (3,)"),
        (lambda: summary.add_value("scalar", "loss", "low"),
         "scalar 'loss' must be a number or a one-element array, not a str"),
        (lambda: summary.add_value("scalar", "", 1.0), "a summary value's name must be a non-empty string, not ''"),
        (lambda: summary.record(-1), "step must be a non-negative integer, not -1"),
        (lambda: summary.record(1.5), "step must be a non-negative integer, not 1.5"),
        (lambda: summary.record(0, epoch="one"), "epoch must be a non-negative integer, not 'one'"),
        (lambda: summary.set_mode("test"), "unknown summary mode 'test': the modes are train, eval"),
        (lambda: summary.set_hyper_params([("lr", 0.1)]),
         "hyper-parameters must be a mapping of names to values, not a list"),
        (lambda: summary.set_hyper_params({"optimizer": {"lr": 0.1}}),
         "hyper-parameter 'optimizer' is a mapping; give its entries as keys of their own"),
        (lambda: summary.set_model_info(size_bytes=-4), "size_bytes must be a non-negative integer, not -4"),
    ]
    for call, message in cases:
        with pytest.raises(SummaryError) as e:
            call()
        assert e.value.message == message
        assert e.value.loc.file == __file__  # the line of the test that called, not one inside msir
    summary.close()
    summary.close()
    with pytest.raises(SummaryError, match=r"the SummaryRecord of '.*' is closed"):
        summary.record(0)


def test_an_unwritable_directory_is_a_summary_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SummaryError, match="cannot write a summary to '.*file/run'"):
        SummaryRecord(tmp_path / "file" / "run")


def test_load_runs_finds_every_run_under_a_folder(tmp_path):
    for name in ("b", "a/x", "a/y"):
        with SummaryRecord(tmp_path / name) as summary:
            summary.set_hyper_params({"name": name})
    (tmp_path / "notes").mkdir()
    runs = load_runs(tmp_path)
    assert [r.name for r in runs] == ["a/x", "a/y", "b"]
    assert [r.hyper_params["name"] for r in runs] == ["a/x", "a/y", "b"]
    assert [r.name for r in load_runs(tmp_path / "b")] == ["b"]  # a run is its own folder of runs

    with pytest.raises(SummaryError, match=r"no msir summary runs under '.*notes' \(a run is a directory holding "
                                           r"scalars.jsonl or lineage.jsonl"):
        load_runs(tmp_path / "notes")
    with pytest.raises(SummaryError, match="no such summary directory: '.*missing'"):
        load_runs(tmp_path / "missing")
    with pytest.raises(SummaryError, match="holds no msir summary"):
        load_run(tmp_path / "notes")


def test_summary_record_is_msir_api_and_import_stays_light():
    code = ("import sys, msir; from msir.viz import SummaryRecord; assert msir.SummaryRecord is SummaryRecord; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('xdsl', 'llvmlite', 'matplotlib')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
