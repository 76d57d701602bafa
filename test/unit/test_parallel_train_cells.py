"""`nn.TrainOneStepCell` and `Model.train` under `msir.set_auto_parallel_context`
(GRAPH_MODE): the compiled step, whose weights and optimizer state are
explicit tuple arguments, is planned data parallel (every array the step
passes to its loss inside those tuples gets its layout: the batch split, the
weights replicated, their gradients all-reduced), run on 2 emulated devices,
and the new weights and state are written back into the Parameters. Over 20
steps the losses are the serial loop's within rtol 1e-4, and so are the
trained weights. In PYNATIVE_MODE the same compiled step runs sharded under the
context; another Cell run eagerly there warns that it runs on one device.
"""

import re
import warnings

import numpy as np
import pytest

import msir as ms
from msir import nn
from msir.train import Callback, Model

STEPS = 20


@pytest.fixture(autouse=True)
def _graph_mode_stand_alone():
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.reset_auto_parallel_context()


def _mlp():
    ms.set_seed(5)
    return nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 4))


def _batches(n):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        x = rng.standard_normal((16, 8)).astype(np.float32)
        out.append((x, np.tanh(x[:, :4] * x[:, 4:]).astype(np.float32)))
    return out


def _train_one_step_cell(parallel: bool):
    net = _mlp()
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Momentum(net.trainable_params(), 0.1, 0.9))
    if parallel:
        ms.set_auto_parallel_context(parallel_mode="data_parallel", device_num=2)
    losses = [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for x, y in _batches(4) * (STEPS // 4)]
    ms.reset_auto_parallel_context()
    return losses, [p.asnumpy().copy() for p in net.trainable_params()], step


def test_train_one_step_cell_data_parallel_gives_the_serial_losses_and_weights():
    serial_losses, serial_weights, _ = _train_one_step_cell(parallel=False)
    losses, weights, step = _train_one_step_cell(parallel=True)
    assert np.mean(serial_losses[-4:]) < 0.8 * np.mean(serial_losses[:4])  # it trains
    np.testing.assert_allclose(losses, serial_losses, rtol=1e-4)
    for got, want in zip(weights, serial_weights):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    plan = next(iter(step._compiled_step()._plans.values()))
    assert {plan.strategy_of(node.name) for node in plan.graph.nodes} == {"m"}  # the batch split everywhere
    assert plan.graph.arg_names[:2] == ["inputs_0", "inputs_1"]  # the arrays of the step's tuple argument
    synced = re.findall(r"msir_shard\.all_reduce %\S+ on @mesh axis 0 kind \"sum\" : (tensor<\S+>)", plan.device_ir)
    # each weight's gradient is partial over the batch and all-reduced, a Dense weight's (out, in) as the
    # gradient of the (in, out) transpose the layer multiplies by; then the loss
    assert synced == ["tensor<8x16xf32>", "tensor<16xf32>", "tensor<16x4xf32>", "tensor<4xf32>", "tensor<f32>"]


class _Losses(Callback):
    def __init__(self):
        self.losses = []

    def step_end(self, run_context):
        args = run_context.original_args()
        self.losses.append(float(args.net_outputs.asnumpy()))
        self.train_network = args.train_network


def _model_train_losses(parallel: bool):
    net = _mlp()
    model = Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.1, 0.9))
    if parallel:
        ms.set_auto_parallel_context(parallel_mode="data_parallel", device_num=2)
    recorder = _Losses()
    model.train(STEPS // 4, _batches(4), callbacks=[recorder])
    ms.reset_auto_parallel_context()
    return recorder.losses, recorder.train_network


def test_model_train_data_parallel_gives_the_serial_losses():
    serial, _ = _model_train_losses(parallel=False)
    assert len(serial) == STEPS
    losses, train_network = _model_train_losses(parallel=True)
    np.testing.assert_allclose(losses, serial, rtol=1e-4)
    plans = list(train_network._compiled_step()._plans.values())
    assert len(plans) == 1 and "msir_shard.all_reduce" in plans[0].device_ir  # it ran the sharded step


def test_in_pynative_mode_the_training_cells_run_the_sharded_step():
    """PYNATIVE_MODE under the context: the step runs compiled and sharded (as MindSpore runs a Cell it shards
    in PyNative mode as a graph), with the losses of the serial PYNATIVE loop, which runs eagerly."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        serial_losses, serial_weights, serial_step = _train_one_step_cell(parallel=False)
        losses, weights, step = _train_one_step_cell(parallel=True)
        model_serial, _ = _model_train_losses(parallel=False)
        model_losses, train_network = _model_train_losses(parallel=True)
    finally:
        ms.set_context(mode=ms.GRAPH_MODE)
    assert vars(serial_step).get("__msir_jit_step") is None  # the serial PYNATIVE step ran eagerly
    np.testing.assert_allclose(losses, serial_losses, rtol=1e-4)
    for got, want in zip(weights, serial_weights):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    np.testing.assert_allclose(model_losses, model_serial, rtol=1e-4)
    for trained in (step, train_network):
        plans = list(trained._compiled_step()._plans.values())
        assert len(plans) == 1 and plans[0].device_ir.count("msir_shard.all_reduce") == 5


def test_in_pynative_mode_a_cell_run_eagerly_under_the_context_warns_once_per_call():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net = _mlp()
    x = ms.Tensor(_batches(1)[0][0])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            want = net(x).asnumpy()
            assert caught == []  # no context: nothing to say
            ms.set_auto_parallel_context(parallel_mode="data_parallel", device_num=2)
            got = net(x).asnumpy()  # the SequentialCell's own Dense and ReLU calls do not warn again
    finally:
        ms.set_context(mode=ms.GRAPH_MODE)
    assert [str(w.message).split(":")[0] for w in caught] == ["SequentialCell runs eagerly on one device"]
    assert "PYNATIVE_MODE runs only nn.TrainOneStepCell and Model.train sharded" in str(caught[0].message)
    assert caught[0].filename == __file__  # at the user's call
    np.testing.assert_array_equal(got, want)
