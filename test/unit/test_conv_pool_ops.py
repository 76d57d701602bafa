"""conv2d, max_pool2d and avg_pool2d through the API: `msir.ops` in both modes
against numbers MindSpore 2.10.0 produced, compiled against eager, and their
errors.

The MindSpore numbers were obtained by running `mindspore.nn.Conv2d`
(`weight_init` a fixed Tensor, `has_bias=False`), `nn.MaxPool2d` and
`nn.AvgPool2d` in a side environment on the inputs below (NumPy's legacy
`RandomState(0)`, which is stable across NumPy versions, rounded to 2 or 1
decimals); MindSpore is not a test dependency. The rules' finite-difference
checks are in test_grad_rules.py (`_window_cases`).
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import pynative
from test_grad_rules import conv2d_reference, pool2d_reference

import msir
from msir import ops
from msir.errors import ShapeError, UnsupportedSyntaxError


def _mindspore_inputs():
    rng = np.random.RandomState(0)
    x = np.round(rng.randn(2, 4, 7, 6).astype(np.float32), 2)
    w = np.round(rng.randn(6, 2, 3, 3).astype(np.float32), 2)
    xp = np.round(rng.randn(1, 2, 5, 5).astype(np.float32), 1)
    return x, w, xp


# nn.Conv2d(4, 6, 3, weight_init=Tensor(w), has_bias=False, group=2, pad_mode=, padding=, stride=,
# dilation=)(x): (those four arguments), the shape, the sum of all outputs and y[0, :, 0, :]
MS_CONV = [
    (("same", 0, 2, 1), (2, 6, 4, 3), 20.192190170288086,
     [[5.2107, 5.3719, -1.1179], [2.4964, 1.9111, -0.15], [-1.506, 2.954099, -1.0064], [-3.6201, 3.1624, 2.1881],
      [-0.3315, 4.766, -0.3819], [-2.1955, 3.6987, -1.4971]]),
    (("valid", 0, 1, 2), (2, 6, 3, 2), -3.047398090362549,
     [[-3.6121, 1.8819], [-1.493, 0.4449], [-0.1137, -1.773], [0.9268, 2.694901], [2.986601, 3.7353],
      [-0.2556, 1.3707]]),
    (("pad", (1, 0, 2, 1), (2, 1), 1), (2, 6, 3, 7), 57.57209396362305,
     [[1.2005, -3.5055, 5.2107, 0.8449, 5.3719, 3.3435, -1.1179],
      [4.0303, -0.8388, 2.4964, 0.5491, 1.9111, 0.0003, -0.15],
      [-2.9429, -0.1926, -1.506, -3.2008, 2.954099, 1.0867, -1.0064],
      [-0.9818, -4.5125, -3.6201, -0.081, 3.1624, 1.8855, 2.1881],
      [0.3686, -4.7514, -0.3315, 5.2118, 4.766, 0.9425, -0.3819],
      [-1.6791, -5.4029, -2.1955, 1.9052, 3.6987, -1.6025, -1.4971]]),
]

# nn.MaxPool2d / nn.AvgPool2d(kernel_size, stride, pad_mode)(xp)
MS_POOL = {
    ("avg", 2, 2, "same"): [[[[-0.1, 0.2, -0.25], [0.425, -1.025, 0.2], [0.95, -0.9, -2.3]],
                             [[0.25, -0.1, 0.2], [-0.125, 0.55, -0.2], [-0.4, 0.4, 1.3]]]],
    ("max", 2, 2, "same"): [[[[0.9, 0.8, 0.3], [2.0, -0.4, 0.2], [2.4, -0.8, -2.3]],
                             [[1.7, 1.3, 1.1], [0.9, 1.5, -0.0], [0.2, 1.1, 1.3]]]],
    ("avg", 3, 2, "same"): [[[[-0.1, -0.066667, -0.25], [0.083333, -0.266667, -0.233333],
                              [0.325, -0.216667, -0.825]],
                             [[0.25, -0.233333, -0.2], [0.366667, 0.188889, -0.083333], [-0.65, -0.133333, 0.75]]]],
    ("max", 3, 2, "same"): [[[[0.9, 0.8, 0.5], [2.0, 2.0, 0.5], [2.4, 2.4, 0.2]],
                             [[1.7, 1.3, 1.1], [1.7, 1.5, 1.1], [0.9, 1.5, 1.3]]]],
    ("avg", 2, 1, "valid"): [[[[-0.1, 0.025, 0.2, -0.25], [0.275, 0.3, -0.35, -0.3], [0.425, 0.0, -1.025, -0.55],
                               [0.325, -0.025, -0.8, -0.825]],
                              [[0.25, -0.05, -0.1, -0.2], [1.0, 1.025, 0.125, -0.275],
                               [-0.125, 0.15, 0.55, -0.175], [-0.65, -0.625, 0.725, 0.75]]]],
    ("max", 2, 1, "valid"): [[[[0.9, 0.8, 0.8, 0.5], [2.0, 2.0, 0.8, 0.5], [2.0, 2.0, -0.4, 0.2],
                               [2.4, 2.4, -0.4, 0.2]],
                              [[1.7, 1.3, 1.3, 1.1], [1.7, 1.3, 1.3, 1.1], [0.9, 1.5, 1.5, 0.6],
                               [0.9, 1.5, 1.5, 1.3]]]],
}

POOLS = list(MS_POOL)


def _all_windows(x, w, xp):
    out = []
    for (pad_mode, padding, stride, dilation), _, _, _ in MS_CONV:
        out.append(ops.conv2d(x, w, None, stride, pad_mode, padding, dilation, 2))
    for kind, k, s, mode in POOLS:
        pool = ops.max_pool2d if kind == "max" else ops.avg_pool2d
        out.append(pool(xp, k, s, pad_mode=mode))
    return out


@pytest.mark.parametrize("mode", ["graph", "pynative"])
def test_matches_mindspore(mode):
    x, w, xp = _mindspore_inputs()
    run = msir.jit(_all_windows) if mode == "graph" else lambda *a: pynative(lambda: _all_windows(*a))
    results = run(x, w, xp)
    for (kw, shape, total, rows), y in zip(MS_CONV, results):
        assert y.shape == shape and y.dtype == np.float32, kw
        np.testing.assert_allclose(y[0, :, 0, :], rows, atol=2e-5, err_msg=str(kw))
        np.testing.assert_allclose(y.sum(dtype=np.float64), total, rtol=1e-5, err_msg=str(kw))
    for key, y in zip(MS_POOL, results[len(MS_CONV):]):
        np.testing.assert_allclose(y, MS_POOL[key], atol=1e-6, err_msg=str(key))


def test_max_pool_ties_go_to_the_first_maximum_as_in_mindspore():
    # MindSpore: grad of sum(MaxPool2d(2, stride=1)(x)) for this x is [[1, 1, 0], [1, 1, 0], [0, 0, 0]];
    # for MaxPool2d(2, stride=2) of ones(2, 2): [[1, 0], [0, 0]]
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]]], np.float32)
    ones = np.ones((1, 1, 2, 2), np.float32)

    def tie_grads(x, ones):
        g1 = msir.grad(lambda a: np.sum(ops.max_pool2d(a, 2, 1)))(x)
        g2 = msir.grad(lambda a: np.sum(ops.max_pool2d(a, 2, 2)))(ones)
        return g1, g2

    for g1, g2 in (msir.jit(tie_grads)(x, ones), pynative(lambda: tie_grads(x, ones))):
        np.testing.assert_array_equal(g1, [[[[1, 1, 0], [1, 1, 0], [0, 0, 0]]]])
        np.testing.assert_array_equal(g2, [[[[1, 0], [0, 0]]]])


def _conv_pool_loss(x, w, b):
    h = ops.relu(ops.conv2d(x, w, b, pad_mode="pad", padding=1, groups=2))
    h = ops.max_pool2d(h, 2, 2)
    h = ops.avg_pool2d(h, 3, 2, pad_mode="same")
    return np.sum(np.tanh(h) ** 2)


def test_compiled_gradients_match_eager_and_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    value, grads = msir.value_and_grad(_conv_pool_loss, argnums=(0, 1, 2))(x, w, b)
    e_value, e_grads = pynative(lambda: msir.value_and_grad(_conv_pool_loss, argnums=(0, 1, 2))(x, w, b))
    # the forward in float64 NumPy, by the references of test_grad_rules
    h = conv2d_reference(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1, 1, 1), (1, 1), 2)
    h = pool2d_reference(np.maximum(h + b[None, :, None, None], 0), "max", (2, 2), (2, 2), (0, 0, 0, 0))
    h = pool2d_reference(h, "avg", (3, 3), (2, 2), (0, 1, 0, 1), count_include_pad=False)
    np.testing.assert_allclose(value, np.sum(np.tanh(h) ** 2), rtol=1e-5)
    np.testing.assert_allclose(e_value, value, rtol=1e-5)
    for g, e, p in zip(grads, e_grads, (x, w, b)):
        assert g.shape == p.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_compiled_forward_mode_matches_reverse_mode():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 6, 6))
    w = rng.standard_normal((3, 2, 3, 3))
    tx, tw = rng.standard_normal(x.shape), rng.standard_normal(w.shape)

    def f(x, w):
        return np.sum(np.sin(ops.max_pool2d(ops.conv2d(x, w, pad_mode="same", stride=2), 2, 1, pad_mode="same")))

    _, tangent = msir.jvp(f, (x, w), (tx, tw))
    gx, gw = pynative(lambda: msir.grad(f, argnums=(0, 1))(x, w))
    np.testing.assert_allclose(tangent, np.sum(gx * tx) + np.sum(gw * tw), rtol=1e-10)


def test_bad_shapes_name_the_op_and_the_line():
    x = np.zeros((1, 3, 8, 8), np.float32)
    w = np.zeros((4, 2, 3, 3), np.float32)

    def f(x, w):
        return ops.conv2d(x, w)

    with pytest.raises(ShapeError, match=r"msir.ops.conv2d: the weight \(4, 2, 3, 3\) expects 2 input channels "
                                         r"\(2 per group, 1 groups\), the input \(1, 3, 8, 8\) has 3") as e:
        msir.jit(f)(x, w)
    assert "test_conv_pool_ops.py" in str(e.value) and "return ops.conv2d(x, w)" in str(e.value)
    with pytest.raises(ShapeError, match=r"msir.ops.conv2d: the input must be 4-D \(N, C, H, W\), got shape \(3, 8, 8\)"):
        ops.conv2d(x[0], w)
    with pytest.raises(ShapeError, match=r"msir.ops.max_pool2d: padding \(2, 2, 2, 2\) must be smaller than the kernel"):
        ops.max_pool2d(x, 2, padding=2)
    with pytest.raises(ShapeError, match=r"pad_mode must be one of 'same', 'valid', 'pad', got 'full'"):
        ops.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), pad_mode="full")
    with pytest.raises(ShapeError, match=r"padding must be 0 unless pad_mode is 'pad'"):
        ops.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), pad_mode="same", padding=1)
    with pytest.raises(UnsupportedSyntaxError, match="ceil_mode=True"):
        ops.max_pool2d(x, 2, ceil_mode=True)
    with pytest.raises(ShapeError, match=r"msir.ops.conv2d: bias must have shape \(4,\), one per output channel"):
        ops.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), np.zeros(3, np.float32))
