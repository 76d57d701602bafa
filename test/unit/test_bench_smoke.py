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
    assert report["w8"]["msir"]["process1"]["agree"] is True
    assert report["w8"]["msir"]["process2"]["agree"] is True
    for t in ("1", "2"):
        lim = report["machine"]["limits"][t]
        assert lim["copy_gb_s_best"] > 0 and lim["sgemm_gflop_s_best"] > 0
        assert lim["openblas_coretype"] is None
        assert lim["fma_gflop_s_best"] > 0 and lim["fma_per_thread_gflop_s_best"] > 0 and lim["fma_isa"]
    assert "workload" in report["table"] and "x msir" in report["table"] and "% FMA" in report["table"]
    assert "FMA peak" in report["table"]
