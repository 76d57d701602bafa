"""W9 and the PyNative step: one training step of LeNet-5 (32x32x1 input, batch
64): forward, backward and the Momentum update, msir GRAPH_MODE and
PYNATIVE_MODE beside MindSpore GRAPH_MODE and PYNATIVE_MODE, PyTorch eager and
JAX jit (those installed), as ratios in one run.

    python bench/lenet_step.py [--rounds 7] [--steps 10] [--mindspore-python /work/ms-venv/bin/python]
                               [--only msir-graph,torch-eager,...]

Each framework runs in its own process (`--worker F --mode M`), with
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from its environment (the BLAS
at full speed, DESIGN.md) and the same network: conv 1->6 5x5, ReLU, 2x2 max
pool, conv 6->16 5x5, ReLU, 2x2 max pool, Dense 400->120->84->10,
softmax cross-entropy, Momentum(lr 0.01, momentum 0.9). All workers start
first (each times its first step, compilation included, then waits); the
driver then interleaves them: each round asks every worker in turn (the
order rotating from round to round) for `--steps` steps, so a burst of load
on the shared machine hits every framework alike. The table gives the
median of all steady steps, the spread of the per-round medians (min-max)
and the ratio to msir GRAPH_MODE. MindSpore needs its own virtualenv
(numpy<2): its worker runs under that python and imports only MindSpore and
NumPy; a framework that is missing is reported as skipped. Times on a shared
machine are rough; the ratios of one run are what to read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

BATCH = 64


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((BATCH, 1, 32, 32)).astype(np.float32), rng.integers(0, 10, BATCH).astype(np.int32)


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


def make_step(framework: str, mode: str):
    """The step function of `framework` in `mode` (graph / pynative for msir and MindSpore)."""
    if framework == "msir":
        import msir
        from msir import Tensor, nn

        msir.set_context(mode=msir.GRAPH_MODE if mode == "graph" else msir.PYNATIVE_MODE)
        msir.set_seed(0)
        return _lenet_cell_step(nn, Tensor, None)
    if framework == "mindspore":
        import mindspore as ms
        from mindspore import Tensor, nn

        ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE, device_target="CPU")
        ms.set_seed(0)
        return _lenet_cell_step(nn, Tensor, None)
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

        return step
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

        return step
    raise ValueError(framework)


RUNS = (("msir", "graph"), ("msir", "pynative"), ("mindspore", "graph"), ("mindspore", "pynative"),
        ("torch", "eager"), ("jax", "jit"))


def serve(framework: str, mode: str) -> None:
    """The worker: time the first step, then answer each `steps` line on stdin
    with the times of that many steps (one JSON line each)."""
    step = make_step(framework, mode)
    t0 = time.perf_counter()
    step()
    print(json.dumps({"first_s": time.perf_counter() - t0}), flush=True)
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        print(json.dumps({"times": times}), flush=True)


class Worker:
    """One framework's worker process, driven line by line."""

    def __init__(self, framework: str, mode: str, python: str):
        env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        self.name, self.times, self.rounds, self.why = f"{framework} {mode}", [], [], None
        # stderr to a file: a chatty worker (MindSpore's warnings) must not fill a pipe nobody reads
        self.err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([python, __file__, "--worker", framework, "--mode", mode], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True)
        first = self._answer()
        self.first_s = None if first is None else first["first_s"]

    def _answer(self) -> dict | None:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                self.err.seek(0)
                err = self.err.read().strip().splitlines() or ["no output"]
                self.why = err[-1]
                return None
            if line.startswith("{"):
                return json.loads(line)

    def run(self, steps: int) -> None:
        if self.why is not None:
            return
        self.proc.stdin.write(f"{steps}\n")
        self.proc.stdin.flush()
        answer = self._answer()
        if answer is not None:
            self.times += answer["times"]
            self.rounds.append(statistics.median(answer["times"]))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10, help="steps per worker and round")
    parser.add_argument("--worker")
    parser.add_argument("--mode", default="graph")
    parser.add_argument("--only", help="comma-separated 'framework-mode' names, e.g. msir-graph,torch-eager")
    parser.add_argument("--mindspore-python", default=os.environ.get("MSIR_BENCH_MS_PYTHON", "/work/ms-venv/bin/python"))
    args = parser.parse_args()
    if args.worker:
        serve(args.worker, args.mode)
        return 0
    runs = [r for r in RUNS if not args.only or "-".join(r) in args.only.split(",")]
    workers = [Worker(fw, mode, args.mindspore_python if fw == "mindspore" else sys.executable)
               for fw, mode in runs]
    try:
        for r in range(args.rounds):
            for k in range(len(workers)):
                workers[(k + r) % len(workers)].run(args.steps)
    finally:
        for w in workers:
            w.close()
    base = next((statistics.median(w.times) for w in workers if w.name == "msir graph" and w.times), None)
    print(f"W9: LeNet-5 training step, batch {BATCH}, 32x32x1, Momentum; {args.rounds} interleaved rounds of "
          f"{args.steps} steps (rough: shared machine)")
    print(f"{'framework':<20}{'first step':>11}{'median step':>13}{'round medians':>22}{'x msir graph':>14}")
    for w in workers:
        if not w.times:
            print(f"{w.name:<20}{'skipped':>11}  ({(w.why or '')[:70]})")
            continue
        med = statistics.median(w.times)
        spread = f"{min(w.rounds) * 1e3:.2f}-{max(w.rounds) * 1e3:.2f}ms"
        ratio = f"{med / base:.2f}" if base else "-"
        print(f"{w.name:<20}{w.first_s:>10.2f}s{med * 1e3:>11.2f}ms{spread:>22}{ratio:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
