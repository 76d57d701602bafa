"""W10: `Model.train` throughput on the digits CNN (samples/s, the data pipeline
included), msir beside MindSpore, in GRAPH_MODE and PYNATIVE_MODE, and the
share of msir's step time spent waiting for its batch.

    python bench/lenet_train.py [--epochs 8] [--repeats 3] [--mindspore-python /work/ms-venv/bin/python]
                                [--only msir-graph,mindspore-graph]

The network, optimizer and batch are those of `examples/lenet_digits.py`
(conv 1->16 3x3 'same' + bias, ReLU, 2x2 max pool, conv 16->32, ReLU, pool,
Dense 128->64->10; Momentum(lr 0.05, momentum 0.9); batch 32), written once
below against either framework's `nn`. The data are scikit-learn's bundled
digits (1797 8x8 images; the driver loads them, as MindSpore's venv has no
scikit-learn, and hands the 80 % training split to the workers as an .npz),
read through each framework's own pipeline as its tutorials write one:
`NumpySlicesDataset({"image", "label"}, shuffle=True)`, `.map(Rescale(1/16,
0), "image")`, `.batch(32, drop_remainder=True)`, then `Model(net, loss,
opt).train(epochs, dataset, callbacks=[...], dataset_sink_mode=False)`.

A callback takes the time of every epoch; the first epoch (compilation
included) is reported apart, the samples/s are those of the median later
epoch. For msir the callback also reads `cb_params.epoch_data_wait_time`,
the time the steps waited for their batch (the pipeline prefetches on a
background thread), and reports it as a share of the epoch. Each framework
trains in its own process (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed, as
in `lenet_step.py`); the runs are repeated `--repeats` times in alternating
order and the table gives the median over repeats and its spread. Times on
a shared machine are rough; the ratios of one run are what to read.
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

BATCH = 32
RUNS = (("msir", "graph"), ("mindspore", "graph"), ("msir", "pynative"), ("mindspore", "pynative"))


def _digits_npz(path: str) -> int:
    """The training split of `examples/lenet_digits.py` (same seed and cut), raw pixel values 0..16."""
    from sklearn.datasets import load_digits

    data = load_digits()
    order = np.random.default_rng(0).permutation(len(data.target))
    train = order[:int(0.8 * len(order))]
    np.savez(path, image=data.images[train].astype(np.float32)[:, None], label=data.target[train].astype(np.int32))
    return len(train)


def _network(nn):
    class LeNet(nn.Cell):
        def __init__(self, num_classes: int = 10):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, pad_mode="same", has_bias=True)
            self.conv2 = nn.Conv2d(16, 32, 3, pad_mode="same", has_bias=True)
            self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.relu = nn.ReLU()
            self.flatten = nn.Flatten()
            self.fc1 = nn.Dense(32 * 2 * 2, 64)
            self.fc2 = nn.Dense(64, num_classes)

        def construct(self, x):
            x = self.pool(self.relu(self.conv1(x)))
            x = self.pool(self.relu(self.conv2(x)))
            return self.fc2(self.relu(self.fc1(self.flatten(x))))

    return LeNet()


def train(framework: str, mode: str, npz: str, epochs: int) -> dict:
    """Train in this process; the epoch times and (msir) the batch waits."""
    if framework == "msir":
        import msir as ms
        import msir.dataset as ds
        from msir import nn
        from msir.dataset import vision
        from msir.train import Callback, Model

        ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    else:
        import mindspore as ms
        import mindspore.dataset as ds
        from mindspore import nn
        from mindspore.dataset import vision
        from mindspore.train import Callback, Model

        ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
        ms.set_device("CPU")
    ms.set_seed(0)
    ds.config.set_seed(0)
    arrays = np.load(npz)
    data = ds.NumpySlicesDataset({"image": arrays["image"], "label": arrays["label"]}, shuffle=True)
    data = data.map(operations=[vision.Rescale(1.0 / 16.0, 0.0)], input_columns="image")
    data = data.batch(BATCH, drop_remainder=True)

    class EpochTimer(Callback):
        def __init__(self):
            super().__init__()
            self.seconds, self.waits = [], []

        def on_train_epoch_begin(self, run_context):
            self.t0 = time.perf_counter()

        def on_train_epoch_end(self, run_context):
            self.seconds.append(time.perf_counter() - self.t0)
            try:  # msir's; MindSpore's run context raises KeyError for a name it lacks
                self.waits.append(run_context.original_args().epoch_data_wait_time)
            except (AttributeError, KeyError):
                self.waits.append(None)

    net = _network(nn)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    timer = EpochTimer()
    Model(net, loss, opt).train(epochs, data, callbacks=[timer], dataset_sink_mode=False)
    return {"seconds": timer.seconds, "waits": timer.waits, "steps": data.get_dataset_size()}


def _run(framework: str, mode: str, python: str, npz: str, epochs: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    try:
        r = subprocess.run([python, __file__, "--worker", framework, "--mode", mode, "--npz", npz,
                            "--epochs", str(epochs)], capture_output=True, text=True, env=env, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"why": str(e)}
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"why": (r.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker")
    parser.add_argument("--mode", default="graph")
    parser.add_argument("--npz")
    parser.add_argument("--only", help="comma-separated 'framework-mode' names, e.g. msir-graph,mindspore-graph")
    parser.add_argument("--mindspore-python", default=os.environ.get("MSIR_BENCH_MS_PYTHON", "/work/ms-venv/bin/python"))
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first epoch compiles)")
    if args.worker:
        print(json.dumps(train(args.worker, args.mode, args.npz, args.epochs)))
        return 0
    runs = [r for r in RUNS if not args.only or "-".join(r) in args.only.split(",")]
    results: dict[tuple, list] = {r: [] for r in runs}
    why: dict[tuple, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "digits.npz")
        samples = _digits_npz(npz)
        for k in range(args.repeats):
            for fw, mode in (runs if k % 2 == 0 else runs[::-1]):
                if (fw, mode) in why:
                    continue
                python = args.mindspore_python if fw == "mindspore" else sys.executable
                r = _run(fw, mode, python, npz, args.epochs)
                if "why" in r:
                    why[(fw, mode)] = r["why"]
                else:
                    results[(fw, mode)].append(r)
    print(f"W10: Model.train on the digits CNN ({samples} training images, batch {BATCH}, {args.epochs} epochs, "
          f"{args.repeats} alternating repeats; rough: shared machine)")
    print(f"{'framework':<20}{'first epoch':>12}{'samples/s':>11}{'repeats':>17}{'x msir graph':>14}"
          f"{'batch wait':>12}")
    base = None
    rows = []
    for key in runs:
        if key in why or not results[key]:
            rows.append((key, None, why.get(key, "no result")))
            continue
        per_repeat, firsts, shares = [], [], []
        for r in results[key]:
            steady = r["seconds"][1:]
            per_repeat.append(r["steps"] * BATCH / statistics.median(steady))
            firsts.append(r["seconds"][0])
            if r["waits"][0] is not None:
                shares += [w / s for w, s in zip(r["waits"][1:], steady)]
        rate = statistics.median(per_repeat)
        if key == ("msir", "graph"):
            base = rate
        rows.append((key, (statistics.median(firsts), rate, min(per_repeat), max(per_repeat), shares), None))
    for (fw, mode), v, reason in rows:
        name = f"{fw} {mode}"
        if v is None:
            print(f"{name:<20}{'skipped':>12}  ({reason[:70]})")
            continue
        first, rate, lo, hi, shares = v
        ratio = f"{base / rate:.2f}" if base else "-"
        wait = f"{100 * statistics.median(shares):.2f}%" if shares else "-"
        print(f"{name:<20}{first:>11.2f}s{rate:>11.0f}{f'{lo:.0f}-{hi:.0f}':>17}{ratio:>14}{wait:>12}")
    print("x msir graph: msir GRAPH_MODE's samples/s over the row's (above 1: msir is faster); batch wait: the "
          "median share of a steady epoch its steps waited for their batch (msir reports it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
