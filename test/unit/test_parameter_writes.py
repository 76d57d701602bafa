"""Parameters that compiled code updates (`ops.assign`, BatchNorm's moving
statistics): the same numbers in GRAPH_MODE as in PYNATIVE_MODE and as
MindSpore 2.10, in a plain call, `msir.jit`, `TrainOneStepCell`, `Model.train`
and from the persistent trace cache; errors at the user's line.

The expected numbers were produced by MindSpore 2.10.0 (CPU, GRAPH_MODE and
PYNATIVE_MODE gave the same) on the network and data below: `make_net()`,
`_data()`, `nn.Momentum(lr=0.1, momentum=0.9)`,
`nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction='mean')`, three
`TrainOneStepCell` steps on `x * (1 + 0.5 * i)`, then `set_train(False)`.
MindSpore 2.10 also gives `AttributeCounter`'s numbers in both modes (a
Tensor assigned to a Parameter attribute in `construct` sets the Parameter).
"""

import inspect

import numpy as np
import pytest

import msir
from msir import Parameter, Tensor, nn, ops
from msir import cache
from msir.dataset import NumpySlicesDataset
from msir.errors import MsirTypeError, ShapeError, UnsupportedSyntaxError
from msir.train import Callback, Model

MS_LOSSES = [1.319909691810608, 0.8349442481994629, 0.4952491521835327]
MS_MOVING_MEAN = [-0.0010455059818923473, 0.011046743020415306, 0.03916444256901741, -0.027775216847658157]
MS_MOVING_VAR = [1.0356496572494507, 0.8402618765830994, 1.906221628189087, 1.538362741470337]
MS_EVAL_OUT0 = [-0.16704341769218445, 0.3106693625450134, -0.9690595865249634]
MS_EVAL_SUMSQ = 38.91569482672388


class BnNet(nn.Cell):
    def __init__(self, conv_w, fc_w):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, pad_mode="valid", has_bias=False, weight_init=Tensor(conv_w))
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(4 * 4 * 4, 3, weight_init=Tensor(fc_w), bias_init="zeros")

    def construct(self, x):
        return self.fc(self.flatten(self.relu(self.bn(self.conv(x)))))


def make_net() -> BnNet:
    rng = np.random.default_rng(1)
    conv_w = (rng.standard_normal((4, 1, 3, 3)) * 0.3).astype(np.float32)
    fc_w = (rng.standard_normal((3, 64)) * 0.1).astype(np.float32)
    return BnNet(conv_w, fc_w)


def _data():
    rng = np.random.default_rng(2)
    return rng.standard_normal((8, 1, 6, 6)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)


def _train_step(net):
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.Momentum(net.trainable_params(), 0.1, 0.9))
    return step.set_train()


def _check_statistics(net):
    np.testing.assert_allclose(net.bn.moving_mean.asnumpy(), MS_MOVING_MEAN, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(net.bn.moving_variance.asnumpy(), MS_MOVING_VAR, rtol=1e-5)


def _check_eval(net, x):
    net.set_train(False)
    out = net(Tensor(x)).asnumpy()
    np.testing.assert_allclose(out[0], MS_EVAL_OUT0, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose((out.astype(np.float64) ** 2).sum(), MS_EVAL_SUMSQ, rtol=1e-5)


def test_cnn_with_batchnorm_trains_as_mindspore(mode):
    x, y = _data()
    net = make_net()
    step = _train_step(net)
    losses = [float(step(Tensor(x * (1 + 0.5 * i)), Tensor(y)).asnumpy()) for i in range(3)]
    np.testing.assert_allclose(losses, MS_LOSSES, rtol=1e-5)
    _check_statistics(net)
    _check_eval(net, x)


def test_model_train_updates_the_moving_statistics(mode):
    x, y = _data()
    net = make_net()
    losses = []

    class Losses(Callback):
        def on_train_step_end(self, run_context):
            losses.append(float(run_context.original_args().net_outputs.asnumpy()))

    data = NumpySlicesDataset((np.concatenate([x, 1.5 * x, 2 * x]), np.tile(y, 3)), column_names=["x", "y"],
                              shuffle=False).batch(8)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    Model(net, loss, nn.Momentum(net.trainable_params(), 0.1, 0.9)).train(1, data, callbacks=[Losses()])
    np.testing.assert_allclose(losses, MS_LOSSES, rtol=1e-5)
    _check_statistics(net)
    _check_eval(net, x)


def _numpy_batchnorm(x, moving_mean, moving_var, momentum=0.9, eps=1e-5):
    """Training-mode BatchNorm2d with gamma 1, beta 0: the output and the new moving statistics."""
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    count = x.size // x.shape[1]
    y = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + eps)
    return y, momentum * moving_mean + (1 - momentum) * mean, momentum * moving_var + (1 - momentum) * var * count / (count - 1)


def test_compiled_batchnorm_follows_set_train():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    bn = nn.BatchNorm2d(3).set_train()
    mean, var = np.zeros(3), np.ones(3)
    for scale in (1.0, 2.0):
        y, mean, var = _numpy_batchnorm(scale * x.astype(np.float64), mean, var)
        np.testing.assert_allclose(bn(Tensor(scale * x)).asnumpy(), y, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(bn.moving_mean.asnumpy(), mean, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(bn.moving_variance.asnumpy(), var, rtol=1e-5)
    bn.set_train(False)  # the moving statistics normalise, and stay as they are
    expected = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(bn(Tensor(x)).asnumpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.moving_mean.asnumpy(), mean, rtol=1e-5, atol=1e-7)
    bn.set_train(True)
    y, mean, var = _numpy_batchnorm(x.astype(np.float64), mean, var)
    np.testing.assert_allclose(bn(Tensor(x)).asnumpy(), y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.moving_variance.asnumpy(), var, rtol=1e-5)


def test_jit_of_a_function_calling_a_training_cell():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 2)).astype(np.float32)
    bn = nn.BatchNorm1d(2, momentum=0.8).set_train()
    f = msir.jit(lambda v: bn(v) * 2.0)
    out = f(x)
    mean, var = x.mean(0), x.var(0)
    np.testing.assert_allclose(out, 2 * (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.moving_mean.asnumpy(), 0.2 * mean, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bn.moving_variance.asnumpy(), 0.8 + 0.2 * x.var(0, ddof=1), rtol=1e-5)


class Counter(nn.Cell):
    """A user Cell that counts its calls and keeps the running sum of its inputs."""

    def __init__(self):
        super().__init__()
        self.calls = Parameter(np.zeros((), np.int32), name="calls", requires_grad=False)
        self.total = Parameter(np.zeros(3, np.float32), name="total", requires_grad=False)

    def construct(self, x):
        ops.assign(self.calls, self.calls + 1)
        ops.assign(self.total, self.total + x)
        return self.total * 2.0  # reads the value just assigned


class AttributeCounter(Counter):
    """The same, written as MindSpore's Graph mode also compiles it: assignments to Parameter attributes."""

    def construct(self, x):
        self.calls += 1
        self.total = self.total + x
        return self.total * 2.0


@pytest.mark.parametrize("cls", [Counter, AttributeCounter])
def test_a_user_cell_assigns_its_parameters(mode, cls):
    counter = cls()
    x = np.array([1.0, 2.0, 3.0], np.float32)
    for i in range(1, 4):
        np.testing.assert_allclose(counter(Tensor(x)).asnumpy(), 2 * i * x)
    assert int(counter.calls.asnumpy()) == 3
    assert isinstance(counter.total, Parameter) and [p.name for p in counter.get_parameters()] == ["calls", "total"]
    np.testing.assert_allclose(counter.total.asnumpy(), 3 * x)


def test_the_persistent_trace_cache_writes_back(tmp_path, monkeypatch):
    """Another instance of the class finds the trace in the persistent cache:
    its call writes its own Parameters."""
    monkeypatch.setenv("MSIR_CACHE_DIR", str(tmp_path))
    cache.reset_stats()
    x = np.array([1.0, 2.0, 3.0], np.float32)
    first, second = Counter(), Counter()
    first(Tensor(x))
    second(Tensor(x))
    second(Tensor(x))
    assert cache.stats["trace_hits"] == 1
    assert int(first.calls.asnumpy()) == 1 and int(second.calls.asnumpy()) == 2
    np.testing.assert_allclose(second.total.asnumpy(), 2 * x)


class AssignsAnArgument(nn.Cell):
    def construct(self, x):
        return ops.assign(x, x + 1)


class AssignsAnotherShape(Counter):
    def construct(self, x):
        ops.assign(self.total, ops.reshape(x, (3, 1)))
        return x


class AssignsInABranch(Counter):
    def construct(self, x):
        if x.sum() > 0:
            ops.assign(self.total, x)
        return x


SHARED = Counter()


def _assign_shared(x):
    ops.assign(SHARED.total, x)
    return x * 2.0


class AssignsInASeparateFunction(Counter):
    def construct(self, x):
        return _assign_shared(x)  # its arguments are all arrays: compiled as a function of its own


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("cls, error, message", [
    (AssignsAnArgument, MsirTypeError, r"ops.assign: the variable must be a Parameter read from an object"),
    (AssignsAnotherShape, ShapeError, r"ops.assign: the value of shape \(3, 1\) does not match the Parameter "
                                      r"'total' of shape \(3,\)"),
    (AssignsInABranch, UnsupportedSyntaxError, r"assigning the Parameter 'total' inside a compiled loop or branch"),
    (AssignsInASeparateFunction, UnsupportedSyntaxError, r"the Parameter 'total' is assigned in a function called "
                                                         r"as a separate function"),
])
def test_bad_assignments_are_refused_at_the_line(cls, error, message):
    with pytest.raises(error, match=message) as e:
        cls()(Tensor(np.ones(3, np.float32)))
    where = _assign_shared if cls is AssignsInASeparateFunction else cls.construct
    assert f"test_parameter_writes.py:{_line_of(where, 'ops.assign')}:" in str(e.value)


def test_assignment_under_vjp_is_refused():
    counter = Counter()
    with pytest.raises(UnsupportedSyntaxError, match="assigned in a function differentiated by vjp; only grad"):
        msir.jit(lambda v: msir.vjp(lambda u: counter(u), v)[0])(np.ones(3, np.float32))


def _call_shared(x):
    return SHARED(x)


def test_runners_that_would_drop_the_updates_refuse():
    x = np.ones(3, np.float32)
    with pytest.raises(UnsupportedSyntaxError, match="msir.vjp in GRAPH_MODE does not update Parameters yet, "
                                                     "and the code assigns 'Counter_calls'"):
        msir.vjp(Counter(), x)
    msir.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=2)
    try:
        with pytest.raises(UnsupportedSyntaxError, match="auto-parallel planning does not update Parameters yet"):
            msir.jit(_call_shared)(x)
    finally:
        msir.reset_auto_parallel_context()
    np.testing.assert_array_equal(SHARED.total.asnumpy(), np.zeros(3))
