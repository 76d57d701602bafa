"""Cost of a compiled gradient against the compiled forward.

The loss of a 2-layer MLP (784-512-512-10, ReLU, softmax cross-entropy, float32,
batch 256) compiled by `msir.jit`, and its `msir.value_and_grad` with respect to
all six parameters: the median time of repeated calls of each, and their ratio.
Reverse mode should cost at most ~3x the forward (issue 3). For reference, the
same loss run by NumPy, and JAX's forward and value_and_grad (jitted) when
`import jax` works.

    python bench/grad_cost.py [--repeat N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import msir

BATCH, SIZES = 256, (784, 512, 512, 10)


def mlp_loss(params, x, onehot):
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.maximum(x @ w1 + b1, 0.0)
    h2 = np.maximum(h1 @ w2 + b2, 0.0)
    logits = h2 @ w3 + b3
    z = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * log_probs, axis=1))


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        params.append((rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32))
        params.append(np.zeros(n_out, np.float32))
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    onehot = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    return tuple(params), x, onehot


def median_ms(fn, repeat: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def check(fwd_value, vg_value, grads, params, x, onehot) -> None:
    """The compiled results agree with NumPy (a benchmark of wrong code is worthless)."""
    expected = mlp_loss(params, x, onehot)
    np.testing.assert_allclose(fwd_value, expected, rtol=1e-4)
    np.testing.assert_allclose(vg_value, expected, rtol=1e-4)
    for g, p in zip(grads, params):
        assert g.dtype == np.float32 and g.shape == p.shape, (g.dtype, g.shape, p.shape)
    # d loss / d b3 = mean over the batch of softmax(logits) - onehot
    w1, b1, w2, b2, w3, b3 = params
    h2 = np.maximum(np.maximum(x @ w1 + b1, 0) @ w2 + b2, 0)
    logits = h2 @ w3 + b3
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(grads[5], (p - onehot).mean(axis=0), rtol=1e-3, atol=1e-6)


def bench_msir(params, x, onehot, repeat: int) -> dict:
    fwd = msir.jit(mlp_loss)
    vg = msir.value_and_grad(mlp_loss)
    t0 = time.perf_counter()
    value = fwd(params, x, onehot)
    compile_fwd = time.perf_counter() - t0
    t0 = time.perf_counter()
    vg_value, grads = vg(params, x, onehot)
    compile_vg = time.perf_counter() - t0
    check(value, vg_value, grads, params, x, onehot)
    fwd_ms = median_ms(lambda: fwd(params, x, onehot), repeat)
    vg_ms = median_ms(lambda: vg(params, x, onehot), repeat)
    return {
        "forward_ms": fwd_ms, "value_and_grad_ms": vg_ms, "ratio": vg_ms / fwd_ms,
        "compile_forward_s": compile_fwd, "compile_value_and_grad_s": compile_vg,
    }


def bench_jax(params, x, onehot, repeat: int) -> dict | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def loss(params, x, onehot):
        w1, b1, w2, b2, w3, b3 = params
        h1 = jnp.maximum(x @ w1 + b1, 0.0)
        h2 = jnp.maximum(h1 @ w2 + b2, 0.0)
        logits = h2 @ w3 + b3
        z = logits - jnp.max(logits, axis=1, keepdims=True)
        log_probs = z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))
        return -jnp.mean(jnp.sum(onehot * log_probs, axis=1))

    fwd = jax.jit(loss)
    vg = jax.jit(jax.value_and_grad(loss))
    jparams, jx, jy = jax.device_put((params, x, onehot))
    fwd_ms = median_ms(lambda: fwd(jparams, jx, jy).block_until_ready(), repeat)
    vg_ms = median_ms(lambda: jax.block_until_ready(vg(jparams, jx, jy)), repeat)
    return {"forward_ms": fwd_ms, "value_and_grad_ms": vg_ms, "ratio": vg_ms / fwd_ms, "version": jax.__version__}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30, help="timed calls of each function (default 30)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()

    params, x, onehot = make_data()
    results = {
        "shape": {"batch": BATCH, "sizes": SIZES, "dtype": "float32"},
        "numpy_forward_ms": median_ms(lambda: mlp_loss(params, x, onehot), args.repeat),
        "msir": bench_msir(params, x, onehot, args.repeat),
        "jax": bench_jax(params, x, onehot, args.repeat),
    }

    m, j = results["msir"], results["jax"]
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32; median of {args.repeat} calls")
    print(f"{'':8} {'forward ms':>11} {'value_and_grad ms':>18} {'ratio':>6}")
    print(f"{'msir':8} {m['forward_ms']:11.2f} {m['value_and_grad_ms']:18.2f} {m['ratio']:6.2f}")
    if j is not None:
        print(f"{'jax':8} {j['forward_ms']:11.2f} {j['value_and_grad_ms']:18.2f} {j['ratio']:6.2f}")
    else:
        print(f"{'jax':8} {'(not installed)':>11}")
    print(f"{'numpy':8} {results['numpy_forward_ms']:11.2f}")
    print(f"msir compile: forward {m['compile_forward_s']:.2f} s, value_and_grad {m['compile_value_and_grad_s']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
