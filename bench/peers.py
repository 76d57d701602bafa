"""Benchmark worker: measures ONE framework at ONE thread count, in its own process.

bench/run.py starts it with the thread environment already set (OMP/MKL/OPENBLAS
threads, XLA_FLAGS, and OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE removed) so that every
library sees it before it is imported. It prints nothing useful on stdout; results go
to the ``--out`` JSON file. Modes:

    peers.py steady --framework F --threads N --workloads W1,W2 [--quick] --out r.json
    peers.py w8     --framework F --dir D --out r.json        # one W8 compile probe
    peers.py limits --threads N [--quick] --out r.json        # copy GB/s, sgemm and FMA GFLOP/s

Imports only NumPy and the framework measured: the MindSpore worker runs this file
with the python of its own virtualenv (numpy<2, no msir).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fma_peak  # noqa: E402  (stdlib only at import; llvmlite when it measures)
import workloads as W  # noqa: E402

FRAMEWORKS = ["msir", "numpy", "jax", "torch", "torch.compile", "mindspore"]


def pin_threads(n: int) -> None:
    """Restrict the process to n CPUs: a backstop for thread pools no env var reaches."""
    cpus = sorted(os.sched_getaffinity(0))
    if n < len(cpus):
        os.sched_setaffinity(0, cpus[:n])


# --------------------------------------------------------------------------------------
# frameworks: load, convert inputs, wait for a result, read it back


class Backend:
    """How to drive one framework: module loading, input conversion, sync, readback."""

    def __init__(self, name: str, threads: int):
        self.name, self.threads = name, threads
        self.mods = self._load()

    def _load(self) -> dict:
        n = self.name
        if n == "msir":
            import msir

            # msir's __init__ is lazy: import the API and the pipeline now so that
            # "first call" excludes imports, as bench/compile_time.py does
            for m in ("msir.api", "msir.compiler", "msir.frontend.driver", "msir.lowering.jit", "msir.lowering.to_loops",
                      "msir.lowering.to_llvm", "msir.passes.fuse", "msir.cache", "msir.trace_cache"):
                try:
                    importlib.import_module(m)
                except ImportError:
                    pass
            preload = getattr(sys.modules.get("msir.compiler"), "preload", None)
            if preload is not None:
                preload()
            return {"msir": msir, "version": getattr(msir, "__version__", "dev")}
        if n == "numpy":
            return {"version": np.__version__}
        if n == "jax":
            import jax
            import jax.numpy as jnp

            return {"jax": jax, "jnp": jnp, "version": jax.__version__}
        if n in ("torch", "torch.compile"):
            import torch

            if n == "torch.compile":  # imports excluded from the first call, as for msir
                import torch._dynamo  # noqa: F401
                import torch._inductor.compile_fx  # noqa: F401
            torch.set_num_threads(self.threads)
            try:
                torch.set_num_interop_threads(self.threads)
            except RuntimeError:
                pass
            return {"torch": torch, "version": torch.__version__}
        if n == "mindspore":
            import mindspore as ms

            ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
            for configure in (lambda: ms.set_device("CPU"),  # older releases know only set_context
                              lambda: ms.set_context(runtime_num_threads=self.threads)):
                try:
                    configure()
                except Exception:
                    pass
            return {"ms": ms, "ops": ms.ops, "version": ms.__version__}
        raise ValueError(f"unknown framework {n!r}")

    def build(self, w: W.Workload):
        if self.name == "torch.compile":
            impl = w.impls.get("torch.compile") or w.impls.get("torch")
            return None if impl is None else self.mods["torch"].compile(impl(self.mods))
        impl = w.impls.get(self.name)
        return None if impl is None else impl(self.mods)

    def convert(self, a):
        n = self.name
        if n in ("msir", "numpy"):
            return a
        if n == "jax":
            return self.mods["jax"].device_put(self.mods["jnp"].asarray(a))
        if n in ("torch", "torch.compile"):
            t = self.mods["torch"]
            return t.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else t.tensor(a)
        if n == "mindspore":
            return self.mods["ms"].Tensor(np.asarray(a))
        raise ValueError(n)

    def sync(self, out):
        if self.name == "jax":
            out.block_until_ready()
        elif self.name == "mindspore":
            self.mods["ms"].runtime.synchronize()
        return out

    def to_numpy(self, out) -> np.ndarray:
        if self.name in ("torch", "torch.compile"):
            return out.detach().numpy()
        if self.name == "mindspore":
            return out.asnumpy()
        return np.asarray(out)


# --------------------------------------------------------------------------------------
# measurement


def time_steady(fn, args, sync, quick: bool):
    """First call (compile + run), 2 warm-up calls, then the median of adaptive repeats:
    at least 5 runs and 1 s (0.05 s in quick mode), at most 200 runs."""
    t0 = time.perf_counter()
    first_out = sync(fn(*args))
    first = time.perf_counter() - t0
    for _ in range(1 if quick else 2):
        sync(fn(*args))
    min_time, min_reps, max_reps = (0.05, 3, 20) if quick else (1.0, 5, 200)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < min_time and len(times) < max_reps):
        t = time.perf_counter()
        sync(fn(*args))
        times.append(time.perf_counter() - t)
    return first_out, first, statistics.median(times), len(times)


def agreement(out: np.ndarray, ref: np.ndarray, tol: float) -> tuple[float, bool]:
    out = np.asarray(out)
    if out.shape != ref.shape:
        return float("inf"), False
    scale = float(np.max(np.abs(ref))) or 1.0
    err = float(np.max(np.abs(out.astype(np.float64) - ref.astype(np.float64)))) / scale
    return err, bool(err <= tol)


def run_steady(framework: str, threads: int, names: list[str], quick: bool) -> dict:
    load = os.getloadavg()
    pin_threads(threads)
    try:
        be = Backend(framework, threads)
    except Exception as e:  # not installed or broken: skipped, never an error
        return {"status": "skipped", "reason": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
    results = {}
    for name in names:
        w = W.REGISTRY[name]
        rng = np.random.default_rng(0)
        inputs = w.make_inputs(quick, rng)
        try:
            fn = be.build(w)
            if fn is None:
                results[name] = {"status": "n/a"}
                continue
            args = [be.convert(a) for a in inputs]
            out, first, med, reps = time_steady(fn, args, be.sync, quick)
            err, ok = agreement(be.to_numpy(out), w.reference(*inputs), w.tol)
            r = {"status": "ok", "shapes": [list(np.shape(x)) for x in inputs],
                 "first_call_s": first, "median_s": med, "reps": reps,
                 "max_rel_err": err, "tol": w.tol, "agree": ok}
            if w.bytes_moved:
                r["gb_s"] = w.bytes_moved(inputs) / med / 1e9
            if w.flops:
                r["gflop_s"] = w.flops(inputs) / med / 1e9
            results[name] = r
        except Exception as e:
            results[name] = {"status": "error", "error": f"{type(e).__name__}: {e}"[:500],
                             "traceback": traceback.format_exc()[-2000:]}
    return {"status": "ok", "version": str(be.mods.get("version")), "results": results,
            "loadavg_at_start": load}


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_w8(framework: str, d: Path) -> dict:
    """First call of the 200-op function (trace + compile + run, imports excluded)."""
    try:
        be = Backend(framework, os.cpu_count() or 1)
    except Exception as e:
        return {"status": "skipped", "reason": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
    try:
        mod = _load_module(d / f"w8_{W.W8_FRAMEWORKS[framework].replace('.', '_')}.py", "bench_w8_chain")
        ref_mod = _load_module(d / "w8_numpy.py", "bench_w8_chain_ref")
        inputs = W.w8_inputs(np.random.default_rng(0))
        args = [be.convert(a) for a in inputs]
        t0 = time.perf_counter()
        if framework == "msir":
            fn = be.mods["msir"].jit(mod.chain)
        elif framework == "jax":
            fn = be.mods["jax"].jit(mod.chain)
        else:
            fn = be.mods["torch"].compile(mod.chain)
        out = be.sync(fn(*args))
        first = time.perf_counter() - t0
        err, ok = agreement(be.to_numpy(out), ref_mod.chain(*inputs), 1e-4)
        return {"status": "ok", "version": str(be.mods.get("version")), "first_call_s": first,
                "max_rel_err": err, "tol": 1e-4, "agree": ok}
    except Exception as e:
        return {"status": "error", "error": f"{type(e).__name__}: {e}"[:500]}


def run_limits(threads: int, quick: bool) -> dict:
    """Machine limits with `threads` threads: copy bandwidth (np.copyto of a large,
    pre-faulted buffer, split across Python threads, which copyto runs without the GIL;
    GB/s counts read + write), NumPy's float32 matmul 1024^3 (OpenBLAS) and the f32
    FMA peak of `threads` threads at once (bench/fma_peak.py: all of them, and per thread)."""
    pin_threads(threads)
    n = (1 << 24) if quick else (1 << 26)  # 64 MiB / 256 MiB of float32
    src = np.ones(n, np.float32)
    dst = np.zeros_like(src)
    chunks = np.array_split(np.arange(n), threads)
    bounds = [(int(c[0]), int(c[-1]) + 1) for c in chunks]

    def copy():
        ts = [threading.Thread(target=np.copyto, args=(dst[a:b], src[a:b])) for a, b in bounds[1:]]
        for t in ts:
            t.start()
        a, b = bounds[0]
        np.copyto(dst[a:b], src[a:b])
        for t in ts:
            t.join()

    def best_and_median(f, reps):
        f()
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return min(ts), statistics.median(ts)

    cb, cm = best_and_median(copy, 5 if quick else 20)
    m = 1024
    a = np.random.default_rng(0).standard_normal((m, m), dtype=np.float32)
    b = a.copy()
    gb, gm = best_and_median(lambda: a @ b, 5 if quick else 30)
    fma = fma_peak.measure(threads, reps=3 if quick else 7, iterations=fma_peak.ITERATIONS // (8 if quick else 1))
    return {
        "status": "ok",
        "copy_gb_s_best": 2 * src.nbytes / cb / 1e9,
        "copy_gb_s_median": 2 * src.nbytes / cm / 1e9,
        "sgemm_gflop_s_best": 2 * m**3 / gb / 1e9,
        "sgemm_gflop_s_median": 2 * m**3 / gm / 1e9,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "fma_isa": fma["isa"],
        "fma_gflop_s_best": fma["gflop_s_best"],
        "fma_gflop_s_median": fma["gflop_s_median"],
        "fma_per_thread_gflop_s_best": fma["per_thread_gflop_s_best"],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["steady", "w8", "limits"])
    p.add_argument("--framework")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workloads", default="")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--dir")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if a.mode == "steady":
        res = run_steady(a.framework, a.threads, [n for n in a.workloads.split(",") if n], a.quick)
    elif a.mode == "w8":
        res = run_w8(a.framework, Path(a.dir))
    else:
        res = run_limits(a.threads, a.quick)
    Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
