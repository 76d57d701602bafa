"""Plain Python objects in compiled code (msir.frontend.objects): methods,
attributes, `*args`, dict and list subscripts.

Values are checked against NumPy running the same Python, gradients against
central finite differences (gradcheck.py) and against PYNATIVE_MODE, which
runs the same methods eagerly. What a compiled method reads of an object is
part of the compiled code's key: changing it between calls compiles again,
in memory and in the persistent trace cache (a second process). Errors are
checked by message and location: the line marked `# E:<name>` in this file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from gradcheck import check_vjp, pynative
from test_trace_cache import cdir, pkg, write  # noqa: F401  (cdir and pkg are fixtures)

import msir
from msir import cache
from msir.errors import MsirError, UnsupportedSyntaxError

with open(__file__) as _f:
    _LINES = _f.read().splitlines()


def assert_at(err: MsirError, marker: str, snippet: str) -> None:
    """`err` is located at `snippet` on the line marked `# E:<marker>`."""
    (line,) = [i for i, text in enumerate(_LINES, 1) if text.rstrip().endswith(f"# E:{marker}")]
    assert err.loc is not None, err.message
    assert (err.loc.file, err.loc.line, err.loc.col) == (__file__, line, _LINES[line - 1].index(snippet) + 1), str(err)


RNG = np.random.default_rng(0)


def rand(*shape) -> np.ndarray:
    return RNG.standard_normal(shape)


# ---------------------------------------------------------------------------
# Methods and attributes
# ---------------------------------------------------------------------------


class Affine:
    """A layer: arrays (hidden arguments), a float and a string (constants)."""

    def __init__(self, n_in, n_out, activation="tanh"):
        self.weight = rand(n_in, n_out) * 0.5
        self.bias = rand(n_out) * 0.1
        self.activation = activation
        self.gain = 1.5

    def pre(self, x):
        return x @ self.weight + self.bias

    def forward(self, x):
        y = self.pre(x)  # a method calling a method
        if self.activation == "tanh":
            return np.tanh(y) * self.gain
        return y

    def loss(self, x):
        return np.sum(self.forward(x) ** 2)


def test_method_values_against_numpy():
    layer = Affine(4, 3)
    x = rand(5, 4)
    f = msir.jit(lambda x: layer.forward(x))
    np.testing.assert_allclose(f(x), layer.forward(x), rtol=1e-12)
    np.testing.assert_allclose(msir.jit(lambda x: layer.loss(x))(x), layer.loss(x), rtol=1e-12)
    linear = Affine(4, 3, activation="none")
    np.testing.assert_allclose(msir.jit(lambda x: linear.forward(x))(x), x @ linear.weight + linear.bias, rtol=1e-12)


def test_method_gradient_against_finite_differences():
    layer = Affine(4, 3)
    x = rand(5, 4)
    grad = msir.grad(layer.loss)  # a bound method, differentiated as it is
    check_vjp(lambda xs: layer.loss(xs[0]), lambda xs, y, ct: [ct * grad(xs[0])], [x])
    inside = msir.jit(lambda x: msir.grad(layer.loss)(x) + msir.grad(lambda v: layer.loss(v))(x))
    np.testing.assert_allclose(inside(x), 2 * grad(x), rtol=1e-12)


def test_method_in_pynative_mode_gives_the_same_results():
    layer = Affine(4, 3)
    x = rand(5, 4)
    value, g = msir.value_and_grad(layer.loss)(x)
    value_e, g_e = pynative(lambda: msir.value_and_grad(layer.loss)(x))
    np.testing.assert_allclose(value_e, value, rtol=1e-12)
    np.testing.assert_allclose(g_e, g, rtol=1e-12)


class Dense:
    """A MindSpore-style cell: called as `layer(x)`, which runs `construct`."""

    def __init__(self, n_in, n_out, activation):
        self.weight = rand(n_in, n_out) * 0.5
        self.bias = np.zeros(n_out)
        self.activation = activation

    def __call__(self, x):
        return self.construct(x)

    def construct(self, x):
        y = x @ self.weight + self.bias
        return np.tanh(y) if self.activation == "tanh" else y


class MLP:
    def __init__(self, sizes):
        n = len(sizes) - 1
        self.layers = [Dense(a, b, "tanh" if i < n - 1 else None) for i, (a, b) in enumerate(zip(sizes, sizes[1:]))]
        self.scale = 2.0

    def __call__(self, x):
        for layer in self.layers:  # unrolled: the list is known at compile time
            x = layer(x)
        return x * self.scale

    def first(self, x):
        return self.layers[0](x)

    def loss(self, x, y):
        return np.mean((self(x) - y) ** 2)


def test_mlp_with_a_list_of_layers():
    net = MLP([4, 8, 8, 3])
    x, y = rand(6, 4), rand(6, 3)
    np.testing.assert_allclose(msir.jit(lambda x: net(x))(x), net(x), rtol=1e-12)
    np.testing.assert_allclose(msir.jit(lambda x: net.first(x))(x), net.first(x), rtol=1e-12)
    grad_x = msir.grad(net.loss)
    check_vjp(lambda xs: net.loss(xs[0], y), lambda xs, out, ct: [ct * grad_x(xs[0], y)], [x])
    np.testing.assert_allclose(pynative(lambda: grad_x(x, y)), grad_x(x, y), rtol=1e-12)


def test_callable_object_differentiated():
    class SquaredNorm:
        def __init__(self, net):
            self.net = net

        def __call__(self, x):
            return np.sum(self.net(x) ** 2)

    loss = SquaredNorm(MLP([3, 5, 2]))
    x = rand(4, 3)
    g = msir.grad(loss)(x)
    check_vjp(lambda xs: loss(xs[0]), lambda xs, y, ct: [ct * msir.grad(loss)(xs[0])], [x])
    np.testing.assert_allclose(pynative(lambda: msir.grad(loss)(x)), g, rtol=1e-12)


def test_objects_in_module_globals_and_closures():
    table = {"fc": Dense(3, 2, None)}

    def apply(x):
        return table["fc"](x) + GLOBAL_LAYER(x)

    x = rand(4, 3)
    np.testing.assert_allclose(msir.jit(apply)(x), apply(x), rtol=1e-12)


GLOBAL_LAYER = Dense(3, 2, "tanh")


# ---------------------------------------------------------------------------
# *args and subscripts
# ---------------------------------------------------------------------------


def total(*xs):
    out = 0.0
    for v in xs:
        out = out + v
    return out


class Concat:
    def __call__(self, *inputs):
        return self.construct(*inputs)

    def construct(self, first, *rest):
        return np.concatenate((first, *rest), axis=0) * len(rest)


def test_star_args():
    a, b, c = rand(2, 3), rand(1, 3), rand(2, 3)
    cat = Concat()

    def f(a, b, c):
        pair = (b, c)
        rows = [*a]  # the rows of an array
        return total(a, b, c), total(*pair), cat(a, b, c), cat(a), total(*rows), total()

    got, expected = msir.jit(f)(a, b, c), f(a, b, c)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    grad = msir.grad(lambda a, b: np.sum(cat(a, b, a) ** 2), argnums=(0, 1))
    for g, e in zip(grad(a, b), pynative(lambda: grad(a, b))):
        np.testing.assert_allclose(g, e, rtol=1e-12)


CONFIG = {"hidden": 3, "scale": 0.5, "act": "tanh", ("w", 0): np.arange(3.0), "inner": {"shift": 1.0}}


class Net:
    def __init__(self):
        self.cfg = CONFIG
        self.layers = {"fc1": Dense(2, CONFIG["hidden"], "tanh"), "fc2": Dense(CONFIG["hidden"], 2, None)}

    def __call__(self, x):
        h = self.layers["fc1"](x)
        if self.cfg["act"] == "tanh":
            h = np.tanh(h)
        y = self.layers["fc2"](h * self.cfg[("w", 0)])
        return y * self.cfg["scale"] + self.cfg["inner"]["shift"] + np.zeros(self.cfg["hidden"]).sum()


def test_dict_subscripts():
    net = Net()
    x = rand(4, 2)
    np.testing.assert_allclose(msir.jit(lambda x: net(x))(x), net(x), rtol=1e-12)
    grad = msir.grad(lambda x: np.sum(net(x) ** 2))
    check_vjp(lambda xs: np.sum(net(xs[0]) ** 2), lambda xs, y, ct: [ct * grad(xs[0])], [x])
    np.testing.assert_allclose(pynative(lambda: grad(x)), grad(x), rtol=1e-12)


# ---------------------------------------------------------------------------
# What a compiled method reads is part of its key
# ---------------------------------------------------------------------------


class Scaled:
    def __init__(self):
        self.w = np.arange(1.0, 4.0)
        self.scale = 2.0
        self.n_layers = 2
        self.parts = [np.ones(3)]

    def __call__(self, x):
        for _ in range(self.n_layers):
            x = np.tanh(x * self.w) * self.scale
        for p in self.parts:
            x = x + p
        return x


def numpy_scaled(m: Scaled, x):
    for _ in range(m.n_layers):
        x = np.tanh(x * m.w) * m.scale
    return x + sum(m.parts)


def test_changed_attributes_compile_again():
    m = Scaled()
    f = msir.jit(lambda x: m(x))
    x = np.linspace(-1.0, 1.0, 3)
    np.testing.assert_allclose(f(x), numpy_scaled(m, x), rtol=1e-12)
    m.scale = 3.0  # a float constant
    np.testing.assert_allclose(f(x), numpy_scaled(m, x), rtol=1e-12)
    m.n_layers = 3  # an int constant (a loop count)
    np.testing.assert_allclose(f(x), numpy_scaled(m, x), rtol=1e-12)
    m.w = np.arange(1.0, 2.0)  # an array of another shape (broadcasts against x)
    np.testing.assert_allclose(f(x), numpy_scaled(m, x), rtol=1e-12)
    m.w = m.w.astype(np.float32)  # another dtype
    np.testing.assert_allclose(f(x), numpy_scaled(m, x), rtol=1e-6)
    m.parts.append(np.full(3, 2.0))  # a list grew
    np.testing.assert_allclose(f(x), numpy_scaled(m, x), rtol=1e-6)
    m.w = np.arange(4.0, 5.0).astype(np.float32)  # new values, same type: read at the call
    np.testing.assert_allclose(f(x), numpy_scaled(m, x), rtol=1e-6)


def test_changed_method_and_object_compile_again():
    m = Scaled()
    holder = {"model": m}
    f = msir.jit(lambda x: holder["model"](x))
    x = np.linspace(-1.0, 1.0, 3)
    np.testing.assert_allclose(f(x), numpy_scaled(m, x), rtol=1e-12)
    other = Scaled()
    other.scale = -1.0
    holder["model"] = other  # another object at the same place
    np.testing.assert_allclose(f(x), numpy_scaled(other, x), rtol=1e-12)
    other.__call__ = None  # an instance attribute does not change what calling it runs
    np.testing.assert_allclose(f(x), numpy_scaled(other, x), rtol=1e-12)


class Residual:
    """Optional parts: a layer or None (`is not None`), a dict that may be empty (its truth)."""

    def __init__(self, norm):
        self.norm = norm
        self.extra = {}

    def __call__(self, x):
        if self.norm is not None:
            x = self.norm(x)
        if self.extra:
            x = x + self.extra["bias"]
        return x


def test_optional_parts_compile_again():
    block = Residual(Dense(3, 3, "tanh"))
    f = msir.jit(lambda x: block(x))
    x = rand(2, 3)
    np.testing.assert_allclose(f(x), block(x), rtol=1e-12)
    block.norm = None
    np.testing.assert_allclose(f(x), x, rtol=1e-12)
    block.extra["bias"] = 1.5
    np.testing.assert_allclose(f(x), x + 1.5, rtol=1e-12)
    block.norm = Dense(3, 3, None)
    np.testing.assert_allclose(f(x), block(x), rtol=1e-12)


def test_persistent_entries_check_what_was_read(cdir):  # noqa: F811
    block = Residual(None)

    def f(x):
        return block(x)

    x = rand(2, 3)
    np.testing.assert_allclose(msir.jit(f)(x), x, rtol=1e-12)
    np.testing.assert_allclose(msir.jit(f)(x), x, rtol=1e-12)  # a new jit function: the trace cache's entry
    assert cache.stats["trace_hits"] == 1
    block.extra["bias"] = 1.5  # the dict is no longer empty
    np.testing.assert_allclose(msir.jit(f)(x), x + 1.5, rtol=1e-12)
    block.norm = Dense(3, 3, "tanh")
    np.testing.assert_allclose(msir.jit(f)(x), block(x), rtol=1e-12)
    assert cache.stats["trace_stale"] == 2 and cache.stats["trace_hits"] == 1


def test_changed_attribute_misses_the_persistent_cache(cdir, pkg):  # noqa: F811
    write(pkg, "tc_objects", MODEL)
    first = run_child(pkg, cdir, {"scale": 2.0})
    assert first["stats"]["trace_writes"] == 1
    hit = run_child(pkg, cdir, {"scale": 2.0})
    assert hit["stats"]["trace_hits"] == 1 and hit["out"] == first["out"]
    for change in ({"scale": 3.0}, {"depth": 3}, {"n": 1}):  # n: w of shape (1,)
        out = run_child(pkg, cdir, change)
        assert out["stats"]["trace_stale"] == 1 and out["stats"]["trace_hits"] == 0, change
        np.testing.assert_allclose(out["out"], model_reference({"scale": 2.0, **change}), rtol=1e-12)


def test_changed_attribute_after_a_persistent_hit(cdir, pkg):  # noqa: F811
    """The entry of a trace cache hit checks what the trace read, as a traced one does."""
    write(pkg, "tc_objects", MODEL)
    run_child(pkg, cdir, {"scale": 2.0})
    out = run_child(pkg, cdir, {"scale": 2.0}, then={"scale": 4.0})
    assert out["stats"]["trace_hits"] == 1
    np.testing.assert_allclose(out["out"], model_reference({"scale": 2.0}), rtol=1e-12)
    np.testing.assert_allclose(out["then"], model_reference({"scale": 4.0}), rtol=1e-12)


MODEL = """
import numpy as np


class Model:
    def __init__(self, n, scale, depth):
        self.w = np.linspace(0.5, 1.5, n)
        self.scale = scale
        self.depth = depth

    def __call__(self, x):
        for _ in range(self.depth):
            x = np.tanh(x * self.w) * self.scale
        return x


model = Model(3, 2.0, 2)


def f(x):
    return model(x)
"""

CHILD = """
import json, sys
import numpy as np
import msir
from msir import cache
sys.path.insert(0, sys.argv[1])
import tc_objects
settings, then = json.loads(sys.argv[2]), json.loads(sys.argv[3])
m = tc_objects.model
m.scale, m.depth = settings.get("scale", 2.0), settings.get("depth", 2)
m.w = np.linspace(0.5, 1.5, settings.get("n", 3))
x = np.linspace(-1.0, 1.0, 3)
f = msir.jit(tc_objects.f)
out = {"out": f(x).tolist(), "stats": dict(cache.stats)}
if then:
    m.scale = then["scale"]
    out["then"] = f(x).tolist()
print(json.dumps(out))
"""


def run_child(d, cache_dir, settings: dict, then: dict | None = None) -> dict:
    env = dict(os.environ, MSIR_CACHE_DIR=str(cache_dir))
    env.pop("MSIR_LOG", None)
    args = [sys.executable, "-c", CHILD, str(d), json.dumps(settings), json.dumps(then or {})]
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def model_reference(settings: dict) -> list:
    w = np.linspace(0.5, 1.5, settings.get("n", 3))
    x = np.linspace(-1.0, 1.0, 3)
    for _ in range(settings.get("depth", 2)):
        x = np.tanh(x * w) * settings["scale"]
    return x.tolist()


def test_changed_attribute_in_one_process_misses_the_persistent_cache(cdir, pkg):  # noqa: F811
    write(pkg, "tc_objects", MODEL)
    sys.modules.pop("tc_objects", None)
    import tc_objects

    x = np.linspace(-1.0, 1.0, 3)
    tc_objects.model.scale = 2.0
    np.testing.assert_allclose(msir.jit(tc_objects.f)(x), model_reference({"scale": 2.0}), rtol=1e-12)
    tc_objects.model.scale = 3.0
    # a new jit function: only the trace cache's entry can tell it is compiled already
    np.testing.assert_allclose(msir.jit(tc_objects.f)(x), model_reference({"scale": 3.0}), rtol=1e-12)
    assert cache.stats["trace_stale"] == 1


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class Counter:
    def __init__(self):
        self.count = 0
        self.total = np.zeros(3)
        self.seen = []
        self.cfg = {"k": 1}

    def bump(self, x):
        self.count = self.count + 1  # E:assign
        return x

    def accumulate(self, x):
        self.total += x  # E:augassign
        return self.total

    def remember(self, x):
        self.seen.append(x)  # E:append
        return x

    def configure(self, x):
        self.cfg["k"] = 2  # E:item
        return x

    def missing(self, x):
        return x * self.weight  # E:missing

    def key(self, x):
        return x * self.cfg["nope"]  # E:key

    def runtime_key(self, x, i):
        return x * self.cfg[i]  # E:runtime_key


COUNTER = Counter()


@pytest.mark.parametrize(
    "method, cls, marker, snippet, message",
    [
        ("bump", UnsupportedSyntaxError, "assign", "self.count", "assigning to the attribute 'self.count'"),
        ("accumulate", UnsupportedSyntaxError, "augassign", "self.total", "assigning to the attribute 'self.total'"),
        ("remember", UnsupportedSyntaxError, "append", "self.seen", "changing the attribute 'self.seen' (.append())"),
        ("configure", UnsupportedSyntaxError, "item", "self.cfg", "assigning to an item of 'self.cfg'"),
        ("missing", AttributeError, "missing", "self.weight", "'Counter' object has no attribute 'weight'"),
        ("key", KeyError, "key", 'self.cfg["nope"]', "the dict 'self.cfg' has no key 'nope'"),
    ],
)
def test_errors_at_the_users_line(method, cls, marker, snippet, message):
    fn = getattr(COUNTER, method)
    with pytest.raises(cls) as info:
        msir.jit(lambda x: fn(x))(np.ones(3))
    assert isinstance(info.value, MsirError)
    assert message in info.value.message
    assert_at(info.value, marker, snippet)
    assert COUNTER.count == 0 and COUNTER.seen == [] and COUNTER.cfg == {"k": 1}  # nothing ran


def test_runtime_dict_key_is_refused():
    with pytest.raises(UnsupportedSyntaxError) as info:
        msir.jit(lambda x, i: COUNTER.runtime_key(x, i))(np.ones(3), np.int64(0))
    assert "a dict key must be a constant known at compile time" in info.value.message
    assert_at(info.value, "runtime_key", 'self.cfg[i]')


def test_calling_an_object_without_call():
    holder = Counter()

    def f(x):
        return holder(x)  # E:not_callable

    with pytest.raises(TypeError) as info:
        msir.jit(f)(np.ones(3))
    assert "'Counter' object is not callable" in info.value.message
    assert_at(info.value, "not_callable", "holder(x)")


class NamedLayer:
    def __init__(self, w, name):
        self.w, self.name = w, name

    def __call__(self, x):
        return msir.ops.relu(msir.ops.matmul(x, self.w, name=self.name + "_mm"), name=self.name * 1 + "_act")


def named_layer_loss(x):
    return np.sum(NAMED(x))


NAMED = NamedLayer(np.random.default_rng(1).standard_normal((3, 2)), "fc1")


def test_strings_built_from_attributes_at_compile_time():
    x = np.random.default_rng(2).standard_normal((4, 3))
    f = msir.jit(named_layer_loss)
    np.testing.assert_allclose(f(x), np.sum(np.maximum(x @ NAMED.w, 0)), rtol=1e-12)
    ir = f.lower(x)
    assert 'msir.name = "fc1_mm"' in ir and 'msir.name = "fc1_act"' in ir


def string_minus_number(x):
    return x * ("a" - 1)  # E:str


def test_arithmetic_on_a_string_is_a_located_type_error():
    with pytest.raises(TypeError, match="got a value of type str") as e:
        msir.jit(string_minus_number)(np.ones(2))
    assert_at(e.value, "str", '"a" - 1')
