"""Checkpoints in MindSpore's `.ckpt` format: files MindSpore wrote load into msir and
resume training with MindSpore's numbers; files msir writes have MindSpore's bytes;
a truncated or foreign file is a clear error; an interrupted save keeps the old file.

test/data/ckpt/dense_{momentum,adam}.ckpt were written by MindSpore 2.10.0 (CPU,
PYNATIVE_MODE) from the network `Net` below, its weights set to `W1`, `W2`
(biases zero), trained 3 steps of `TrainOneStepCell(WithLossCell(net, MSELoss()),
opt)` on `X`, `Y` with `opt` = `nn.Momentum(params, 0.1, 0.9)` or `nn.Adam(params,
0.01)`, then `ms.save_checkpoint(train_net, path)`; MindSpore then trained 2 more
steps and printed the losses and `fc1.weight` recorded below as
`MINDSPORE_RESUMED`. dense_momentum_crc.ckpt is dense_momentum.ckpt's dict saved
again by MindSpore with `crc_check=True, append_dict={'epoch_num': 2, 'note':
'hello'}`. (X and Y are `np.random.default_rng(0).standard_normal` draws of
shapes (8, 4) and (8, 2) in float32, as below.)
"""

import os
from pathlib import Path

import numpy as np
import pytest

import msir as ms
from msir import Parameter, Tensor, nn
from msir.errors import DTypeError, MsirValueError, ShapeError
from msir.train import CheckpointConfig, Model, ModelCheckpoint
from msir.train import serialization

DATA = Path(__file__).resolve().parents[1] / "data" / "ckpt"
_rng = np.random.default_rng(0)
X = _rng.standard_normal((8, 4)).astype(np.float32)
Y = _rng.standard_normal((8, 2)).astype(np.float32)
W1 = np.arange(12, dtype=np.float32).reshape(3, 4) / 20 - 0.3
W2 = np.arange(6, dtype=np.float32).reshape(2, 3) / 10 - 0.25

MINDSPORE_RESUMED = {
    "momentum": ([0.723034679889679, 0.6656236052513123],
                 [[-0.2931250333786011, -0.2847224473953247, -0.13639645278453827, -0.0656692162156105],
                  [-0.15686720609664917, -0.07805570214986801, 0.004727894905954599, 0.1059454083442688],
                  [0.06506048142910004, 0.14658857882022858, 0.2268008291721344, 0.3240509629249573]]),
    "adam": ([0.9395857453346252, 0.9188904762268066],
             [[-0.2550208270549774, -0.2998388111591339, -0.15095654129981995, -0.10027321428060532],
              [-0.15021421015262604, -0.09975102543830872, 0.0027879145927727222, 0.09966247528791428],
              [0.05002645403146744, 0.1991681605577469, 0.249619722366333, 0.2999873161315918]]),
}
OPTIMIZERS = {"momentum": lambda p: nn.Momentum(p, learning_rate=0.1, momentum=0.9),
              "adam": lambda p: nn.Adam(p, learning_rate=0.01)}


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 3, weight_init="normal", bias_init="zeros")
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(3, 2, weight_init="normal", bias_init="zeros")

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _train_net(optimizer):
    net = Net()
    net.fc1.weight.set_data(Tensor(W1))
    net.fc2.weight.set_data(Tensor(W2))
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), OPTIMIZERS[optimizer](net.trainable_params()))
    train.set_train()
    return net, train


def test_mindspore_checkpoint_loads_with_its_names_dtypes_and_values():
    params = ms.load_checkpoint(str(DATA / "dense_momentum.ckpt"))
    assert list(params) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "global_step", "learning_rate",
                            "momentum", "moments.fc1.weight", "moments.fc1.bias", "moments.fc2.weight",
                            "moments.fc2.bias"]
    assert all(isinstance(p, Parameter) and p.name == name for name, p in params.items())
    assert params["global_step"].shape == (1,) and str(params["global_step"].dtype) == "Int32"
    assert int(params["global_step"].asnumpy()[0]) == 3
    assert params["learning_rate"].shape == () and params["learning_rate"].asnumpy() == np.float32(0.1)
    # the first values MindSpore's own load_checkpoint printed for this file
    np.testing.assert_array_equal(params["fc1.weight"].asnumpy().ravel()[:2],
                                  np.float32([-0.2871524691581726, -0.26839518547058105]))
    np.testing.assert_array_equal(params["moments.fc2.bias"].asnumpy(),
                                  np.float32([-0.7631530165672302, -1.6418176889419556]))


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_mindspore_checkpoint_resumes_training_with_mindspores_numbers(optimizer):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        net, train = _train_net(optimizer)
        not_loaded, unused = ms.load_param_into_net(train, ms.load_checkpoint(str(DATA / f"dense_{optimizer}.ckpt")))
        assert not_loaded == [] and unused == []
        losses = [float(train(Tensor(X), Tensor(Y)).asnumpy()) for _ in range(2)]
    finally:
        ms.set_context(mode=ms.GRAPH_MODE)
    expected_losses, expected_w1 = MINDSPORE_RESUMED[optimizer]
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)
    np.testing.assert_allclose(net.fc1.weight.asnumpy(), expected_w1, rtol=1e-5, atol=1e-7)


def test_msir_writes_mindspores_bytes_and_reads_them_back(tmp_path):
    params = ms.load_checkpoint(str(DATA / "dense_momentum.ckpt"))
    ms.save_checkpoint([{"name": k, "data": v} for k, v in params.items()], str(tmp_path / "again"))
    assert (tmp_path / "again.ckpt").read_bytes() == (DATA / "dense_momentum.ckpt").read_bytes()
    net, train = _train_net("momentum")
    ms.load_param_into_net(train, params)
    ms.save_checkpoint(train, str(tmp_path / "train.ckpt"))
    assert (tmp_path / "train.ckpt").read_bytes() == (DATA / "dense_momentum.ckpt").read_bytes()


def test_crc_and_appended_values_as_mindspore_writes_them(tmp_path):
    params = ms.load_checkpoint(str(DATA / "dense_momentum_crc.ckpt"), crc_check=True)
    assert params["note"] == "hello" and params["epoch_num"].asnumpy() == 2
    assert str(params["epoch_num"].dtype) == "Int64"
    base = ms.load_checkpoint(str(DATA / "dense_momentum.ckpt"))
    ms.save_checkpoint([{"name": k, "data": v} for k, v in base.items()], str(tmp_path / "crc.ckpt"),
                       crc_check=True, append_dict={"epoch_num": 2, "note": "hello"})
    assert (tmp_path / "crc.ckpt").read_bytes() == (DATA / "dense_momentum_crc.ckpt").read_bytes()
    damaged = bytearray((DATA / "dense_momentum_crc.ckpt").read_bytes())
    damaged[40] ^= 1
    (tmp_path / "damaged.ckpt").write_bytes(bytes(damaged))
    with pytest.raises(MsirValueError, match="the CRC of .*damaged.ckpt' does not match"):
        ms.load_checkpoint(str(tmp_path / "damaged.ckpt"), crc_check=True)


def test_truncated_and_foreign_files_are_refused_by_name(tmp_path):
    content = (DATA / "dense_adam.ckpt").read_bytes()
    for cut in (3, 100, len(content) - 1):
        (tmp_path / "cut.ckpt").write_bytes(content[:cut])
        with pytest.raises(MsirValueError, match=r"load_checkpoint: '.*cut.ckpt' is (truncated|not a MindSpore)"):
            ms.load_checkpoint(str(tmp_path / "cut.ckpt"))
    (tmp_path / "notes.ckpt").write_text("hello, this is not a checkpoint\n")
    with pytest.raises(MsirValueError, match=r"notes.ckpt' is not a MindSpore checkpoint: byte 0 holds field 13"):
        ms.load_checkpoint(str(tmp_path / "notes.ckpt"))
    np.save(tmp_path / "array.npy", np.zeros(3))
    with pytest.raises(MsirValueError, match="array.npy' is not a MindSpore checkpoint"):
        ms.load_checkpoint(str(tmp_path / "array.npy"))
    (tmp_path / "empty.ckpt").write_bytes(b"")
    with pytest.raises(MsirValueError, match="empty.ckpt' is empty"):
        ms.load_checkpoint(str(tmp_path / "empty.ckpt"))
    with pytest.raises(MsirValueError, match="cannot read"):
        ms.load_checkpoint(str(tmp_path / "missing.ckpt"))


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    net, train = _train_net("momentum")
    path = tmp_path / "net.ckpt"
    ms.save_checkpoint(train, str(path))
    before = path.read_bytes()
    net.fc1.weight.set_data(Tensor(W1 + 1))

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(serialization.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        ms.save_checkpoint(train, str(path))
    monkeypatch.undo()
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["net.ckpt"]
    ms.save_checkpoint(train, str(path))
    np.testing.assert_array_equal(ms.load_checkpoint(str(path))["fc1.weight"].asnumpy(), W1 + 1)


def test_load_param_into_net_reports_and_refuses_as_mindspore(tmp_path):
    net = Net()
    params = ms.load_checkpoint(str(DATA / "dense_momentum.ckpt"))
    not_loaded, unused = ms.load_param_into_net(net, params)
    assert not_loaded == [] and unused[0] == "global_step" and len(unused) == 7
    np.testing.assert_array_equal(net.fc2.bias.asnumpy(), params["fc2.bias"].asnumpy())
    partial = {"fc1.weight": params["fc1.weight"], "extra": Parameter(np.zeros(2, np.float32), name="extra")}
    assert ms.load_param_into_net(Net(), partial) == (["fc1.bias", "fc2.weight", "fc2.bias"], ["extra"])
    prefixed = {"backbone." + k: v for k, v in params.items()}
    prefixed_net = Net()
    assert ms.load_param_into_net(prefixed_net, prefixed)[0] == []
    np.testing.assert_array_equal(prefixed_net.fc1.weight.asnumpy(), params["fc1.weight"].asnumpy())
    wrong = {"fc1.weight": Parameter(np.zeros((4, 3), np.float32), name="fc1.weight")}
    with pytest.raises(ShapeError, match=r"'fc1.weight' has shape \(3, 4\) in the net but shape \(4, 3\)"):
        ms.load_param_into_net(Net(), wrong)
    doubles = {"fc1.weight": Parameter(np.ones((3, 4)), name="fc1.weight")}
    relaxed = Net()
    ms.load_param_into_net(relaxed, doubles)
    assert relaxed.fc1.weight.asnumpy().dtype == np.float32 and relaxed.fc1.weight.asnumpy()[0, 0] == 1
    with pytest.raises(DTypeError, match="'fc1.weight' has dtype Float32 in the net but Float64"):
        ms.load_param_into_net(Net(), doubles, strict_load=True)
    ints = {"fc1.weight": Parameter(np.ones((3, 4), np.int32), name="fc1.weight")}
    with pytest.raises(DTypeError, match="Float32 in the net but Int32"):
        ms.load_param_into_net(Net(), ints)


def test_load_checkpoint_filters_and_loads_into_a_net():
    only = ms.load_checkpoint(str(DATA / "dense_momentum.ckpt"), choice_func=lambda n: n.startswith("fc"))
    assert list(only) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert list(ms.load_checkpoint(str(DATA / "dense_momentum.ckpt"), specify_prefix="moments")) == [
        "moments.fc1.weight", "moments.fc1.bias", "moments.fc2.weight", "moments.fc2.bias"]
    assert "momentum" not in ms.load_checkpoint(str(DATA / "dense_momentum.ckpt"), filter_prefix=["mom"])
    net = Net()
    ms.load_checkpoint(str(DATA / "dense_momentum.ckpt"), net=net)
    np.testing.assert_array_equal(net.fc1.weight.asnumpy(), only["fc1.weight"].asnumpy())


def test_model_checkpoint_saves_keeps_and_resumes(tmp_path):
    ms.set_seed(0)
    net, _ = _train_net("momentum")
    optimizer = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    model = Model(net, nn.MSELoss(), optimizer)
    batches = [(X[:4], Y[:4]), (X[4:], Y[4:])]
    config = CheckpointConfig(save_checkpoint_steps=1, keep_checkpoint_max=2, append_info=["epoch_num", "step_num"])
    callback = ModelCheckpoint(prefix="dense", directory=str(tmp_path), config=config)
    model.train(2, batches, callbacks=[callback])
    assert sorted(os.listdir(tmp_path)) == ["dense-2_1.ckpt", "dense-2_2.ckpt"]
    assert callback.latest_ckpt_file_name == str(tmp_path / "dense-2_2.ckpt")
    saved = ms.load_checkpoint(callback.latest_ckpt_file_name)
    assert saved["epoch_num"].asnumpy() == 2 and saved["step_num"].asnumpy() == 4
    assert int(saved["global_step"].asnumpy()[0]) == 4
    for p in net.trainable_params():
        np.testing.assert_array_equal(saved[p.name].asnumpy(), p.asnumpy())
    np.testing.assert_array_equal(saved["moments.fc1.weight"].asnumpy(), optimizer.moments[0].asnumpy())
    again = ModelCheckpoint(prefix="dense", directory=str(tmp_path), config=CheckpointConfig(save_checkpoint_steps=3))
    model.train(1, batches, callbacks=[again])  # the end of training saves the last step
    assert again.latest_ckpt_file_name == str(tmp_path / "dense_1-1_2.ckpt")
    with pytest.raises(MsirValueError, match="cannot both be None or 0"):
        CheckpointConfig(save_checkpoint_steps=0, save_checkpoint_seconds=0)
