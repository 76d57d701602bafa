"""`nn.Conv2d`, `nn.MaxPool2d`, `nn.AvgPool2d`, `nn.BatchNorm1d`, `nn.BatchNorm2d`:
MindSpore's defaults and numbers, gradients against finite differences, and
the errors naming the layer.

The expected numbers were produced by MindSpore 2.10.0 in a side environment
on the inputs below (NumPy's legacy `RandomState(0)`, stable across
versions; MindSpore is not a test dependency). test_conv_pool_ops.py checks the ops
underneath against MindSpore's `nn.Conv2d` / pooling outputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import numerical_vjp, pynative
from test_conv_pool_ops import MS_CONV, MS_POOL, _mindspore_inputs

import msir
from msir import Tensor, nn
from msir.common import dtype as mstype
from msir.errors import ShapeError, UnsupportedSyntaxError


def _bn_inputs():
    rng = np.random.RandomState(0)
    _mindspore_inputs()  # the same stream: the inputs of test_conv_pool_ops come first
    for shape in ((2, 4, 7, 6), (6, 2, 3, 3), (1, 2, 5, 5)):
        rng.randn(*shape)
    xb = np.round(rng.randn(4, 3, 2, 2).astype(np.float32), 2)
    xb1 = np.round(rng.randn(5, 3).astype(np.float32), 2)
    return xb, xb1


def test_conv2d_defaults_are_mindspores():
    conv = nn.Conv2d(4, 6, 3)
    assert conv.pad_mode == "same" and not conv.has_bias and conv.bias is None
    assert [p.name for p in conv.trainable_params()] == ["weight"]
    assert conv.weight.shape == (6, 4, 3, 3) and conv.weight.dtype == mstype.float32
    # HeUniform(negative_slope=sqrt(5)): bound sqrt(6 / ((1 + 5) * fan_in)) = 1 / sqrt(fan_in)
    bound = 1 / math.sqrt(4 * 9)
    w = conv.weight.asnumpy()
    assert np.all(np.abs(w) <= bound) and np.abs(w).max() > 0.8 * bound
    biased = nn.Conv2d(4, 6, 3, group=2, has_bias=True)
    assert biased.weight.shape == (6, 2, 3, 3) and biased.bias.shape == (6,)
    assert np.all(np.abs(biased.bias.asnumpy()) <= 1 / math.sqrt(2 * 9))


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_conv2d_matches_mindspore(mode):
    x, w, _ = _mindspore_inputs()
    (pad_mode, padding, stride, dilation), shape, total, rows = MS_CONV[2]
    conv = nn.Conv2d(4, 6, 3, stride, pad_mode, padding, dilation, group=2, weight_init=Tensor(w))
    y = (pynative(lambda: conv(Tensor(x))) if mode == "pynative" else conv(Tensor(x))).asnumpy()
    assert y.shape == shape
    np.testing.assert_allclose(y[0, :, 0, :], rows, atol=2e-5)
    np.testing.assert_allclose(y.sum(dtype=np.float64), total, rtol=1e-5)


def test_pooling_layers_match_mindspore():
    _, _, xp = _mindspore_inputs()
    for (kind, k, s, mode), expected in MS_POOL.items():
        layer = (nn.MaxPool2d if kind == "max" else nn.AvgPool2d)(kernel_size=k, stride=s, pad_mode=mode.upper())
        np.testing.assert_allclose(pynative(lambda: layer(Tensor(xp))).asnumpy(), expected, atol=1e-6)


def _fd_check(net, x, rtol=1e-6):
    """d sum(tanh(net(x))) / d x and / d each trainable parameter against central differences (float64)."""
    params = net.trainable_params()

    def loss(x):
        return np.sum(np.tanh(net(x)))

    def loss_at(xs):
        for p, v in zip(params, xs[1:]):
            p.set_data(v)
        return pynative(lambda: loss(Tensor(xs[0])).asnumpy())

    _, (gx, gws) = pynative(lambda: msir.value_and_grad(loss, 0, params)(Tensor(x)))
    values = [x] + [p.asnumpy().copy() for p in params]
    for i, got in enumerate([gx, *gws]):
        np.testing.assert_allclose(np.asarray(got.asnumpy() if hasattr(got, "asnumpy") else got),
                                   numerical_vjp(loss_at, values, np.ones(()), i), rtol=rtol, atol=1e-8)
        loss_at(values)  # the parameters back at their values


def test_layer_gradients_against_finite_differences():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 5, 5))
    msir.set_seed(0)
    _fd_check(nn.Conv2d(4, 2, 3, stride=2, pad_mode="pad", padding=(1, 0, 0, 1), group=2, has_bias=True,
                        dtype=mstype.float64), x)
    _fd_check(nn.SequentialCell(nn.MaxPool2d(3, 2, pad_mode="same"), nn.AvgPool2d(2, 1, pad_mode="same")),
              rng.permutation(np.arange(100.0)).reshape(1, 4, 5, 5) / 50)
    bn = nn.BatchNorm2d(4, dtype=mstype.float64)
    bn.set_train()
    _fd_check(bn, x)


def test_batchnorm2d_matches_mindspore():
    xb, _ = _bn_inputs()
    bn = nn.BatchNorm2d(3)
    assert [(p.name, p.requires_grad) for p in bn.get_parameters()] == [
        ("mean", False), ("variance", False), ("gamma", True), ("beta", True)]
    bn.set_train()
    y = pynative(lambda: bn(Tensor(xb))).asnumpy()
    np.testing.assert_allclose(y[0, :, 0, 0], [2.150784730911255, -0.6310760974884033, 1.1273473501205444], rtol=1e-5)
    np.testing.assert_allclose((y ** 2).sum(), 47.99952697753906, rtol=1e-6)
    np.testing.assert_allclose(bn.moving_mean.asnumpy(), [-0.008062501437962055, -0.04568750038743019,
                                                          0.0033750012516975403], rtol=1e-5)
    np.testing.assert_allclose(bn.moving_variance.asnumpy(), [1.0782859325408936, 0.9849315881729126,
                                                              0.9954171180725098], rtol=1e-6)
    pynative(lambda: bn(Tensor(xb * 2 + 1)))
    np.testing.assert_allclose(bn.moving_mean.asnumpy(), [0.0766187384724617, -0.032493747770786285,
                                                          0.10978750884532928], rtol=1e-5)
    np.testing.assert_allclose(bn.moving_variance.asnumpy(), [1.6836011409759521, 1.2261649370193481,
                                                              1.2775440216064453], rtol=1e-6)
    bn.set_train(False)
    expected = [2.02181077003479, -0.8917921185493469, 0.8760699033737183]
    np.testing.assert_allclose(pynative(lambda: bn(Tensor(xb))).asnumpy()[0, :, 0, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(bn(Tensor(xb)).asnumpy()[0, :, 0, 0], expected, rtol=1e-5)  # compiled


def test_batchnorm1d_matches_mindspore():
    _, xb1 = _bn_inputs()
    bn = nn.BatchNorm1d(3, momentum=0.8)
    bn.set_train()
    y = pynative(lambda: bn(Tensor(xb1))).asnumpy()
    np.testing.assert_allclose(y[:2], [[-0.3444303572177887, 0.8898694515228271, 0.615102231502533],
                                       [-0.6519574522972107, 0.3123731315135956, -1.295044183731079]], rtol=1e-5)
    np.testing.assert_allclose(bn.moving_mean.asnumpy(), [-0.0032000017818063498, 0.16840000450611115,
                                                          -0.21640001237392426], rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(bn.moving_variance.asnumpy(), [0.9057360291481018, 0.9451240301132202,
                                                              1.1256239414215088], rtol=1e-6)


def test_wrong_input_shapes_name_the_layer():
    x = Tensor(np.zeros((2, 3, 8, 8), np.float32))
    cases = [
        (nn.Conv2d(4, 6, 3), r"Conv2d: expected an input of shape \(\?, 4, \?, \?\), got \(2, 3, 8, 8\)"),
        (nn.MaxPool2d(2, 2), r"MaxPool2d: expected an input of shape \(\?, \?, \?, \?\), got \(3, 8, 8\)"),
        (nn.BatchNorm2d(4), r"BatchNorm2d: expected an input of shape \(\?, 4, \?, \?\), got \(2, 3, 8, 8\)"),
        (nn.BatchNorm1d(4), r"BatchNorm1d: expected an input of shape \(\?, 4\), got \(2, 3, 8, 8\)"),
    ]
    for layer, message in cases:
        arg = Tensor(np.zeros((3, 8, 8), np.float32)) if isinstance(layer, nn.MaxPool2d) else x
        with pytest.raises(ShapeError, match=message):
            pynative(lambda: layer(arg))
    with pytest.raises(ValueError, match="Conv2d: pad_mode must be one of 'same', 'valid', 'pad', got 'full'"):
        nn.Conv2d(1, 1, 3, pad_mode="full")
    with pytest.raises(UnsupportedSyntaxError, match="MaxPool2d: ceil_mode=True is not supported yet"):
        nn.MaxPool2d(2, ceil_mode=True)
