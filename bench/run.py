"""msir side by side with NumPy, JAX, PyTorch (eager and torch.compile) and MindSpore.

    python bench/run.py [--quick] [--repeats N] [--json out.json] [--only W1,W4-1024] [--frameworks msir,numpy]
    python bench/run.py --contention [--quick] [--repeats N] [--only ...] [--frameworks msir,jax]

Every (framework, thread count) pair runs in its own process (bench/peers.py) with the
thread environment set before anything is imported: OMP/MKL/OPENBLAS/MSIR_NUM_THREADS,
XLA_FLAGS (1 thread: no multi-threaded Eigen, intra_op_parallelism_threads=1),
torch.set_num_threads, and the CPU affinity cut to that many cores. All harness
processes run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed (the environment's
Haswell setting halves OpenBLAS's sgemm, see DESIGN.md) and PYTHONDONTWRITEBYTECODE
removed (Python keeps the bytecode of the modules it imports, as an installed msir has it). Each process gets fresh msir
and TorchInductor cache directories, so "first call" is a cold compile.

Per workload and framework: first call (compile + one run, imports excluded), median
of repeated steady-state runs after warm-up, agreement with NumPy (max|out-ref| /
max|ref| <= tol), GB/s against the measured copy bandwidth, GFLOP/s against the
measured NumPy sgemm and against the measured f32 FMA peak x threads ("% FMA": the
best single-thread peak of bench/fma_peak.py, an llvmlite kernel at the host's widest
vector width, times the row's thread count; the limits line also gives the peak of
that many threads at once), and each framework's time divided by msir's from the same
run ("x msir": above 1 means msir is faster). MindSpore runs with the python of its own
virtualenv (bench/setup_peers.sh); a framework that is not installed is "skipped".
W8 (compile time of a 200-op function, first and second process) runs apart.

Repeats (--repeats N, default 5, 1 with --quick): the worker processes run in N
alternating rounds (round r: msir 1T, msir 2T, jax 1T, ... then the next round), so
a change of machine load falls on every framework alike. Each cell is the median
over the rounds of the process's own median, with the rounds' min-max; every
ratio (x msir, msir / best peer, 2T/1T) is the median of the per-round ratios,
with its min-max. W8 runs its two processes per framework once per round (each
round a fresh cache, so process 1 is always cold) and reports medians of N.

--contention runs the steady-state rows (msir alone unless --frameworks names
others) under four loads, started by the harness from bench/neighbour.py and
killed after: quiet; one process spinning on the last CPU (the 1-thread worker
is pinned to the first, so only the 2-thread run shares a core); one spinning
process per CPU; a multi-threaded neighbour (a NumPy matmul thread per CPU).
It prints each row's 1- and 2-thread times per load, their ratio (target
<= 1.1) and the 2-thread time over the quiet 1-thread time (target <= 1.5
beside the neighbour), each the median of N rounds (per load) with min-max.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import workloads as W  # noqa: E402
from peers import FRAMEWORKS  # noqa: E402

PEERS = [f for f in FRAMEWORKS if f != "msir"]


def ms_python() -> Path:
    venv = Path(os.environ.get("MSIR_BENCH_MS_VENV", HERE.parent / ".venv-mindspore"))
    return venv / "bin" / "python"


def thread_env(n: int, scratch: Path) -> dict:
    env = dict(os.environ)
    # PYTHONDONTWRITEBYTECODE (set on some of these machines) would make every worker compile the
    # source of every msir module it imports (msir runs from the source tree, without bytecode): a
    # user's installed msir has its bytecode. The timed first calls are unaffected (peers.py imports
    # msir's pipeline before it starts the clock); worker start-up is shorter
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "XLA_FLAGS", "PYTHONDONTWRITEBYTECODE"):
        env.pop(k, None)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
              "MSIR_NUM_THREADS"):
        env[k] = str(n)
    if n == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    env["JAX_PLATFORMS"] = "cpu"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["GLOG_v"] = "3"  # MindSpore: errors only
    scratch.mkdir(parents=True, exist_ok=True)
    env["MSIR_CACHE_DIR"] = str(scratch / "msir-cache")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor-cache")
    return env


def availability(frameworks: list[str]) -> dict[str, dict]:
    """Cheap checks in this process; a worker that then fails to import reports skipped."""
    out = {}
    for f in frameworks:
        if f == "mindspore":
            py = ms_python()
            ok = py.exists()
            reason = f"no MindSpore virtualenv at {py.parent.parent} (run bench/setup_peers.sh)"
        elif f == "torch.compile":
            ok = importlib.util.find_spec("torch") is not None and shutil.which("gcc") is not None
            reason = "torch or a C compiler (gcc) for TorchInductor is missing"
        else:
            mod = {"msir": "msir", "numpy": "numpy", "jax": "jax", "torch": "torch"}[f]
            ok = importlib.util.find_spec(mod) is not None
            reason = f"{mod} not installed (bash bench/setup_peers.sh)"
        out[f] = {"status": "ok"} if ok else {"status": "skipped", "reason": reason}
    return out


def run_worker(args: list[str], env: dict, python: str, timeout: float, log) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    try:
        p = subprocess.run([python, str(HERE / "peers.py"), *args, "--out", str(out)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        if p.returncode != 0 or not out.stat().st_size:
            tail = "\n".join(p.stdout.strip().splitlines()[-5:])
            log(f"    worker failed (exit {p.returncode}): {tail}")
            return {"status": "error", "error": f"worker exit {p.returncode}: {tail[-400:]}"}
        return json.loads(out.read_text())
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"worker timed out after {timeout:.0f} s"}
    finally:
        out.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------
# repeats


def spread(xs: list[float]) -> dict:
    """{"median", "min", "max", "n"} of the numbers xs (the rounds of one quantity)."""
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def merge_rounds(rounds: list[dict]) -> dict:
    """One workload result from its N rounds' results (each a worker's {"status", "median_s", ...}):
    the first failed round if any failed; else round 0's fields with median_s and first_call_s the
    medians of the rounds (their lists in median_s_rounds / first_call_s_rounds, the spread in
    min_s / max_s), gb_s and gflop_s rescaled to the median time, max_rel_err the worst, agree all."""
    bad = next((r for r in rounds if r.get("status") != "ok"), None)
    if bad is not None:
        return bad
    out = dict(rounds[0])
    meds = [r["median_s"] for r in rounds]
    out["median_s_rounds"] = meds
    out["median_s"] = statistics.median(meds)
    out["min_s"], out["max_s"] = min(meds), max(meds)
    out["repeats"] = len(rounds)
    firsts = [r["first_call_s"] for r in rounds if r.get("first_call_s") is not None]
    if firsts:
        out["first_call_s_rounds"] = firsts
        out["first_call_s"] = statistics.median(firsts)
    for k in ("gb_s", "gflop_s"):  # both are (work / median time): rescale to the median of the rounds
        if rounds[0].get(k) is not None:
            out[k] = rounds[0][k] * rounds[0]["median_s"] / out["median_s"]
    errs = [r["max_rel_err"] for r in rounds if r.get("max_rel_err") is not None]
    if errs:
        out["max_rel_err"] = max(errs)
    if all("agree" in r for r in rounds):
        out["agree"] = all(r["agree"] for r in rounds)
    return out


def round_ratios(num: list[float] | None, den: list[float] | None) -> dict | None:
    """The spread of the per-round ratios num[r] / den[r] (None if either is missing)."""
    if not num or not den or len(num) != len(den):
        return None
    return spread([a / b for a, b in zip(num, den)])


def best_peer_ratio(per_fw_rounds: dict[str, list[float]]) -> dict | None:
    """msir / best peer per round (the best peer: the fastest of that round), its spread, and
    the peer that was fastest in most rounds. per_fw_rounds: {framework: per-round times}."""
    ours = per_fw_rounds.get("msir")
    peers = {fw: r for fw, r in per_fw_rounds.items() if fw not in ("msir", "numpy") and r and ours
             and len(r) == len(ours)}
    if not ours or not peers:
        return None
    ratios, winners = [], []
    for i, m in enumerate(ours):
        fw = min(peers, key=lambda f: peers[f][i])
        winners.append(fw)
        ratios.append(m / peers[fw][i])
    out = spread(ratios)
    out["best_peer"] = max(set(winners), key=winners.count)
    out["rounds"] = ratios
    return out


def _fmt_spread(x: dict | None, digits: int = 2) -> str:
    if not x:
        return "-"
    if x["n"] == 1:
        return f"{x['median']:.{digits}f}"
    return f"{x['median']:.{digits}f} [{x['min']:.{digits}f}-{x['max']:.{digits}f}]"


def _fmt_t_spread(r: dict | None) -> str:
    """A cell's median time in ms with its rounds' min-max."""
    if not r or r.get("status") != "ok":
        return (r or {}).get("status", "-")
    if r.get("repeats", 1) == 1:
        return _fmt_t(r["median_s"])
    return f"{_fmt_t(r['median_s'])} [{_fmt_t(r['min_s'])}-{_fmt_t(r['max_s'])}]"


# --------------------------------------------------------------------------------------
# reporting


def _fmt_t(s):
    if s is None:
        return "-"
    return f"{s * 1e3:.3f}" if s < 1e-2 else f"{s * 1e3:.2f}" if s < 1 else f"{s * 1e3:.0f}"


def _cell(r: dict | None, key: str):
    return r.get(key) if r and r.get("status") == "ok" else None


def build_table(report: dict) -> str:
    threads = report["config"]["threads"]
    lim = report["machine"]["limits"]
    hdr = ["workload", "framework"] + [f"{t}T ms" for t in threads] + [f"{t}T x msir" for t in threads]
    tl = threads[-1]
    scal = f"{tl}T/{threads[0]}T" if len(threads) > 1 else None
    hdr += ([scal] if scal else []) + [f"{tl}T GB/s|GFLOP/s", "% limit", "% FMA", "1st call s", "rel err", "ok"]
    peak = fma_peak_of(lim, tl)
    rows = [hdr]
    for name, wr in report["workloads"].items():
        for fw, per_t in wr["results"].items():
            row = [name, fw]
            statuses = {r.get("status") for r in per_t.values()}
            if statuses - {"ok"}:
                bad = next(r for r in per_t.values() if r.get("status") != "ok")
                if bad.get("status") in ("skipped", "n/a"):
                    continue
            for t in threads:
                row.append(_fmt_t_spread(per_t.get(str(t))))
            for t in threads:
                row.append(_fmt_spread(_cell(per_t.get(str(t)), "x_msir_spread")))
            if scal:
                row.append(_fmt_spread(wr.get("scaling", {}).get(fw)))
            r = per_t.get(str(tl))
            if _cell(r, "gflop_s") is not None:
                row.append(f"{r['gflop_s']:.1f} GF")
                row.append(f"{100 * r['gflop_s'] / lim[str(tl)]['sgemm_gflop_s_best']:.0f}%")
                row.append(f"{100 * r['gflop_s'] / peak:.0f}%" if peak else "-")
            elif _cell(r, "gb_s") is not None:
                row.append(f"{r['gb_s']:.1f} GB")
                row.append(f"{100 * r['gb_s'] / lim[str(tl)]['copy_gb_s_best']:.0f}%")
                row.append("-")
            else:
                row += ["-", "-", "-"]
            firsts = [_cell(x, "first_call_s") for x in per_t.values() if _cell(x, "first_call_s") is not None]
            row.append(f"{min(firsts):.3f}" if firsts else "-")
            errs = [_cell(x, "max_rel_err") for x in per_t.values() if _cell(x, "max_rel_err") is not None]
            row.append(f"{max(errs):.1e}" if errs else "-")
            agrees = [x.get("agree") for x in per_t.values() if x.get("status") == "ok"]
            row.append("yes" if agrees and all(agrees) else "NO" if agrees else "-")
            rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(hdr))]
    lines = ["  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def fma_peak_of(limits: dict, threads: int) -> float | None:
    """The issue's "measured FMA peak x threads": the best per-thread FMA GFLOP/s of
    any limits run (the 1-thread one unless only more were measured) times `threads`."""
    per = [x.get("fma_per_thread_gflop_s_best") for x in limits.values() if x.get("status") == "ok"]
    per = [p for p in per if p]
    return max(per) * threads if per else None


def build_best_peer_table(report: dict) -> str:
    """Per workload and thread count: msir / best peer, the median of the per-round ratios [min-max]."""
    threads = report["config"]["threads"]
    rows = [["workload"] + [f"{t}T msir/best peer" for t in threads] + ["best peer"]]
    for name, wr in report["workloads"].items():
        bp = wr.get("msir_over_best_peer", {})
        if not any(bp.get(str(t)) for t in threads):
            continue
        who = sorted({bp[str(t)]["best_peer"] for t in threads if bp.get(str(t))})
        rows.append([name] + [_fmt_spread(bp.get(str(t))) for t in threads] + ["/".join(who)])
    if len(rows) == 1:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if 0 < i < len(r) - 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def build_w8_table(w8: dict, quick: bool) -> str:
    ops = 40 if quick else 200
    n = max((len(x.get("process1_rounds", [])) for x in w8.values()), default=1)
    lines = [f"W8: first call (trace + compile + run, imports excluded) of a {ops}-op function, seconds"
             + (f"; median of {n} rounds [min-max]" if n > 1 else "")]
    lines.append(f"  {'framework':14s} {'process 1':>22s} {'process 2':>22s}  ok")
    for fw, r in w8.items():
        if r.get("status") != "ok":
            lines.append(f"  {fw:14s} {r.get('status')}: {r.get('reason') or r.get('error', '')}"[:160])
            continue
        f = lambda p: _fmt_spread(r.get(p + "_spread"), 3)  # noqa: E731
        ok = all(x.get("agree") for p in ("process1", "process2") for x in r.get(p + "_rounds", [r[p]]))
        lines.append(f"  {fw:14s} {f('process1'):>22s} {f('process2'):>22s}  {'yes' if ok else 'NO'}")
    return "\n".join(lines)


def targets(report: dict) -> list[str]:
    """The issue's targets, judged on the highest thread count of this run."""
    t = str(report["config"]["threads"][-1])
    wl = report["workloads"]

    def med(w, fw):
        """The rounds' times of one cell (a list; None if not measured)."""
        c = wl.get(w, {}).get("results", {}).get(fw, {}).get(t)
        return (c.get("median_s_rounds") or [c["median_s"]]) if _cell(c, "median_s") else None

    out = []

    def judge(label, ours, theirs, factor, who):
        """ours / theirs: per-round times (lists) or single numbers; the ratio is the median of per-round ratios."""
        if ours is None or theirs is None:
            out.append(f"{label}: not measured ({who} missing)")
            return
        ours, theirs = ([x] if not isinstance(x, list) else x for x in (ours, theirs))
        x = round_ratios(ours, theirs) if len(ours) == len(theirs) else spread([statistics.median(ours)
                                                                               / statistics.median(theirs)])
        ratio = x["median"]
        verdict = "met" if ratio <= factor else f"MISSED by {ratio / factor:.2f}x"
        rng = f" [{x['min']:.2f}-{x['max']:.2f}]" if x["n"] > 1 else ""
        out.append(f"{label}: msir {statistics.median(ours) * 1e3:.2f} ms vs {who} {statistics.median(theirs) * 1e3:.2f}"
                   f" ms -> {ratio:.2f}x{rng} (target <= {factor}x): {verdict}")

    if "W1" in wl:  # only the workloads this run measured (--only)
        judge("W1 <= JAX", med("W1", "msir"), med("W1", "jax"), 1.0, "jax")
    for w, factor in (("W2", 1.0), ("W3", 1.1)):
        if w not in wl:
            continue
        peers = {fw: med(w, fw) for fw in ("jax", "torch", "torch.compile", "mindspore")}
        peers = {k: v for k, v in peers.items() if v is not None}
        best = min(peers, key=lambda k: statistics.median(peers[k])) if peers else None
        judge(f"{w} <= {factor}x best peer", med(w, "msir"), peers.get(best), factor, best or "peers")
    for v in ("W4-1024", "W4-1024-Ta", "W4-1024-Tb"):
        if v not in wl:
            continue
        ours = _cell(wl.get(v, {}).get("results", {}).get("msir", {}).get(t), "gflop_s")
        np_all = [_cell(wl.get(x, {}).get("results", {}).get("numpy", {}).get(t), "gflop_s")
                  for x in ("W4-1024", "W4-1024-Ta", "W4-1024-Tb")]
        np_all = [x for x in np_all if x is not None]
        if ours is None or not np_all:
            out.append(f"{v} >= 0.8x NumPy BLAS: not measured")
            continue
        frac = ours / max(np_all)
        verdict = "met" if frac >= 0.8 else f"MISSED by {0.8 / frac:.2f}x"
        out.append(f"{v} >= 0.8x NumPy BLAS best kernel: msir {ours:.1f} vs {max(np_all):.1f} GFLOP/s -> {frac:.2f}x: {verdict}")
    ours = _cell(wl.get("W4-1024", {}).get("results", {}).get("msir", {}).get(t), "gflop_s")
    peak = fma_peak_of(report["machine"]["limits"], int(t))
    if ours is not None and peak:
        frac = ours / peak
        verdict = "met" if frac >= 0.9 else f"MISSED by {0.9 / frac:.2f}x"
        out.append(f"W4-1024 >= 90% of FMA peak x {t} threads (issue 18): msir {ours:.1f} vs {peak:.1f} GFLOP/s "
                   f"-> {100 * frac:.0f}%: {verdict}")
    w8 = report.get("w8", {})
    m, j = w8.get("msir", {}), w8.get("jax", {})
    if m.get("status") == "ok" and j.get("status") == "ok":
        p1 = [x["first_call_s"] for x in m.get("process1_rounds", [m["process1"]])]
        jp1 = [x["first_call_s"] for x in j.get("process1_rounds", [j["process1"]])]
        if p1 is not None and jp1 is not None:
            judge("W8 process 1 <= JAX first call", p1, jp1, 1.0, "jax")
        p2 = m["process2"].get("first_call_s")
        if p2 is not None:
            out.append(f"W8 process 2 <= 50 ms: {p2 * 1e3:.1f} ms: {'met' if p2 <= 0.05 else f'MISSED by {p2 / 0.05:.1f}x'}")
    return out


# --------------------------------------------------------------------------------------
# contention


def contention_loads() -> list[tuple[str, list[list[str]]]]:
    """(label, commands of the load processes) for each load, quiet first."""
    cpus = sorted(os.sched_getaffinity(0))
    neighbour = [sys.executable, str(HERE / "neighbour.py")]
    return [
        ("quiet", []),
        (f"CPU {cpus[-1]} busy", [neighbour + ["--busy", str(cpus[-1])]]),
        ("every CPU busy", [neighbour + ["--busy", str(c)] for c in cpus]),
        (f"neighbour, {len(cpus)} threads", [neighbour + ["--threads", str(len(cpus))]]),
    ]


LOAD_RAMP_S = 1.0
"""Seconds a load runs before the measurement starts (NumPy's import, the
scheduler settling)."""


def run_rounds(frameworks, avail, names, threads, repeats: int, scratch: Path, timeout, quick, log,
               label: str = "") -> dict[str, dict[str, list[dict]]]:
    """raw[fw][threads]: the steady-state worker results of `repeats` rounds, each round
    running every available framework at every thread count in turn (so a drift of the
    machine falls on all of them alike). A framework whose worker reports "skipped" is
    marked so in `avail` and left out of later rounds; `label` (a load's name under
    --contention) prefixes the log lines and the workers' scratch directories."""
    raw: dict[str, dict[str, list[dict]]] = {}
    prefix = f"{label}, " if label else ""
    for rnd in range(repeats):
        for fw in frameworks:
            if avail[fw]["status"] != "ok":
                continue
            python = str(ms_python()) if fw == "mindspore" else sys.executable
            for t in threads:
                log(f"{prefix}round {rnd + 1}/{repeats}: {fw}, {t} thread(s): {','.join(names)} ...")
                t0 = time.perf_counter()
                tag = f"{label}-{fw}-{t}-r{rnd}" if label else f"{fw}-{t}-r{rnd}"
                res = run_worker(["steady", "--framework", fw, "--threads", str(t), "--workloads",
                                  ",".join(names)] + (["--quick"] if quick else []),
                                 thread_env(t, scratch / tag.replace(" ", "_").replace(",", "")), python, timeout, log)
                log(f"    {res.get('status')} in {time.perf_counter() - t0:.1f} s")
                raw.setdefault(fw, {}).setdefault(str(t), []).append(res)
                if res.get("status") == "skipped":
                    avail[fw] = {"status": "skipped", "reason": res.get("reason")}
                    break
                avail[fw]["version"] = res.get("version", avail[fw].get("version"))
    return raw


def run_contention(frameworks, avail, names, threads, scratch: Path, timeout, quick, log, repeats: int = 1) -> dict:
    """{load: {framework: {threads: worker result}}}, each load's workers run in
    `repeats` rounds alternating over frameworks and thread counts, and each
    workload's result merged over them (merge_rounds: median with min-max and
    the rounds' times); every load process is this harness's own and is
    killed, by its pid, after its load."""
    out: dict[str, dict] = {}
    for label, commands in contention_loads():
        procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in commands]
        try:
            if procs:
                time.sleep(LOAD_RAMP_S)
            rounds = run_rounds(frameworks, avail, names, threads, repeats, scratch, timeout, quick, log, label)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
        for fw, per_t in rounds.items():
            for t, rs in per_t.items():
                bad = next((r for r in rs if r.get("status") != "ok"), None)
                out.setdefault(label, {}).setdefault(fw, {})[t] = bad or {
                    "status": "ok", "version": rs[0].get("version"), "repeats": len(rs),
                    "loadavg_at_start": [r.get("loadavg_at_start") for r in rs],
                    "results": {n: merge_rounds([r["results"].get(n, {"status": "error", "error": "missing"})
                                                 for r in rs]) for n in names}}
    return out


def build_contention_table(report: dict) -> str:
    threads = report["config"]["threads"]
    lo, hi = str(threads[0]), str(threads[-1])
    hdr = ["workload", "framework", "load"] + [f"{t}T ms" for t in threads] + [f"{hi}T/{lo}T", f"{hi}T/quiet {lo}T"]
    rows = [hdr]
    loads = list(report["contention"])
    frameworks = sorted({fw for per in report["contention"].values() for fw in per})
    for name in report["config"]["workloads"]:
        for fw in frameworks:
            quiet = report["contention"].get("quiet", {}).get(fw, {}).get(lo, {})
            quiet_lo = _cell(quiet.get("results", {}).get(name), "median_s") if quiet.get("status") == "ok" else None
            for load in loads:
                res = report["contention"][load].get(fw, {})
                cell, times = {}, {}
                for t in threads:
                    r = res.get(str(t), {})
                    c = r.get("results", {}).get(name) if r.get("status") == "ok" else None
                    cell[str(t)] = c
                    if _cell(c, "median_s"):
                        times[str(t)] = c.get("median_s_rounds") or [c["median_s"]]
                row = [name, fw, load] + [_fmt_t_spread(cell[str(t)]) for t in threads]
                row.append(_fmt_spread(round_ratios(times.get(hi), times.get(lo))))
                # against the quiet 1T median (one number): the spread of this load's rounds over it
                row.append(_fmt_spread(spread([x / quiet_lo for x in times[hi]])) if hi in times and quiet_lo
                           else "-")
                rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(hdr))]
    lines = ["  ".join(c.rjust(w) if i > 2 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def main_contention(a, frameworks, names, threads, timeout, log) -> int:
    steady = [n for n in names if n != "W8"]
    t_start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="msir-bench-contention-"))
    try:
        avail = availability(frameworks)
        report = {
            "config": {"quick": a.quick, "threads": threads, "frameworks": frameworks, "workloads": steady,
                       "repeats": a.repeats, "loads": [label for label, _ in contention_loads()]},
            "machine": {"cpu": _cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
                        "loadavg_at_start": os.getloadavg()},
            "frameworks": avail,
            "contention": run_contention(frameworks, avail, steady, threads, scratch, timeout, a.quick, log,
                                         a.repeats),
        }
        report["wall_s"] = time.perf_counter() - t_start
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    m = report["machine"]
    text = "\n".join([
        f"msir contention benchmark ({'quick' if a.quick else 'full'}) on {m['cpu']}, {m['cores']} cores, "
        f"load average at start {m['loadavg_at_start'][0]:.2f}",
        f"  ms = median steady-state time, median of {a.repeats} round(s) [min-max]; ratios: median of the "
        "per-round ratios [min-max]; targets: 2T/1T <= 1.1 under every load, 2T/quiet 1T <= 1.5 beside the neighbour",
        "",
        build_contention_table(report),
    ])
    for load, per_fw in report["contention"].items():
        for fw, per_t in per_fw.items():
            for t, r in per_t.items():
                if r.get("status") != "ok":
                    text += f"\n  ERROR {load} {fw} {t}T: {r.get('error', r.get('reason', ''))[:300]}"
    print(text)
    report["table"] = text
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    log(f"JSON written to {out} ({report['wall_s']:.0f} s)")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats (smoke test)")
    p.add_argument("--json", default=None,
                   help="JSON output path (default bench/results/latest.json, with --contention contention.json)")
    p.add_argument("--only", default="", help="comma-separated workloads (W1,W2,W3,W4-512,...,W8); a prefix such as W4 selects all its sizes")
    p.add_argument("--frameworks", help="comma-separated subset of " + ",".join(FRAMEWORKS)
                   + " (default: all; with --quick all but torch.compile, whose cold compiles take minutes)")
    p.add_argument("--no-peers", action="store_true", help="msir and NumPy only")
    p.add_argument("--threads", default="1,2", help="thread counts to measure (default 1,2)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per worker process")
    p.add_argument("--repeats", type=int, default=None,
                   help="alternating rounds of every worker process (default 5, with --quick 1); each cell is "
                        "the median of the rounds with their min-max, each ratio the median of per-round ratios")
    p.add_argument("--contention", action="store_true",
                   help="run the rows quiet, with a busy process on one CPU, on every CPU and beside a "
                        "multi-threaded neighbour (msir alone unless --frameworks is given)")
    a = p.parse_args(argv)

    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if a.repeats is None:
        a.repeats = 1 if a.quick else 5
    if a.repeats < 1:
        p.error("--repeats must be >= 1")
    a.json = a.json or str(HERE / "results" / ("contention.json" if a.contention else "latest.json"))
    if a.no_peers:
        frameworks = ["msir", "numpy"]
    elif a.frameworks:
        frameworks = [f for f in a.frameworks.split(",") if f]
    elif a.contention:
        frameworks = ["msir"]
    else:
        frameworks = list(FRAMEWORKS)
    unknown = set(frameworks) - set(FRAMEWORKS)
    if unknown:
        p.error(f"unknown frameworks {sorted(unknown)}")
    threads = [int(t) for t in a.threads.split(",")]
    all_names = list(W.REGISTRY) + ["W8"]
    if a.only:
        sel = [s.strip() for s in a.only.split(",") if s.strip()]
        names = [n for n in all_names if any(n == s or n.startswith(s + "-") for s in sel)]
        if not names:
            p.error(f"no workload matches {a.only!r}; known: {', '.join(all_names)}")
    elif a.quick:  # one workload of each kind
        names = ["W1", "W2", "W3", "W4-512", "W4-512-Ta", "W8"]
    else:
        names = all_names
    steady = [n for n in names if n != "W8"]
    timeout = a.timeout or (300 if a.quick else 1800)
    if a.contention:
        return main_contention(a, frameworks, names, threads, timeout, log)

    t_start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="msir-bench-"))
    try:
        avail = availability(frameworks)
        if a.quick and not a.frameworks and avail.get("torch.compile", {}).get("status") == "ok":
            avail["torch.compile"] = {"status": "skipped", "reason": "cold compiles take minutes: not in --quick "
                                      "unless named in --frameworks"}
        report = {
            "config": {"quick": a.quick, "threads": threads, "frameworks": frameworks, "workloads": names,
                       "repeats": a.repeats,
                       "agreement": "max|out - ref| / max|ref| <= tol, ref = NumPy float32 on the same inputs",
                       "ratio": "x msir = framework time / msir time (same round, same thread count; median of the "
                                "per-round ratios); > 1: msir faster"},
            "machine": {"cpu": _cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
                        "loadavg_at_start": os.getloadavg(), "limits": {}},
            "frameworks": avail,
            "workloads": {},
        }
        for t in threads:
            log(f"machine limits, {t} thread(s) ...")
            report["machine"]["limits"][str(t)] = run_worker(
                ["limits", "--threads", str(t)] + (["--quick"] if a.quick else []),
                thread_env(t, scratch / f"limits{t}"), sys.executable, timeout, log)

        raw = run_rounds(frameworks, avail, steady, threads, a.repeats if steady else 0, scratch, timeout, a.quick,
                         log)

        for name in steady:
            w = W.REGISTRY[name]
            entry = {"desc": w.desc, "tol": w.tol, "results": {}}
            for fw in frameworks:
                per_t = {}
                for t in threads:
                    rounds = raw.get(fw, {}).get(str(t)) or [None]
                    bad = next((res for res in rounds if res is None or res.get("status") != "ok"), None)
                    if avail[fw]["status"] != "ok":
                        per_t[str(t)] = {"status": "skipped", "reason": avail[fw].get("reason")}
                    elif bad is not None or len(rounds) < a.repeats:
                        per_t[str(t)] = {"status": "error", "error": (bad or {}).get("error", "worker failed")}
                    else:
                        per_t[str(t)] = merge_rounds([res["results"].get(name, {"status": "error", "error": "missing"})
                                                      for res in rounds])
                entry["results"][fw] = per_t
            rounds_of = lambda fw, t: _cell(entry["results"].get(fw, {}).get(str(t)), "median_s_rounds")  # noqa: E731
            for t in threads:
                base = rounds_of("msir", t)
                for fw, per_t in entry["results"].items():
                    x = round_ratios(rounds_of(fw, t), base)
                    if x:
                        per_t[str(t)]["x_msir"] = x["median"]
                        per_t[str(t)]["x_msir_spread"] = x
                bp = best_peer_ratio({fw: rounds_of(fw, t) for fw in entry["results"]})
                if bp:
                    entry.setdefault("msir_over_best_peer", {})[str(t)] = bp
            if len(threads) > 1:
                for fw in entry["results"]:
                    x = round_ratios(rounds_of(fw, threads[-1]), rounds_of(fw, threads[0]))
                    if x:
                        entry.setdefault("scaling", {})[fw] = x
            report["workloads"][name] = entry

        if "W8" in names:
            report["w8"] = run_w8(frameworks, avail, scratch, timeout, a.quick, log, a.repeats)

        report["wall_s"] = time.perf_counter() - t_start
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    text = render(report)
    print(text)
    report["table"] = text
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    log(f"JSON written to {out} ({report['wall_s']:.0f} s)")
    return 0


def run_w8(frameworks, avail, scratch: Path, timeout, quick, log, repeats: int = 1) -> dict:
    """Each W8 framework: two fresh processes in a row, sharing one on-disk cache dir
    (msir: MSIR_CACHE_DIR; TorchInductor: its cache dir; JAX: its defaults, no
    persistent cache); `repeats` rounds alternating over the frameworks, each round
    with fresh cache dirs (so process 1 is always a cold compile). Per framework:
    process1 / process2 are the medians (first_call_s) of the rounds, their lists
    in process1_rounds / process2_rounds and their spread in process1_spread / ..."""
    out = {}
    fws = [fw for fw in W.W8_FRAMEWORKS if fw in frameworks]
    for fw in fws:
        if avail[fw]["status"] != "ok":
            out[fw] = {"status": "skipped", "reason": avail[fw].get("reason")}
        else:
            out[fw] = {"status": "ok", "process1_rounds": [], "process2_rounds": []}
    for rnd in range(repeats):
        d = scratch / f"w8-r{rnd}"  # fresh sources too: no __pycache__ from an earlier round
        d.mkdir()
        for np_mod in set(W.W8_FRAMEWORKS.values()):
            (d / f"w8_{np_mod.replace('.', '_')}.py").write_text(W.w8_source(np_mod, 10 if quick else 50))
        for fw in fws:
            r = out[fw]
            if r["status"] != "ok":
                continue
            env = thread_env(os.cpu_count() or 1, scratch / f"w8-{fw}-r{rnd}")
            for proc in ("process1", "process2"):
                log(f"W8 round {rnd + 1}/{repeats}: {fw} {proc} ...")
                res = run_worker(["w8", "--framework", fw, "--dir", str(d)], env, sys.executable, timeout, log)
                r[proc + "_rounds"].append(res)
                if res.get("status") != "ok":
                    r["status"] = res.get("status")
                    r["reason"] = res.get("reason") or res.get("error")
                    r[proc] = res
                    break
    for fw, r in out.items():
        if r["status"] != "ok":
            continue
        for proc in ("process1", "process2"):
            rounds = r[proc + "_rounds"]
            r[proc + "_spread"] = spread([x["first_call_s"] for x in rounds])
            r[proc] = merge_rounds([dict(x, median_s=x["first_call_s"]) for x in rounds])
            r[proc].pop("median_s", None)
            for k in ("median_s_rounds", "min_s", "max_s"):
                r[proc].pop(k, None)
    return out


def render(report: dict) -> str:
    m = report["machine"]
    lines = [f"msir benchmark ({'quick' if report['config']['quick'] else 'full'}) on {m['cpu']}, "
             f"{m['cores']} cores, load average at start {m['loadavg_at_start'][0]:.2f}"]
    for t, lim in m["limits"].items():
        if lim.get("status") == "ok":
            lines.append(f"  limits, {t} thread(s): copy {lim['copy_gb_s_best']:.1f} GB/s (median {lim['copy_gb_s_median']:.1f}), "
                         f"NumPy sgemm 1024^3 {lim['sgemm_gflop_s_best']:.1f} GFLOP/s (median {lim['sgemm_gflop_s_median']:.1f}), "
                         f"FMA peak ({lim.get('fma_isa')}) {lim.get('fma_gflop_s_best', 0):.1f} GFLOP/s "
                         f"(median {lim.get('fma_gflop_s_median', 0):.1f}; per thread {lim.get('fma_per_thread_gflop_s_best', 0):.1f})")
    fws = []
    for fw, st in report["frameworks"].items():
        fws.append(f"{fw} {st.get('version', '')}".strip() if st["status"] == "ok" else f"{fw}: skipped ({st.get('reason')})")
    lines.append("  frameworks: " + "; ".join(fws))
    lines.append(f"  ms = median steady-state time, median of {report['config'].get('repeats', 1)} alternating round(s)"
                 " [min-max]; x msir = framework time / msir time, median of per-round ratios (> 1: msir faster);"
                 " % limit = of measured copy GB/s or sgemm GFLOP/s; % FMA = of the FMA peak per thread x threads; rel err = max|out-ref|/max|ref| vs NumPy")
    for name, wr in report["workloads"].items():
        quick = ""
        if report["config"]["quick"]:
            shapes = next((r.get("shapes") for per_t in wr["results"].values() for r in per_t.values()
                           if r.get("shapes")), None)
            quick = f" [quick sizes: {' '.join('x'.join(map(str, s)) or 'scalar' for s in shapes)}]" if shapes else ""
        lines.append(f"  {name}: {wr['desc']} (tol {wr['tol']:.0e}){quick}")
    lines += ["", build_table(report)]
    bp = build_best_peer_table(report)
    if bp:
        n = report["config"].get("repeats", 1)
        lines += ["", f"msir / best peer (per round: msir time / the fastest peer's; median of {n} rounds "
                      "[min-max]; > 1: a peer is faster)", bp]
    for name, wr in report["workloads"].items():
        for fw, per_t in wr["results"].items():
            for t, r in per_t.items():
                if r.get("status") == "error":
                    lines.append(f"  ERROR {name} {fw} {t}T: {r.get('error', '')[:300]}")
    if "w8" in report:
        lines += ["", build_w8_table(report["w8"], report["config"]["quick"])]
    tg = [] if report["config"]["quick"] else targets(report)
    if tg:
        lines += ["", f"targets (issue 5, {report['config']['threads'][-1]} threads):"] + [f"  {x}" for x in tg]
    return "\n".join(lines)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
