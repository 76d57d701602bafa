"""bench/fma_peak.py, the harness's FMA peak: the kernel is what its docstring says
(one vector FMA per accumulator chain per trip, at the host's widest width, nothing
spilled) and a measurement returns its figures. Never asserts on times (DESIGN.md)."""

import importlib.util
import math
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def fma_peak():
    spec = importlib.util.spec_from_file_location("bench_fma_peak", BENCH / "fma_peak.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _loop(asm: str) -> list[str]:
    """The instructions of the kernel's loop (the block that branches back to itself)."""
    lines = [x.strip() for x in asm.splitlines()]
    for i, line in enumerate(lines):
        m = re.match(r"^(\.LBB\d+_\d+):", line)
        if m:
            body = []
            for x in lines[i + 1:]:
                if re.match(r"^\.LBB\d+_\d+:", x):
                    break
                body.append(x)
                if re.match(rf"^j\w+\s+{re.escape(m.group(1))}$", x):
                    return body
    raise AssertionError("no loop in the kernel's assembly")


def test_the_loop_is_one_vector_fma_per_chain_at_the_widest_width(fma_peak):
    lanes, fused, isa = fma_peak.host_vector()
    chains = fma_peak.CHAINS[lanes]
    assert chains >= 2 * 5, "fewer chains than 2 FMA ports x latency 5"
    loop = _loop(fma_peak.assembly())
    reg = {16: "zmm", 8: "ymm", 4: "xmm"}[lanes]
    if fused:
        fmas = [x for x in loop if x.startswith("vfmadd")]
        assert len(fmas) == chains, loop
        assert all(f"%{reg}" in x for x in fmas), fmas
    # no spills: nothing in the loop touches the stack
    assert not any("(%rsp)" in x or "(%rbp)" in x for x in loop), loop


def test_a_measurement_reports_positive_figures(fma_peak):
    r = fma_peak.measure(threads=2, reps=1, iterations=1 << 14)
    assert r["threads"] == 2 and r["chains"] == fma_peak.CHAINS[r["lanes"]]
    for k in ("gflop_s_best", "gflop_s_median", "per_thread_gflop_s_best", "per_thread_gflop_s_median"):
        assert r[k] > 0 and math.isfinite(r[k]), k
    fn = fma_peak._compile()[0]
    assert math.isfinite(fn(1000)) and fn(1000) > 0
