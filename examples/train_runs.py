"""Three training runs of one network at three learning rates, and the pictures
that compare them: README's training curves and model lineage.

    python examples/train_runs.py [--runs DIR] [--images DIR] [--epochs N]

Trains on scikit-learn's bundled handwritten digits (1797 images of 8x8
pixels, no download) with `msir.train.Model`, a `SummaryCollector` per run
(`DIR/lr<rate>`), the test set's accuracy after every epoch (`Model.fit`),
LossMonitor's line once an epoch and a progress bar when stderr is a
terminal. Then it
writes, to the images folder (default docs/images):

* `train-curves.png`: loss, accuracy and learning rate of the runs
  (`msir.viz.curves`);
* `lineage.html`: the runs side by side (`msir.viz.lineage`), and
  `lineage.png`, a screenshot of it in headless Chromium when one is installed.

Needs the `viz` and `demo` extras (matplotlib, tqdm, scikit-learn). The
network is `build_network`'s: the digits CNN of `lenet_digits.py` (two 3x3
convolutions with ReLU and 2x2 max pooling, then two Dense layers).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import msir
from msir import nn
from msir.train import LossMonitor, Model, ProgressBar, SummaryCollector

LEARNING_RATES = (0.1, 0.01, 0.001)
BATCH_SIZE = 32
MOMENTUM = 0.9
SEED = 0


def build_network() -> nn.Cell:
    """The network of every run: images (N, 1, 8, 8) to 10 class scores."""
    return nn.SequentialCell(
        nn.Conv2d(1, 16, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Conv2d(16, 32, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Flatten(), nn.Dense(32 * 2 * 2, 64), nn.ReLU(), nn.Dense(64, 10),
    )


def digits(batch_size: int = BATCH_SIZE) -> tuple[list, list]:
    """The digits as (image, label) batches, a fifth held out for testing; the
    pixels scaled to [0, 1]. Only whole batches, so that each compiled step
    sees one shape."""
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    images = (images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    labels = labels.astype(np.int32)
    order = np.random.default_rng(SEED).permutation(len(labels))
    images, labels = images[order], labels[order]
    n_test = len(labels) // 5

    def batches(x, y):
        return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(y) - batch_size + 1, batch_size)]

    return batches(images[n_test:], labels[n_test:]), batches(images[:n_test], labels[:n_test])


def train_run(learning_rate: float, train, test, epochs: int, summary_dir: Path) -> dict:
    msir.set_seed(SEED)  # the same initial weights in every run: only the learning rate differs
    network = build_network()
    optimizer = nn.Momentum(network.trainable_params(), learning_rate, MOMENTUM)
    model = Model(network, nn.CrossEntropyLoss(), optimizer,
                  metrics={"accuracy": nn.Accuracy(), "eval_loss": nn.Loss()})
    collector = SummaryCollector(str(summary_dir), collect_freq=5,
                                 custom_lineage_data={"momentum": MOMENTUM})
    print(f"-- learning rate {learning_rate}", flush=True)
    model.fit(epochs, train, test, callbacks=[collector, LossMonitor(per_print_times=len(train)), ProgressBar()])
    return model.eval(test)


def browser() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _shoot(chromium: str, page: Path, out: Path, size: str) -> bytes:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", f"--window-size={size}", "--hide-scrollbars",
                        "--virtual-time-budget=5000", "--run-all-compositor-stages-before-draw",
                        f"--screenshot={out.resolve()}", page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)
    return out.read_bytes()


def screenshot(page: Path, out: Path, size: str = "1920,600", attempts: int = 6) -> bool:
    """A picture of `page` as headless Chromium draws it; False without a Chromium.

    Headless Chromium sometimes takes its shot before every tile is drawn
    (rows of the table cut off at a tile's edge, seen here about one shot in
    three); a whole page is drawn the same every time, so shots are taken
    until two in a row are the same."""
    chromium = browser()
    if chromium is None:
        return False
    previous = None
    for _ in range(attempts):
        shot = _shoot(chromium, page, out, size)
        if shot == previous:
            return True
        previous = shot
    raise RuntimeError(f"headless Chromium drew {page} differently in each of {attempts} screenshots")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parent.parent
    parser.add_argument("--runs", type=Path, default=None, help="where the runs' summaries go (default: a new "
                        "temporary folder)")
    parser.add_argument("--images", type=Path, default=root / "docs" / "images")
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args(argv)
    runs = args.runs if args.runs is not None else Path(tempfile.mkdtemp(prefix="msir-runs-"))
    args.images.mkdir(parents=True, exist_ok=True)
    train, test = digits()
    for rate in LEARNING_RATES:
        run_dir = runs / f"lr{rate}"
        if run_dir.exists():  # a summary appends to a run: start this one afresh
            shutil.rmtree(run_dir)
        metrics = train_run(rate, train, test, args.epochs, run_dir)
        print(f"   test accuracy {metrics['accuracy']:.3f}, loss {metrics['eval_loss']:.4f}", flush=True)
    curves = msir.viz.curves(runs, args.images / "train-curves.png",
                             title=f"digits CNN, Momentum {MOMENTUM}, three learning rates")
    page = msir.viz.lineage(runs, args.images / "lineage.html",
                            title="Model lineage: the digits CNN at three learning rates")
    print(f"wrote {curves}\nwrote {page}")
    shot = args.images / "lineage.png"
    if screenshot(page, shot):
        print(f"wrote {shot}")
    else:
        print("no Chromium on PATH: no screenshot of the lineage page", file=sys.stderr)
    print(f"runs in {runs}")


if __name__ == "__main__":
    main()
