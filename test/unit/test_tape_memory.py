"""What reverse mode through a loop keeps per iteration (grad_control's residual plan)."""

import numpy as np
import pytest

import msir
from gradcheck import numerical_vjp
from msir.dialects import msir as M
from msir.frontend.driver import spec_of, trace
from msir.passes.grad import ModuleAD


def rnn(W, U, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t])
    return np.sum(h)


def rnn_while(W, h0):
    h = h0
    t = 0
    while t < 5:
        h = np.tanh(W @ h)
        t = t + 1
    return np.sum(h * h)


@pytest.fixture(params=["graph", "pynative"])
def mode(request):
    msir.set_context(mode=msir.GRAPH_MODE if request.param == "graph" else msir.PYNATIVE_MODE)
    yield request.param
    msir.set_context(mode=msir.GRAPH_MODE)


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((6, 6)) / 3, rng.standard_normal((6, 3)) / 2,
            rng.standard_normal((7, 3, 4)), rng.standard_normal((6, 4)) / 2)


def _tapes(fn, args, wanted):
    traced = trace(fn, [spec_of(a) for a in args])
    ad = ModuleAD(traced.module)
    pair = ad.pair(traced.entry, ad.funcs[traced.entry], wanted)
    return [M.shape_of(op.result.type) for op in ad.funcs[pair.fwd].walk() if isinstance(op, M.TapeAllocOp)]


def test_rnn_tapes_the_hidden_state_once():
    # tanh's output is the next h: read from row k + 1 of h's tape, not taped
    # again; xs[t] is recomputed from the counter.
    assert _tapes(rnn, _args(), (0, 1)) == [(M.DYNAMIC, 6, 4)]
    W, h0 = _args()[0], _args()[3]
    assert _tapes(rnn_while, (W, h0), (0,)) == [(M.DYNAMIC, 6, 4)]


def test_rnn_gradients_with_the_shifted_tape(mode):
    args = _args()
    g = msir.grad(rnn, argnums=(0, 1, 3))(*args)
    for i, gi in zip((0, 1, 3), g):
        fd = numerical_vjp(lambda xs: rnn(*xs), list(args), np.float64(1.0), i)
        np.testing.assert_allclose(gi, fd, rtol=1e-6, atol=1e-8)
    W, h0 = args[0], args[3]
    gw = msir.grad(rnn_while, argnums=(0, 1))(W, h0)
    for i, gi in enumerate(gw):
        fd = numerical_vjp(lambda xs: rnn_while(*xs), [W, h0], np.float64(1.0), i)
        np.testing.assert_allclose(gi, fd, rtol=1e-6, atol=1e-8)


def test_second_order_through_the_shifted_tape():
    args = _args()
    W = args[0]

    def gnorm(W):
        return np.sum(msir.grad(rnn)(W, *args[1:]) ** 2)

    g = msir.grad(gnorm)(W)
    fd = numerical_vjp(lambda xs: gnorm(xs[0]), [W], np.float64(1.0), 0, eps=1e-5)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
