"""The README's demo (`python examples/demo.py`) runs and checks itself."""

import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


def test_demo_runs_and_trains_in_place():
    r = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "predictions agree: True" in r.stdout
    assert "parameters updated in place: True" in r.stdout
    assert r.stdout.rstrip().endswith("OK")
    assert "Warning" not in r.stderr, r.stderr
