"""msir.nn's layers (issue 14, step b): each layer's forward against NumPy and
its gradients (input and parameters) against central finite differences, in
both modes; MindSpore's initialisers and defaults; Dropout's train/eval
behaviour and reproducibility under `set_seed`; bad arguments.

Gradients are checked in float64 (the layers take `dtype=ms.float64`), with
the loss sum(layer(x) * R) for a fixed random R.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import msir as ms
from msir import Tensor, nn, ops
from msir.common.initializer import HeUniform, Normal, TruncatedNormal, Uniform, XavierUniform, initializer
from msir.errors import ShapeError


@pytest.fixture(params=["graph", "pynative"])
def mode(request):
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    return request.param


RNG = np.random.default_rng(0)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def check_gradients(layer, x, rtol=1e-6, atol=1e-8, eps=1e-6):
    """The gradients of sum(layer(x) * R) for x and every trainable parameter
    (one value_and_grad call) against central differences."""
    x = np.asarray(x, np.float64)
    r = np.random.default_rng(1).standard_normal(np.shape(layer(Tensor(x)).asnumpy()))
    params = layer.trainable_params()
    inputs = {"x": x}

    def loss(inp):
        return ops.reduce_sum(layer(inp) * Tensor(r))

    def loss_value() -> float:
        return float(loss(Tensor(inputs["x"])).asnumpy())

    def numeric(read, write):
        base = read().copy()
        grad = np.zeros_like(base)
        for i in np.ndindex(base.shape):
            for sign in (1, -1):
                pert = base.copy()
                pert[i] += sign * eps
                write(pert)
                grad[i] += sign * loss_value() / (2 * eps)
        write(base)
        return grad

    _, (gx, gparams) = ms.value_and_grad(loss, 0, weights=params)(Tensor(x))
    num_x = numeric(lambda: inputs["x"], lambda v: inputs.__setitem__("x", v))
    np.testing.assert_allclose(gx.asnumpy(), num_x, rtol=rtol, atol=atol)
    assert len(gparams) == len(params)
    for p, g in zip(params, gparams):
        assert g.shape == p.shape and g.dtype == p.dtype
        np.testing.assert_allclose(g.asnumpy(), numeric(p.asnumpy, p.set_data), rtol=rtol, atol=atol, err_msg=p.name)


X64 = RNG.standard_normal((3, 4))


@pytest.mark.parametrize(
    "layer, reference",
    [
        (nn.ReLU(), lambda x: np.maximum(x, 0)),
        (nn.GELU(), gelu_tanh),
        (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
        (nn.Tanh(), np.tanh),
        (nn.Softmax(), lambda x: softmax(x, -1)),
        (nn.Softmax(axis=0), lambda x: softmax(x, 0)),
    ],
    ids=["relu", "gelu", "sigmoid", "tanh", "softmax", "softmax0"],
)
def test_activations(mode, layer, reference):
    np.testing.assert_allclose(layer(Tensor(X64)).asnumpy(), reference(X64), rtol=1e-12, atol=1e-14)
    out32 = layer(Tensor(X64.astype(np.float32)))
    assert out32.dtype == ms.float32
    check_gradients(layer, X64)


def test_gelu_exact_form_needs_erf():
    from msir.errors import UnsupportedSyntaxError

    with pytest.raises((UnsupportedSyntaxError, ValueError), match="erf"):
        nn.GELU(approximate=False)(Tensor(X64))


def test_flatten(mode):
    x = RNG.standard_normal((2, 3, 4, 5))
    np.testing.assert_array_equal(nn.Flatten()(Tensor(x)).asnumpy(), x.reshape(2, 60))
    np.testing.assert_array_equal(nn.Flatten(1, 2)(Tensor(x)).asnumpy(), x.reshape(2, 12, 5))
    np.testing.assert_array_equal(nn.Flatten(0, -1)(Tensor(x)).asnumpy(), x.reshape(120))
    check_gradients(nn.Flatten(), x[:, :2, :2, :2])


def test_dense_defaults_are_mindspores():
    ms.set_seed(3)
    d = nn.Dense(400, 300)
    w, b = d.weight.asnumpy(), d.bias.asnumpy()
    assert w.shape == (300, 400) and b.shape == (300,) and w.dtype == np.float32
    bound = 1 / math.sqrt(400)  # HeUniform(sqrt(5)) and Uniform(1/sqrt(in)) both give 1/sqrt(fan_in)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    np.testing.assert_allclose(w.std(), bound / math.sqrt(3), rtol=0.02)
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.95 * bound
    assert [p.name for p in d.trainable_params()] == ["weight", "bias"]
    ms.set_seed(3)
    np.testing.assert_array_equal(nn.Dense(400, 300).weight.asnumpy(), w)  # reproducible


def test_dense(mode):
    w = RNG.standard_normal((3, 4))
    b = RNG.standard_normal(3)
    d = nn.Dense(4, 3, weight_init=Tensor(w), bias_init=Tensor(b), dtype=ms.float64)
    np.testing.assert_allclose(d(Tensor(X64)).asnumpy(), X64 @ w.T + b, rtol=1e-12)
    x3 = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(d(Tensor(x3)).asnumpy(), x3 @ w.T + b, rtol=1e-12)  # leading axes
    check_gradients(d, X64)
    relu = nn.Dense(4, 3, weight_init=Tensor(w), has_bias=False, activation="relu", dtype=ms.float64)
    assert relu.bias is None and [p.name for p in relu.trainable_params()] == ["weight"]
    np.testing.assert_allclose(relu(Tensor(X64)).asnumpy(), np.maximum(X64 @ w.T, 0), rtol=1e-12)
    check_gradients(relu, X64)


def test_dense_bad_arguments():
    with pytest.raises(ShapeError, match=r"Dense: weight_init has shape \(4, 3\), expected \(3, 4\)"):
        nn.Dense(4, 3, weight_init=Tensor(np.zeros((4, 3))))
    with pytest.raises(ValueError, match="Dense: in_channels must be a positive int"):
        nn.Dense(0, 3)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        nn.Dense(2, 3, activation="swish")


def test_layer_input_shape_errors(mode):
    with pytest.raises(ShapeError, match=r"Dense: expected an input of shape \(\.\.\., 4\), got \(3, 5\)"):
        nn.Dense(4, 3)(Tensor(np.ones((3, 5), np.float32)))
    with pytest.raises(ShapeError, match=r"LayerNorm: expected an input of shape \(\.\.\., 4\), got \(2, 3\)"):
        nn.LayerNorm((4,))(Tensor(np.ones((2, 3), np.float32)))


def test_layer_norm(mode):
    gamma, beta = RNG.standard_normal(4), RNG.standard_normal(4)
    ln = nn.LayerNorm((4,), gamma_init=Tensor(gamma), beta_init=Tensor(beta), dtype=ms.float64)
    assert ln.epsilon == 1e-7  # MindSpore's default
    mean = X64.mean(-1, keepdims=True)
    var = X64.var(-1, keepdims=True)
    np.testing.assert_allclose(ln(Tensor(X64)).asnumpy(), (X64 - mean) / np.sqrt(var + 1e-7) * gamma + beta,
                               rtol=1e-10, atol=1e-12)
    check_gradients(ln, X64, rtol=1e-5, atol=1e-7)
    two = nn.LayerNorm((3, 4), begin_norm_axis=-2, begin_params_axis=-2, dtype=ms.float64)
    x3 = RNG.standard_normal((2, 3, 4))
    m, v = x3.mean((1, 2), keepdims=True), x3.var((1, 2), keepdims=True)
    np.testing.assert_allclose(two(Tensor(x3)).asnumpy(), (x3 - m) / np.sqrt(v + 1e-7), rtol=1e-10, atol=1e-12)
    defaults = nn.LayerNorm((4,))
    assert defaults.gamma.asnumpy().tolist() == [1, 1, 1, 1] and not defaults.beta.asnumpy().any()
    assert [p.name for p in defaults.trainable_params()] == ["gamma", "beta"]
    with pytest.raises(ValueError, match="begin_norm_axis and begin_params_axis must be -1"):
        nn.LayerNorm((4,), begin_norm_axis=1)


def test_embedding(mode):
    ms.set_seed(0)
    emb = nn.Embedding(6, 3, padding_idx=2)
    table = emb.embedding_table.asnumpy()
    assert table.shape == (6, 3) and not table[2].any()
    assert 0.005 < table.std() < 0.02  # Normal(sigma=0.01), MindSpore's default
    ids = np.array([[0, 2, 5], [5, 5, 1]], np.int32)
    out = emb(Tensor(ids))
    np.testing.assert_array_equal(out.asnumpy(), table[ids])
    r = np.random.default_rng(1).standard_normal((2, 3, 3)).astype(np.float32)

    def loss(i):
        return ops.reduce_sum(emb(i) * Tensor(r))

    (g,) = ms.grad(loss, None, weights=emb.trainable_params())(Tensor(ids))
    expected = np.zeros((6, 3), np.float32)
    np.add.at(expected, ids.ravel(), r.reshape(-1, 3))
    np.testing.assert_allclose(g.asnumpy(), expected, rtol=1e-6)
    assert [p.name for p in emb.trainable_params()] == ["embedding_table"]


def test_dropout_is_the_identity_in_evaluation(mode):
    d = nn.Dropout(p=0.3)
    assert d.training is False
    np.testing.assert_array_equal(d(Tensor(X64)).asnumpy(), X64)
    assert nn.Dropout(keep_prob=0.8).p == pytest.approx(0.2) and nn.Dropout().p == 0.5
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        nn.Dropout(p=1.0)


def test_dropout_in_training_is_reproducible_and_the_same_in_both_modes():
    x = np.ones((50, 40), np.float32)
    outs = []
    for m in (ms.GRAPH_MODE, ms.PYNATIVE_MODE):
        ms.set_context(mode=m)
        d = nn.Dropout(p=0.25).set_train()
        ms.set_seed(11)
        first, second = d(Tensor(x)).asnumpy(), d(Tensor(x)).asnumpy()
        outs.append((first, second))
        assert set(np.unique(first).tolist()) <= {0.0, np.float32(1 / 0.75)}
        assert abs((first == 0).mean() - 0.25) < 0.03  # 2000 draws
        assert not np.array_equal(first, second)  # a new mask at every call
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


class WithDropout(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(6, 6, weight_init="ones", bias_init="zeros")
        self.dropout = nn.Dropout(p=0.5)

    def construct(self, x):
        return self.dropout(self.dense(x))


def test_set_train_switches_a_compiled_dropout_without_stale_code(monkeypatch):
    import msir.frontend.driver as driver

    traces = [0]
    real = driver.trace

    def counting(*args, **kwargs):
        traces[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "trace", counting)
    net = WithDropout()
    x = Tensor(np.ones((40, 6), np.float32))
    evaluated = net(x).asnumpy()
    np.testing.assert_array_equal(evaluated, np.full((40, 6), 6.0, np.float32))  # eval: no dropout
    net.set_train()
    trained = net(x).asnumpy()
    assert set(np.unique(trained).tolist()) == {0.0, 12.0}  # dropped, or scaled by 1 / (1 - p)
    net.set_train(False)
    np.testing.assert_array_equal(net(x).asnumpy(), evaluated)
    assert traces[0] == 2  # eval and train; eval again runs its first version


def test_dropout_gradient_is_its_mask(mode):
    d = nn.Dropout(p=0.5).set_train()
    x = RNG.standard_normal((4, 6))
    r = RNG.standard_normal((4, 6))
    ms.set_seed(5)
    y = d(Tensor(x)).asnumpy()
    ms.set_seed(5)
    g = ms.grad(lambda_dropout_loss(d, r))(Tensor(x))
    np.testing.assert_allclose(g.asnumpy(), (y != 0) * 2.0 * r, rtol=1e-12)


def lambda_dropout_loss(d, r):
    def loss(x):
        return ops.reduce_sum(d(x) * Tensor(r))

    return loss


def test_initializers():
    ms.set_seed(0)
    assert not initializer("zeros", (2, 3)).asnumpy().any()
    assert initializer("ones", (2,), ms.float64).asnumpy().tolist() == [1.0, 1.0]
    assert initializer(0.5, 3).asnumpy().tolist() == [0.5, 0.5, 0.5]
    n = initializer(Normal(sigma=0.2, mean=1.0), (200, 200)).asnumpy()
    assert abs(n.mean() - 1.0) < 0.01 and abs(n.std() - 0.2) < 0.01
    u = initializer(Uniform(scale=0.3), (100, 100)).asnumpy()
    assert np.abs(u).max() <= 0.3 and np.abs(u).max() > 0.29
    t = initializer(TruncatedNormal(sigma=1.0), (100, 100)).asnumpy()
    assert np.abs(t).max() <= 2.0
    x = initializer(XavierUniform(), (30, 20)).asnumpy()
    assert np.abs(x).max() <= math.sqrt(6 / 50)
    h = initializer(HeUniform(), (30, 20)).asnumpy()  # relu-like gain sqrt(2): bound sqrt(6 / fan_in)
    assert np.abs(h).max() <= math.sqrt(6 / 20) and np.abs(h).max() > 0.95 * math.sqrt(6 / 20)
    assert initializer("he_uniform", (4, 4)).dtype == ms.float32
    with pytest.raises(ValueError, match="unknown initializer 'glorot'"):
        initializer("glorot", (2, 2))
    with pytest.raises(ValueError, match=r"the Tensor has shape \(2,\), the parameter \(3,\)"):
        initializer(Tensor(np.zeros(2)), (3,))
