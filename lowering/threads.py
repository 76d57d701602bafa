"""msir's native thread pool: persistent pthreads driven from generated code.

Why native
==========
A jitted function is one native call (`NativeFunction.__call__`, GIL released).
Its large parallel loops are split inside that call: `msir-lower-to-llvm`
outlines them (see "Parallel loops" in `msir.lowering.to_llvm`) and calls
`__msir_parallel_for`, which hands chunks to worker threads that already exist
and wait for work. Starting a Python thread per kernel would cost tens of
microseconds and the GIL; a dispatch here costs a few microseconds (measured
by `measure_dispatch_us`, see `DISPATCH_NOTE`).

The runtime
===========
`load()` compiles, once per process, a small LLVM IR module (`_RUNTIME`) with
llvmlite in an engine of its own, and registers its entry points with
`llvmlite.binding.add_symbol` so every module compiled (or loaded from the
persistent cache) afterwards resolves them. No C compiler, no new dependency:
the module calls libc's `pthread_create`, `pthread_sigmask`, `pthread_atfork`
(glibc: `__register_atfork`)
and `syscall(SYS_futex)`. ::

    i64 __msir_parallel_for(ptr task, ptr ctx, i64 begin, i64 end, i64 min_iters)
        -- task: void (ptr ctx, i64 chunk, i64 chunk_begin, i64 chunk_end)

splits [begin, end) into `n` contiguous chunks, runs `task` once per chunk
(chunk `k` covers `[begin + k*size, min(begin + (k+1)*size, end))`, sizes a
multiple of 16 iterations except the last) and returns `n` (0 for an empty
range). `n = min(ceil((end - begin) / min_iters), CHUNKS_PER_THREAD *
threads, MAX_CHUNKS)`: the caller's `min_iters` is the work-size threshold
(a chunk must be worth more than a dispatch), and `n` depends only on the
range, `min_iters` and the thread count, never on timing, so a reduction
combining per-chunk partials in chunk order is deterministic for a given
thread count. With one chunk, one thread, or when the pool is busy, `task`
runs in the calling thread as one chunk.

Scheduling: the caller publishes the job (task, ctx, range, chunk size) and
a generation word, wakes sleeping workers, and then takes chunks itself
through the same atomic counter as the workers (dynamic scheduling, so a core
the OS gives to another process slows one chunk, not a fixed half of the
work). It returns when every participating worker has reported done.

Waiting: a worker that has no work spins on the generation word for
`SPIN_ITERATIONS` pause instructions (about 0.1 ms on current x86 cores, so
back-to-back kernels find it awake), then sleeps in `futex(FUTEX_WAIT)` and
costs nothing. The caller waits for the last worker the same way. A sleeper
count (and a flag for the caller) makes the waking side skip the futex
syscall when nobody sleeps; both sides use seq_cst so a wake-up is never lost.

Safety
======
* Concurrency: one dispatch at a time per process. `__msir_parallel_for`
  takes the pool with a try-lock; a second thread (two Python threads calling
  compiled functions, or a task that itself reaches a parallel loop) that
  finds it taken runs its loop serially in its own thread: always correct,
  never a deadlock.
* Workers block every signal, so signals reach Python's threads only.
* fork: a `pthread_atfork` child handler resets the pool to "no workers, not
  busy"; the child starts fresh workers on its first parallel loop. (A fork
  taken while another thread of the parent is inside a parallel loop leaves
  that loop's buffers half-written in the child, as with any threaded code.)
* Errors: tasks report runtime errors through the module's `__msir_error`
  (first error wins, atomically); the caller reads the status after the
  join, so errors raised in a worker reach Python as from a serial loop.
* Platforms: Linux on x86_64 or aarch64 (the futex syscall number). Elsewhere
  the pool never starts and every loop runs serially.

Thread count
============
One count for msir's pool and for OpenBLAS (`msir.lowering.blas`): the
caller's thread plus `n - 1` workers. In order: `set_num_threads(n)`
(`msir.set_num_threads`), the environment variable `MSIR_NUM_THREADS`, then
`OMP_NUM_THREADS` (the convention the benchmark harness and most numeric
libraries follow), then the CPUs this process may run on
(`len(os.sched_getaffinity(0))`). At most `MAX_THREADS`. Workers start on the
first parallel loop that needs them; lowering the count leaves the extra
workers asleep.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

MAX_THREADS = 256
"""Threads (caller included) the pool may use; the participant count of a
job is packed in 8 bits of the futex word."""

CHUNKS_PER_THREAD = 4
MAX_CHUNKS = 256
"""A parallel loop has at most this many chunks: the generated code keeps
one partial per chunk of each reduction in a stack array of this length."""

CHUNK_ALIGN = 16
SPIN_ITERATIONS = 4096

MIN_CHUNK_WORK = 40000
"""Work units (see `msir.lowering.to_llvm`'s cost model: about one per scalar
operation of a loop body, ~0.1-0.3 ns each once vectorised) a chunk must do,
so that splitting pays for the dispatch. Chosen from `measure_dispatch_us`: a
dispatch costs ~2-5 us with awake workers and ~15-40 us when they sleep (futex
wake-up, on this 2-core machine); 40000 units is ~5-10 us of single-thread
work, so a loop goes parallel only when each thread gets at least that. Loops
below 2 * MIN_CHUNK_WORK in total stay serial, without a call to the runtime
when their size is known at compile time."""

ENTRY_POINTS = ("__msir_parallel_for",)

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}

_lock = threading.Lock()
_state: dict[str, object] = {}  # "ok", "engine", "set", "get", "started", "error"
_requested: int | None = None  # set_num_threads(n)


_RUNTIME = r"""
@pool.nthreads = internal global i32 1
@pool.started = internal global i32 0
@pool.lock = internal global i32 0
@pool.gen = internal global i32 0
@pool.sleepers = internal global i32 0
@pool.pending = internal global i32 0
@pool.caller_sleeping = internal global i32 0
@job.task = internal global ptr null
@job.ctx = internal global ptr null
@job.begin = internal global i64 0
@job.end = internal global i64 0
@job.chunk = internal global i64 0
@job.nchunks = internal global i64 0
@job.next = internal global i64 0
@stats.worker_chunks = internal global i64 0

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare i32 @pthread_sigmask(i32, ptr, ptr)
declare i32 @{atfork}(ptr, ptr, ptr, ptr)
declare i32 @sigfillset(ptr)
declare i64 @syscall(i64, ...)
declare i64 @llvm.smin.i64(i64, i64)
declare i64 @llvm.smax.i64(i64, i64)
{pause_decl}

define internal void @pause() {{
  {pause_call}
  ret void
}}

define internal void @futex_wait(ptr %addr, i32 %val) {{
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %addr, i32 128, i32 %val, ptr null)
  ret void
}}

define internal void @futex_wake(ptr %addr, i32 %n) {{
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %addr, i32 129, i32 %n)
  ret void
}}

; Run chunks until none is left; returns how many this thread ran.
define internal i64 @run_chunks() {{
entry:
  %task = load ptr, ptr @job.task
  %ctx = load ptr, ptr @job.ctx
  %begin = load i64, ptr @job.begin
  %end = load i64, ptr @job.end
  %chunk = load i64, ptr @job.chunk
  %n = load i64, ptr @job.nchunks
  br label %loop
loop:
  %ran = phi i64 [ 0, %entry ], [ %ran1, %run ]
  %k = atomicrmw add ptr @job.next, i64 1 monotonic
  %more = icmp slt i64 %k, %n
  br i1 %more, label %run, label %done
run:
  %ran1 = add i64 %ran, 1
  %off = mul i64 %k, %chunk
  %b = add i64 %begin, %off
  %b1 = add i64 %b, %chunk
  %e = call i64 @llvm.smin.i64(i64 %b1, i64 %end)
  call void %task(ptr %ctx, i64 %k, i64 %b, i64 %e)
  br label %loop
done:
  ret i64 %ran
}}

define internal ptr @worker_main(ptr %arg) {{
entry:
  ; arg = generation at creation << 16 | worker id: the first job may be
  ; published before this thread runs, so it must not read the word itself
  %a64 = ptrtoint ptr %arg to i64
  %w64 = and i64 %a64, 65535
  %w = trunc i64 %w64 to i32
  %g64 = lshr i64 %a64, 16
  %seen0 = trunc i64 %g64 to i32
  %set = alloca [128 x i8], align 8
  %r0 = call i32 @sigfillset(ptr %set)
  %r1 = call i32 @pthread_sigmask(i32 0, ptr %set, ptr null)
  br label %wait
wait:
  %seen = phi i32 [ %seen0, %entry ], [ %g, %got ], [ %g, %worked ], [ %g, %notify ]
  br label %spin
spin:
  %i = phi i32 [ 0, %wait ], [ %i1, %spin_more ], [ 0, %woke ]
  %g = load atomic i32, ptr @pool.gen acquire, align 4
  %changed = icmp ne i32 %g, %seen
  br i1 %changed, label %got, label %spin_more
spin_more:
  call void @pause()
  %i1 = add i32 %i, 1
  %again = icmp ult i32 %i1, {spin}
  br i1 %again, label %spin, label %sleep
sleep:
  %s0 = atomicrmw add ptr @pool.sleepers, i32 1 seq_cst
  %g1 = load atomic i32, ptr @pool.gen seq_cst, align 4
  %same = icmp eq i32 %g1, %seen
  br i1 %same, label %do_wait, label %woke
do_wait:
  call void @futex_wait(ptr @pool.gen, i32 %seen)
  br label %woke
woke:
  %s1 = atomicrmw sub ptr @pool.sleepers, i32 1 seq_cst
  br label %spin
got:
  %parts = and i32 %g, 255
  %mine = icmp ule i32 %w, %parts
  br i1 %mine, label %work, label %wait
work:
  %ran = call i64 @run_chunks()
  %st = atomicrmw add ptr @stats.worker_chunks, i64 %ran monotonic
  %old = atomicrmw sub ptr @pool.pending, i32 1 seq_cst
  %last = icmp eq i32 %old, 1
  br i1 %last, label %check_caller, label %worked
check_caller:
  %cs = load atomic i32, ptr @pool.caller_sleeping seq_cst, align 4
  %asleep = icmp ne i32 %cs, 0
  br i1 %asleep, label %notify, label %worked
notify:
  call void @futex_wake(ptr @pool.pending, i32 1)
  br label %wait
worked:
  br label %wait
}}

define internal void @child_after_fork() {{
  store i32 0, ptr @pool.started
  store i32 0, ptr @pool.lock
  store i32 0, ptr @pool.sleepers
  store i32 0, ptr @pool.pending
  store i32 0, ptr @pool.caller_sleeping
  ret void
}}

define i32 @__msir_threads_init() {{
  %r = call i32 @{atfork}(ptr null, ptr null, ptr @child_after_fork, ptr null)
  ret i32 %r
}}

define void @__msir_threads_set(i32 %n) {{
  store atomic i32 %n, ptr @pool.nthreads monotonic, align 4
  ret void
}}

define void @__msir_noop_task(ptr %ctx, i64 %k, i64 %b, i64 %e) {{
  ret void
}}

define i64 @__msir_threads_worker_chunks() {{
  %n = load atomic i64, ptr @stats.worker_chunks monotonic, align 8
  ret i64 %n
}}

define i32 @__msir_threads_started() {{
  %n = load atomic i32, ptr @pool.started monotonic, align 4
  ret i32 %n
}}

; Start workers 1..want-1 that are not running yet (under the pool lock).
define internal i32 @ensure_workers(i32 %want) {{
entry:
  %tid = alloca i64, align 8
  %have0 = load i32, ptr @pool.started
  br label %loop
loop:
  %have = phi i32 [ %have0, %entry ], [ %next, %created ]
  %need = icmp slt i32 %have, %want
  br i1 %need, label %create, label %done
create:
  %next = add i32 %have, 1
  %id64 = zext i32 %next to i64
  %gen = load i32, ptr @pool.gen
  %gen64 = zext i32 %gen to i64
  %gen_hi = shl i64 %gen64, 16
  %packed = or i64 %gen_hi, %id64
  %arg = inttoptr i64 %packed to ptr
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @worker_main, ptr %arg)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %created, label %done
created:
  %t = load i64, ptr %tid
  %d = call i32 @pthread_detach(i64 %t)
  store i32 %next, ptr @pool.started
  br label %loop
done:
  %h = load i32, ptr @pool.started
  ret i32 %h
}}

define i64 @__msir_parallel_for(ptr %task, ptr %ctx, i64 %begin, i64 %end, i64 %min_iters) {{
entry:
  %n = sub i64 %end, %begin
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %none, label %plan
none:
  ret i64 0
plan:
  %nt32 = load atomic i32, ptr @pool.nthreads monotonic, align 4
  %nt = zext i32 %nt32 to i64
  %mi = call i64 @llvm.smax.i64(i64 %min_iters, i64 1)
  %mi1 = sub i64 %mi, 1
  %na = add i64 %n, %mi1
  %by_work = udiv i64 %na, %mi
  %by_threads = mul i64 %nt, {chunks_per_thread}
  %c0 = call i64 @llvm.smin.i64(i64 %by_work, i64 %by_threads)
  %c1 = call i64 @llvm.smin.i64(i64 %c0, i64 {max_chunks})
  ; chunk size: ceil(n / c1) rounded up to a multiple of {align}
  %c1m = sub i64 %c1, 1
  %nc = add i64 %n, %c1m
  %size0 = udiv i64 %nc, %c1
  %size1 = add i64 %size0, {align_m1}
  %size = and i64 %size1, -{align}
  %sm1 = sub i64 %size, 1
  %ns = add i64 %n, %sm1
  %chunks = udiv i64 %ns, %size
  %one_thread = icmp ule i64 %nt, 1
  %one_chunk = icmp ule i64 %chunks, 1
  %serial0 = or i1 %one_thread, %one_chunk
  br i1 %serial0, label %serial, label %try_lock
serial:
  call void %task(ptr %ctx, i64 0, i64 %begin, i64 %end)
  ret i64 1
try_lock:
  %cx = cmpxchg ptr @pool.lock, i32 0, i32 1 acquire monotonic
  %locked = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %locked, label %start, label %serial
start:
  %want = sub i32 %nt32, 1
  %have = call i32 @ensure_workers(i32 %want)
  %have64 = zext i32 %have to i64
  %nw0 = call i64 @llvm.smin.i64(i64 %have64, i64 %chunks)
  %cm1 = sub i64 %chunks, 1
  %nw1 = call i64 @llvm.smin.i64(i64 %nw0, i64 %cm1)
  %nw2 = call i64 @llvm.smin.i64(i64 %nw1, i64 %nt)
  %nw = trunc i64 %nw2 to i32
  %no_workers = icmp eq i32 %nw, 0
  br i1 %no_workers, label %unlock_serial, label %publish
unlock_serial:
  store atomic i32 0, ptr @pool.lock release, align 4
  br label %serial
publish:
  store ptr %task, ptr @job.task
  store ptr %ctx, ptr @job.ctx
  store i64 %begin, ptr @job.begin
  store i64 %end, ptr @job.end
  store i64 %size, ptr @job.chunk
  store i64 %chunks, ptr @job.nchunks
  store i64 0, ptr @job.next
  store i32 %nw, ptr @pool.pending
  %gen0 = load i32, ptr @pool.gen
  %gen1 = add i32 %gen0, 256
  %gen2 = and i32 %gen1, -256
  %gen = or i32 %gen2, %nw
  store atomic i32 %gen, ptr @pool.gen seq_cst, align 4
  %sleepers = load atomic i32, ptr @pool.sleepers seq_cst, align 4
  %any_asleep = icmp ne i32 %sleepers, 0
  br i1 %any_asleep, label %wake, label %work
wake:
  call void @futex_wake(ptr @pool.gen, i32 2147483647)
  br label %work
work:
  %mine = call i64 @run_chunks()
  br label %spin
spin:
  %i = phi i32 [ 0, %work ], [ %i1, %spin_more ]
  %p = load atomic i32, ptr @pool.pending acquire, align 4
  %finished = icmp eq i32 %p, 0
  br i1 %finished, label %done, label %spin_more
spin_more:
  call void @pause()
  %i1 = add i32 %i, 1
  %again = icmp ult i32 %i1, {spin}
  br i1 %again, label %spin, label %sleep
sleep:
  store atomic i32 1, ptr @pool.caller_sleeping seq_cst, align 4
  br label %sleep_loop
sleep_loop:
  %q = load atomic i32, ptr @pool.pending seq_cst, align 4
  %zero = icmp eq i32 %q, 0
  br i1 %zero, label %awake, label %do_wait
do_wait:
  call void @futex_wait(ptr @pool.pending, i32 %q)
  br label %sleep_loop
awake:
  store atomic i32 0, ptr @pool.caller_sleeping seq_cst, align 4
  br label %done
done:
  store atomic i32 0, ptr @pool.lock release, align 4
  ret i64 %chunks
}}
"""


def _runtime_ir(arch: str, atfork: str) -> str:
    x86 = arch in ("x86_64", "i386", "i686")
    return _RUNTIME.format(
        atfork=atfork,
        pause_decl="declare void @llvm.x86.sse2.pause()" if x86 else "",
        pause_call="call void @llvm.x86.sse2.pause()" if x86 else "",
        sys_futex=_SYS_FUTEX.get(arch, -1),
        spin=SPIN_ITERATIONS,
        chunks_per_thread=CHUNKS_PER_THREAD,
        max_chunks=MAX_CHUNKS,
        align=CHUNK_ALIGN,
        align_m1=CHUNK_ALIGN - 1,
    )


def supported() -> bool:
    """Whether this platform can run worker threads (Linux, known futex)."""
    return os.uname().sysname == "Linux" and os.uname().machine in _SYS_FUTEX


def load() -> bool:
    """Compile the runtime and register `__msir_parallel_for` (once per
    process; thread-safe). False if it could not be built."""
    if "ok" in _state:
        return bool(_state["ok"])
    with _lock:
        if "ok" not in _state:
            try:
                _load()
                _state["ok"] = True
            except Exception as e:  # llvmlite or dlsym failure
                _state["ok"] = False
                _state["error"] = f"{type(e).__name__}: {e}"
    return bool(_state["ok"])


def _load() -> None:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # glibc's pthread_atfork lives in libc_nonshared.a (not in the process):
    # it is __register_atfork(prepare, parent, child, dso_handle); the extra
    # argument is ignored by a 3-argument pthread_atfork (musl).
    atfork = "__register_atfork" if hasattr(ctypes.CDLL(None), "__register_atfork") else "pthread_atfork"
    mod = llvm.parse_assembly(_runtime_ir(os.uname().machine, atfork))
    mod.verify()
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(opt=2, codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    for name in ENTRY_POINTS:
        llvm.add_symbol(name, engine.get_function_address(name))
    address = engine.get_function_address
    init = ctypes.CFUNCTYPE(ctypes.c_int32)(address("__msir_threads_init"))
    setter = ctypes.CFUNCTYPE(None, ctypes.c_int32)(address("__msir_threads_set"))
    started = ctypes.CFUNCTYPE(ctypes.c_int32)(address("__msir_threads_started"))
    worker_chunks = ctypes.CFUNCTYPE(ctypes.c_int64)(address("__msir_threads_worker_chunks"))
    parallel_for = ctypes.CFUNCTYPE(
        ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64
    )(address("__msir_parallel_for"))
    if init() != 0:
        raise RuntimeError("pthread_atfork failed")
    _state.update(
        engine=engine,
        set=setter,
        started=started,
        worker_chunks=worker_chunks,
        parallel_for=parallel_for,
        noop=address("__msir_noop_task"),
    )
    setter(get_num_threads() if supported() else 1)


def load_error() -> str | None:
    """Why `load()` failed, if it did."""
    return _state.get("error")  # type: ignore[return-value]


def _env_threads() -> int | None:
    for var in ("MSIR_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "").strip()
        if value:
            try:
                n = int(value.split(",")[0])
            except ValueError:
                continue
            if n > 0:
                return n
    return None


def default_num_threads() -> int:
    """`MSIR_NUM_THREADS`, else `OMP_NUM_THREADS`, else the usable CPUs."""
    n = _env_threads()
    if n is None:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))


def get_num_threads() -> int:
    """The threads (caller included) msir's parallel loops and OpenBLAS use."""
    return _requested if _requested is not None else default_num_threads()


def set_num_threads(n: int) -> None:
    """Use `n` threads (the caller's plus n - 1 workers) in every later
    parallel loop and BLAS call of the process. 1 makes all code serial."""
    global _requested
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"the number of threads must be an int, got {type(n).__name__}")
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"the number of threads must be between 1 and {MAX_THREADS}, got {n}")
    _requested = n
    if _state.get("ok"):
        _state["set"](n if supported() else 1)  # type: ignore[operator]
    blas = sys.modules.get("msir.lowering.blas")
    if blas is not None:  # else blas.load() applies get_num_threads() itself
        blas.set_num_threads(n)


def workers_started() -> int:
    """Worker threads running in this process (0 before the first parallel loop)."""
    return int(_state["started"]()) if load() else 0  # type: ignore[operator]


def worker_chunks() -> int:
    """Chunks run by worker threads (not callers) since the process started."""
    return int(_state["worker_chunks"]()) if load() else 0  # type: ignore[operator]


def measure_dispatch_us(repeats: int = 2000) -> dict[str, float]:
    """Median cost in microseconds of `__msir_parallel_for` on an empty task:
    `serial` (one chunk, no dispatch), `awake` (back-to-back dispatches, the
    workers spinning) and `asleep` (after the workers went to sleep). Used to
    choose MIN_CHUNK_WORK; see the module docstring."""
    if not load():
        raise RuntimeError(f"the thread pool runtime is unavailable: {load_error()}")
    noop = _state["noop"]
    pf = _state["parallel_for"]

    def median(min_iters: int, pause: float, n: int) -> float:
        times = []
        for _ in range(n):
            if pause:
                time.sleep(pause)
            t0 = time.perf_counter()
            pf(noop, None, 0, 1 << 20, min_iters)  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
        times.sort()
        return times[len(times) // 2] * 1e6

    return {
        "serial": median(1 << 30, 0, repeats),
        "awake": median(1 << 18, 0, repeats),
        "asleep": median(1 << 18, 0.005, max(20, repeats // 50)),
    }
