"""Smoke test of the benchmark harness: `bench/run.py --quick --no-peers` runs msir and
NumPy on small sizes, and its JSON holds every quick workload with a numeric-agreement
flag for each framework and thread count. Never asserts on times (DESIGN.md)."""

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_bench_quick_msir_and_numpy(tmp_path):
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, str(BENCH / "run.py"), "--quick", "--no-peers", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["workloads"]) == {"W1", "W2", "W3", "W4-512", "W4-512-Ta"}
    for name, w in report["workloads"].items():
        assert set(w["results"]) == {"msir", "numpy"}, name
        for fw, per_thread in w["results"].items():
            assert set(per_thread) == {"1", "2"}, (name, fw)
            for t, r in per_thread.items():
                # an msir compile error would show up here as status "error"
                assert r["status"] == "ok", (name, fw, t, r.get("error"))
                assert r["agree"] is True, (name, fw, t, r["max_rel_err"])
                assert r["median_s"] > 0 and r["first_call_s"] > 0
                assert r["repeats"] == 1 and r["median_s_rounds"] == [r["median_s"]]  # --quick: one round
    assert report["w8"]["msir"]["process1"]["agree"] is True
    assert report["w8"]["msir"]["process2"]["agree"] is True
    for t in ("1", "2"):
        lim = report["machine"]["limits"][t]
        assert lim["copy_gb_s_best"] > 0 and lim["sgemm_gflop_s_best"] > 0
        assert lim["openblas_coretype"] is None
        assert lim["fma_gflop_s_best"] > 0 and lim["fma_per_thread_gflop_s_best"] > 0 and lim["fma_isa"]
    assert "workload" in report["table"] and "x msir" in report["table"] and "% FMA" in report["table"]
    assert "FMA peak" in report["table"]


def test_parallel_step_bench_runs_and_agrees():
    """`bench/parallel_step.py` (the emulated data-parallel step against the single-device one): it runs its
    interleaved blocks and its instrumented split, and the two steps agree; times are not checked."""
    import re

    p = subprocess.run([sys.executable, str(BENCH / "parallel_step.py"), "--reps", "2", "--repeats", "2"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert re.search(r"ratio +\d+\.\d+x median \[\d+\.\d+, \d+\.\d+\]", p.stdout), p.stdout
    assert re.search(r"native segments +\d+\.\d+ ms \(2 per device\)", p.stdout), p.stdout
    difference = float(re.search(r"max relative difference from the single-device step: (\S+)", p.stdout)[1])
    assert difference < 1e-5, p.stdout


def test_parallel_mpi_bench_runs_the_planned_step_on_2_ranks(tmp_path):
    """`bench/parallel_mpi.py` on 2 ranks: the planned data-parallel W5 step (the context and `msir.jit`) equals the
    one-process step on every rank (the script fails otherwise), and each rank's runtime profile has its parts;
    times are not checked."""
    import pytest

    pytest.importorskip("mpi4py", reason="msir's mpi extra is not installed")
    out = tmp_path / "mpi.json"
    p = subprocess.run([sys.executable, str(BENCH / "parallel_mpi.py"), "--ranks", "2", "--steps", "2", "--json",
                        str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["same_on_every_rank"] is True
    assert report["collective_calls"] == 7  # the loss and the six gradients, each all-reduced once
    assert report["collective_bytes"] == report["gradient_bytes"] + 4
    assert len(report["per_rank"]) == 2
    for times in report["per_rank"]:
        for total, seg, coll in zip(times["total_s"], times["segments_s"], times["collectives_s"]):
            assert seg > 0 and coll > 0 and seg + coll <= total
    assert "results equal the one-process step's, the same on every rank" in p.stdout
