"""examples/train_runs.py (issue 15, the demo): its data, its network, and one
run's summary with the test accuracy of every epoch (`Model.fit`'s
evaluations, which the SummaryCollector records)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import msir as ms
from msir.viz import load_run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_runs.py"


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("train_runs", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def digits(demo):
    return demo.digits()  # scikit-learn's import is most of this test's time: once


def test_the_digits_batches(digits):
    train, test = digits
    assert len(train) == 44 and len(test) == 11  # 1438 and 359 images, in whole batches of 32
    for x, y in train + test:
        assert x.shape == (32, 1, 8, 8) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
        assert y.shape == (32,) and y.dtype == np.int32 and set(np.unique(y)) <= set(range(10))
    assert len({int(v) for _, y in train for v in y}) == 10


def test_one_run_records_the_accuracy_of_every_epoch(demo, digits, tmp_path, capsys):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        train, test = digits
        metrics = demo.train_run(0.1, train[:6], test[:2], 2, tmp_path / "lr0.1")
    finally:
        ms.set_context(mode=ms.GRAPH_MODE)
    run = load_run(tmp_path / "lr0.1")
    steps, accuracy = run.series("accuracy", "eval")
    assert steps == [6, 12] and accuracy[-1] == metrics["accuracy"]
    assert run.series("eval_loss", "eval")[1][-1] == pytest.approx(float(metrics["eval_loss"]), rel=1e-6)
    assert run.hyper_params["learning_rate"] == 0.1 and run.hyper_params["momentum"] == 0.9
    conv = (16 * 1 * 9 + 16) + (32 * 16 * 9 + 32)  # two 3x3 convolutions with bias
    assert run.model_info["param_count"] == conv + (128 * 64 + 64) + (64 * 10 + 10)
    printed = capsys.readouterr().out
    assert "epoch: 2 step: 6, loss is " in printed and "Eval result: epoch 2, metrics: " in printed
