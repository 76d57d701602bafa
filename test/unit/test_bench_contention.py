"""`bench/run.py --contention`: its loads (bench/neighbour.py) and its table,
on a made-up report (the real run takes minutes; tests never time anything)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import run  # noqa: E402


def test_loads_are_quiet_one_cpu_every_cpu_and_a_neighbour():
    cpus = sorted(os.sched_getaffinity(0))
    loads = run.contention_loads()
    assert [label for label, _ in loads] == ["quiet", f"CPU {cpus[-1]} busy", "every CPU busy",
                                             f"neighbour, {len(cpus)} threads"]
    assert loads[0][1] == [] and len(loads[2][1]) == len(cpus)
    busy = subprocess.Popen(loads[1][1][0])
    try:
        deadline = time.monotonic() + 60
        while os.sched_getaffinity(busy.pid) != {cpus[-1]} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.sched_getaffinity(busy.pid) == {cpus[-1]}  # pinned away from the 1-thread worker's CPU
        assert busy.poll() is None
    finally:
        busy.kill()
        busy.wait()


def _worker(times: dict[str, float]) -> dict:
    return {"status": "ok", "results": {name: {"status": "ok", "median_s": t} for name, t in times.items()}}


def test_table_gives_each_loads_ratios():
    report = {
        "config": {"threads": [1, 2], "workloads": ["W5", "W6"]},
        "contention": {
            "quiet": {"msir": {"1": _worker({"W5": 0.004, "W6": 0.003}), "2": _worker({"W5": 0.002, "W6": 0.003})}},
            "every CPU busy": {"msir": {"1": _worker({"W5": 0.005, "W6": 0.006}),
                                        "2": _worker({"W5": 0.010, "W6": 0.006})}},
        },
    }
    rows = [line.split() for line in run.build_contention_table(report).splitlines()[2:]]
    assert rows[0] == ["W5", "msir", "quiet", "4.000", "2.000", "0.50", "0.50"]
    assert rows[1] == ["W5", "msir", "every", "CPU", "busy", "5.000", "10.00", "2.00", "2.50"]
    assert rows[3][-2:] == ["1.00", "2.00"]
