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


def test_contention_rounds_alternate_and_merge(monkeypatch, tmp_path):
    """--repeats N under --contention: per load, N rounds over (framework, threads) in
    alternating order, each workload's time the median of its rounds (worker results made up)."""
    calls = []
    times = iter([0.004, 0.002, 0.006, 0.003, 0.005, 0.001])  # round-major: (1T, 2T) per round

    def fake_worker(args, env, python, timeout, log):
        calls.append(args[args.index("--threads") + 1])
        return _worker({"W5": next(times)})

    monkeypatch.setattr(run, "run_worker", fake_worker)
    monkeypatch.setattr(run, "contention_loads", lambda: [("quiet", [])])
    out = run.run_contention(["msir"], {"msir": {"status": "ok"}}, ["W5"], [1, 2], tmp_path, 10, True,
                             lambda s: None, repeats=3)
    assert calls == ["1", "2", "1", "2", "1", "2"]
    lo, hi = out["quiet"]["msir"]["1"]["results"]["W5"], out["quiet"]["msir"]["2"]["results"]["W5"]
    assert lo["median_s_rounds"] == [0.004, 0.006, 0.005] and lo["median_s"] == 0.005
    assert hi["median_s_rounds"] == [0.002, 0.003, 0.001] and (hi["min_s"], hi["max_s"]) == (0.001, 0.003)
    report = {"config": {"threads": [1, 2], "workloads": ["W5"]}, "contention": out}
    row = run.build_contention_table(report).splitlines()[2]
    # 2T/1T per round: 0.5, 0.5, 0.2 -> median 0.5; 2T over the quiet 1T median (5 ms): 0.4, 0.6, 0.2
    assert "0.50 [0.20-0.50]" in row and "0.40 [0.20-0.60]" in row and "5.000 [4.000-6.000]" in row
