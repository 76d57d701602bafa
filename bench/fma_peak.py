"""The host's measured f32 FMA peak, the limit the harness states matmul GFLOP/s against.

    python bench/fma_peak.py [--threads 1,2] [--reps 7]

Method
======
A kernel is generated as LLVM IR and compiled with llvmlite for the host CPU
(its name and features from `llvmlite.binding`, as msir's JIT does) at the widest
float vector width the host has: 16 lanes with AVX-512F, 8 with AVX2 + FMA, 4
with FMA on 128-bit registers, else 4-lane SSE code (multiply and add, not
fused). Its loop runs `CHAINS` independent accumulator chains `acc_i =
fma(acc_i, x, y)` (`llvm.fma.v<W>f32`: LLVM may not reassociate them, and x, y
keep every value finite and normal). A core retires at most `ports` FMAs per
cycle, each with a latency of `latency` cycles, so it needs at least
`ports x latency` independent chains to stay busy: 2 x 4 = 8 on Zen 4/5 and
Skylake-X, 2 x 5 = 10 on Haswell/Zen 3. The kernel uses 24 chains with 32
vector registers (AVX-512) and 12 with 16 (AVX2, SSE), which covers latency 6
at 2 ports (3 at 4 ports) and leaves registers for x and y, so nothing spills
(`assembly()` shows the loop).

GFLOP/s = 2 x lanes x chains x iterations / seconds. `measure(threads)` runs
the kernel in `threads` plain Python threads at once (a ctypes call releases
the GIL, so each is one native thread), started together at a barrier; the
aggregate is the flops of all threads over the wall time from the barrier to
the last thread's end, per thread its own flops over its own time. Each
figure is the best of `reps` runs (a peak: on a shared machine the median
says more about the neighbours), with the median beside it.

Plausibility, on the 2-core AMD EPYC (Zen 5, family 0x1A, AVX-512) of
2026-12-02: Zen 5 has two 512-bit FMA pipes, 2 x 16 lanes x 2 flops = 64 f32
flops a cycle; 1 thread measured 250 GFLOP/s (median 249), i.e. 3.9 GHz, a
Zen 5 boost clock (DESIGN.md had 267 on another such host), and NumPy's
single-threaded sgemm 1024^3 reached 200-222 GFLOP/s, 80-89 % of it.

Imports llvmlite only (no msir), so the limits worker of bench/peers.py can
run it before anything else is loaded.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import struct
import threading
import time

CHAINS = {16: 24, 8: 12, 4: 12}
"""Accumulator chains per vector width (lanes): see the module docstring."""

ITERATIONS = 1 << 22
"""Loop trips per run: 3.2 GFLOP at 24 x 16-lane FMAs a trip, ~13 ms of a Zen 5
core (short enough that the best of a few runs misses the other processes of a
loaded machine, long enough to dwarf the thread start)."""

_engine_state: dict[str, object] = {}


def host_vector() -> tuple[int, bool, str]:
    """(f32 lanes, fused multiply-add available, name of the ISA) of the host."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    feats = llvm.get_host_cpu_features()
    has = lambda f: bool(feats.get(f, False))  # noqa: E731
    if has("avx512f"):
        return 16, True, "AVX-512F"
    if has("avx2") and has("fma"):
        return 8, True, "AVX2+FMA"
    if has("fma"):
        return 4, True, "FMA (128-bit)"
    return 4, False, "SSE (no FMA)"


def _hex_float(x: float) -> str:
    """`x` rounded to f32, in the hexadecimal double form LLVM IR wants for a float."""
    f32 = struct.unpack("<f", struct.pack("<f", x))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", f32))[0]


def kernel_ir(lanes: int, chains: int, fused: bool) -> str:
    """`float @fma_peak(i64 iterations)`: `chains` accumulators of `lanes` f32
    updated once per trip; returns one lane of their sum (so nothing is dead)."""
    v = f"<{lanes} x float>"
    splat = lambda x: "<" + ", ".join([f"float {_hex_float(x)}"] * lanes) + ">"  # noqa: E731
    init = [splat(1.0 + i / 64) for i in range(chains)]
    phis = "\n".join(f"  %a{i} = phi {v} [ {init[i]}, %entry ], [ %n{i}, %loop ]" for i in range(chains))
    if fused:
        body = "\n".join(f"  %n{i} = call {v} @llvm.fma.v{lanes}f32({v} %a{i}, {v} %x, {v} %y)" for i in range(chains))
        decl = f"declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})"
    else:
        body = "\n".join(f"  %m{i} = fmul {v} %a{i}, %x\n  %n{i} = fadd {v} %m{i}, %y" for i in range(chains))
        decl = ""
    total = ["%n0"]
    sums = []
    for i in range(1, chains):
        sums.append(f"  %s{i} = fadd {v} {total[-1]}, %n{i}")
        total.append(f"%s{i}")
    return f"""
{decl}
define float @fma_peak(i64 %iterations) #0 {{
entry:
  ; x < 1 and y small: acc -> y / (1 - x), finite and normal on every trip
  %x = bitcast {v} {splat(0.999999)} to {v}
  %y = bitcast {v} {splat(1e-6)} to {v}
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k1, %loop ]
{phis}
{body}
  %k1 = add i64 %k, 1
  %more = icmp ult i64 %k1, %iterations
  br i1 %more, label %loop, label %done
done:
{chr(10).join(sums)}
  %r = extractelement {v} {total[-1]}, i32 0
  ret float %r
}}
attributes #0 = {{ "min-legal-vector-width"="{32 * lanes}" "prefer-vector-width"="{32 * lanes}" }}
"""


def _compile():
    """(ctypes function, lanes, chains, fused, isa, engine), compiled once per process."""
    if "fn" in _engine_state:
        return _engine_state["fn"]
    import llvmlite.binding as llvm

    lanes, fused, isa = host_vector()
    chains = CHAINS[lanes]
    mod = llvm.parse_assembly(kernel_ir(lanes, chains, fused))
    mod.verify()
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                      opt=3, codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("fma_peak"))
    _engine_state["fn"] = (fn, lanes, chains, fused, isa, engine, tm, mod)
    return _engine_state["fn"]


def assembly() -> str:
    """The kernel's machine code, to check that the loop is `chains` vector FMAs."""
    _, _, _, _, _, _, tm, mod = _compile()
    return tm.emit_assembly(mod)


def _run(threads: int, iterations: int) -> tuple[float, list[float]]:
    """Wall seconds of `threads` simultaneous kernel runs, and each one's own seconds."""
    fn = _compile()[0]
    barrier = threading.Barrier(threads + 1)
    own = [0.0] * threads

    def work(i: int) -> None:
        barrier.wait()
        t = time.perf_counter()
        fn(iterations)
        own[i] = time.perf_counter() - t

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, own


def measure(threads: int = 1, reps: int = 7, iterations: int = ITERATIONS) -> dict:
    """The FMA peak with `threads` threads at once (see the module docstring)."""
    fn, lanes, chains, fused, isa, *_ = _compile()
    fn(1 << 12)  # page in the code
    flops = 2 * lanes * chains * iterations
    walls, per_thread = [], []
    for _ in range(reps):
        wall, own = _run(threads, iterations)
        walls.append(wall)
        per_thread.append(max(own))
    return {
        "isa": isa, "lanes": lanes, "chains": chains, "fused": fused, "threads": threads,
        "gflop_s_best": threads * flops / min(walls) / 1e9,
        "gflop_s_median": threads * flops / statistics.median(walls) / 1e9,
        "per_thread_gflop_s_best": flops / min(per_thread) / 1e9,
        "per_thread_gflop_s_median": flops / statistics.median(per_thread) / 1e9,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--asm", action="store_true", help="print the kernel's loop")
    a = p.parse_args()
    if a.asm:
        print(assembly())
    for t in (int(x) for x in a.threads.split(",")):
        r = measure(t, a.reps)
        print(f"{t} thread(s), {r['isa']}, {r['chains']} chains of {r['lanes']} f32: "
              f"{r['gflop_s_best']:.1f} GFLOP/s (median {r['gflop_s_median']:.1f}); per thread "
              f"{r['per_thread_gflop_s_best']:.1f} (median {r['per_thread_gflop_s_median']:.1f})")


if __name__ == "__main__":
    main()
