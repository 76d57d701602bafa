"""Training loops with and without donated parameters (`donate_argnums`).

W5's SGD step (MLP, ReLU, softmax cross-entropy, float32), run as a training
loop that feeds each step's parameters into the next, four ways in one run:
msir.jit with and without `donate_argnums`, and jax.jit with and without it
(when `import jax` works), taking turns block by block. Prints the median
time per step and the ratios. With donation msir's update writes over the parameters
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


def step3(w1, b1, w2, b2, w3, b3, x, onehot):
    loss, (g1, gb1, g2, gb2, g3, gb3) = msir.value_and_grad(W.w5_loss3, argnums=(0, 1, 2, 3, 4, 5))(
        w1, b1, w2, b2, w3, b3, x, onehot)
    return (w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2,
            w3 - 0.01 * g3, b3 - 0.01 * gb3, loss)


def step2(w1, b1, w2, b2, x, onehot):
    loss, (g1, gb1, g2, gb2) = msir.value_and_grad(W.w5_loss2, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, onehot)
    return w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2, loss


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


def interleaved_ms(blocks: dict, steps: int, rounds: int) -> dict[str, float]:
    """Median ms per step of each variant's `run(n)`, the variants taking turns
    block by block (a shared machine's drift hits them alike)."""
    for run in blocks.values():
        run(steps)  # warm-up (compiles)
    times: dict[str, list[float]] = {name: [] for name in blocks}
    for _ in range(rounds):
        for name, run in blocks.items():
            t0 = time.perf_counter()
            run(steps)
            times[name].append((time.perf_counter() - t0) / steps)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="b256")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed block (default 10)")
    ap.add_argument("--blocks", type=int, default=40, help="timed blocks of each variant, taking turns (default 40)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()

    sizes, batch = CONFIGS[args.config]
    n_layers = len(sizes) - 1
    inputs = W._w5_inputs(sizes, batch, sizes, batch)(False, np.random.default_rng(0))
    params0, data = inputs[: 2 * n_layers], inputs[2 * n_layers:]
    blocks: dict = {}
    finals: dict[str, list[np.ndarray]] = {}
    for name, donate in (("msir", ()), ("msir donated", tuple(range(2 * n_layers)))):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DonationWarning)  # every parameter must be reused
            fn = msir.jit(step3 if n_layers == 3 else step2, donate_argnums=donate)
            fresh = [p.copy() for p in params0]
            for _ in range(3):
                fresh = list(fn(*fresh, *data)[: 2 * n_layers])
            finals[name] = fresh
        state = [p.copy() for p in params0]

        def block(n, fn=fn, state=state):
            for _ in range(n):
                state[:] = fn(*state, *data)[: 2 * n_layers]

        blocks[name] = block
    for a, b in zip(finals["msir"], finals["msir donated"]):
        np.testing.assert_array_equal(a, b)
    # msir's variants take turns, then JAX's (msir's idle pool threads would
    # spin right after its calls and slow the next framework's first steps)
    results = interleaved_ms(blocks, args.steps, args.blocks)
    blocks = {}

    try:
        import jax
    except ImportError:
        jax = None
    if jax is not None:
        jdata = jax.device_put(data)
        for name, donate in (("jax", False), ("jax donated", True)):
            fn = jax_step(n_layers, donate)
            p = tuple(jax.device_put(q.copy()) for q in params0)
            for _ in range(3):
                p, _ = fn(p, *jdata)
            for a, b in zip(finals["msir"], p):
                np.testing.assert_allclose(a, np.asarray(b), rtol=1e-3, atol=1e-5)
            state = [tuple(jax.device_put(q.copy()) for q in params0)]

            def block(n, fn=fn, state=state):
                for _ in range(n):
                    state[0], _ = fn(state[0], *jdata)
                jax.block_until_ready(state[0])

            blocks[name] = block
    if blocks:
        time.sleep(0.5)
        results.update(interleaved_ms(blocks, args.steps, args.blocks))

    print(f"SGD training loop, MLP {'-'.join(map(str, sizes))}, batch {batch}, float32; "
          f"median ms per step over {args.blocks} blocks of {args.steps} steps, variants taking turns; "
          f"{msir.get_num_threads()} msir threads")
    base = results["msir donated"]
    print(f"{'':14} {'ms/step':>8} {'x msir donated':>15}")
    for name, ms in results.items():
        print(f"{name:14} {ms:8.3f} {ms / base:15.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"config": args.config, "ms_per_step": results}, indent=1))


if __name__ == "__main__":
    main()
