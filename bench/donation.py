"""Training loops with and without donated parameters (`donate_argnums`).

W5's SGD step (MLP, ReLU, softmax cross-entropy, float32), run as a training
loop that feeds each step's parameters into the next, four ways in one run:
msir.jit with and without `donate_argnums`, and jax.jit with and without it
(when `import jax` works). Prints the median time per step over blocks of
steps, and the ratios. With donation msir's update writes over the parameters
it was given instead of new buffers; the loop's results must be identical.

    python bench/donation.py [--config b256|b128] [--steps N] [--blocks K] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workloads as W  # noqa: E402

import msir  # noqa: E402
from msir.errors import DonationWarning  # noqa: E402

CONFIGS = {"b256": ((784, 512, 512, 10), 256), "b128": ((784, 256, 10), 128)}


def msir_step(n_layers: int):
    loss = W.w5_loss3 if n_layers == 3 else W.w5_loss2
    argnums = tuple(range(2 * n_layers))

    def step(*args):
        params, (x, onehot) = args[: 2 * n_layers], args[2 * n_layers:]
        value, grads = msir.value_and_grad(loss, argnums=argnums)(*params, x, onehot)
        return (*[p - 0.01 * g for p, g in zip(params, grads)], value)

    return step


def jax_step(n_layers: int, donate: bool):
    import jax
    import jax.numpy as jnp

    def loss(params, x, onehot):
        h = x
        for i in range(n_layers):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < n_layers - 1:
                h = jnp.maximum(h, 0.0)
        return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(h, axis=1), axis=1))

    def step(params, x, onehot):
        value, grads = jax.value_and_grad(loss)(params, x, onehot)
        return tuple(p - 0.01 * g for p, g in zip(params, grads)), value

    return jax.jit(step, donate_argnums=(0,) if donate else ())


def per_step_ms(run_block, steps: int, blocks: int) -> float:
    run_block(steps)  # warm-up (compiles)
    times = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        run_block(steps)
        times.append((time.perf_counter() - t0) / steps)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="b256")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed block (default 20)")
    ap.add_argument("--blocks", type=int, default=15, help="timed blocks (default 15)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()

    sizes, batch = CONFIGS[args.config]
    n_layers = len(sizes) - 1
    inputs = W._w5_inputs(sizes, batch, sizes, batch)(False, np.random.default_rng(0))
    params0, data = inputs[: 2 * n_layers], inputs[2 * n_layers:]
    results: dict[str, float] = {}
    finals: dict[str, list[np.ndarray]] = {}

    for name, donate in (("msir", ()), ("msir donated", tuple(range(2 * n_layers)))):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DonationWarning)  # every parameter must be reused
            fn = msir.jit(msir_step(n_layers), donate_argnums=donate)
            state = [p.copy() for p in params0]

            def block(n, fn=fn, state=state):
                for _ in range(n):
                    state[:] = fn(*state, *data)[: 2 * n_layers]

            results[name] = per_step_ms(block, args.steps, args.blocks)
            fresh = [p.copy() for p in params0]
            for _ in range(3):
                fresh = list(fn(*fresh, *data)[: 2 * n_layers])
            finals[name] = fresh
    for a, b in zip(finals["msir"], finals["msir donated"]):
        np.testing.assert_array_equal(a, b)

    try:
        import jax
    except ImportError:
        jax = None
    if jax is not None:
        for name, donate in (("jax", False), ("jax donated", True)):
            fn = jax_step(n_layers, donate)
            state = [tuple(jax.device_put(p.copy()) for p in params0)]
            jdata = jax.device_put(data)

            def block(n, fn=fn, state=state):
                for _ in range(n):
                    state[0], _ = fn(state[0], *jdata)
                jax.block_until_ready(state[0])

            results[name] = per_step_ms(block, args.steps, args.blocks)
            p = tuple(jax.device_put(q.copy()) for q in params0)
            for _ in range(3):
                p, _ = fn(p, *jdata)
            for a, b in zip(finals["msir"], p):
                np.testing.assert_allclose(a, np.asarray(b), rtol=1e-3, atol=1e-5)

    print(f"SGD training loop, MLP {'-'.join(map(str, sizes))}, batch {batch}, float32; "
          f"median ms per step over {args.blocks} blocks of {args.steps} steps; "
          f"{msir.get_num_threads()} msir threads")
    base = results["msir donated"]
    print(f"{'':14} {'ms/step':>8} {'x msir donated':>15}")
    for name, ms in results.items():
        print(f"{name:14} {ms:8.3f} {ms / base:15.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"config": args.config, "ms_per_step": results}, indent=1))


if __name__ == "__main__":
    main()
