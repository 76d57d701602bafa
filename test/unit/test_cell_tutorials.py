"""MindSpore's tutorials, written as MindSpore writes them, with only the
imports changed (`import msir as mindspore`), in both modes (issue 14).

* Network building (the quick start's `Network`: Flatten, a SequentialCell
  of Dense and ReLU), called on a Tensor; its parameters' names and shapes.
* Automatic differentiation: `grad(function, (2, 3))`, `has_aux` with
  `grads, (z,) = grad_fn(...)`, `stop_gradient`, and the network form
  `value_and_grad(forward_fn, None, weights=model.trainable_params())`.
* The quick start's training loop, `value_and_grad(forward_fn, None,
  params, has_aux=True)`: the losses of a few steps against a NumPy
  implementation of the same network, loss and update. (MindSpore's
  `nn.CrossEntropyLoss` and `nn.SGD` are the next step of the issue; here
  they are `ops.cross_entropy` and the update written out.)

MindSpore is not installed here: the expected numbers are computed with
NumPy from the same initial parameters (MindSpore's random initial values
cannot be reproduced by another generator; the tests fix them).
"""

from __future__ import annotations

import numpy as np
import pytest

import msir as mindspore
from msir import Parameter, Tensor, nn, ops


@pytest.fixture(params=["graph", "pynative"])
def mode(request):
    mindspore.set_context(mode=mindspore.GRAPH_MODE if request.param == "graph" else mindspore.PYNATIVE_MODE)
    return request.param


class Network(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense_relu_sequential = nn.SequentialCell(
            nn.Dense(28 * 28, 512),
            nn.ReLU(),
            nn.Dense(512, 512),
            nn.ReLU(),
            nn.Dense(512, 10),
        )

    def construct(self, x):
        x = self.flatten(x)
        logits = self.dense_relu_sequential(x)
        return logits


def network_numpy(model, x):
    params = {name: p.asnumpy().astype(np.float64) for name, p in model.parameters_and_names()}
    h = x.reshape(x.shape[0], -1)
    for i in (0, 2, 4):
        h = h @ params[f"dense_relu_sequential.{i}.weight"].T + params[f"dense_relu_sequential.{i}.bias"]
        if i < 4:
            h = np.maximum(h, 0)
    return h


def test_network_building(mode):
    mindspore.set_seed(0)
    model = Network()
    X = ops.ones((1, 28, 28), mindspore.float32)
    logits = model(X)
    assert isinstance(logits, Tensor) and logits.shape == (1, 10) and logits.dtype == mindspore.float32
    np.testing.assert_allclose(logits.asnumpy(), network_numpy(model, X.asnumpy()), rtol=1e-4, atol=1e-6)
    pred_probab = nn.Softmax(axis=1)(logits)
    y_pred = pred_probab.argmax(1)
    assert y_pred.asnumpy().tolist() == [int(np.argmax(network_numpy(model, X.asnumpy())))]
    shapes = [(name, param.shape) for name, param in model.parameters_and_names()]
    assert shapes == [
        ("dense_relu_sequential.0.weight", (512, 784)), ("dense_relu_sequential.0.bias", (512,)),
        ("dense_relu_sequential.2.weight", (512, 512)), ("dense_relu_sequential.2.bias", (512,)),
        ("dense_relu_sequential.4.weight", (10, 512)), ("dense_relu_sequential.4.bias", (10,)),
    ]
    assert str(model.dense_relu_sequential[0].weight[:2].dtype) == "Float32"


def bce_with_logits(z, y):
    return np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z))))


def test_automatic_differentiation(mode):
    rng = np.random.default_rng(0)
    x = ops.ones(5, mindspore.float32)  # input tensor
    y = ops.zeros(3, mindspore.float32)  # expected output
    w = Parameter(Tensor(rng.standard_normal((5, 3)), mindspore.float32), name="w")  # weight
    b = Parameter(Tensor(rng.standard_normal((3,)), mindspore.float32), name="b")  # bias

    def function(x, y, w, b):
        z = ops.matmul(x, w) + b
        loss = ops.binary_cross_entropy_with_logits(z, y, ops.ones_like(z), ops.ones_like(z))
        return loss

    z_np = x.asnumpy() @ w.asnumpy() + b.asnumpy()
    sig = 1 / (1 + np.exp(-z_np.astype(np.float64)))
    expected_loss = bce_with_logits(z_np.astype(np.float64), 0.0)
    expected_gb = (sig - 0.0) / 3
    expected_gw = np.outer(x.asnumpy(), expected_gb)

    loss = function(x, y, w, b)
    np.testing.assert_allclose(float(loss), expected_loss, rtol=1e-6)

    grad_fn = mindspore.grad(function, (2, 3))
    grads = grad_fn(x, y, w, b)
    np.testing.assert_allclose(grads[0].asnumpy(), expected_gw, rtol=1e-5)
    np.testing.assert_allclose(grads[1].asnumpy(), expected_gb, rtol=1e-5)

    def function_with_logits(x, y, w, b):
        z = ops.matmul(x, w) + b
        loss = ops.binary_cross_entropy_with_logits(z, y, ops.ones_like(z), ops.ones_like(z))
        return loss, z

    grad_fn = mindspore.grad(function_with_logits, (2, 3), has_aux=True)
    grads, (z,) = grad_fn(x, y, w, b)
    np.testing.assert_allclose(grads[0].asnumpy(), expected_gw, rtol=1e-5)
    np.testing.assert_allclose(z.asnumpy(), z_np, rtol=1e-6)

    def function_stop_gradient(x, y, w, b):
        z = ops.matmul(x, w) + b
        loss = ops.binary_cross_entropy_with_logits(z, y, ops.ones_like(z), ops.ones_like(z))
        return loss, ops.stop_gradient(z)

    grad_fn = mindspore.grad(function_stop_gradient, (2, 3))  # without has_aux: only the loss is differentiable
    grads = grad_fn(x, y, w, b)
    np.testing.assert_allclose(grads[1].asnumpy(), expected_gb, rtol=1e-5)

    class Network(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = w
            self.b = b

        def construct(self, x):
            z = ops.matmul(x, self.w) + self.b
            return z

    model = Network()

    def forward_fn(x, y):
        z = model(x)
        loss = ops.binary_cross_entropy_with_logits(z, y, ops.ones_like(z), ops.ones_like(z))
        return loss

    grad_fn = mindspore.value_and_grad(forward_fn, None, weights=model.trainable_params())
    loss, grads = grad_fn(x, y)
    np.testing.assert_allclose(float(loss), expected_loss, rtol=1e-6)
    np.testing.assert_allclose(grads[0].asnumpy(), expected_gw, rtol=1e-5)
    np.testing.assert_allclose(grads[1].asnumpy(), expected_gb, rtol=1e-5)


class SmallNetwork(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense_relu_sequential = nn.SequentialCell(nn.Dense(4 * 4, 12), nn.ReLU(), nn.Dense(12, 5))

    def construct(self, x):
        return self.dense_relu_sequential(self.flatten(x))


def numpy_training(params, data, label, lr, steps):
    """The same network, mean cross entropy and SGD, in float64 NumPy: the loss of each step."""
    w1, b1, w2, b2 = (p.astype(np.float64) for p in params)
    x = data.reshape(data.shape[0], -1).astype(np.float64)
    n = x.shape[0]
    one_hot = np.eye(5)[label]
    losses = []
    for _ in range(steps):
        pre = x @ w1.T + b1
        h = np.maximum(pre, 0)
        logits = h @ w2.T + b2
        shifted = logits - logits.max(1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        losses.append(-np.mean(np.sum(one_hot * log_p, 1)))
        d_logits = (np.exp(log_p) - one_hot) / n
        d_w2, d_b2 = d_logits.T @ h, d_logits.sum(0)
        d_pre = (d_logits @ w2) * (pre > 0)
        d_w1, d_b1 = d_pre.T @ x, d_pre.sum(0)
        w1, b1, w2, b2 = w1 - lr * d_w1, b1 - lr * d_b1, w2 - lr * d_w2, b2 - lr * d_b2
    return losses


def test_training_loop_value_and_grad_with_aux(mode):
    mindspore.set_seed(1)
    model = SmallNetwork()
    rng = np.random.default_rng(2)
    data = Tensor(rng.standard_normal((8, 4, 4)).astype(np.float32))
    label = Tensor(rng.integers(0, 5, 8).astype(np.int32))
    initial = [p.asnumpy().copy() for p in model.trainable_params()]
    learning_rate = 0.5

    def forward_fn(data, label):
        logits = model(data)
        loss = ops.cross_entropy(logits, label)
        return loss, logits

    grad_fn = mindspore.value_and_grad(forward_fn, None, model.trainable_params(), has_aux=True)

    def train_step(data, label):
        (loss, _), grads = grad_fn(data, label)
        for param, grad in zip(model.trainable_params(), grads):
            param.set_data(param - learning_rate * grad)
        return loss

    model.set_train()
    losses = [float(train_step(data, label)) for _ in range(4)]
    expected = numpy_training(initial, data.asnumpy(), label.asnumpy(), learning_rate, 4)
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    assert losses[-1] < losses[0]
