"""Gradient of an RNN with respect to its input sequence, as the sequence grows.

W6's RNN (`h = tanh(h @ W + xs[t] @ U)`, hidden 128, batch 32, float32, a
Python `for` over t), differentiated with respect to xs and W together, for
T = 100, 200, 400, 800. The cotangent of xs is built one row per step; the
time per step should stay flat as T grows (linear total cost). JAX's
`lax.scan` gradient runs beside it when `import jax` works.

    python bench/rnn_input_grad.py [--steps 100,200,400,800] [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grad_cost import median_ms  # noqa: E402

import msir  # noqa: E402

HIDDEN, BATCH, FEATURES = 128, 32, 128


def rnn(xs, W, U, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(h @ W + xs[t] @ U)
    return np.sum(h * h)


def inputs(T: int):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((T, BATCH, FEATURES), dtype=np.float32) * 0.5
    W = rng.standard_normal((HIDDEN, HIDDEN), dtype=np.float32) / np.sqrt(HIDDEN)
    U = rng.standard_normal((FEATURES, HIDDEN), dtype=np.float32) / np.sqrt(FEATURES)
    h0 = np.zeros((BATCH, HIDDEN), np.float32)
    return xs, W, U, h0


def jax_grad():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def loss(xs, W, U, h0):
        def step(h, x):
            return jnp.tanh(h @ W + x @ U), None

        h, _ = jax.lax.scan(step, h0, xs)
        return jnp.sum(h * h)

    return jax.jit(jax.grad(loss, argnums=(0, 1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="100,200,400,800")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    g = msir.jit(msir.grad(rnn, argnums=(0, 1)))
    jg = jax_grad()
    print(f"RNN gradient w.r.t. (xs, W): hidden {HIDDEN}, batch {BATCH}, features {FEATURES}, float32; "
          f"median of {args.repeat}; {msir.get_num_threads()} msir threads")
    print(f"{'T':>5} {'msir ms':>9} {'us/step':>8} {'jax ms':>9} {'jax/msir':>9}")
    for T in (int(t) for t in args.steps.split(",")):
        a = inputs(T)
        gx, gw = g(*a)
        ms = median_ms(lambda: g(*a), args.repeat)
        line = f"{T:5d} {ms:9.2f} {ms * 1e3 / T:8.1f}"
        if jg is not None:
            jx, jw = jg(*a)
            np.testing.assert_allclose(gx, np.asarray(jx), rtol=2e-3, atol=2e-5)
            np.testing.assert_allclose(gw, np.asarray(jw), rtol=2e-3, atol=2e-4)
            jms = median_ms(lambda: [o.block_until_ready() for o in jg(*a)], args.repeat)
            line += f" {jms:9.2f} {jms / ms:9.2f}"
        print(line)


if __name__ == "__main__":
    main()
