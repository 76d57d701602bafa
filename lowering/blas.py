"""The BLAS behind `msir.matmul`: msir's own float32 GEMM and OpenBLAS from the PyPI package `scipy-openblas32`.

Which kernel
============
float32 products of at least `gemm_kernel.OWN_MIN_FLOPS` flops run in msir's
own packed GEMM (`msir.lowering.gemm_kernel`: AVX-512 / AVX2 micro-kernels,
panels of B packed once and shared by the pool's threads) when the CPU has one
of its micro-kernels (`sgemm_backend`, `MSIR_GEMM`, read when the BLAS loads:
"msir" by default, "openblas" for OpenBLAS alone); smaller ones, float64 ones
and every product on other CPUs run in OpenBLAS as below. Both are reached
through the same trampolines (`__msir_gemm_f32` ...), so generated code does
not depend on the choice, and the choice depends on the sizes only, so bits
stay equal across thread counts; `own_gemms()` counts the products msir's
kernel ran. Measured side by side by `bench/gemm_kernel.py`; on the 2-core
Zen 4 of 2026-12-04, `bench/run.py --only W4`, 2 threads, msir / JAX: W4-1024
0.99 with msir's kernel (206.7 GFLOP/s, 88 % of 2x FMA peak) against 1.10 with
OpenBLAS per chunk, W4-1024-Tb 0.98 against 1.14; W4-512 1.08 against 1.05.

Why OpenBLAS at first (issue 5)
===============================
Issue 5 asks for >= 0.8x the GFLOP/s of NumPy's BLAS at its best kernel (sgemm
1024^3 float32). NumPy's BLAS is OpenBLAS with hand-written, per-microarchitecture
assembly micro-kernels (Haswell/Zen AVX2, SkylakeX/Zen5 AVX-512), cache blocking
and packing tuned per core type. `scipy-openblas32` is the same OpenBLAS build
(DYNAMIC_ARCH, 32-bit integers, symbols prefixed `scipy_`), so calling it reaches
1.0x of NumPy by construction. Measured through `msir.jit` against `np.matmul(...,
out=)` in one process (OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset, medians of 21
interleaved runs; a Zen 3 host without AVX-512 where OpenBLAS picks its Haswell
kernels, heavily shared at the time, so only the ratios mean something):
msir/NumPy = 0.93-1.03 at 512^3 and 0.98-1.03 at 1024^3 with 1 thread, 0.93-1.09
with 2 threads, for a@b, a.T@b and a@b.T alike. A packed,
register-blocked kernel generated through LLVM would have to reach ~80% of the
FMA peak on every host msir runs on (AVX2 here, AVX-512 on the Zen 5 machines of
DESIGN.md) to meet the target; that is weeks of tuning for what the BLAS gives
now. NumPy's own OpenBLAS copy is private (renamed, not exported), so it is not
an option.

How it is called
================
`load()` loads `libscipy_openblas.so` with `llvmlite.binding.load_library_permanently`
and compiles, once per process in a tiny engine of its own (its object code kept
in the cache directory, `msir.lowering.runtime_object`), two trampolines::

    void __msir_gemm_f32(i64 trans_a, i64 trans_b, i64 m, i64 n, i64 k,
                         ptr a, i64 a_offset, i64 lda,
                         ptr b, i64 b_offset, i64 ldb,
                         ptr c, i64 c_offset, i64 ldc)
    void __msir_gemm_f64(...)                       (the same with double)

and two for matmuls whose result is only added to another array (convert-msir-to-loops,
"Matmul updates")::

    void __msir_gemm_update_f32(<the same>, ptr src, float alpha)
    void __msir_gemm_update_f64(<the same>, ptr src, double alpha)

which copy the m x n array `src` into C unless it is C itself (a donated
buffer), then call the gemm with `alpha` and beta = 1: C = src + alpha op(A) op(B).

`C[c_offset:] = op(A[a_offset:]) @ op(B[b_offset:])`, row-major, offsets in
elements, `op` the transpose when the flag is 1; leading dimensions are clamped
to >= 1 (CBLAS rejects 0, which zero-size operands would give). They call
`scipy_cblas_sgemm`/`scipy_cblas_dgemm` with alpha = 1, beta = 0 (OpenBLAS then
writes C without reading it, so the output needs no zero fill; with k = 0 it
writes zeros). Their addresses are registered with `llvmlite.binding.add_symbol`,
so every module JIT-compiled afterwards in the process resolves them; generated
code calls them through a private `func.func` declaration whose memref
arguments are rank-0 (one pointer at the llvm level). The offsets exist because
the loops level has no pointer arithmetic; batched products pass them per call.

Sizes are passed to CBLAS as 32-bit ints (`scipy-openblas32` is LP64): a
dimension above 2^31 - 1 is not supported.

NumPy arrays (the eager path)
============================
`matmul(a, b)` computes `np.matmul(a, b)` of float32 / float64 arrays of rank
>= 2 through the same gemm, one native call for the whole (broadcast) batch
(`__msir_gemm_batched_f32/f64`: the element offsets of each product's A and
B in two i64 arrays, C dense), from the arrays' own strides (a transposed view is passed as a
transposed operand, not copied). PYNATIVE mode's matmuls (`NumpyBuilder`)
go through it so that they run as compiled code does: NumPy's own OpenBLAS
splits a product statically over its threads, which on the loaded 2-core
hosts made LeNet's eager products 10-100x slower than single-threaded (a
(6, 50176) x (50176, 25) weight gradient 68 ms against 0.5 ms).

A module that references `__msir_gemm_*` must be compiled in a process where
`load()` succeeded; the lowering calls it before emitting such a call (a
persistent compile cache that loads object code must call it too).

Threads
=======
msir's pool owns the cores (`msir.lowering.threads`): OpenBLAS never runs its
own thread pool beside it. Each product is cut, along the longer of m and n,
into chunks of at least `GEMM_MIN_CHUNK_ROWS` rows (columns) and
`GEMM_CHUNK_FLOPS` flops, run through `__msir_parallel_for`; each chunk is one
single-threaded OpenBLAS call on views of A, B and C. So:

* a thread the OS deschedules delays one chunk, which the awake threads do
  not wait for (OpenBLAS's own threads split a product statically and wait
  for one another inside it: on a loaded 2-core machine its 2-thread sgemm
  was measured 2.5-3x slower than its 1-thread one);
* products too small to pay for a dispatch (W6's 128x128x32 steps) are one
  call in the calling thread, whatever the thread count;
* the chunks depend on the shapes only, so products are bitwise equal across
  thread counts.

The trampolines set OpenBLAS to one thread for the duration of each call and
restore it after. Outside msir's calls OpenBLAS's thread count is msir's
(`msir.lowering.threads.get_num_threads()`: `msir.set_num_threads(n)`, else
`MSIR_NUM_THREADS`, else `OMP_NUM_THREADS`, else the usable CPUs), applied at
`load()` and by every `msir.set_num_threads`; its pool, which then sits
unused, sleeps at once (`OPENBLAS_THREAD_TIMEOUT`, set in the environment
before the library loads unless the user set it). Two Python threads in
msir's products at once may see OpenBLAS's count restored while the other's
chunks still run: those chunks then use OpenBLAS's threads (correct results,
not necessarily the same bits).
`split_gemms()` counts the products that ran as more than one chunk.

Epilogues
=========
An elementwise consumer of a product (bias add and activation, a residual
add, a backward mask: a fusion, convert-msir-to-loops' "Matmul epilogues")
runs on each block of C right after the block's gemm, while it is in cache,
instead of in a second pass over C::

    void __msir_gemm_epilogue_f32(<the 14 gemm arguments>, ptr task, ptr ctx, i64 task_min_iters)
    void __msir_gemm_epilogue_f64(...)

`task(ctx, chunk, lo, hi)` is an outlined loop (`msir.lowering.parallel_outline`)
computing the epilogue of C's rows [lo, hi). When the product is split by
rows -- m >= n, as in a plain product, or rows enough for
`EPILOGUE_MIN_ROW_CHUNKS` chunks (of at least `GEMM_MIN_CHUNK_ROWS` rows and
`GEMM_CHUNK_FLOPS` flops, as above) -- each chunk of msir's pool runs its
single-threaded gemm on rows [lo, hi) and then `task` on the same rows.
Otherwise (few rows, many columns: splitting the rows would leave threads
idle) the product is split by columns as usual and then `task` runs over all
rows through `__msir_parallel_for` with its own `task_min_iters`: a second
pass, but still no buffer for the product.
Chunks depend on the shapes only, so results keep their bits across thread
counts. `fused_epilogues()` counts the products whose epilogue ran per chunk.

Disabling
=========
`MSIR_BLAS=0` in the environment (read at import) or `msir.lowering.blas.enabled =
False` makes `available()` false: matmuls lowered afterwards use msir's loop
kernel, with the same results up to float rounding. So does a missing or
unloadable library. `MSIR_GEMM_EPILOGUE=0` (or `fuse_epilogues = False`) keeps the BLAS
but lowers epilogues as a pass of their own over a product buffer: the same
bits whenever the product is split the same way (always but for a wide
product with rows for `EPILOGUE_MIN_ROW_CHUNKS` chunks, split by rows fused
and by columns unfused; then within the rounding of the product).
"""

from __future__ import annotations

import ctypes
import os
import threading

import numpy as np

from msir.lowering import gemm_kernel, runtime_object
from msir.lowering.load_once import load_once

LIBRARY_NAME = "libscipy_openblas.so"
GEMM_SYMBOLS = {"f32": "__msir_gemm_f32", "f64": "__msir_gemm_f64"}
GEMM_UPDATE_SYMBOLS = {"f32": "__msir_gemm_update_f32", "f64": "__msir_gemm_update_f64"}
GEMM_EPILOGUE_SYMBOLS = {"f32": "__msir_gemm_epilogue_f32", "f64": "__msir_gemm_epilogue_f64"}
GEMM_BATCHED_SYMBOLS = {"f32": "__msir_gemm_batched_f32", "f64": "__msir_gemm_batched_f64"}

enabled = os.environ.get("MSIR_BLAS", "1").strip().lower() not in ("0", "false", "no", "off")
"""Whether the lowering may call the BLAS (tests switch it off to check the
loop kernel)."""

fuse_epilogues = os.environ.get("MSIR_GEMM_EPILOGUE", "1").strip().lower() not in ("0", "false", "no", "off")
"""Whether convert-msir-to-loops computes a matmul straight into the fusion
consuming it and marks that fusion's loop as the product's epilogue (see
"Epilogues"); off (`MSIR_GEMM_EPILOGUE=0`, read at import), the product gets
a buffer and the fusion is a loop of its own, as before (the benchmark's A/B)."""

sgemm_backend = os.environ.get("MSIR_GEMM", "msir").strip().lower()
"""Which kernel runs float32 products: "msir" (default), msir's own packed GEMM
(`msir.lowering.gemm_kernel`) for products of at least `gemm_kernel.OWN_MIN_FLOPS`
flops where the CPU has one of its micro-kernels (else OpenBLAS), or "openblas".
Read when the BLAS loads (once per process: the trampolines are compiled then).
float64 products always run in OpenBLAS. The kernel's first build costs ~0.4 s of
CPU once per machine (its object code is cached)."""

_lock = threading.Lock()
_state: dict[str, object] = {}  # "ok": bool, "engine", "cdll", "path", "error"

OPENBLAS_THREAD_TIMEOUT = 4
"""log2 of the cycles an idle OpenBLAS thread spins before it sleeps (its
minimum; OpenBLAS's default, 28, is ~0.1 s), set in the environment unless
the user set it."""

GEMM_CHUNK_FLOPS = 1 << 24
"""Floating-point operations a chunk of a split product must do at least:
~70-500 us of one core (30-240 GFLOP/s single-threaded sgemm on these
machines), well above the ~1 us of a dispatch to awake workers and the
~20-200 us of one to sleeping workers (`threads.measure_dispatch_us`). A
recurrent step's 128x128x32 product (1 MFLOP, W6) is never split."""

GEMM_MIN_CHUNK_ROWS = 256
"""Rows (or columns) a chunk has at least (up to the runtime's rounding): each
chunk is a gemm call that packs the shared operand again, so a chunk of
r rows costs ~k x n extra copies against 2 r k n flops, an overhead of about
30 / r whatever k and n. Measured by `bench/gemm_chunks.py` in CPU time
(steady under load), one thread, OpenBLAS's SkylakeX kernels on a Zen 5, the
rows of a product in r-row pieces over the whole product: r = 64: 1.50-1.65
(1024^3), 1.61-1.74 (2048^3); 128: 1.24-1.28, 1.30-1.38; 256: 1.08-1.11,
1.14-1.18; 512: 1.05, 1.07-1.08 (two runs). Through msir, 256 against 128
took 9 % (1024^3) and 12 % (2048^3) less CPU time. (On a Zen 3 with Haswell kernels
128-row pieces had cost 1.0-1.2x.) 256 rows still make 4 chunks of a 1024^3
product for the pool to balance; sharing packed panels between threads, as
OpenBLAS's own threading does, would remove the overhead."""

EPILOGUE_MIN_ROW_CHUNKS = 4
"""A product wider than tall runs its epilogue per chunk of rows only when its
rows make at least this many chunks: fewer would leave a loaded machine's
awake threads little to take over from a descheduled one (the column split
makes more chunks; its epilogue then runs as a pass of its own)."""

_TRAMPOLINE = """
declare void @scipy_cblas_{p}gemm(i32, i32, i32, i32, i32, i32, {t}, ptr, i32, ptr, i32, {t}, ptr, i32)

; the arguments of one product, read by every chunk of it
%args_{p} = type {{ i64, i64, i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, i64, {t}, {t}, i64 }}

define internal void @cblas_{p}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k,
                               ptr %a, i64 %ao, i64 %lda, ptr %b, i64 %bo, i64 %ldb,
                               ptr %c, i64 %co, i64 %ldc, {t} %alpha, {t} %beta) {{
  %pa = getelementptr {t}, ptr %a, i64 %ao
  %pb = getelementptr {t}, ptr %b, i64 %bo
  %pc = getelementptr {t}, ptr %c, i64 %co
  %ta1 = add i64 %ta, 111
  %tb1 = add i64 %tb, 111
  %ta2 = trunc i64 %ta1 to i32
  %tb2 = trunc i64 %tb1 to i32
  %m2 = trunc i64 %m to i32
  %n2 = trunc i64 %n to i32
  %k2 = trunc i64 %k to i32
  %lda1 = call i64 @llvm.smax.i64(i64 %lda, i64 1)
  %ldb1 = call i64 @llvm.smax.i64(i64 %ldb, i64 1)
  %ldc1 = call i64 @llvm.smax.i64(i64 %ldc, i64 1)
  %lda2 = trunc i64 %lda1 to i32
  %ldb2 = trunc i64 %ldb1 to i32
  %ldc2 = trunc i64 %ldc1 to i32
  call void @scipy_cblas_{p}gemm(i32 101, i32 %ta2, i32 %tb2, i32 %m2, i32 %n2, i32 %k2,
      {t} %alpha, ptr %pa, i32 %lda2, ptr %pb, i32 %ldb2, {t} %beta, ptr %pc, i32 %ldc2)
  ret void
}}

; rows [lo, hi) of C (by_rows) or its columns [lo, hi): one gemm on views
define internal void @chunk_{p}(ptr %args, i64 %chunk, i64 %lo, i64 %hi) {{
  %s = load %args_{p}, ptr %args
  %ta = extractvalue %args_{p} %s, 0
  %tb = extractvalue %args_{p} %s, 1
  %m = extractvalue %args_{p} %s, 2
  %n = extractvalue %args_{p} %s, 3
  %k = extractvalue %args_{p} %s, 4
  %a = extractvalue %args_{p} %s, 5
  %ao = extractvalue %args_{p} %s, 6
  %lda = extractvalue %args_{p} %s, 7
  %b = extractvalue %args_{p} %s, 8
  %bo = extractvalue %args_{p} %s, 9
  %ldb = extractvalue %args_{p} %s, 10
  %c = extractvalue %args_{p} %s, 11
  %co = extractvalue %args_{p} %s, 12
  %ldc = extractvalue %args_{p} %s, 13
  %alpha = extractvalue %args_{p} %s, 14
  %beta = extractvalue %args_{p} %s, 15
  %by_rows = extractvalue %args_{p} %s, 16
  %len = sub i64 %hi, %lo
  %rows = icmp ne i64 %by_rows, 0
  br i1 %rows, label %split_m, label %split_n
split_m:
  ; row i of op(A) starts at i * lda (A) or at i (A transposed)
  %ta_set = icmp ne i64 %ta, 0
  %a_stride = select i1 %ta_set, i64 1, i64 %lda
  %a_skip = mul i64 %lo, %a_stride
  %ao_m = add i64 %ao, %a_skip
  %c_skip_m = mul i64 %lo, %ldc
  %co_m = add i64 %co, %c_skip_m
  call void @cblas_{p}(i64 %ta, i64 %tb, i64 %len, i64 %n, i64 %k, ptr %a, i64 %ao_m, i64 %lda,
                       ptr %b, i64 %bo, i64 %ldb, ptr %c, i64 %co_m, i64 %ldc, {t} %alpha, {t} %beta)
  ret void
split_n:
  ; column j of op(B) starts at j (B) or at j * ldb (B transposed)
  %tb_set = icmp ne i64 %tb, 0
  %b_stride = select i1 %tb_set, i64 %ldb, i64 1
  %b_skip = mul i64 %lo, %b_stride
  %bo_n = add i64 %bo, %b_skip
  %co_n = add i64 %co, %lo
  call void @cblas_{p}(i64 %ta, i64 %tb, i64 %m, i64 %len, i64 %k, ptr %a, i64 %ao, i64 %lda,
                       ptr %b, i64 %bo_n, i64 %ldb, ptr %c, i64 %co_n, i64 %ldc, {t} %alpha, {t} %beta)
  ret void
}}

; C = alpha op(A) op(B) + beta C, split along the longer of m and n into
; chunks of msir's pool; OpenBLAS runs single-threaded in every chunk
define internal void @gemm_{p}{ob}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k,
                               ptr %a, i64 %ao, i64 %lda, ptr %b, i64 %bo, i64 %ldb,
                               ptr %c, i64 %co, i64 %ldc, {t} %alpha, {t} %beta) {{
  %by_rows = icmp sge i64 %m, %n
  %extent = select i1 %by_rows, i64 %m, i64 %n
  %other = select i1 %by_rows, i64 %n, i64 %m
  %flag = zext i1 %by_rows to i64
{pack_args}
  %args = alloca %args_{p}, align 8
  store %args_{p} %s16, ptr %args
  ; a chunk: at least {min_rows} rows and {chunk_flops} flops
  %kk = call i64 @llvm.smax.i64(i64 %k, i64 1)
  %oo = call i64 @llvm.smax.i64(i64 %other, i64 1)
  %per0 = mul i64 %kk, %oo
  %per = shl i64 %per0, 1
  %want = add i64 {chunk_flops_m1}, %per
  %by_flops = udiv i64 %want, %per
  %min_iters = call i64 @llvm.smax.i64(i64 %by_flops, i64 {min_rows})
  call void @blas_single_threaded()
  %chunks = call i64 @__msir_parallel_for(ptr @chunk_{p}, ptr %args, i64 0, i64 %extent, i64 %min_iters)
  call void @blas_restore_threads()
  %split = icmp ugt i64 %chunks, 1
  br i1 %split, label %count, label %done
count:
  %old = atomicrmw add ptr @stats.split_gemms, i64 1 monotonic
  br label %done
done:
  ret void
}}

; an epilogue product: the gemm's arguments, then the epilogue task and its context
%epi_{p} = type {{ %args_{p}, ptr, ptr }}

; rows [lo, hi) of C, then the epilogue of those rows while they are in cache
define internal void @chunk_epilogue_{p}(ptr %args, i64 %chunk, i64 %lo, i64 %hi) {{
  call void @chunk_{p}(ptr %args, i64 %chunk, i64 %lo, i64 %hi)
  %task_at = getelementptr %epi_{p}, ptr %args, i32 0, i32 1
  %ctx_at = getelementptr %epi_{p}, ptr %args, i32 0, i32 2
  %task = load ptr, ptr %task_at
  %ctx = load ptr, ptr %ctx_at
  call void %task(ptr %ctx, i64 %chunk, i64 %lo, i64 %hi)
  ret void
}}

define void @{epilogue}{ob}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k,
                        ptr %a, i64 %ao, i64 %lda, ptr %b, i64 %bo, i64 %ldb,
                        ptr %c, i64 %co, i64 %ldc, ptr %task, ptr %ctx, i64 %task_min) {{
  ; row chunks as @gemm_{p} makes them: at least {min_rows} rows and {chunk_flops} flops
  %kk = call i64 @llvm.smax.i64(i64 %k, i64 1)
  %nn = call i64 @llvm.smax.i64(i64 %n, i64 1)
  %per0 = mul i64 %kk, %nn
  %per = shl i64 %per0, 1
  %want = add i64 {chunk_flops_m1}, %per
  %by_flops = udiv i64 %want, %per
  %min_rows = call i64 @llvm.smax.i64(i64 %by_flops, i64 {min_rows})
  %tall = icmp sge i64 %m, %n
  %enough = mul i64 %min_rows, {row_chunks_m1}
  %many = icmp sgt i64 %m, %enough
  %by_rows = or i1 %tall, %many
  br i1 %by_rows, label %fused, label %apart
fused:
{pack_unit}
  %e0 = insertvalue %epi_{p} undef, %args_{p} %s16, 0
  %e1 = insertvalue %epi_{p} %e0, ptr %task, 1
  %e2 = insertvalue %epi_{p} %e1, ptr %ctx, 2
  %args = alloca %epi_{p}, align 8
  store %epi_{p} %e2, ptr %args
  call void @blas_single_threaded()
  %chunks = call i64 @__msir_parallel_for(ptr @chunk_epilogue_{p}, ptr %args, i64 0, i64 %m, i64 %min_rows)
  call void @blas_restore_threads()
  %fused_old = atomicrmw add ptr @stats.fused_epilogues, i64 1 monotonic
  %split = icmp ugt i64 %chunks, 1
  br i1 %split, label %count, label %done
count:
  %old = atomicrmw add ptr @stats.split_gemms, i64 1 monotonic
  br label %done
apart:
  call void @gemm_{p}{ob}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda,
                      ptr %b, i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, {t} 1.0, {t} 0.0)
  %pass = call i64 @__msir_parallel_for(ptr %task, ptr %ctx, i64 0, i64 %m, i64 %task_min)
  br label %done
done:
  ret void
}}

define void @{name}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k,
                    ptr %a, i64 %ao, i64 %lda, ptr %b, i64 %bo, i64 %ldb,
                    ptr %c, i64 %co, i64 %ldc) {{
  call void @gemm_{p}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda,
                      ptr %b, i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, {t} 1.0, {t} 0.0)
  ret void
}}

; products i < count: C[i*m*n:] = op(A[a_offsets[i]:]) op(B[b_offsets[i]:]) (the eager path's batches)
define void @{batched}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, ptr %aos, i64 %lda,
                       ptr %b, ptr %bos, i64 %ldb, ptr %c, i64 %ldc, i64 %count) {{
entry:
  %mn = mul i64 %m, %n
  %any = icmp sgt i64 %count, 0
  br i1 %any, label %loop, label %done
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %pao = getelementptr i64, ptr %aos, i64 %i
  %ao = load i64, ptr %pao
  %pbo = getelementptr i64, ptr %bos, i64 %i
  %bo = load i64, ptr %pbo
  %co = mul i64 %i, %mn
  call void @gemm_{p}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda,
                      ptr %b, i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, {t} 1.0, {t} 0.0)
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %count
  br i1 %more, label %loop, label %done
done:
  ret void
}}

define void @{update}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k,
                      ptr %a, i64 %ao, i64 %lda, ptr %b, i64 %bo, i64 %ldb,
                      ptr %c, i64 %co, i64 %ldc, ptr %src, {t} %alpha) {{
  %pc = getelementptr {t}, ptr %c, i64 %co
  %same = icmp eq ptr %src, %pc
  br i1 %same, label %gemm, label %copy
copy:
  %count = mul i64 %m, %n
  %bytes = mul i64 %count, {size}
  call void @llvm.memcpy.p0.p0.i64(ptr %pc, ptr %src, i64 %bytes, i1 false)
  br label %gemm
gemm:
  call void @gemm_{p}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda,
                      ptr %b, i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, {t} %alpha, {t} 1.0)
  ret void
}}
"""

_OWN_SGEMM = """
declare i64 @__msir_sgemm(i64, i64, i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, i64, float, float, ptr,
                          ptr, i64)

; its flags: 1 split over the pool, 2 epilogue fused per task
define internal void @count_sgemm(i64 %flags) {
  %split = and i64 %flags, 1
  %fused = lshr i64 %flags, 1
  %s = atomicrmw add ptr @stats.split_gemms, i64 %split monotonic
  %f = atomicrmw add ptr @stats.fused_epilogues, i64 %fused monotonic
  %o = atomicrmw add ptr @stats.own_gemms, i64 1 monotonic
  ret void
}

; whether msir's own packed GEMM runs an m x n x k product: at least @MIN_FLOPS@ flops
; (gemm_kernel.OWN_MIN_FLOPS; below, OpenBLAS's small-matrix kernels, which pack nothing)
define internal i1 @own_runs(i64 %m, i64 %n, i64 %k) {
  %f0 = mul i64 %m, %n
  %f1 = mul i64 %f0, %k
  %f = shl i64 %f1, 1
  %big = icmp sge i64 %f, @MIN_FLOPS@
  ret i1 %big
}

; f32 products through msir's own packed GEMM (msir.lowering.gemm_kernel)
define internal void @gemm_s(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda, ptr %b, i64 %bo,
                             i64 %ldb, ptr %c, i64 %co, i64 %ldc, float %alpha, float %beta) {
  %own = call i1 @own_runs(i64 %m, i64 %n, i64 %k)
  br i1 %own, label %msir, label %openblas
openblas:
  call void @gemm_s_openblas(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda, ptr %b, i64 %bo,
                             i64 %ldb, ptr %c, i64 %co, i64 %ldc, float %alpha, float %beta)
  ret void
msir:
  %flags = call i64 @__msir_sgemm(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda, ptr %b,
      i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, float %alpha, float %beta, ptr null, ptr null, i64 1)
  call void @count_sgemm(i64 %flags)
  ret void
}

define void @__msir_gemm_epilogue_f32(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda,
                                      ptr %b, i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, ptr %task, ptr %ctx,
                                      i64 %task_min) {
  %own = call i1 @own_runs(i64 %m, i64 %n, i64 %k)
  br i1 %own, label %msir, label %openblas
openblas:
  call void @__msir_gemm_epilogue_f32_openblas(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda,
      ptr %b, i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, ptr %task, ptr %ctx, i64 %task_min)
  ret void
msir:
  %flags = call i64 @__msir_sgemm(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda, ptr %b,
      i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, float 1.0, float 0.0, ptr %task, ptr %ctx, i64 %task_min)
  call void @count_sgemm(i64 %flags)
  ret void
}
"""
"""With msir's own f32 GEMM, `gemm_s` and the f32 epilogue entry call it for products of at least
`gemm_kernel.OWN_MIN_FLOPS` flops and the OpenBLAS ones (renamed `*_openblas`) below; f64 stays on OpenBLAS."""

_GEMM_ARG_FIELDS = ("i64 %ta", "i64 %tb", "i64 %m", "i64 %n", "i64 %k", "ptr %a", "i64 %ao", "i64 %lda",
                    "ptr %b", "i64 %bo", "i64 %ldb", "ptr %c", "i64 %co", "i64 %ldc")
"""The gemm arguments a chunk task reads, in the order of `%args_{p}`'s fields (alpha, beta and the split
direction follow)."""


def _pack_gemm_args(p: str, t: str, alpha: str, beta: str, by_rows: str) -> str:
    """The insertvalue chain that builds `%s16`, an `%args_{p}` of the gemm's arguments, alpha, beta and the
    split direction (1: by rows): written once for the split gemm and the gemm with an epilogue."""
    fields = [*_GEMM_ARG_FIELDS, f"{t} {alpha}", f"{t} {beta}", f"i64 {by_rows}"]
    return "\n".join(f"  %s{i} = insertvalue %args_{p} {'undef' if i == 0 else f'%s{i - 1}'}, {field}, {i}"
                     for i, field in enumerate(fields))


_COMMON = """
declare i64 @llvm.smax.i64(i64, i64)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @scipy_openblas_set_num_threads(i32)
declare i64 @__msir_parallel_for(ptr, ptr, i64, i64, i64)

; msir's thread count, which OpenBLAS's own pool is set to outside msir's calls
@blas.threads = internal global i32 1
@stats.split_gemms = internal global i64 0
@stats.fused_epilogues = internal global i64 0
@stats.own_gemms = internal global i64 0

define internal void @blas_single_threaded() {
  %n = load atomic i32, ptr @blas.threads monotonic, align 4
  %many = icmp sgt i32 %n, 1
  br i1 %many, label %set, label %done
set:
  call void @scipy_openblas_set_num_threads(i32 1)
  br label %done
done:
  ret void
}

define internal void @blas_restore_threads() {
  %n = load atomic i32, ptr @blas.threads monotonic, align 4
  %many = icmp sgt i32 %n, 1
  br i1 %many, label %set, label %done
set:
  call void @scipy_openblas_set_num_threads(i32 %n)
  br label %done
done:
  ret void
}

define void @__msir_blas_set_threads(i32 %n) {
  store atomic i32 %n, ptr @blas.threads monotonic, align 4
  call void @scipy_openblas_set_num_threads(i32 %n)
  ret void
}

define i64 @__msir_blas_split_gemms() {
  %n = load atomic i64, ptr @stats.split_gemms monotonic, align 8
  ret i64 %n
}

define i64 @__msir_blas_fused_epilogues() {
  %n = load atomic i64, ptr @stats.fused_epilogues monotonic, align 8
  ret i64 %n
}

define i64 @__msir_blas_own_gemms() {
  %n = load atomic i64, ptr @stats.own_gemms monotonic, align 8
  ret i64 %n
}
"""


def library_path() -> str | None:
    """The path of `libscipy_openblas.so` from the installed `scipy-openblas32`."""
    try:
        import scipy_openblas32
    except ImportError:
        return None
    path = os.path.join(scipy_openblas32.get_lib_dir(), LIBRARY_NAME)
    return path if os.path.exists(path) else None


def load() -> bool:
    """Load the library and register the trampolines (once per process; thread-safe).
    False when the library is missing or fails to load."""
    return load_once(_state, _lock, _load)


def _load() -> None:
    import llvmlite.binding as llvm

    path = library_path()
    if path is None:
        raise FileNotFoundError("scipy-openblas32 is not installed")
    from msir.lowering import threads

    if not threads.load():
        raise RuntimeError(f"msir's thread pool, which runs the BLAS, is unavailable: {threads.load_error()}")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # OpenBLAS reads this when the library loads; its pool, which msir's
    # calls never use, then sleeps at once instead of spinning ~0.1 s
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", str(OPENBLAS_THREAD_TIMEOUT))
    llvm.load_library_permanently(path)
    for p in "sd":
        if not llvm.address_of_symbol(f"scipy_cblas_{p}gemm"):
            raise RuntimeError(f"{path} does not export scipy_cblas_{p}gemm")
    own = sgemm_backend == "msir" and gemm_kernel.load()
    own_ir = _OWN_SGEMM.replace("@MIN_FLOPS@", str(gemm_kernel.OWN_MIN_FLOPS)) if own else ""
    ir = _COMMON + own_ir + "".join(
        _TRAMPOLINE.format(p=p, t=t, ob="_openblas" if own and p == "s" else "", name=GEMM_SYMBOLS[k], update=GEMM_UPDATE_SYMBOLS[k],
                           epilogue=GEMM_EPILOGUE_SYMBOLS[k], batched=GEMM_BATCHED_SYMBOLS[k], size=size,
                           min_rows=GEMM_MIN_CHUNK_ROWS, chunk_flops=GEMM_CHUNK_FLOPS,
                           row_chunks_m1=EPILOGUE_MIN_ROW_CHUNKS - 1,
                           chunk_flops_m1=GEMM_CHUNK_FLOPS - 1,
                           pack_args=_pack_gemm_args(p, t, "%alpha", "%beta", "%flag"),
                           pack_unit=_pack_gemm_args(p, t, "1.0", "0.0", "1"))
        for p, t, k, size in (("s", "float", "f32", 4), ("d", "double", "f64", 8))
    )
    engine = runtime_object.compile_cached("blas-trampolines", ir, {"opt": 2, "codemodel": "jitdefault"},
                                           GEMM_SYMBOLS["f32"])
    for name in (*GEMM_SYMBOLS.values(), *GEMM_UPDATE_SYMBOLS.values(), *GEMM_EPILOGUE_SYMBOLS.values()):
        llvm.add_symbol(name, engine.get_function_address(name))
    cdll = ctypes.CDLL(path)
    cdll.scipy_openblas_set_num_threads.argtypes = [ctypes.c_int]
    cdll.scipy_openblas_set_num_threads.restype = None
    cdll.scipy_openblas_get_num_threads.restype = ctypes.c_int
    cdll.scipy_openblas_get_corename.restype = ctypes.c_char_p
    set_threads = ctypes.CFUNCTYPE(None, ctypes.c_int32)(engine.get_function_address("__msir_blas_set_threads"))
    split_gemms = ctypes.CFUNCTYPE(ctypes.c_int64)(engine.get_function_address("__msir_blas_split_gemms"))
    fused = ctypes.CFUNCTYPE(ctypes.c_int64)(engine.get_function_address("__msir_blas_fused_epilogues"))
    own_count = ctypes.CFUNCTYPE(ctypes.c_int64)(engine.get_function_address("__msir_blas_own_gemms"))
    i64, p = ctypes.c_int64, ctypes.c_void_p
    gemm_type = ctypes.CFUNCTYPE(None, i64, i64, i64, i64, i64, p, p, i64, p, p, i64, p, i64, i64)
    gemms = {np.dtype(np.float32): gemm_type(engine.get_function_address(GEMM_BATCHED_SYMBOLS["f32"])),
             np.dtype(np.float64): gemm_type(engine.get_function_address(GEMM_BATCHED_SYMBOLS["f64"]))}
    _state.update(engine=engine, cdll=cdll, path=path, set_threads=set_threads, split_gemms=split_gemms,
                  fused_epilogues=fused, own_gemms=own_count, gemms=gemms, own_sgemm=own)
    set_threads(threads.get_num_threads())


def available() -> bool:
    """Whether matmuls lowered now may call the BLAS (enabled and loadable)."""
    return enabled and load()


def load_error() -> str | None:
    """Why `load()` failed, if it did."""
    return _state.get("error")  # type: ignore[return-value]


def set_num_threads(n: int) -> None:
    """Size of OpenBLAS's thread pool for every later BLAS call of the process."""
    if n < 1:
        raise ValueError(f"the number of threads must be >= 1, got {n}")
    if load():
        _state["set_threads"](int(n))  # type: ignore[operator]


def get_num_threads() -> int | None:
    """OpenBLAS's thread count (None without the library)."""
    if not load():
        return None
    return int(_state["cdll"].scipy_openblas_get_num_threads())  # type: ignore[attr-defined]


def split_gemms() -> int:
    """Products split across msir's pool (more than one chunk) since the
    process started (0 without the library)."""
    return int(_state["split_gemms"]()) if load() else 0  # type: ignore[operator]


def fused_epilogues() -> int:
    """Products whose epilogue ran per chunk of rows, after each chunk's gemm
    ("Epilogues"), since the process started (0 without the library)."""
    return int(_state["fused_epilogues"]()) if load() else 0  # type: ignore[operator]


def own_gemms() -> int:
    """Products that ran in msir's own float32 GEMM (`gemm_kernel.runs`) since the process started."""
    return int(_state["own_gemms"]()) if load() else 0  # type: ignore[operator]


def own_sgemm() -> bool:
    """Whether float32 products run in msir's own packed GEMM (`sgemm_backend`)."""
    return load() and bool(_state["own_sgemm"])


def sgemm_kernel() -> str | None:
    """What runs float32 products: "msir <isa> <MR>x<NR> kc=<KC>" or "openblas <core>" (None without the library)."""
    if not load():
        return None
    return gemm_kernel.kernel().describe() if own_sgemm() else f"openblas {core_name()}"


def fuses_epilogue(m: int, n: int, k: int, dtype) -> bool:
    """Whether an m x k x n product of this dtype with an epilogue runs the epilogue per chunk of rows (see
    "Epilogues"; msir's own GEMM: `gemm_kernel.Kernel.fuses_epilogue`), as the trampolines decide it."""
    if np.dtype(dtype) == np.float32 and own_sgemm() and gemm_kernel.runs(m, n, k):
        return gemm_kernel.kernel().fuses_epilogue(m, n)
    per_row = 2 * max(k, 1) * max(n, 1)
    min_rows = max(-(-GEMM_CHUNK_FLOPS // per_row), GEMM_MIN_CHUNK_ROWS)
    return m >= n or m > min_rows * (EPILOGUE_MIN_ROW_CHUNKS - 1)


def core_name() -> str | None:
    """The kernel family OpenBLAS picked for this CPU ("Haswell", "Zen", "SkylakeX"...)."""
    if not load():
        return None
    return _state["cdll"].scipy_openblas_get_corename().decode()  # type: ignore[attr-defined]


def _operand(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """`x` (rank >= 2) as a BLAS operand: (array, transposed flag, leading
    dimension), copied only when its last two axes are neither row- nor
    column-major or a batch stride is negative."""
    size = x.itemsize
    rs, cs = x.strides[-2], x.strides[-1]
    rows, cols = x.shape[-2], x.shape[-1]
    batch_ok = all(st >= 0 and st % size == 0 for st in x.strides[:-2])
    if batch_ok and cs == size and rs % size == 0 and rs // size >= max(cols, 1):
        return x, 0, rs // size
    if batch_ok and rs == size and cs % size == 0 and cs // size >= max(rows, 1):
        return x, 1, cs // size
    x = np.ascontiguousarray(x)
    return x, 0, x.shape[-1]


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """`np.matmul(a, b)` through msir's BLAS (see "NumPy arrays" above), or None
    when it does not apply: other dtypes, rank < 2, mixed dtypes, empty
    operands, or no library."""
    if (a.dtype != b.dtype or a.dtype not in (np.float32, np.float64) or a.ndim < 2 or b.ndim < 2
            or a.size == 0 or b.size == 0 or a.shape[-1] != b.shape[-2] or not available()):
        return None
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    count = int(np.prod(batch, dtype=np.int64))
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    a, ta, lda = _operand(np.broadcast_to(a, batch + a.shape[-2:]))
    b, tb, ldb = _operand(np.broadcast_to(b, batch + b.shape[-2:]))
    c = np.empty(batch + (m, n), a.dtype)
    gemm = _state["gemms"][a.dtype]  # type: ignore[index]
    at = np.indices(batch, dtype=np.int64).reshape(len(batch), count)
    ao = np.ascontiguousarray(np.asarray(a.strides[:-2], np.int64) @ at // a.itemsize)
    bo = np.ascontiguousarray(np.asarray(b.strides[:-2], np.int64) @ at // b.itemsize)
    gemm(ta, tb, m, n, k, a.ctypes.data, ao.ctypes.data, lda, b.ctypes.data, bo.ctypes.data, ldb, c.ctypes.data, n,
         count)
    return c
