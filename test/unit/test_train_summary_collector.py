"""`msir.train.SummaryCollector` (issue 15, step 2): what a training run and an
evaluation write to the summary directory, line by line against the schema of
docs/summary-format.md, and the values against what the run computed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import msir as ms
from msir import nn
from msir.errors import UnsupportedSyntaxError
from msir.train import Callback, Model, SummaryCollector
from msir.viz import load_run

RATES = [0.1, 0.05, 0.02, 0.01, 0.005, 0.002]


@pytest.fixture(autouse=True)
def pynative():
    # eager steps keep the test fast; the graph is traced in either mode
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


class LossRecorder(Callback):
    def __init__(self):
        self.losses = {}

    def step_end(self, run_context):
        p = run_context.original_args()
        self.losses[p.cur_step_num] = float(p.net_outputs.asnumpy())


def _data(batches=3, batch_size=8, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch_size, 4)).astype(np.float32), rng.integers(0, 3, batch_size).astype(np.int32))
            for _ in range(batches)]


def _model(learning_rate=RATES):
    ms.set_seed(7)
    net = nn.SequentialCell(nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3))
    return Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), learning_rate, 0.9),
                 metrics={"accuracy": nn.Accuracy(), "loss": nn.Loss()})


SCHEMA = {
    "header": {"format": int, "file": str, "writer": str, "wall_time": float},
    "scalars": {"tag": str, "step": int, "epoch": int, "wall_time": float, "value": float, "mode": str},
    "graphs": {"name": str, "step": int, "wall_time": float, "text": str},
}
LINEAGE_SCHEMA = {
    "hyper_params": {"learning_rate": float, "batch_size": int, "optimizer": str, "epochs": int,
                     "loss_function": str},
    "model_info": {"param_count": int, "size_bytes": int, "network": str, "train_dataset_size": int},
}


def _check(record: dict, schema: dict, where: str) -> None:
    assert set(record) == set(schema), f"{where}: keys {sorted(record)}"
    for key, kind in schema.items():
        ok = isinstance(record[key], kind) and not isinstance(record[key], bool)
        if kind is float:
            ok = isinstance(record[key], (int, float)) or record[key] in ("NaN", "Infinity", "-Infinity")
        assert ok, f"{where}: '{key}' is {record[key]!r}, not a {kind.__name__}"


def _lines(path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    summary_dir = tmp_path_factory.mktemp("summary") / "run"
    model = _model()
    recorder = LossRecorder()
    collector = SummaryCollector(str(summary_dir), collect_freq=2, custom_lineage_data={"dropout": 0.0, "seed": 7})
    model.train(2, _data(), callbacks=[collector, recorder])
    metrics = model.eval(_data(seed=1), callbacks=[collector])
    ms.set_context(mode=ms.GRAPH_MODE)
    return summary_dir, recorder.losses, metrics, model


def test_every_line_follows_the_schema(run):
    summary_dir, _, _, _ = run
    assert sorted(p.name for p in summary_dir.iterdir()) == ["graphs.jsonl", "lineage.jsonl", "scalars.jsonl"]
    for name in ("scalars", "graphs", "lineage"):
        header, *records = _lines(summary_dir / f"{name}.jsonl")
        _check(header, SCHEMA["header"], f"{name} header")
        assert header["format"] == 1 and header["file"] == name and header["writer"].startswith("msir ")
        for i, record in enumerate(records, start=2):
            if name == "lineage":
                assert record["kind"] in ("hyper_params", "model_info", "end"), record
                if record["kind"] == "end":
                    _check(record, {"kind": str, "wall_time": float}, f"lineage line {i}")
                    continue
                _check(record, {"kind": str, "wall_time": float, "values": dict}, f"lineage line {i}")
                schema = dict(LINEAGE_SCHEMA[record["kind"]])
                if record["kind"] == "hyper_params":
                    schema.update(dropout=float, seed=int)
                _check(record["values"], schema, f"lineage line {i} values")
            else:
                _check(record, SCHEMA[name], f"{name} line {i}")
                assert record["wall_time"] >= header["wall_time"] - 1e-3


def test_the_scalars_are_the_runs_values(run):
    summary_dir, losses, metrics, _ = run
    records = _lines(summary_dir / "scalars.jsonl")[1:]

    def series(tag, mode="train"):
        return [(r["step"], r["epoch"], r["value"]) for r in records if r["tag"] == tag and r["mode"] == mode]

    # the first step, then every second one (collect_freq=2) of 3 batches x 2 epochs
    assert series("loss") == [(s, (s - 1) // 3 + 1, losses[s]) for s in (1, 2, 4, 6)]
    # the rate each step used, from the per-step list
    assert series("learning_rate") == [(s, (s - 1) // 3 + 1, RATES[s - 1]) for s in (1, 2, 4, 6)]
    epoch_loss = series("epoch_loss")
    assert [(s, e) for s, e, _ in epoch_loss] == [(3, 1), (6, 2)]
    for (_, epoch, value), steps in zip(epoch_loss, ((1, 2, 3), (4, 5, 6)), strict=True):
        assert value == pytest.approx(np.mean([losses[s] for s in steps]), rel=1e-12)
    # the evaluation's metrics, at the last training step
    assert series("accuracy", "eval") == [(6, 2, metrics["accuracy"])]
    assert series("loss", "eval") == [(6, 2, pytest.approx(metrics["loss"], rel=1e-12))]
    assert {r["tag"] for r in records} == {"loss", "learning_rate", "epoch_loss", "accuracy"}


def test_the_lineage_and_the_graph(run):
    summary_dir, _, metrics, model = run
    loaded = load_run(summary_dir)
    assert loaded.complete and loaded.ignored_lines == 0
    assert loaded.hyper_params == {"learning_rate": 0.1, "batch_size": 8, "optimizer": "Momentum", "epochs": 2,
                                   "loss_function": "CrossEntropyLoss", "dropout": 0.0, "seed": 7}
    params = list(model.predict_network.get_parameters())
    assert loaded.model_info == {
        "param_count": 4 * 8 + 8 + 8 * 3 + 3, "size_bytes": 4 * (4 * 8 + 8 + 8 * 3 + 3),
        "network": "SequentialCell", "train_dataset_size": 24}
    assert loaded.model_info["param_count"] == sum(p.asnumpy().size for p in params)
    assert loaded.final(loaded.tag_of("accuracy")) == metrics["accuracy"]
    assert loaded.duration is not None and loaded.duration > 0
    # the whole training step's IR, which msir reads back
    from xdsl.parser import Parser

    from msir.compiler import make_context

    text = loaded.graphs["train_network"]
    module = Parser(make_context(), text).parse_module()
    names = {op.name for op in module.walk()}
    assert {"func.func", "msir.matmul", "msir.value_and_grad"} <= names, sorted(names)


def test_collect_specified_data_chooses_what_is_written(tmp_path):
    model = _model(0.05)
    no_graph = SummaryCollector(str(tmp_path / "no_graph"), collect_specified_data={"collect_graph": False})
    model.train(1, _data(), callbacks=[no_graph])
    assert not (tmp_path / "no_graph" / "graphs.jsonl").exists()
    assert load_run(tmp_path / "no_graph").hyper_params["learning_rate"] == 0.05
    only_metric = SummaryCollector(str(tmp_path / "only_metric"), collect_freq=1,
                                   collect_specified_data={"collect_metric": True}, keep_default_action=False)
    model.train(1, _data(), callbacks=[only_metric])
    loaded = load_run(tmp_path / "only_metric")
    assert loaded.hyper_params == {} and loaded.model_info == {} and loaded.graphs == {}
    assert loaded.series("loss")[0] == [1, 2, 3] and loaded.series("learning_rate")[1] == [0.05] * 3


def test_arguments_are_checked_as_mindspore_checks_them(tmp_path):
    where = str(tmp_path / "s")
    with pytest.raises(ValueError, match="the value of `collect_freq` should be greater than 0, but got `0`"):
        SummaryCollector(where, collect_freq=0)
    with pytest.raises(ValueError, match=r"the keys \['collect_images'\] of `collect_specified_data` are unsupported"):
        SummaryCollector(where, collect_specified_data={"collect_images": True})
    with pytest.raises(TypeError, match="the type of 'collect_graph' should be bool"):
        SummaryCollector(where, collect_specified_data={"collect_graph": 1})
    with pytest.raises(TypeError, match="the value of custom_lineage_data -> layers should be int, str or float"):
        SummaryCollector(where, custom_lineage_data={"layers": [8, 3]})
    with pytest.raises(UnsupportedSyntaxError, match=r"collect_specified_data\['histogram_regular'\] asks for "
                       "parameter histograms"):
        SummaryCollector(where, collect_specified_data={"histogram_regular": "^fc"})
    with pytest.raises(UnsupportedSyntaxError, match="max_file_size asks for summary file rotation"):
        SummaryCollector(where, max_file_size=1 << 20)
    model = _model(0.05)
    with pytest.raises(ValueError, match="more than one SummaryCollector instance in callback list"):
        model.train(1, _data(), callbacks=[SummaryCollector(where), SummaryCollector(where)])


def test_a_nan_metric_is_recorded_and_a_non_number_warned(tmp_path):
    class Constant(nn.Metric):
        def __init__(self, value):
            super().__init__()
            self.value = value

        def clear(self):
            pass

        def update(self, *inputs):
            pass

        def eval(self):
            return self.value

    ms.set_seed(7)
    net = nn.SequentialCell(nn.Dense(4, 3))
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1),
                  metrics={"nan": Constant(math.nan), "pair": Constant([1, 2])})
    collector = SummaryCollector(str(tmp_path / "m"))
    model.train(1, _data(), callbacks=[collector])
    with pytest.warns(UserWarning, match=r"metric 'pair' is not a number \(\[1, 2\]\), so it is not recorded"):
        model.eval(_data(), callbacks=[collector])
    loaded = load_run(tmp_path / "m")
    assert math.isnan(loaded.final("nan")) and loaded.final("pair") is None
