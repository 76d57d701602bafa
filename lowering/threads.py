"""msir's native thread pool: persistent pthreads driven from generated code.

Why native
==========
A jitted function is one native call (`NativeFunction.__call__`, GIL released).
Its large parallel loops are split inside that call: `msir-lower-to-llvm`
outlines them (`msir.lowering.parallel_outline`) and calls
`__msir_parallel_for`, which hands chunks to worker threads that already exist
and wait for work. Starting a Python thread per kernel would cost tens of
microseconds and the GIL; a dispatch here costs under a microsecond when the
workers are awake (`measure_dispatch_us`, see `MIN_CHUNK_WORK`).

The runtime
===========
`load()` compiles, once per process, a small LLVM IR module (`_RUNTIME`) with
llvmlite in an engine of its own, and registers its entry points with
`llvmlite.binding.add_symbol` so every module compiled (or loaded from the
persistent cache) afterwards resolves them. No C compiler, no new dependency:
the module calls libc's `pthread_create`, `pthread_sigmask`, `pthread_atfork`
(glibc: `__register_atfork`) and `syscall(SYS_futex)`. Its object code is kept in the persistent compile
cache's directory (`msir.lowering.runtime_object`; `threads-runtime-<hash>.o`),
so later processes load it in milliseconds instead of generating it again. ::

    i64 __msir_parallel_for(ptr task, ptr ctx, i64 begin, i64 end, i64 min_iters)
        -- task: void (ptr ctx, i64 chunk, i64 chunk_begin, i64 chunk_end)

splits [begin, end) into `n` contiguous chunks, runs `task` once per chunk
(chunk `k` covers `[begin + k*size, min(begin + (k+1)*size, end))`, sizes a
multiple of 16 iterations except the last) and returns `n` (0 for an empty
range). `n = min(ceil((end - begin) / min_iters), MAX_CHUNKS)`: the caller's
`min_iters` is the work-size threshold (a chunk must be worth more than a
dispatch). The chunks depend only on the range and `min_iters`, never on the
thread count or on timing, and every chunk is run by exactly one call of
`task`, whichever thread makes it: a reduction combining per-chunk partials in
chunk order gives the same bits with 1, 2 or 256 threads. With one thread, or
when the pool is busy, the calling thread runs the same chunks in order.
There are many more chunks than threads on purpose: a thread the OS
deschedules delays one small chunk while the awake threads take the rest.

Scheduling: the caller writes the job (task, ctx, range, chunk size), opens
it in the 64-bit claim word `generation << 32 | next chunk`, bumps the
generation word (whose low 8 bits say how many workers may join), wakes
sleeping workers, and then claims chunks itself like any worker: a chunk is
taken by a compare-and-swap on the claim word (dynamic scheduling: a core the
OS gives to another process slows one chunk, not a fixed share of the work).
The caller waits only for chunks that were claimed, counted in `done`, never
for a worker that has not woken up yet: on a busy machine a late worker finds
the job finished (the claim word carries another generation) and goes back
to waiting. Before it rewrites the fields for the next job, the caller closes
the previous generation in the claim word; the fields are stored with release
and loaded with acquire, so a worker whose claim succeeds has read the fields
of the job it claimed from.

Waiting backs off in two steps: a worker that has no work spins on the
generation word for `SPIN_ITERATIONS` pause instructions (some 20-50 us on
current x86 cores, so back-to-back kernels find it awake), then sleeps in
`futex(FUTEX_WAIT)` and costs nothing. The caller waits for the last claimed
chunks the same way: on a busy machine the thread running that chunk may be
the one its spinning keeps off the core. Spinning stays short because a
spinning thread takes a core from every other thread of the machine,
OpenBLAS's included (`msir.lowering.blas`). There is no `sched_yield` phase
between the two (there was, 64 calls): on a machine whose cores all run other
threads, a yield seems to put the waiting thread behind another thread's whole
time slice (~3-4 ms), while a thread woken from the futex may preempt at once.
Measured by `bench/run.py --contention` on a 2-core Zen 4, for the products
cut into two chunks (512^3; W5's 256x784x512) beside the 2-thread neighbour:
with the yields, rounds reached 1.7-2.2x the quiet 1-thread time (the caller
waiting for a worker kept off its core); without them at most 1.1-1.7x, medians
1.03-1.12.
A sleeper count (and a flag for the caller) makes the waking side skip the
futex syscall when nobody sleeps; both sides use seq_cst so a wake-up is never
lost.

Contention
==========
A thread the OS deschedules while it runs a chunk holds up the caller until
it runs again (a scheduler tick or more: the 4 ms steps of the issue's busy
machine), and no claiming scheme can take a chunk back once it has started.
So the caller measures each dispatch: if waiting for the other threads'
chunks took longer than running them itself would have (its own time per
chunk times their count), the dispatch lost, and the next `penalty`
dispatches run in the caller alone; the penalty starts at 1, doubles (up to
`MAX_BACKOFF`) each time the dispatch after it loses again, and drops to 0
after one that does not. On a busy machine a 2-thread run thus costs about a
1-thread run plus one probe in `MAX_BACKOFF`; on a quiet one nothing changes.
The caller alone runs the same chunks, so results keep their bits.

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
  (`@__msir_status`/`@__msir_site`); the caller reads them after the join, so
  an index or zero-division error raised in a worker reaches Python as from a
  serial loop. Two chunks failing at the same moment may interleave their
  writes (the llvm dialect has no atomics): the error is then one of the two,
  its reported line possibly the other's.
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
import warnings

from msir.lowering import runtime_object
from msir.lowering.load_once import load_once

MAX_THREADS = 256
"""Threads (caller included) the pool may use; the participant count of a
job is packed in 8 bits of the futex word."""

MAX_CHUNKS = 256
"""A parallel loop has at most this many chunks: the generated code keeps
one partial per chunk of each reduction in a stack array of this length."""

CHUNK_ALIGN = 16
SPIN_ITERATIONS = 1024
"""Pause instructions a waiting thread spins for before it sleeps (~140
cycles each on Intel since Skylake, ~65 on Zen: some 20-50 us)."""
MAX_BACKOFF = 64
"""Dispatches at most that a contended pool runs in the caller alone between
two probes (see "Contention" in the module docstring)."""

_TARGET_MACHINE = {"opt": 0, "codemodel": "jitdefault"}
"""O0 (fast instruction selection): generating code is 3-4x faster than at O2
and the runtime's hot path is a few atomics per chunk either way."""

MIN_CHUNK_WORK = 100_000
"""Work units a chunk must do (parallel_outline's cost model: ~1 per scalar op of a
loop body, 8 per libm call), so that splitting pays for the dispatch. From
measurements on this 2-core machine (shared, load average ~13 at the time):
one unit is ~0.1 ns of single-thread time (0.07-0.15 ns for `x + y` and the
W1 chain at 2^14..2^18 elements); `measure_dispatch_us` gives ~0.5 us over a
plain call when the workers are spinning and ~20-200 us when they sleep
(futex wake-up plus scheduling latency, the larger figure under load). A chunk
of 100000 units (~10 us) amortises an awake dispatch completely and a sleeping
one over the chunks of a large loop; loops below 2 * MIN_CHUNK_WORK in total
(~20 us) stay serial, without a call to the runtime when their size is known
at compile time."""

ENTRY_POINTS = ("__msir_parallel_for",)

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}

_lock = threading.Lock()
_state: dict[str, object] = {}  # "ok", "engine", "set", "get", "started", "error"
_requested: int | None = None  # set_num_threads(n)


_RUNTIME = r"""
; pool
@pool.nthreads = internal global i32 1
@pool.started = internal global i32 0
@pool.lock = internal global i32 0
@pool.gen = internal global i32 0
@pool.sleepers = internal global i32 0
@pool.caller_sleeping = internal global i32 0
; the job of generation g: fields written (release) before `claim` opens it
@job.task = internal global ptr null
@job.ctx = internal global ptr null
@job.begin = internal global i64 0
@job.end = internal global i64 0
@job.chunk = internal global i64 0
@job.nchunks = internal global i64 0
@job.claim = internal global i64 0
@job.done = internal global i32 0
@stats.worker_chunks = internal global i64 0
; contention: dispatches still to run in the caller alone, and the length of
; the current back-off (doubling while the probes keep losing)
@pool.backoff = internal global i32 0
@pool.penalty = internal global i32 0
@stats.backed_off = internal global i64 0

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare i32 @pthread_sigmask(i32, ptr, ptr)
declare i32 @{atfork}(ptr, ptr, ptr, ptr)
declare i32 @sigfillset(ptr)
declare i32 @clock_gettime(i32, ptr)
declare i32 @llvm.smin.i32(i32, i32)
declare i32 @llvm.smax.i32(i32, i32)
declare i64 @syscall(i64, ...)
declare i64 @llvm.smin.i64(i64, i64)
declare i64 @llvm.smax.i64(i64, i64)
{pause_decl}

define internal void @pause() {{
  {pause_call}
  ret void
}}

define internal i64 @now_ns() {{
  %ts = alloca {{ i64, i64 }}, align 8
  %r = call i32 @clock_gettime(i32 1, ptr %ts)
  %t = load {{ i64, i64 }}, ptr %ts
  %sec = extractvalue {{ i64, i64 }} %t, 0
  %nsec = extractvalue {{ i64, i64 }} %t, 1
  %ns = mul i64 %sec, 1000000000
  %sum = add i64 %ns, %nsec
  ret i64 %sum
}}

define internal void @futex_wait(ptr %addr, i32 %val) {{
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %addr, i32 128, i32 %val, ptr null)
  ret void
}}

define internal void @futex_wake(ptr %addr, i32 %n) {{
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %addr, i32 129, i32 %n)
  ret void
}}

; Claim and run chunks of generation %g until none is left or the job is
; over; returns how many this thread ran. A chunk is claimed by a CAS on
; `claim` = g << 32 | next chunk, so a thread that read the fields of another
; job never runs anything with them (the CAS fails: see the module docstring).
define internal i64 @run_chunks(i32 %g) {{
entry:
  %task = load atomic ptr, ptr @job.task acquire, align 8
  %ctx = load atomic ptr, ptr @job.ctx acquire, align 8
  %begin = load atomic i64, ptr @job.begin acquire, align 8
  %end = load atomic i64, ptr @job.end acquire, align 8
  %chunk = load atomic i64, ptr @job.chunk acquire, align 8
  %n = load atomic i64, ptr @job.nchunks acquire, align 8
  %g64 = zext i32 %g to i64
  %tag = shl i64 %g64, 32
  %n32 = trunc i64 %n to i32
  br label %loop
loop:
  %ran = phi i64 [ 0, %entry ], [ %ran1, %finished ], [ %ran, %claim ]
  %c = load atomic i64, ptr @job.claim seq_cst, align 8
  %cg = and i64 %c, -4294967296
  %ours = icmp eq i64 %cg, %tag
  br i1 %ours, label %check, label %done
check:
  %k = and i64 %c, 4294967295
  %left = icmp ult i64 %k, %n
  br i1 %left, label %claim, label %done
claim:
  %c1 = add i64 %c, 1
  %cx = cmpxchg ptr @job.claim, i64 %c, i64 %c1 seq_cst seq_cst
  %won = extractvalue {{ i64, i1 }} %cx, 1
  br i1 %won, label %run, label %loop
run:
  %off = mul i64 %k, %chunk
  %b = add i64 %begin, %off
  %b1 = add i64 %b, %chunk
  %e = call i64 @llvm.smin.i64(i64 %b1, i64 %end)
  call void %task(ptr %ctx, i64 %k, i64 %b, i64 %e)
  %ran1 = add i64 %ran, 1
  %d0 = atomicrmw add ptr @job.done, i32 1 seq_cst
  %d1 = add i32 %d0, 1
  %last = icmp eq i32 %d1, %n32
  br i1 %last, label %check_caller, label %finished
check_caller:
  %cs = load atomic i32, ptr @pool.caller_sleeping seq_cst, align 4
  %asleep = icmp ne i32 %cs, 0
  br i1 %asleep, label %wake_caller, label %finished
wake_caller:
  call void @futex_wake(ptr @job.done, i32 1)
  br label %finished
finished:
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
  %sg64 = lshr i64 %a64, 16
  %seen0 = trunc i64 %sg64 to i32
  %set = alloca [128 x i8], align 8
  %r0 = call i32 @sigfillset(ptr %set)
  %r1 = call i32 @pthread_sigmask(i32 0, ptr %set, ptr null)
  br label %wait
wait:
  %seen = phi i32 [ %seen0, %entry ], [ %g, %got ], [ %g, %work ]
  br label %spin
spin:
  %i = phi i32 [ 0, %wait ], [ %i1, %do_pause ], [ 0, %woke ]
  %g = load atomic i32, ptr @pool.gen acquire, align 4
  %changed = icmp ne i32 %g, %seen
  br i1 %changed, label %got, label %spin_more
spin_more:
  %i1 = add i32 %i, 1
  %pausing = icmp ult i32 %i1, {spin}
  br i1 %pausing, label %do_pause, label %sleep
do_pause:
  call void @pause()
  br label %spin
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
  %ran = call i64 @run_chunks(i32 %g)
  %st = atomicrmw add ptr @stats.worker_chunks, i64 %ran monotonic
  br label %wait
}}

define internal void @child_after_fork() {{
  store i32 0, ptr @pool.started
  store i32 0, ptr @pool.lock
  store i32 0, ptr @pool.sleepers
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

; Start workers up to `want` that are not running yet (under the pool lock).
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
  %c1 = call i64 @llvm.smin.i64(i64 %by_work, i64 {max_chunks})
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
  ; the same chunks as a parallel run, in order: the same partials, the same bits
  br label %serial_loop
serial_loop:
  %k = phi i64 [ 0, %serial ], [ %k1, %serial_loop ]
  %off = mul i64 %k, %size
  %b = add i64 %begin, %off
  %b1 = add i64 %b, %size
  %e = call i64 @llvm.smin.i64(i64 %b1, i64 %end)
  call void %task(ptr %ctx, i64 %k, i64 %b, i64 %e)
  %k1 = add i64 %k, 1
  %more = icmp ult i64 %k1, %chunks
  br i1 %more, label %serial_loop, label %serial_done
serial_done:
  ret i64 %chunks
try_lock:
  %lx = cmpxchg ptr @pool.lock, i32 0, i32 1 acquire monotonic
  %locked = extractvalue {{ i32, i1 }} %lx, 1
  br i1 %locked, label %start, label %serial
start:
  %bo = load i32, ptr @pool.backoff
  %backing = icmp sgt i32 %bo, 0
  br i1 %backing, label %back_off, label %start_workers
back_off:
  %bo1 = sub i32 %bo, 1
  store i32 %bo1, ptr @pool.backoff
  %bst = atomicrmw add ptr @stats.backed_off, i64 1 monotonic
  br label %unlock_serial
start_workers:
  %want = sub i32 %nt32, 1
  %have = call i32 @ensure_workers(i32 %want)
  %have64 = zext i32 %have to i64
  %cm1 = sub i64 %chunks, 1
  %nw0 = call i64 @llvm.smin.i64(i64 %have64, i64 %cm1)
  %ntm1 = sub i64 %nt, 1
  %nw1 = call i64 @llvm.smin.i64(i64 %nw0, i64 %ntm1)
  %nw = trunc i64 %nw1 to i32
  %no_workers = icmp eq i32 %nw, 0
  br i1 %no_workers, label %unlock_serial, label %publish
unlock_serial:
  store atomic i32 0, ptr @pool.lock release, align 4
  br label %serial
publish:
  %gen0 = load i32, ptr @pool.gen
  %gen1 = add i32 %gen0, 256
  %gen2 = and i32 %gen1, -256
  %gen = or i32 %gen2, %nw
  ; close the previous job before its fields change, then open this one
  %old_tag = zext i32 %gen0 to i64
  %old_hi = shl i64 %old_tag, 32
  %closed = or i64 %old_hi, 4294967295
  store atomic i64 %closed, ptr @job.claim seq_cst, align 8
  store atomic ptr %task, ptr @job.task release, align 8
  store atomic ptr %ctx, ptr @job.ctx release, align 8
  store atomic i64 %begin, ptr @job.begin release, align 8
  store atomic i64 %end, ptr @job.end release, align 8
  store atomic i64 %size, ptr @job.chunk release, align 8
  store atomic i64 %chunks, ptr @job.nchunks release, align 8
  store atomic i32 0, ptr @job.done release, align 4
  %tag64 = zext i32 %gen to i64
  %tag = shl i64 %tag64, 32
  store atomic i64 %tag, ptr @job.claim seq_cst, align 8
  store atomic i32 %gen, ptr @pool.gen seq_cst, align 4
  %sleepers = load atomic i32, ptr @pool.sleepers seq_cst, align 4
  %any_asleep = icmp ne i32 %sleepers, 0
  br i1 %any_asleep, label %wake, label %work
wake:
  call void @futex_wake(ptr @pool.gen, i32 2147483647)
  br label %work
work:
  %t0 = call i64 @now_ns()
  %mine = call i64 @run_chunks(i32 %gen)
  %t1 = call i64 @now_ns()
  %n32 = trunc i64 %chunks to i32
  br label %spin
spin:
  ; wait for the chunks other threads claimed, not for threads that never came
  %i = phi i32 [ 0, %work ], [ %i1, %do_pause ]
  %p = load atomic i32, ptr @job.done acquire, align 4
  %finished = icmp eq i32 %p, %n32
  br i1 %finished, label %done, label %spin_more
spin_more:
  %i1 = add i32 %i, 1
  %pausing = icmp ult i32 %i1, {spin}
  br i1 %pausing, label %do_pause, label %sleep
do_pause:
  call void @pause()
  br label %spin
sleep:
  ; asleep, not yielding: the thread that holds the last chunk may be
  ; waiting for this core, and its futex wake may let this thread preempt
  ; whatever took the core, where a yield seems to queue it behind a slice
  store atomic i32 1, ptr @pool.caller_sleeping seq_cst, align 4
  br label %sleep_loop
sleep_loop:
  %q = load atomic i32, ptr @job.done seq_cst, align 4
  %all = icmp eq i32 %q, %n32
  br i1 %all, label %awake, label %do_wait
do_wait:
  call void @futex_wait(ptr @job.done, i32 %q)
  br label %sleep_loop
awake:
  store atomic i32 0, ptr @pool.caller_sleeping seq_cst, align 4
  br label %done
done:
  ; Lost to contention if waiting for the other threads' chunks took longer
  ; than running them here would have: waited / theirs > own / mine. Then
  ; the next `penalty` dispatches run in the caller alone (the same chunks),
  ; the penalty doubling (up to {max_backoff}) while the probes keep losing.
  %t2 = call i64 @now_ns()
  %own = sub i64 %t1, %t0
  %waited = sub i64 %t2, %t1
  %theirs = sub i64 %chunks, %mine
  %lhs = mul i64 %waited, %mine
  %rhs = mul i64 %own, %theirs
  %lost = icmp ugt i64 %lhs, %rhs
  %shared = icmp ugt i64 %theirs, 0
  %contended = and i1 %lost, %shared
  br i1 %contended, label %penalise, label %forgive
penalise:
  %pen = load i32, ptr @pool.penalty
  %pen2 = shl i32 %pen, 1
  %pen3 = call i32 @llvm.smax.i32(i32 %pen2, i32 1)
  %pen4 = call i32 @llvm.smin.i32(i32 %pen3, i32 {max_backoff})
  store i32 %pen4, ptr @pool.penalty
  store i32 %pen4, ptr @pool.backoff
  br label %release
forgive:
  store i32 0, ptr @pool.penalty
  br label %release
release:
  store atomic i32 0, ptr @pool.lock release, align 4
  ret i64 %chunks
}}

define i64 @__msir_threads_backed_off() {{
  %n = load atomic i64, ptr @stats.backed_off monotonic, align 8
  ret i64 %n
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
        max_backoff=MAX_BACKOFF,
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
    return load_once(_state, _lock, _load)


def _load() -> None:
    import llvmlite.binding as llvm

    # glibc's pthread_atfork lives in libc_nonshared.a (not in the process):
    # it is __register_atfork(prepare, parent, child, dso_handle); the extra
    # argument is ignored by a 3-argument pthread_atfork (musl).
    atfork = "__register_atfork" if hasattr(ctypes.CDLL(None), "__register_atfork") else "pthread_atfork"
    ir = _runtime_ir(os.uname().machine, atfork)
    engine = runtime_object.compile_cached("threads-runtime", ir, _TARGET_MACHINE, ENTRY_POINTS[0])
    for name in ENTRY_POINTS:
        llvm.add_symbol(name, engine.get_function_address(name))
    address = engine.get_function_address
    init = ctypes.CFUNCTYPE(ctypes.c_int32)(address("__msir_threads_init"))
    setter = ctypes.CFUNCTYPE(None, ctypes.c_int32)(address("__msir_threads_set"))
    started = ctypes.CFUNCTYPE(ctypes.c_int32)(address("__msir_threads_started"))
    worker_chunks = ctypes.CFUNCTYPE(ctypes.c_int64)(address("__msir_threads_worker_chunks"))
    backed_off = ctypes.CFUNCTYPE(ctypes.c_int64)(address("__msir_threads_backed_off"))
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
        backed_off=backed_off,
        parallel_for=parallel_for,
        noop=address("__msir_noop_task"),
    )
    setter(get_num_threads() if supported() else 1)


def load_error() -> str | None:
    """Why `load()` failed, if it did."""
    return _state.get("error")  # type: ignore[return-value]


def _env_threads() -> int | None:
    """The first valid setting of MSIR_NUM_THREADS, OMP_NUM_THREADS (whose
    nested form "4,2" gives 4); a malformed one is skipped with a warning."""
    for var in ("MSIR_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "").strip()
        if not value:
            continue
        try:
            n = int(value.split(",")[0])
        except ValueError:
            n = 0
        if n > 0:
            return n
        warnings.warn(f"msir: ignoring {var}={value!r} (expected a positive integer)", stacklevel=3)
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


def backed_off() -> int:
    """Dispatches run in the caller alone because the previous ones lost time
    waiting for descheduled threads (see "Contention" in the module docstring)."""
    return int(_state["backed_off"]()) if load() else 0  # type: ignore[operator]


def plan_chunks(iterations: int, min_iters: int) -> int:
    """The chunks `__msir_parallel_for` cuts a loop of `iterations` into with
    this `min_iters` (it runs an empty task over them): a function of these
    two numbers only, whatever the thread count."""
    if not load():
        raise RuntimeError(f"the thread pool runtime is unavailable: {load_error()}")
    return int(_state["parallel_for"](_state["noop"], None, 0, iterations, min_iters))  # type: ignore[operator]


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
