"""`bench/run.py --repeats N`: the rounds' merge (medians with min-max), the per-round ratios
(x msir, msir / best peer, 2T/1T) and their tables, on made-up worker results, plus one tiny
real run of two rounds (tests never assert on times, DESIGN.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import run  # noqa: E402


def _r(t, **kw):
    return {"status": "ok", "median_s": t, "first_call_s": 10 * t, "max_rel_err": kw.pop("err", 0.0),
            "agree": kw.pop("agree", True), **kw}


def test_merge_takes_medians_spread_worst_error_and_rescales_rates():
    m = run.merge_rounds([_r(0.003, gb_s=3.0), _r(0.001, gb_s=9.0, err=1e-6), _r(0.002, gb_s=4.5, agree=False)])
    assert m["median_s"] == 0.002 and (m["min_s"], m["max_s"]) == (0.001, 0.003)
    assert m["median_s_rounds"] == [0.003, 0.001, 0.002] and m["repeats"] == 3
    assert m["first_call_s"] == pytest.approx(0.02)
    assert m["gb_s"] == pytest.approx(4.5)  # the rate of the median time, not of round 0
    assert m["max_rel_err"] == 1e-6 and m["agree"] is False


def test_merge_reports_a_failed_round():
    bad = {"status": "error", "error": "boom"}
    assert run.merge_rounds([_r(0.001), bad, _r(0.002)]) is bad


def test_ratios_are_medians_of_per_round_ratios():
    # msir is 2x slower than jax in round 0 and 2x faster in rounds 1, 2 (load moved): the per-round
    # ratios are [2, 0.5, 0.5], median 0.5, while the ratio of the medians would be 1.0
    x = run.round_ratios([2.0, 1.0, 1.0], [1.0, 2.0, 2.0])
    assert (x["median"], x["min"], x["max"], x["n"]) == (0.5, 0.5, 2.0, 3)
    assert run.round_ratios([1.0], None) is None
    bp = run.best_peer_ratio({"msir": [1.0, 1.0, 1.0], "numpy": [0.1, 0.1, 0.1],
                              "jax": [2.0, 0.5, 4.0], "torch": [0.8, 4.0, 2.0]})
    # per round the fastest peer (NumPy is a reference, not a peer): torch, jax, torch
    assert bp["rounds"] == [1.25, 2.0, 0.5] and bp["median"] == 1.25 and bp["best_peer"] == "torch"
    assert run.best_peer_ratio({"msir": [1.0], "numpy": [0.5]}) is None


def test_tables_show_spreads():
    def per_t(a, b):
        return {"1": run.merge_rounds([_r(x) for x in a]), "2": run.merge_rounds([_r(x) for x in b])}

    entry = {"desc": "d", "tol": 1e-5, "results": {"msir": per_t([0.002, 0.004], [0.001, 0.003]),
                                                    "jax": per_t([0.004, 0.004], [0.002, 0.002])}}
    rounds = lambda fw, t: entry["results"][fw][t]["median_s_rounds"]  # noqa: E731
    for t in ("1", "2"):
        x = run.round_ratios(rounds("jax", t), rounds("msir", t))
        entry["results"]["jax"][t]["x_msir_spread"] = x
        entry["results"]["jax"][t]["x_msir"] = x["median"]
        entry.setdefault("msir_over_best_peer", {})[t] = run.best_peer_ratio(
            {fw: rounds(fw, t) for fw in entry["results"]})
    entry["scaling"] = {fw: run.round_ratios(rounds(fw, "2"), rounds(fw, "1")) for fw in entry["results"]}
    report = {"config": {"threads": [1, 2], "repeats": 2}, "workloads": {"W1": entry},
              "machine": {"limits": {}}}
    table = run.build_table(report)
    assert "2T/1T" in table.splitlines()[0]
    msir_row = next(line for line in table.splitlines() if line.startswith("W1") and "msir" in line)
    assert "3.000 [2.000-4.000]" in msir_row and "2.000 [1.000-3.000]" in msir_row
    assert "0.62 [0.50-0.75]" in msir_row  # 2T/1T per round: 0.5, 0.75
    bp = run.build_best_peer_table(report).splitlines()
    assert bp[2].split() == ["W1", "0.75", "[0.50-1.00]", "1.00", "[0.50-1.50]", "jax"]


def test_two_rounds_of_a_tiny_run(tmp_path):
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, str(BENCH / "run.py"), "--quick", "--no-peers", "--repeats", "2",
                        "--only", "W1,W8", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["config"]["repeats"] == 2
    w1 = report["workloads"]["W1"]
    for fw in ("msir", "numpy"):
        for t in ("1", "2"):
            r = w1["results"][fw][t]
            assert r["status"] == "ok" and r["agree"] is True and len(r["median_s_rounds"]) == 2
            assert r["min_s"] <= r["median_s"] <= r["max_s"]
            assert r["x_msir_spread"]["n"] == 2
        assert w1["scaling"][fw]["n"] == 2
    w8 = report["w8"]["msir"]
    assert len(w8["process1_rounds"]) == 2 and len(w8["process2_rounds"]) == 2
    assert w8["process1_spread"]["n"] == 2 and w8["process1"]["agree"] is True
    assert "median of 2 rounds" in report["table"]
