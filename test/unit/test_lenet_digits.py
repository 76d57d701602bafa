"""The LeNet demo (`examples/lenet_digits.py`) trains with `Model.train` and learns.

The full run (15 epochs) reaches about 99% on the held-out fifth of the
digits; the test runs 4 epochs, where it is past 90%, and checks the
report line.
"""

import re
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "examples" / "lenet_digits.py"


def test_lenet_digits_learns():
    r = subprocess.run([sys.executable, str(DEMO), "--epochs", "4"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^epoch: 4 step: 44, loss is [0-9.e-]+$", r.stdout, re.M), r.stdout
    match = re.search(r"^test accuracy: ([0-9.]+) after 4 epochs, [0-9.]+ s of training", r.stdout, re.M)
    assert match, r.stdout
    assert float(match.group(1)) > 0.9, r.stdout
    assert "Warning" not in r.stderr, r.stderr
