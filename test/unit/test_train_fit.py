"""`Model.fit`: training with an evaluation after chosen epochs (MindSpore's
`Model.fit(epoch, train_dataset, valid_dataset, valid_frequency, ...)`):
when it evaluates, which callbacks see the evaluation, the metrics the
epoch's end finds, and the training's parameters after it."""

from __future__ import annotations

import numpy as np
import pytest

import msir as ms
from msir import nn
from msir.train import Callback, LossMonitor, Model, SummaryCollector, TimeMonitor
from msir.viz import load_run


@pytest.fixture(autouse=True)
def pynative():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


def _data(batches, seed):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, 4)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32))
            for _ in range(batches)]


def _model():
    ms.set_seed(11)
    net = nn.SequentialCell(nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3))
    return Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1), metrics={"accuracy": nn.Accuracy()})


class Watcher(Callback):
    """What a user's callback sees: every step with its mode, and the metrics at each epoch's end."""

    def __init__(self):
        self.steps, self.epoch_metrics = [], {}

    def on_train_step_end(self, run_context):
        p = run_context.original_args()
        self.steps.append(("train", p.cur_epoch_num, p.cur_step_num, p.batch_num))

    def on_eval_step_end(self, run_context):
        p = run_context.original_args()
        self.steps.append(("eval", p.cur_epoch_num, p.cur_step_num, p.batch_num))

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        self.epoch_metrics[p.cur_epoch_num] = p.get("metrics")
        assert p.mode == "train" and p.batch_num == 3


@pytest.mark.parametrize("valid_frequency, evaluated", [(2, [2, 4]), ([1, 3], [1, 3])])
def test_fit_evaluates_after_the_chosen_epochs(valid_frequency, evaluated):
    model, watcher = _model(), Watcher()
    model.fit(4, _data(3, 0), _data(2, 1), valid_frequency=valid_frequency, callbacks=[watcher])
    expected = []
    for epoch in range(1, 5):
        expected += [("train", epoch, 3 * (epoch - 1) + s, 3) for s in (1, 2, 3)]
        if epoch in evaluated:
            expected += [("eval", epoch, s, 2) for s in (1, 2)]
    assert watcher.steps == expected  # the training's step count goes on after each evaluation
    assert [e for e, m in watcher.epoch_metrics.items() if m is not None] == evaluated
    assert all(set(m) == {"accuracy"} for m in watcher.epoch_metrics.values() if m is not None)


def test_the_last_evaluation_is_the_trained_models():
    model = _model()
    valid = _data(2, 1)
    watcher = Watcher()
    model.fit(3, _data(3, 0), valid, valid_frequency=[3], callbacks=[watcher])
    assert watcher.epoch_metrics[3] == model.eval(valid)
    assert model.train_network.training  # fit's evaluation gave training mode back


def test_msirs_own_monitors_see_only_the_training_and_record_the_metrics(tmp_path, capsys):
    model = _model()
    collector = SummaryCollector(str(tmp_path / "run"), collect_freq=3)
    model.fit(2, _data(3, 0), _data(2, 1), callbacks=[collector, LossMonitor(3), TimeMonitor()])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "epoch", "Eval epoch time", "Eval result", "Train epoch time"] * 2
    run = load_run(tmp_path / "run")
    assert run.series("accuracy", "eval")[0] == [3, 6]  # at the epochs' last steps
    assert run.series("loss", "train")[0] == [1, 3, 6]  # no eval step recorded as training


def test_fit_arguments_are_checked():
    model = _model()
    with pytest.raises(TypeError, match="the type of 'valid_frequency' must be a list or an integer"):
        model.fit(1, _data(3, 0), _data(2, 1), valid_frequency="2")
    with pytest.raises(ValueError, match="Model.fit: valid_frequency must be a positive int, got 0"):
        model.fit(1, _data(3, 0), _data(2, 1), valid_frequency=0)
    net = nn.Dense(4, 3)
    with pytest.raises(ValueError, match="if valid_dataset is not None, the model argument 'metrics' can not be"):
        Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1)).fit(1, _data(3, 0), _data(2, 1))
    with pytest.raises(ValueError, match="Model.fit: epoch must be a positive int, got 0"):
        model.fit(0, _data(3, 0))
