"""MindSpore's training surface on msir (issue 14, step c): the losses, the
optimizers and learning-rate lists, `WithLossCell` / `TrainOneStepCell`, and
`msir.train.Model` with its callbacks and metrics.

Losses are checked against NumPy and their gradients against central
differences; every optimizer's update against a NumPy re-implementation of
MindSpore 2.10's kernel formula over several steps, in both modes; a
training step in GRAPH_MODE against the same step in PYNATIVE_MODE (and its
parameters updated in their own arrays); `Model.train`'s printed lines
against MindSpore's LossMonitor / TimeMonitor format.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import msir as ms
from msir import Parameter, Tensor, nn, ops
from msir.errors import DonationWarning, UnsupportedSyntaxError
from msir.train import Callback, LossMonitor, Model, TimeMonitor


@pytest.fixture(params=["graph", "pynative"])
def mode(request):
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    yield request.param
    ms.set_context(mode=ms.GRAPH_MODE)


def _log_softmax(z):
    m = z.max(axis=1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))


# -- losses -----------------------------------------------------------------------------

RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((4, 3))
INDICES = np.array([2, 0, 1, 1], np.int32)
PROBS = np.eye(3)[[1, 2, 0, 1]] * 0.7 + 0.1
ONE_HOT = np.eye(3)[INDICES]
TARGET = RNG.standard_normal((4, 3))

LOSSES = [
    ("cross_entropy", nn.CrossEntropyLoss(), INDICES, lambda z: -np.mean(_log_softmax(z)[np.arange(4), INDICES])),
    ("cross_entropy_probs_sum", nn.CrossEntropyLoss(reduction="sum"), PROBS,
     lambda z: -np.sum(PROBS * _log_softmax(z))),
    ("softmax_ce_sparse_mean", nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), INDICES,
     lambda z: -np.mean(_log_softmax(z)[np.arange(4), INDICES])),
    ("softmax_ce_dense_none", nn.SoftmaxCrossEntropyWithLogits(), ONE_HOT,
     lambda z: -np.sum(ONE_HOT * _log_softmax(z), axis=1)),
    ("mse", nn.MSELoss(), TARGET, lambda z: np.mean((z - TARGET) ** 2)),
    ("l1_sum", nn.L1Loss(reduction="sum"), TARGET, lambda z: np.sum(np.abs(z - TARGET))),
    ("l1_none", nn.L1Loss(reduction="none"), TARGET, lambda z: np.abs(z - TARGET)),
]


@pytest.mark.parametrize("loss_fn, labels, reference", [c[1:] for c in LOSSES], ids=[c[0] for c in LOSSES])
def test_loss_value_and_gradient(mode, loss_fn, labels, reference):
    value = loss_fn(Tensor(LOGITS), Tensor(labels))
    assert isinstance(value, Tensor) and value.dtype == ms.float64
    np.testing.assert_allclose(value.asnumpy(), reference(LOGITS), rtol=1e-12)
    weights = np.random.default_rng(1).standard_normal(np.shape(reference(LOGITS)))

    def objective(z):
        return ops.reduce_sum(loss_fn(z, Tensor(labels)) * Tensor(weights))

    grad = ms.grad(objective)(Tensor(LOGITS)).asnumpy()
    eps = 1e-6
    numeric = np.zeros_like(LOGITS)
    for i in np.ndindex(LOGITS.shape):
        d = np.zeros_like(LOGITS)
        d[i] = eps
        numeric[i] = (np.sum(reference(LOGITS + d) * weights) - np.sum(reference(LOGITS - d) * weights)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_sparse_softmax_cross_entropy_gives_an_out_of_range_label_zero_loss():
    labels = np.array([2, 3, 1, -1], np.int32)  # MindSpore's one-hot row of 3 and -1 is zero
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True)(Tensor(LOGITS), Tensor(labels)).asnumpy()
    log_p = _log_softmax(LOGITS)
    np.testing.assert_allclose(loss, [-log_p[0, 2], 0.0, -log_p[2, 1], 0.0], rtol=1e-12)


def test_loss_reduction_is_checked():
    with pytest.raises(ValueError, match="MSELoss: reduction must be one of 'mean', 'sum', 'none', got 'avg'"):
        nn.MSELoss(reduction="avg")


# -- optimizers -------------------------------------------------------------------------


def _numpy_optimizer(kind: str, options: dict):
    """MindSpore 2.10's update rules (its CPU kernels), in NumPy float32: a
    step function of (weights, grads, lr, names) over a state dict."""
    f32 = np.float32
    wd = f32(options.get("weight_decay", 0.0))
    state: dict = {}

    def decayed(w, g, name):
        return g + w * wd if wd > 0 and "beta" not in name and "gamma" not in name else g

    def sgd(i, w, g, lr, name):
        mom, damp = f32(options.get("momentum", 0.0)), f32(options.get("dampening", 0.0))
        g = decayed(w, g, name)
        accum, stat = state.setdefault(("accum", i), np.zeros_like(w)), state.setdefault(("stat", i), np.ones_like(w))
        if mom > 0:
            accum = np.where(stat > 0, g, accum * mom + (f32(1) - damp) * g)
            state[("accum", i)], state[("stat", i)] = accum, np.zeros_like(w)
            g = g + mom * accum if options.get("nesterov") else accum
        return w - lr * g

    def momentum(i, w, g, lr, name):
        mom = f32(options["momentum"])
        g = decayed(w, g, name)
        accum = state.get(("moments", i), np.zeros_like(w)) * mom + g
        state[("moments", i)] = accum
        if options.get("use_nesterov"):
            return w - g * lr - accum * mom * lr
        return w - lr * accum

    def adam(i, w, g, lr, name, t):
        b1, b2, eps = f32(0.9), f32(0.999), f32(options.get("eps", 1e-8))
        g = decayed(w, g, name)
        b1p, b2p = b1 ** f32(t), b2 ** f32(t)
        m = state.get(("m", i), np.zeros_like(w))
        v = state.get(("v", i), np.zeros_like(w))
        m = m + (g - m) * (f32(1) - b1)
        v = v + (g * g - v) * (f32(1) - b2)
        state[("m", i)], state[("v", i)] = m, v
        lr_t = lr * np.sqrt(f32(1) - b2p) / (f32(1) - b1p)
        step = m * b1 + (f32(1) - b1) * g if options.get("use_nesterov") else m
        return w - lr_t * step / (np.sqrt(v) + eps)

    def adam_weight_decay(i, w, g, lr, name):
        b1, b2, eps = f32(0.9), f32(0.999), f32(1e-6)
        m = state.get(("m", i), np.zeros_like(w))
        v = state.get(("v", i), np.zeros_like(w))
        m = m + (g - m) * (f32(1) - b1)
        v = v + (g * g - v) * (f32(1) - b2)
        state[("m", i)], state[("v", i)] = m, v
        update = m / (np.sqrt(v) + eps)
        if wd > 0 and "beta" not in name and "gamma" not in name:
            update = update + wd * w
        return w - lr * update

    def step(weights, grads, lr, names, t):
        rule = {"SGD": sgd, "Momentum": momentum, "AdamWeightDecay": adam_weight_decay}.get(kind)
        if kind == "Adam":
            return [adam(i, w, g, lr, n, t) for i, (w, g, n) in enumerate(zip(weights, grads, names))]
        return [rule(i, w, g, lr, n) for i, (w, g, n) in enumerate(zip(weights, grads, names))]

    return step


OPTIMIZERS = [
    ("sgd", "SGD", {}, 0.1),
    ("sgd_momentum_dampening_decay", "SGD", {"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}, 0.1),
    ("sgd_nesterov", "SGD", {"momentum": 0.9, "nesterov": True}, [0.1, 0.05, 0.02, 0.01]),
    ("momentum_decay", "Momentum", {"momentum": 0.9, "weight_decay": 0.01}, 0.1),
    ("momentum_nesterov_tensor_lr", "Momentum", {"momentum": 0.8, "use_nesterov": True},
     Tensor(np.array([0.1, 0.2, 0.3, 0.4], np.float32))),
    ("adam_decay", "Adam", {"weight_decay": 0.01}, 0.01),
    ("adam_nesterov", "Adam", {"use_nesterov": True, "eps": 1e-6}, nn.cosine_decay_lr(0.001, 0.01, 4, 1, 4)),
    ("adam_weight_decay", "AdamWeightDecay", {"weight_decay": 0.1}, 0.01),
]


def _make_optimizer(kind, params, lr, options):
    if kind == "Momentum":
        return nn.Momentum(params, lr, **options)
    return getattr(nn, kind)(params, learning_rate=lr, **options)


@pytest.mark.parametrize("kind, options, lr", [c[1:] for c in OPTIMIZERS], ids=[c[0] for c in OPTIMIZERS])
def test_optimizer_update_matches_mindspores_formula(mode, kind, options, lr):
    rng = np.random.default_rng(2)
    params = [Parameter(rng.standard_normal((3, 2)).astype(np.float32), name="fc.weight"),
              Parameter(rng.standard_normal(2).astype(np.float32), name="ln.gamma")]
    arrays = [p.asnumpy() for p in params]
    expected = [a.copy() for a in arrays]
    optimizer = _make_optimizer(kind, params, lr, options)
    reference = _numpy_optimizer(kind, options)
    rates = np.asarray(lr.asnumpy() if isinstance(lr, Tensor) else lr, np.float32)
    for t in range(4):
        grads = [rng.standard_normal(a.shape).astype(np.float32) for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("error", DonationWarning)
            optimizer(tuple(Tensor(g) for g in grads))
        step_lr = rates if rates.ndim == 0 else rates[t]
        expected = reference(expected, grads, step_lr, ["fc.weight", "ln.gamma"], t + 1)
        for p, a, e in zip(params, arrays, expected):
            assert p.asnumpy() is a  # updated in place
            np.testing.assert_allclose(a, e, rtol=2e-6, atol=1e-7, err_msg=f"step {t}, {p.name}")
    assert optimizer.global_step.asnumpy().tolist() == [4]


def test_optimizer_state_is_named_as_mindspores():
    net = nn.Dense(3, 2)
    names = {
        nn.SGD: ["global_step", "learning_rate", "momentum", "accum.weight", "accum.bias", "stat.weight", "stat.bias"],
        nn.Adam: ["global_step", "learning_rate", "beta1_power", "beta2_power", "moment1.weight", "moment1.bias",
                  "moment2.weight", "moment2.bias"],
        nn.AdamWeightDecay: ["global_step", "learning_rate", "adam_m.weight", "adam_m.bias", "adam_v.weight",
                             "adam_v.bias"],
    }
    for cls, expected in names.items():
        assert [p.name for p in cls(net.trainable_params()).get_parameters()] == expected
    moments = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    assert [p.name for p in moments.moments] == ["moments.weight", "moments.bias"]
    assert moments.parameters[0] is net.weight


def test_learning_rate_lists_are_mindspores():
    # the examples of MindSpore's documentation, with its printed values
    assert nn.piecewise_constant_lr([2, 5, 10], [0.1, 0.05, 0.01]) == [0.1, 0.1, 0.05, 0.05, 0.05] + [0.01] * 5
    assert nn.exponential_decay_lr(0.1, 0.9, 6, 2, 1) == [
        0.1, 0.1, 0.09000000000000001, 0.09000000000000001, 0.08100000000000002, 0.08100000000000002]
    assert nn.exponential_decay_lr(0.1, 0.9, 6, 1, 2, is_stair=True) == [0.1, 0.1, 0.09000000000000001,
                                                                        0.09000000000000001, 0.08100000000000002,
                                                                        0.08100000000000002]
    assert nn.cosine_decay_lr(0.01, 0.1, 6, 2, 2) == [0.1, 0.1, 0.05500000000000001, 0.05500000000000001, 0.01, 0.01]
    with pytest.raises(ValueError, match="cosine_decay_lr: max_lr \\(0.1\\) must be greater than min_lr \\(0.2\\)"):
        nn.cosine_decay_lr(0.2, 0.1, 6, 2, 2)


def test_a_learning_rate_list_that_ends_is_an_error():
    p = Parameter(np.ones(2, np.float32), name="w")
    optimizer = nn.SGD([p], learning_rate=[0.1, 0.2])
    optimizer((np.ones(2, np.float32),))
    optimizer((np.ones(2, np.float32),))
    np.testing.assert_allclose(p.asnumpy(), [1 - 0.1 - 0.2] * 2, rtol=1e-6)
    with pytest.raises(ValueError, match="SGD: the learning rate list has 2 steps, step 2 needs one more"):
        optimizer((np.ones(2, np.float32),))


def test_optimizer_arguments_are_checked():
    params = nn.Dense(2, 2).trainable_params()
    with pytest.raises(ValueError, match="SGD: with nesterov, momentum must be > 0.0 and dampening 0.0"):
        nn.SGD(params, nesterov=True)
    with pytest.raises(TypeError, match="Momentum: momentum must be a float, got int"):
        nn.Momentum(params, 0.1, 1)
    with pytest.raises(ValueError, match="Adam: beta1 must be a float in \\(0, 1\\), got 1.5"):
        nn.Adam(params, beta1=1.5)
    with pytest.raises(UnsupportedSyntaxError, match="parameter groups"):
        nn.SGD([{"params": params}])
    with pytest.raises(ValueError, match="SGD: got 1 gradients for 2 parameters"):
        nn.SGD(params)((np.zeros((2, 2), np.float32),))
    with pytest.raises(ValueError, match="SGD: the gradient of 'weight' has shape \\(2,\\), the parameter \\(2, 2\\)"):
        nn.SGD(params)((np.zeros(2, np.float32), np.zeros(2, np.float32)))
    with pytest.raises(ValueError, match="TrainOneStepCell: sens cannot be 0"):
        nn.TrainOneStepCell(nn.Dense(2, 2), nn.SGD(params), sens=0.0)


def test_an_optimizer_called_in_compiled_code_is_refused():
    net = nn.Dense(2, 1)
    optimizer = nn.SGD(net.trainable_params())
    grad_fn = ms.value_and_grad(lambda x: ops.reduce_sum(net(x)), None, net.trainable_params())

    @ms.jit
    def train_step(x):
        loss, grads = grad_fn(x)
        updated = optimizer(grads)
        return loss, updated

    with pytest.raises(UnsupportedSyntaxError) as e:
        train_step(Tensor(np.ones((1, 2), np.float32)))
    assert "SGD: an optimizer updates Parameters, which compiled code does not change" in str(e.value)
    assert "nn.TrainOneStepCell" in str(e.value)


# -- training wrappers ---------------------------------------------------------------------


def _mlp():
    ms.set_seed(3)
    return nn.SequentialCell(nn.Dense(4, 8), nn.Tanh(), nn.Dense(8, 3))


def _batch(seed=0, n=8):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    return x, (np.abs(x).argmax(axis=1) % 3).astype(np.int32)


def _train_losses(make_optimizer, steps=5, sens=None):
    net = _mlp()
    arrays = [p.asnumpy() for p in net.trainable_params()]
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), make_optimizer(net.trainable_params()),
                               sens=sens)
    losses = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DonationWarning)
        for t in range(steps):
            x, y = _batch(t)
            loss = step(Tensor(x), Tensor(y))
            assert isinstance(loss, Tensor) and loss.shape == ()
            losses.append(float(loss))
    assert all(p.asnumpy() is a for p, a in zip(net.trainable_params(), arrays))  # in place
    return losses, [p.asnumpy().copy() for p in net.trainable_params()]


@pytest.mark.parametrize("make_optimizer", [
    lambda p: nn.Momentum(p, 0.1, 0.9),
    lambda p: nn.Adam(p, 0.01, weight_decay=0.001),
], ids=["momentum", "adam"])
def test_train_one_step_cell_is_the_same_in_both_modes(make_optimizer):
    ms.set_context(mode=ms.GRAPH_MODE)
    graph, graph_params = _train_losses(make_optimizer)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        eager, eager_params = _train_losses(make_optimizer)
    finally:
        ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_allclose(graph, eager, rtol=1e-6)
    for g, e in zip(graph_params, eager_params):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    assert graph[-1] < graph[0]


def test_a_graph_mode_training_step_is_one_native_call(monkeypatch):
    from msir.lowering.jit import NativeFunction

    ms.set_context(mode=ms.GRAPH_MODE)
    net = _mlp()
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), nn.Adam(net.trainable_params(), 0.01))
    x, y = _batch()
    step(Tensor(x), Tensor(y))  # compiles
    calls = [0]
    real = NativeFunction.__call__

    def counting(self, *args, **kwargs):
        calls[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(NativeFunction, "__call__", counting)
    step(Tensor(x), Tensor(y))
    assert calls[0] == 1
    # the checkpointable state, named as MindSpore's checkpoint of the step names it
    assert [p.name for p in step.get_parameters()] == [
        "0.weight", "0.bias", "2.weight", "2.bias", "global_step", "learning_rate", "beta1_power", "beta2_power",
        "moment1.0.weight", "moment1.0.bias", "moment1.2.weight", "moment1.2.bias",
        "moment2.0.weight", "moment2.0.bias", "moment2.2.weight", "moment2.2.bias",
    ]
    assert float(step.optimizer.beta1_power.asnumpy()) == np.float32(0.9) * np.float32(0.9)


def test_the_quick_start_training_loop_equals_train_one_step_cell(mode):
    """MindSpore's quick start: value_and_grad over optimizer.parameters, then optimizer(grads)."""
    net = _mlp()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.SGD(net.trainable_params(), 1e-1, momentum=0.9)

    def forward_fn(data, label):
        logits = net(data)
        return loss_fn(logits, label), logits

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)

    def train_step(data, label):
        (loss, _), grads = grad_fn(data, label)
        optimizer(grads)
        return loss

    losses = [float(train_step(Tensor(x), Tensor(y))) for x, y in (_batch(t) for t in range(5))]
    reference, params = _train_losses(lambda p: nn.SGD(p, 1e-1, momentum=0.9))
    np.testing.assert_allclose(losses, reference, rtol=1e-6)
    for p, q in zip(net.trainable_params(), params):
        np.testing.assert_allclose(p.asnumpy(), q, rtol=1e-5, atol=1e-6)


def test_train_one_step_cell_step_is_forward_backward_update(mode):
    """One step's new weights are w - lr * grad(loss) (plain SGD), grad from msir.grad
    of the same loss; `sens` scales the gradient."""
    net = _mlp()
    x, y = _batch()
    loss_net = nn.WithLossCell(net, nn.CrossEntropyLoss())
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    loss_before = float(loss_net(Tensor(x), Tensor(y)))
    grads = ms.grad(loss_net, None, net.trainable_params())(Tensor(x), Tensor(y))
    step = nn.TrainOneStepCell(loss_net, nn.SGD(net.trainable_params(), 0.5), sens=2.0)
    loss = step(Tensor(x), Tensor(y))
    np.testing.assert_allclose(float(loss), loss_before, rtol=1e-6)  # the loss before the update
    for p, w, g in zip(net.trainable_params(), before, grads):
        np.testing.assert_allclose(p.asnumpy(), w - np.float32(0.5) * (2 * g.asnumpy()), rtol=1e-5, atol=1e-6)


# -- Model -----------------------------------------------------------------------------------

LOSS_LINE = re.compile(r"^epoch: (\d+) step: (\d+), loss is (\S+)$")
TIME_LINE = re.compile(r"^Train epoch time: \d+\.\d{3} ms, per step time: \d+\.\d{3} ms$")


class Recorder(Callback):
    """Keeps what each training step's run parameters held."""

    def __init__(self, stop_at=None):
        self.steps = []
        self.began = self.ended = 0
        self.stop_at = stop_at

    def on_train_begin(self, run_context):
        self.began += 1

    def step_end(self, run_context):
        p = run_context.original_args()
        self.steps.append({k: p[k] for k in ("cur_epoch_num", "cur_step_num", "batch_num", "epoch_num", "mode")})
        self.steps[-1]["loss"] = float(p.net_outputs.asnumpy())
        self.steps[-1]["network"] = (p.train_network, p.optimizer, p.loss_fn, p.network)
        if p.cur_step_num == self.stop_at:
            run_context.request_stop()

    def on_train_end(self, run_context):
        self.ended += 1


def _dataset(n_batches=4, seed=0):
    return [_batch(seed + i, 16) for i in range(n_batches)]


class TupleIteratorDataset:
    """MindSpore's dataset protocol, as `msir.dataset` will provide it."""

    def __init__(self, batches):
        self.batches = batches
        self.resets = 0

    def get_dataset_size(self):
        return len(self.batches)

    def create_tuple_iterator(self):
        return iter([tuple(Tensor(a) for a in b) for b in self.batches])

    def reset(self):
        self.resets += 1


def test_model_train_prints_loss_monitor_lines_and_decreases_the_loss(mode, capsys):
    net = _mlp()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    model = Model(net, loss_fn, optimizer)
    recorder = Recorder()
    model.train(3, _dataset(), callbacks=[LossMonitor(), TimeMonitor(), recorder])
    lines = capsys.readouterr().out.splitlines()
    loss_lines = [LOSS_LINE.match(line) for line in lines if line.startswith("epoch:")]
    assert len(loss_lines) == 12 and all(loss_lines)
    assert [(int(m[1]), int(m[2])) for m in loss_lines] == [(e, s) for e in (1, 2, 3) for s in (1, 2, 3, 4)]
    assert [m[3] for m in loss_lines] == [str(s["loss"]) for s in recorder.steps]  # Python floats, as MindSpore
    assert sum(TIME_LINE.match(line) is not None for line in lines) == 3
    losses = [s["loss"] for s in recorder.steps]
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    assert recorder.began == recorder.ended == 1
    assert [s["cur_step_num"] for s in recorder.steps] == list(range(1, 13))
    assert {(s["batch_num"], s["epoch_num"], s["mode"]) for s in recorder.steps} == {(4, 3, "train")}
    train_network, opt, fn, network = recorder.steps[0]["network"]
    assert isinstance(train_network, nn.TrainOneStepCell) and opt is optimizer and fn is loss_fn and network is net


def test_loss_monitor_per_print_times_and_request_stop(capsys):
    ms.set_context(mode=ms.GRAPH_MODE)
    net = _mlp()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.05))
    recorder = Recorder(stop_at=6)
    model.train(3, TupleIteratorDataset(_dataset()), callbacks=[LossMonitor(per_print_times=3), recorder])
    printed = [LOSS_LINE.match(line) for line in capsys.readouterr().out.splitlines()]
    assert [(int(m[1]), int(m[2])) for m in printed] == [(1, 3), (2, 2)]  # steps 3 and 6 of 4 per epoch
    assert len(recorder.steps) == 6 and recorder.ended == 1


def test_loss_monitor_refuses_a_nan_loss():
    ms.set_context(mode=ms.GRAPH_MODE)
    net = _mlp()
    model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.1))
    x = np.full((2, 4), np.nan, np.float32)
    with pytest.raises(ValueError, match="In epoch: 1 step: 1, loss is NAN or INF, training process cannot continue"):
        model.train(1, [(x, np.zeros((2, 3), np.float32))], callbacks=[LossMonitor()])


def _train_with_dropout(mode):
    ms.set_context(mode=mode)
    ms.set_seed(5)
    net = nn.SequentialCell(nn.Dense(4, 16), nn.ReLU(), nn.Dropout(p=0.5), nn.Dense(16, 3))
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1, momentum=0.9),
                  metrics={"accuracy": nn.Accuracy()})
    recorder = Recorder()
    model.train(2, _dataset(3), callbacks=[recorder])
    return [s["loss"] for s in recorder.steps], model.eval(_dataset(3)), net.training


def test_model_trains_with_dropout_and_evaluates_without_it_the_same_in_both_modes():
    try:
        graph_losses, graph_metrics, graph_training = _train_with_dropout(ms.GRAPH_MODE)
        eager_losses, eager_metrics, eager_training = _train_with_dropout(ms.PYNATIVE_MODE)
    finally:
        ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-6)
    assert graph_metrics == eager_metrics
    assert graph_training is eager_training is False  # eval switched the network to evaluation


def test_model_eval_and_predict(mode):
    net = _mlp()
    model = Model(net, nn.CrossEntropyLoss(), nn.Adam(net.trainable_params(), 0.01),
                  metrics={"accuracy": nn.Accuracy(), "loss": nn.Loss()})
    model.train(2, (b for b in _dataset()))  # a generator is read once, kept for the second epoch
    assert int(model.train_network.optimizer.global_step.asnumpy()[0]) == 8
    data = TupleIteratorDataset(_dataset(3, seed=10))
    metrics = model.eval(data)
    assert set(metrics) == {"accuracy", "loss"} and data.resets == 1
    correct = total = 0
    losses = []
    for x, y in data.batches:
        logits = model.predict(x)
        assert isinstance(logits, Tensor) and logits.shape == (16, 3)
        z = logits.asnumpy().astype(np.float64)
        correct += int((z.argmax(axis=1) == y).sum())
        total += len(y)
        losses.append(-np.mean(_log_softmax(z)[np.arange(len(y)), y]))
    assert metrics["accuracy"] == correct / total
    np.testing.assert_allclose(metrics["loss"], np.mean(losses), rtol=1e-5)


def test_metrics_follow_mindspore():
    acc = nn.Accuracy()
    acc.update(np.array([[0.2, 0.8], [0.9, 0.1], [0.3, 0.7]]), np.array([1, 1, 1]))
    acc.update(Tensor(np.array([[0.6, 0.4]])), Tensor(np.array([[1.0, 0.0]])))  # one-hot labels
    assert acc.eval() == 0.75
    loss = nn.Loss()
    loss.update(Tensor(np.float32(2.0)))
    loss.update(np.array([1.0, 3.0]))
    assert loss.eval() == 2.0
    with pytest.raises(RuntimeError, match="Accuracy.eval: no samples yet"):
        nn.Accuracy().eval()


def test_model_errors_name_the_problem():
    net = _mlp()
    with pytest.raises(ValueError, match="Model: metrics need an eval_network, or a loss_fn"):
        Model(net, metrics={"accuracy": nn.Accuracy()})
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params()))
    with pytest.raises(TypeError, match="Model.train: the dataset must have create_tuple_iterator\\(\\) and "
                       "get_dataset_size\\(\\), or be an iterable of \\(data, label\\) tuples, got int"):
        model.train(1, 5)
    with pytest.raises(ValueError, match="Model.train: with a loss_fn each batch must be \\(data, label\\), got 3"):
        model.train(1, [(*_batch(), np.zeros(1))])
    with pytest.raises(ValueError, match="Model.eval: give metrics"):
        model.eval(_dataset())
