"""MindSpore's programming model on msir (issue 14, step a): Tensor, dtypes,
Parameter, Cell and its containers, the modes, and the grad API in
MindSpore's form (`grad_position`, `weights`, `has_aux`, `GradOperation`).

Values are checked against NumPy (the gradients of these small functions
are written out by hand), both modes against each other, compilation counts
through the frontend's `trace`, and errors by their message and location.
"""

from __future__ import annotations

import numpy as np
import pytest

import msir as ms
from msir import Parameter, ParameterTuple, Tensor, nn, ops
from msir.errors import ShapeError, UnsupportedSyntaxError


@pytest.fixture(params=["graph", "pynative"])
def mode(request):
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    return request.param


@pytest.fixture
def trace_count(monkeypatch):
    """How many times the frontend translates a function (a compile)."""
    import msir.frontend.driver as driver

    count = [0]
    real = driver.trace

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "trace", counting)
    return count


# -- Tensor and dtypes ----------------------------------------------------------


def test_tensor_dtypes_follow_mindspore():
    assert str(Tensor([1.0, 2.0]).dtype) == "Float32"  # Python floats are Float32
    assert str(Tensor(3).dtype) == "Int64"
    assert str(Tensor(True).dtype) == "Bool"
    assert Tensor(np.ones(2)).dtype == ms.float64  # arrays keep their dtype
    assert Tensor(np.ones(2), ms.float32).dtype == ms.float32
    from msir.common.initializer import One

    ones = Tensor(shape=(2, 3), dtype=ms.int32, init=One())
    assert ones.dtype == ms.int32 and ones.asnumpy().tolist() == [[1, 1, 1], [1, 1, 1]]
    assert str(ms.float32) == "Float32" and repr(ms.int64) == "Int64"
    assert ms.dtype_to_nptype(ms.float16) is np.float16
    assert ms.pytype_to_dtype(np.int32) == ms.int32
    assert np.ones(2, ms.float32).dtype == np.float32  # NumPy reads a dtype of msir


def test_tensor_holds_its_array_and_computes_like_numpy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = Tensor(a)
    assert t.asnumpy() is a and np.asarray(t) is a  # no copies
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2
    for got, want in [
        (t + 1, a + 1), (2 * t, 2 * a), (t - t, a - a), (t / 2, a / 2), (t ** 2, a ** 2), (-t, -a),
        (t @ t.T, a @ a.T), (t > 2, a > 2), (t.sum(), a.sum()), (t.sum(axis=1, keepdims=True), a.sum(1, keepdims=True)),
        (t.mean(axis=0), a.mean(0)), (t.max(), a.max()), (t.argmax(axis=1), a.argmax(1)),
        (t.reshape(3, 2), a.reshape(3, 2)), (t.reshape((6,)), a.reshape(6)), (t.transpose(), a.T),
        (t.expand_dims(0), a[None]), (t.flatten(), a.ravel()), (t[1], a[1]), (t[:, 1:], a[:, 1:]),
        (t.astype(ms.int32), a.astype(np.int32)), (np.exp(t), np.exp(a)), (t.abs(), np.abs(a)),
    ]:
        assert isinstance(got, Tensor)
        np.testing.assert_array_equal(got.asnumpy(), want)
    assert (t + 1).dtype == ms.float32 and t.argmax().dtype == ms.int64
    assert t[1, 2].item() == 5.0 and float(t.sum()) == 15.0
    t[0, 0] = 7.0
    assert a[0, 0] == 7.0  # writes reach the array
    assert repr(Tensor([1.0, 2.0])) == "Tensor(shape=[2], dtype=Float32, value=[1., 2.])"
    assert Tensor.from_numpy(a).asnumpy() is a


def test_parameter_is_a_named_tensor():
    p = Parameter(Tensor(np.ones((2, 3), np.float32)), name="w")
    assert isinstance(p, Tensor) and p.name == "w" and p.requires_grad and p.data is p
    assert repr(p) == "Parameter (name=w, shape=(2, 3), dtype=Float32, requires_grad=True)"
    old = p.asnumpy()
    p.set_data(np.zeros((2, 3)))
    assert p.asnumpy() is not old and p.dtype == ms.float32 and not p.asnumpy().any()
    with pytest.raises(ValueError, match=r"Parameter 'w': set_data got shape \(3,\), the parameter has shape \(2, 3\)"):
        p.set_data(np.zeros(3))
    frozen = Parameter(np.zeros(2, np.float32), name="f", requires_grad=False)
    pt = ParameterTuple([p, frozen])
    assert isinstance(pt, tuple) and [q.name for q in pt.clone("m")] == ["m.w", "m.f"]
    with pytest.raises(ValueError, match="not unique"):
        ParameterTuple([p, Parameter(np.zeros(1), name="w")])


# -- Cells ------------------------------------------------------------------------


class Affine(nn.Cell):
    def __init__(self, n_in, n_out, seed):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.weight = Parameter(Tensor(rng.standard_normal((n_in, n_out)).astype(np.float32)))
        self.bias = Parameter(Tensor(rng.standard_normal(n_out).astype(np.float32)))

    def construct(self, x):
        return ops.matmul(x, self.weight) + self.bias


class TwoLayers(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = Affine(4, 5, 0)
        self.fc2 = Affine(5, 3, 1)
        self.scale = 2.0
        self.frozen = Parameter(Tensor(np.ones(3, np.float32)), requires_grad=False)

    def construct(self, x):
        h = ops.relu(self.fc1(x))
        if self.training:
            h = h * self.scale
        return self.fc2(h) * self.frozen


def two_layers_numpy(net, x, training):
    h = np.maximum(x @ net.fc1.weight.asnumpy() + net.fc1.bias.asnumpy(), 0)
    if training:
        h = h * net.scale
    return (h @ net.fc2.weight.asnumpy() + net.fc2.bias.asnumpy()) * net.frozen.asnumpy()


X = np.random.default_rng(5).standard_normal((2, 4)).astype(np.float32)


def test_parameters_are_named_by_their_attribute_paths():
    net = TwoLayers()
    names = [n for n, _ in net.parameters_and_names()]
    assert names == ["frozen", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [p.name for _, p in net.parameters_and_names()] == names
    assert [p.name for p in net.trainable_params()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [p.name for p in net.untrainable_params()] == ["frozen"]
    assert [n for n, _ in net.cells_and_names()] == ["", "fc1", "fc2"]
    seq = nn.SequentialCell(Affine(4, 4, 2), nn.SequentialCell([Affine(4, 2, 3)]))
    holder = nn.SequentialCell({"body": seq})
    assert [p.name for p in holder.trainable_params()] == ["body.0.weight", "body.0.bias", "body.1.0.weight",
                                                           "body.1.0.bias"]
    layers = nn.CellList([Affine(2, 2, 4), Affine(2, 2, 5)])
    assert [p.name for p in layers.trainable_params()] == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_a_compiled_cell_can_be_copied():
    import copy
    import pickle

    net = TwoLayers()
    net(Tensor(X))
    twin = copy.deepcopy(net)
    twin.fc1.weight.set_data(twin.fc1.weight.asnumpy() * 3)
    np.testing.assert_allclose(twin(Tensor(X)).asnumpy(), two_layers_numpy(twin, X, False), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net(Tensor(X)).asnumpy(), two_layers_numpy(net, X, False), rtol=1e-5, atol=1e-6)
    again = pickle.loads(pickle.dumps(net))
    assert [p.name for p in again.trainable_params()] == [p.name for p in net.trainable_params()]
    np.testing.assert_allclose(again(Tensor(X)).asnumpy(), net(Tensor(X)).asnumpy(), rtol=1e-6)


def test_a_cell_needs_its_init_before_its_parameters():
    class Forgot(nn.Cell):
        def __init__(self):
            self.w = Parameter(np.zeros(2, np.float32))

    with pytest.raises(AttributeError, match=r"call(ing)? super\(\).__init__\(\)"):
        Forgot()


def test_a_cell_runs_the_same_in_both_modes_and_gives_tensors(mode):
    net = TwoLayers()
    for training in (False, True):
        net.set_train(training)
        assert net.training is training and net.fc1.training is training
        out = net(Tensor(X))
        assert isinstance(out, Tensor) and out.dtype == ms.float32
        np.testing.assert_allclose(out.asnumpy(), two_layers_numpy(net, X, training), rtol=1e-5, atol=1e-6)
    assert isinstance(net(X), Tensor)  # a Cell gives Tensors whatever it is given


def test_set_train_never_runs_stale_code(trace_count):
    net = TwoLayers()
    eval_out = net(Tensor(X)).asnumpy()
    net.set_train()
    train_out = net(Tensor(X)).asnumpy()
    np.testing.assert_allclose(train_out, two_layers_numpy(net, X, True), rtol=1e-5, atol=1e-6)
    assert not np.allclose(train_out, eval_out)
    net.set_train(False)
    np.testing.assert_allclose(net(Tensor(X)).asnumpy(), eval_out, rtol=1e-6)
    net.scale = 3.0  # any attribute construct reads is part of the key
    np.testing.assert_allclose(net.set_train()(Tensor(X)).asnumpy(), two_layers_numpy(net, X, True), rtol=1e-5)
    assert trace_count[0] == 3  # eval, train, train with the new scale: eval found its version again


def test_updating_a_parameter_does_not_recompile(trace_count):
    net = TwoLayers()
    net(Tensor(X))
    net.fc1.weight.set_data(net.fc1.weight.asnumpy() * 2)  # a new array
    np.testing.assert_allclose(net(Tensor(X)).asnumpy(), two_layers_numpy(net, X, False), rtol=1e-5, atol=1e-6)
    net.fc2.bias.asnumpy()[:] += 1  # in place
    np.testing.assert_allclose(net(Tensor(X)).asnumpy(), two_layers_numpy(net, X, False), rtol=1e-5, atol=1e-6)
    assert trace_count[0] == 1
    net.fc1, net.fc2 = Affine(4, 6, 7), Affine(6, 3, 8)  # other shapes: compiles again
    np.testing.assert_allclose(net(Tensor(X)).asnumpy(), two_layers_numpy(net, X, False), rtol=1e-5)
    assert trace_count[0] == 2


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    from msir import cache

    monkeypatch.setenv("MSIR_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("MSIR_CACHE", "MSIR_TRACE_CACHE", "MSIR_DUMP"):
        monkeypatch.delenv(var, raising=False)
    cache.reset_stats()
    return cache


def test_the_persistent_trace_cache_keys_what_construct_read(fresh_cache):
    first = TwoLayers()
    first(Tensor(X))
    assert fresh_cache.stats["trace_writes"] == 1
    second = TwoLayers()  # another instance, as another process would make: found without tracing
    second.fc1.weight.set_data(second.fc1.weight.asnumpy() + 1)
    np.testing.assert_allclose(second(Tensor(X)).asnumpy(), two_layers_numpy(second, X, False), rtol=1e-5, atol=1e-6)
    assert fresh_cache.stats["trace_hits"] == 1
    third = TwoLayers().set_train()  # `training` is part of the key: the entry is stale
    np.testing.assert_allclose(third(Tensor(X)).asnumpy(), two_layers_numpy(third, X, True), rtol=1e-5, atol=1e-6)
    assert fresh_cache.stats["trace_stale"] == 1 and fresh_cache.stats["trace_hits"] == 1


def test_jit_takes_cells_methods_and_tensors():
    net = TwoLayers()
    jitted = ms.jit(net)
    np.testing.assert_allclose(jitted(X), two_layers_numpy(net, X, False), rtol=1e-5, atol=1e-6)

    class Scaler:
        def __init__(self):
            self.k = Tensor(np.float32(3.0))

        def apply(self, x):
            return x * self.k

    s = Scaler()
    method = ms.jit(s.apply)
    out = method(Tensor(X))
    assert isinstance(out, Tensor)  # Tensors in, Tensors out
    np.testing.assert_allclose(out.asnumpy(), X * 3, rtol=1e-6)
    assert isinstance(method(X), np.ndarray)  # NumPy in, NumPy out
    s.k = Tensor(np.float32(4.0))
    np.testing.assert_allclose(method(X), X * 4, rtol=1e-6)


def test_vjp_and_jvp_take_and_give_tensors(mode):
    def f(x):
        return ops.tanh(x) * 2.0

    x = np.array([0.1, -0.4], np.float32)
    out, vjp_fn = ms.vjp(f, Tensor(x))
    (ct,) = vjp_fn(Tensor(np.ones(2, np.float32)))
    assert isinstance(out, Tensor) and isinstance(ct, Tensor)
    np.testing.assert_allclose(ct.asnumpy(), 2 * (1 - np.tanh(x) ** 2), rtol=1e-6)
    value, tangent = ms.jvp(f, (Tensor(x),), (Tensor(np.ones(2, np.float32)),))
    assert isinstance(tangent, Tensor)
    np.testing.assert_allclose(tangent.asnumpy(), 2 * (1 - np.tanh(x) ** 2), rtol=1e-6)


def test_the_mindspore_surface_imports_light():
    import subprocess
    import sys

    code = (
        "import sys, msir\n"
        "from msir import nn, ops, Tensor, Parameter\n"
        "import msir.common.initializer\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('xdsl', 'llvmlite', 'scipy')]\n"
        "heavy += [m for m in ('msir.api', 'msir.frontend.translate') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


class Stack(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layers = nn.CellList([Affine(4, 4, 10), Affine(4, 4, 11)])
        self.layers.append(Affine(4, 2, 12))

    def construct(self, x):
        for layer in self.layers:
            x = ops.tanh(layer(x))
        return x


def test_a_cell_list_is_iterated_in_construct(mode):
    net = Stack()
    expected = X.astype(np.float64)
    for layer in net.layers:
        expected = np.tanh(expected @ layer.weight.asnumpy() + layer.bias.asnumpy())
    np.testing.assert_allclose(net(Tensor(X)).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert [n for n, _ in net.parameters_and_names()][:2] == ["layers.0.weight", "layers.0.bias"]


SHIFT = Parameter(Tensor(np.array([1.0, 2.0, 3.0], np.float32)), name="shift")


def shifted(x):
    return x + SHIFT


def test_a_global_parameter_is_a_runtime_argument(trace_count):
    f = ms.jit(shifted)
    x = np.zeros(3, np.float32)
    np.testing.assert_array_equal(f(x), [1.0, 2.0, 3.0])
    SHIFT.set_data(np.array([5.0, 5.0, 5.0]))
    try:
        np.testing.assert_array_equal(f(x), [5.0, 5.0, 5.0])
    finally:
        SHIFT.set_data(np.array([1.0, 2.0, 3.0]))
    assert trace_count[0] == 1


class JittedConstruct(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)), name="w")

    @ms.jit
    def construct(self, x):
        return ops.tanh(ops.matmul(x, self.w))


def test_a_jitted_construct(mode):
    """MindSpore's `@jit` on construct: compiled in both modes, differentiable in both."""
    net = JittedConstruct()
    x = Tensor(np.array([[0.1, -0.2, 0.3]], np.float32))
    y = np.tanh(x.asnumpy() @ net.w.asnumpy())
    np.testing.assert_allclose(net(x).asnumpy(), y, rtol=1e-6)

    def loss(inp):
        return ops.reduce_sum(net(inp))

    (gw,) = ms.grad(loss, None, net.trainable_params())(x)  # in PyNative the Parameter is traced: runs eagerly
    np.testing.assert_allclose(gw.asnumpy(), x.asnumpy().T @ (1 - y**2), rtol=1e-5)


def test_a_jitted_method_of_a_plain_object(trace_count):
    class Scale:
        def __init__(self):
            self.k = 3.0

        @ms.jit
        def apply(self, x):
            return x * self.k

    s = Scale()
    np.testing.assert_array_equal(s.apply(np.ones(2)), [3.0, 3.0])
    s.k = 4.0
    np.testing.assert_array_equal(s.apply(np.ones(2)), [4.0, 4.0])
    assert trace_count[0] == 2


def test_legacy_context_and_modes():
    from msir import context

    context.set_context(mode=context.PYNATIVE_MODE)
    assert ms.get_context("mode") == ms.PYNATIVE_MODE == context.PYNATIVE_MODE
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    assert context.get_context("mode") == context.GRAPH_MODE and ms.get_context("device_target") == "CPU"
    with pytest.raises(ValueError, match="mode must be"):
        ms.set_context(mode=7)
    ms.set_device("cpu")
    assert ms.get_context("device_target") == "CPU"
    with pytest.raises(ValueError, match="device_id must be 0"):
        ms.set_device("CPU", 1)


# -- the grad API ---------------------------------------------------------------------


def f3(x, y, z):
    return ops.reduce_sum(x * ops.exp(y) * z * z)


def grads_f3(x, y, z):
    e = np.exp(y)
    return e * z * z, x * e * z * z, 2 * x * e * z


XYZ = [np.array([3.0, 1.0], np.float32), np.array([0.0, 0.5], np.float32), np.array([5.0, 2.0], np.float32)]


def test_grad_position_and_argnums(mode):
    x, y, z = (Tensor(v) for v in XYZ)
    gx, gy, gz = grads_f3(*XYZ)
    g = ms.grad(f3)(x, y, z)
    assert isinstance(g, Tensor)
    np.testing.assert_allclose(g.asnumpy(), gx, rtol=1e-6)
    g1, g2 = ms.grad(f3, grad_position=(1, 2))(x, y, z)
    np.testing.assert_allclose(g1.asnumpy(), gy, rtol=1e-6)
    np.testing.assert_allclose(g2.asnumpy(), gz, rtol=1e-6)
    v, (g0, g2b) = ms.value_and_grad(f3, argnums=(0, 2))(x, y, z)
    np.testing.assert_allclose(float(v), np.sum(XYZ[0] * np.exp(XYZ[1]) * XYZ[2] ** 2), rtol=1e-6)
    np.testing.assert_allclose(g0.asnumpy(), gx, rtol=1e-6)
    np.testing.assert_allclose(g2b.asnumpy(), gz, rtol=1e-6)
    with pytest.raises(ValueError, match="grad_position and weights cannot both be None"):
        ms.grad(f3, None)
    with pytest.raises(TypeError, match="not both"):
        ms.grad(f3, 1, argnums=2)


class Product(nn.Cell):
    def construct(self, x, y, z):
        return x * y * z


def test_a_cell_is_differentiated_as_mindspore_does(mode):
    """MindSpore's docstring example: the output is not a scalar, its sensitivity is ones."""
    x = Tensor([1, 2], ms.float32)
    y = Tensor([-2, 3], ms.float32)
    z = Tensor([0, 3], ms.float32)
    output, inputs_gradient = ms.value_and_grad(Product(), grad_position=1)(x, y, z)
    np.testing.assert_array_equal(output.asnumpy(), [-0.0, 18.0])
    np.testing.assert_array_equal(inputs_gradient.asnumpy(), [0.0, 6.0])
    gy, gz = ms.grad(Product(), grad_position=(1, 2))(x, y, z)
    np.testing.assert_array_equal(gy.asnumpy(), [0.0, 6.0])
    np.testing.assert_array_equal(gz.asnumpy(), [-2.0, 6.0])


def with_aux(x, y, z):
    return f3(x, y, z), z * 2, x + y


def test_has_aux_differentiates_the_first_output(mode):
    x, y, z = (Tensor(v) for v in XYZ)
    gx, gy, gz = grads_f3(*XYZ)
    (g1, g2), (a, b) = ms.grad(with_aux, (1, 2), has_aux=True)(x, y, z)
    np.testing.assert_allclose(g1.asnumpy(), gy, rtol=1e-6)
    np.testing.assert_allclose(g2.asnumpy(), gz, rtol=1e-6)
    np.testing.assert_allclose(a.asnumpy(), XYZ[2] * 2)
    np.testing.assert_allclose(b.asnumpy(), XYZ[0] + XYZ[1])
    # a pair: MindSpore gives the aux as a 1-tuple when called on Tensors
    gradient, aux = ms.grad(lambda_pair, 0, None, True)(x, y, z)
    assert isinstance(aux, tuple) and len(aux) == 1
    np.testing.assert_allclose(aux[0].asnumpy(), XYZ[2])
    np.testing.assert_allclose(gradient.asnumpy(), gx, rtol=1e-6)
    # value_and_grad gives every output as the value
    (v, a2, b2), g = ms.value_and_grad(with_aux, has_aux=True)(x, y, z)
    np.testing.assert_allclose(g.asnumpy(), gx, rtol=1e-6)
    np.testing.assert_allclose(a2.asnumpy(), XYZ[2] * 2)


def lambda_pair(x, y, z):
    return f3(x, y, z), z


def test_has_aux_on_numpy_keeps_msirs_pair_form():
    g, aux = ms.grad(lambda_pair, has_aux=True)(*XYZ)
    assert isinstance(aux, np.ndarray)
    np.testing.assert_allclose(aux, XYZ[2])


class Linear(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]], np.float32)), name="w")
        self.b = Parameter(Tensor(np.array([0.1, -0.2], np.float32)), name="b")

    def construct(self, x):
        return ops.matmul(x, self.w) + self.b


XL = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], np.float32)


def linear_loss_grads(net, x):
    """loss = sum((x @ w + b) ** 2): its gradients for x, w, b."""
    r = 2 * (x @ net.w.asnumpy() + net.b.asnumpy())
    return r @ net.w.asnumpy().T, x.T @ r, r.sum(0)


def test_weights_give_parameter_gradients(mode):
    net = Linear()

    def loss_fn(x):
        out = net(x)
        return ops.reduce_sum(out * out), out

    gx, gw, gb = linear_loss_grads(net, XL)
    (loss, out), (dw, db) = ms.value_and_grad(loss_fn, None, weights=net.trainable_params(), has_aux=True)(Tensor(XL))
    np.testing.assert_allclose(dw.asnumpy(), gw, rtol=1e-5)
    np.testing.assert_allclose(db.asnumpy(), gb, rtol=1e-5)
    np.testing.assert_allclose(out.asnumpy(), XL @ net.w.asnumpy() + net.b.asnumpy(), rtol=1e-6)
    d_x, (dw2, db2) = ms.grad(lambda_loss(net), 0, net.trainable_params())(Tensor(XL))
    np.testing.assert_allclose(d_x.asnumpy(), gx, rtol=1e-5)
    np.testing.assert_allclose(dw2.asnumpy(), gw, rtol=1e-5)
    (d_x2,), (dw3,) = ms.grad(lambda_loss(net), (0,), net.w)(Tensor(XL))
    np.testing.assert_allclose(d_x2.asnumpy(), gx, rtol=1e-5)
    np.testing.assert_allclose(dw3.asnumpy(), gw, rtol=1e-5)


def lambda_loss(net):
    def loss(x):
        out = net(x)
        return ops.reduce_sum(out * out)

    return loss


def test_weight_gradients_follow_parameter_updates_without_recompiling(trace_count):
    net = Linear()
    grad_fn = ms.grad(lambda_loss(net), None, weights=net.trainable_params())
    grad_fn(Tensor(XL))
    for step in range(3):
        net.w.set_data(net.w.asnumpy() - 0.01 * (step + 1))
        dw, db = grad_fn(Tensor(XL))
        _, gw, gb = linear_loss_grads(net, XL)
        np.testing.assert_allclose(dw.asnumpy(), gw, rtol=1e-5)
        np.testing.assert_allclose(db.asnumpy(), gb, rtol=1e-5)
    assert trace_count[0] == 1


def test_weights_inside_a_jitted_step(trace_count):
    ms.set_seed(0)
    model = nn.SequentialCell(nn.Dense(4, 6), nn.ReLU(), nn.Dense(6, 3))  # parameters named "0.weight", ...

    def forward_fn(data, label):
        logits = model(data)
        return ops.cross_entropy(logits, label), logits

    grad_fn = ms.value_and_grad(forward_fn, None, model.trainable_params(), has_aux=True)

    @ms.jit
    def step(data, label):
        (loss, logits), grads = grad_fn(data, label)
        return loss, grads

    x = Tensor(np.random.default_rng(0).random((5, 4)).astype(np.float32))
    y = Tensor(np.array([0, 1, 2, 1, 0], np.int32))
    for _ in range(2):
        loss, grads = step(x, y)
        (expected_loss, _), expected = grad_fn(x, y)
        np.testing.assert_allclose(float(loss), float(expected_loss), rtol=1e-6)
        assert len(grads) == 4
        for g, e in zip(grads, expected):
            np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-7)
        model[0].weight.set_data(model[0].weight.asnumpy() * 0.5)
    assert trace_count[0] == 2  # the jitted step once, grad_fn called from Python once


def test_weights_must_be_parameters():
    with pytest.raises(TypeError, match="weights must be a Parameter"):
        ms.grad(f3, None, weights=[np.zeros(2)])


def test_grad_operation(mode):
    net = Linear()
    x = Tensor(XL)
    gx, gw, gb = linear_loss_grads(net, XL)
    np.testing.assert_allclose(ops.GradOperation()(lambda_loss(net))(x).asnumpy(), gx, rtol=1e-5)
    (all_x,) = ops.GradOperation(get_all=True)(lambda_loss(net))(x)
    np.testing.assert_allclose(all_x.asnumpy(), gx, rtol=1e-5)
    dw, db = ops.GradOperation(get_by_list=True)(lambda_loss(net), ParameterTuple(net.trainable_params()))(x)
    np.testing.assert_allclose(dw.asnumpy(), gw, rtol=1e-5)
    np.testing.assert_allclose(db.asnumpy(), gb, rtol=1e-5)
    (ax,), (aw, ab) = ops.GradOperation(get_all=True, get_by_list=True)(lambda_loss(net), net.trainable_params())(x)
    np.testing.assert_allclose(aw.asnumpy(), gw, rtol=1e-5)
    # sens_param: the output's cotangent is the last argument (the network's output is not a scalar)
    sens = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    dw_s, db_s = ops.GradOperation(get_by_list=True, sens_param=True)(net, net.trainable_params())(x, Tensor(sens))
    np.testing.assert_allclose(dw_s.asnumpy(), XL.T @ sens, rtol=1e-6)
    np.testing.assert_allclose(db_s.asnumpy(), sens.sum(0), rtol=1e-6)
    ones_w = ops.GradOperation(get_by_list=True)(net, net.trainable_params())(x)[0]  # sens of ones
    np.testing.assert_allclose(ones_w.asnumpy(), XL.T @ np.ones((2, 2), np.float32), rtol=1e-6)


# -- bprop ------------------------------------------------------------------------------


class ScaledSquare(nn.Cell):
    """x * x, with a custom backward that doubles the true gradient (so it is visibly used)."""

    def construct(self, x, y):
        return x * x * y

    def bprop(self, x, y, out, dout):
        return 4.0 * x * y * dout, x * x * dout


class UsesScaledSquare(nn.Cell):
    def __init__(self):
        super().__init__()
        self.inner = ScaledSquare()

    def construct(self, x, y):
        return self.inner(x, y)


def test_bprop_is_the_cells_backward(mode):
    x, y = Tensor(np.array([1.0, 2.0, 3.0], np.float32)), Tensor(np.array([0.5, 1.0, 2.0], np.float32))
    net = UsesScaledSquare()
    np.testing.assert_allclose(net(x, y).asnumpy(), x.asnumpy() ** 2 * y.asnumpy())

    def loss(a, b):
        return ops.reduce_sum(net(a, b))

    ga, gb = ms.grad(loss, (0, 1))(x, y)
    np.testing.assert_allclose(ga.asnumpy(), 4 * x.asnumpy() * y.asnumpy())  # bprop's, not 2xy
    np.testing.assert_allclose(gb.asnumpy(), x.asnumpy() ** 2)
    value, gx = ms.value_and_grad(lambda_bprop_twice(net), 0)(x, y)  # the rule composes with other ops
    np.testing.assert_allclose(gx.asnumpy(), np.cos(x.asnumpy() ** 2 * y.asnumpy()) * 4 * x.asnumpy() * y.asnumpy(),
                               rtol=1e-5)


def lambda_bprop_twice(net):
    def loss(a, b):
        return ops.reduce_sum(np.sin(net(a, b)))

    return loss


class HoldsAParameter(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.ones(3, np.float32)))

    def construct(self, x):
        return x * self.w

    def bprop(self, x, out, dout):
        return (dout * 2.0,)


def test_a_bprop_cell_holding_parameters_is_refused_at_its_call(mode):
    net = HoldsAParameter()

    def loss(x):
        return ops.reduce_sum(net(x))

    with pytest.raises(UnsupportedSyntaxError) as info:
        ms.grad(loss)(Tensor(np.ones(3, np.float32)))
    assert "HoldsAParameter.bprop: a Cell with a custom backward cannot hold Parameters in msir yet (w)" in str(info.value)
    if mode == "graph":
        assert "test_cell_api.py" in str(info.value)  # at the call in the user's code


# -- bad input ------------------------------------------------------------------------------


class Unsupported(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.ones((3, 2), np.float32)))

    def construct(self, x):
        y = ops.matmul(x, self.w)
        try:
            y = y + 1
        except ValueError:
            y = x
        return y


def test_an_unsupported_construct_names_the_construct_and_line():
    with pytest.raises(UnsupportedSyntaxError) as info:
        Unsupported()(Tensor(np.ones((2, 3), np.float32)))
    message = str(info.value)
    line = Unsupported.construct.__code__.co_firstlineno + 2
    assert f"test_cell_api.py:{line}:9: error: in Unsupported.construct: try/except is not supported" in message
    assert "try:" in message
    inner = nn.SequentialCell(Unsupported())

    def through_a_transform(x):
        return ops.reduce_sum(inner(x))

    with pytest.raises(UnsupportedSyntaxError, match="in Unsupported.construct: try/except"):
        ms.grad(through_a_transform)(Tensor(np.ones((2, 3), np.float32)))


def test_a_wrong_input_shape_names_the_layer_and_both_shapes(mode):
    net = nn.SequentialCell(nn.Dense(4, 3), nn.ReLU(), nn.Dense(3, 2))
    with pytest.raises(ShapeError, match=r"Dense '0': expected an input of shape \(\.\.\., 4\), got \(2, 5\)"):
        net(Tensor(np.ones((2, 5), np.float32)))
