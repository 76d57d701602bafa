"""W9: one training step of LeNet-5 (32x32x1 input, batch 64): forward, backward
and the Momentum update, msir GRAPH_MODE beside MindSpore GRAPH_MODE, PyTorch
eager and JAX jit (those installed), as ratios in one run.

    python bench/lenet_step.py [--steps 30] [--mindspore-python /work/ms-venv/bin/python]

Each framework runs in its own process (`--worker F`), with
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from its environment (the BLAS
at full speed, DESIGN.md) and the same network: conv 1->6 5x5, ReLU, 2x2 max
pool, conv 6->16 5x5, ReLU, 2x2 max pool, Dense 400->120->84->10,
softmax cross-entropy, Momentum(lr 0.01, momentum 0.9). A worker prints one
JSON line: the first step (compilation included) and the median of the
steady steps. MindSpore needs its own virtualenv (numpy<2): the script's
worker runs under that python and imports only MindSpore and NumPy; a
framework that is missing is reported as skipped. Times on a shared machine
are rough; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH = 64


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((BATCH, 1, 32, 32)).astype(np.float32), rng.integers(0, 10, BATCH).astype(np.int32)


def _time(step, steps: int) -> dict:
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"first_s": first, "median_s": statistics.median(times)}


def _lenet_cell_step(nn, Tensor, Model_parts):
    """A TrainOneStepCell of LeNet-5 in msir's or MindSpore's `nn` (the same code)."""
    class LeNet5(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="valid")
            self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid")
            self.relu = nn.ReLU()
            self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.flatten = nn.Flatten()
            self.fc1 = nn.Dense(16 * 5 * 5, 120)
            self.fc2 = nn.Dense(120, 84)
            self.fc3 = nn.Dense(84, 10)

        def construct(self, x):
            x = self.pool(self.relu(self.conv1(x)))
            x = self.pool(self.relu(self.conv2(x)))
            x = self.flatten(x)
            return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))

    net = LeNet5()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    train.set_train()
    x, y = _data()
    xt, yt = Tensor(x), Tensor(y)
    return lambda: train(xt, yt).asnumpy()


def worker(framework: str, steps: int) -> dict:
    if framework == "msir":
        import msir
        from msir import Tensor, nn

        msir.set_context(mode=msir.GRAPH_MODE)
        msir.set_seed(0)
        return _time(_lenet_cell_step(nn, Tensor, None), steps)
    if framework == "mindspore":
        import mindspore as ms
        from mindspore import Tensor, nn

        ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
        ms.set_seed(0)
        return _time(_lenet_cell_step(nn, Tensor, None), steps)
    if framework == "torch":
        import torch

        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Conv2d(1, 6, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
            torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2), torch.nn.Flatten(),
            torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 84), torch.nn.ReLU(),
            torch.nn.Linear(84, 10))
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        x, y = (torch.from_numpy(a) for a in _data())
        y = y.long()

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        return _time(step, steps)
    if framework == "jax":
        import jax
        import jax.numpy as jnp

        keys = jax.random.split(jax.random.PRNGKey(0), 5)
        shapes = [(6, 1, 5, 5), (16, 6, 5, 5), (400, 120), (120, 84), (84, 10)]
        params = [jax.random.normal(k, s) * 0.1 for k, s in zip(keys, shapes)]
        moms = [jnp.zeros_like(p) for p in params]

        def forward(ps, x):
            def conv(x, w):
                return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")

            def pool(x):
                return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

            h = pool(jax.nn.relu(conv(x, ps[0])))
            h = pool(jax.nn.relu(conv(h, ps[1]))).reshape(x.shape[0], -1)
            h = jax.nn.relu(jax.nn.relu(h @ ps[2]) @ ps[3])
            return h @ ps[4]

        def loss(ps, x, y):
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(forward(ps, x)), y[:, None], 1))

        @jax.jit
        def update(ps, ms_, x, y):
            g = jax.grad(loss)(ps, x, y)
            ms_ = [0.9 * m + gi for m, gi in zip(ms_, g)]
            return [p - 0.01 * m for p, m in zip(ps, ms_)], ms_

        x, y = (jnp.asarray(a) for a in _data())
        state = [params, moms]

        def step():
            state[0], state[1] = update(state[0], state[1], x, y)
            jax.block_until_ready(state[0])

        return _time(step, steps)
    raise ValueError(framework)


def _run(framework: str, python: str, steps: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    try:
        r = subprocess.run([python, __file__, "--worker", framework, "--steps", str(steps)], capture_output=True,
                           text=True, env=env, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"status": "skipped", "why": str(e)}
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "skipped", "why": tail}
    return {"status": "ok", **json.loads(lines[-1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--worker")
    parser.add_argument("--mindspore-python", default=os.environ.get("MSIR_BENCH_MS_PYTHON", "/work/ms-venv/bin/python"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps)))
        return 0
    results = {fw: _run(fw, args.mindspore_python if fw == "mindspore" else sys.executable, args.steps)
               for fw in ("msir", "mindspore", "torch", "jax")}
    base = results["msir"].get("median_s")
    print(f"W9: LeNet-5 training step, batch {BATCH}, 32x32x1, Momentum ({args.steps} steady steps; rough: shared machine)")
    print(f"{'framework':<12}{'first step':>12}{'median step':>14}{'x msir':>9}")
    for fw, r in results.items():
        if r["status"] != "ok":
            print(f"{fw:<12}{'skipped':>12}  ({r['why'][:70]})")
            continue
        ratio = f"{r['median_s'] / base:.2f}" if base else "-"
        print(f"{fw:<12}{r['first_s']:>11.2f}s{r['median_s'] * 1e3:>12.2f}ms{ratio:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
