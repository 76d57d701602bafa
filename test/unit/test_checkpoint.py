"""msir.checkpoint: reverse mode recomputes a function's residuals instead of storing them."""

import numpy as np
import pytest

import msir
from gradcheck import numerical_jvp, numerical_vjp
from msir.frontend.driver import spec_of, trace
from msir.passes.forward_arguments import forward_arguments
from msir.passes.jvp import differentiate_all
from msir.passes.specialize import remove_unreachable_functions


def layer(h, w):
    return np.tanh(h @ w) * np.exp(-0.1 * h @ w)


ckpt_layer = msir.checkpoint(layer)


def deep_plain(x, w1, w2, w3):
    return np.sum(layer(layer(layer(x, w1), w2), w3) ** 2)


def deep_ckpt(x, w1, w2, w3):
    return np.sum(ckpt_layer(ckpt_layer(ckpt_layer(x, w1), w2), w3) ** 2)


def _args(n=32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, n)) / np.sqrt(n) for _ in range(4)]



def test_values_and_gradients_match_the_plain_function(mode):
    args = _args()
    g_plain = msir.grad(deep_plain, argnums=(0, 1, 2, 3))(*args)
    g_ckpt = msir.grad(deep_ckpt, argnums=(0, 1, 2, 3))(*args)
    for a, b in zip(g_plain, g_ckpt):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    assert np.isclose(msir.jit(deep_ckpt)(*args) if mode == msir.GRAPH_MODE else deep_ckpt(*args), deep_plain(*args))
    for i in (0, 2):
        fd = numerical_vjp(lambda xs: deep_plain(*xs), args, np.float64(1.0), i)
        np.testing.assert_allclose(g_ckpt[i], fd, rtol=1e-5, atol=1e-7)


def test_second_order_through_a_checkpoint():
    def f(x):
        return np.sum(ckpt_layer(x, x) ** 2)

    x = _args(6)[0]
    t = np.ones_like(x)
    g = msir.grad(f)
    hvp = msir.jvp(g, (x,), (t,))[1]
    np.testing.assert_allclose(hvp, numerical_jvp(lambda xs: g(xs[0]), [x], [t]), rtol=1e-5, atol=1e-6)
    gg = msir.grad(lambda x: np.sum(msir.grad(f)(x) ** 2))(x)
    fd = numerical_vjp(lambda xs: np.sum(np.asarray(g(xs[0])) ** 2), [x], np.float64(1.0), 0)
    np.testing.assert_allclose(gg, fd, rtol=1e-5, atol=1e-6)


def _residual_bytes(fn, args) -> int:
    """Bytes of the residuals the compiled gradient's top-level augmented forward returns."""
    traced = trace(msir.grad(fn, argnums=(1, 2, 3)), [spec_of(a) for a in args])
    module = traced.module
    differentiate_all(module)
    remove_unreachable_functions(module)
    forward_arguments(module)
    from xdsl.dialects import func

    fwds = [op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data.startswith(fn.__name__)
            and op.sym_name.data.endswith("__fwd")]
    assert fwds, [op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)]
    total = 0
    for t in fwds[0].function_type.outputs.data[1:]:
        total += 8 * int(np.prod(t.get_shape()))
    return total


def test_checkpointed_calls_store_only_their_arguments():
    args = _args(64)
    plain = _residual_bytes(deep_plain, args)
    ckpt = _residual_bytes(deep_ckpt, args)
    # plain: per layer the matmul output, tanh and exp values (and more);
    # checkpointed: per layer only the input h (x is forwarded, not stored).
    assert ckpt < plain / 2, (ckpt, plain)


def test_checkpoint_of_a_tuple_is_a_clear_error():
    @msir.checkpoint
    def pair_sum(p):
        return p[0] + p[1]

    def f(x):
        return np.sum(pair_sum((x, x)))

    with pytest.raises(msir.errors.UnsupportedSyntaxError, match="takes arrays and numbers; argument 'p'"):
        msir.jit(f)(np.ones(3))


def test_checkpoint_rejects_non_callables():
    with pytest.raises(TypeError, match="expects a function"):
        msir.checkpoint(3)
