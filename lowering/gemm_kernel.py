"""msir's own single-precision GEMM: packed panels shared by the pool's threads.

Contract
========
`load()` compiles, once per process and machine (object code kept by
`msir.lowering.runtime_object`), an LLVM IR module for this CPU and registers
its entry point with `llvmlite.binding.add_symbol`::

    i64 __msir_sgemm(i64 trans_a, i64 trans_b, i64 m, i64 n, i64 k,
                      ptr a, i64 a_offset, i64 lda, ptr b, i64 b_offset, i64 ldb,
                      ptr c, i64 c_offset, i64 ldc, float alpha, float beta,
                      ptr epilogue_task, ptr epilogue_ctx, i64 epilogue_min_iters)

C = alpha op(A) op(B) + beta C, row-major, the same operands as
`msir.lowering.blas`'s trampolines (offsets in elements, `op` a transpose
when its flag is 1). It returns flags: 1 when a step ran as more than one
chunk of the pool, 2 when the epilogue ran per task. beta = 0 never reads C
(it may hold garbage). With `epilogue_task` non-null, `task(ctx, chunk, lo,
hi)` runs on rows [lo, hi) of C once they are final (see "Epilogue"). It
exists on x86-64 CPUs with AVX-512F or AVX2 + FMA (`kernel_shape()`);
elsewhere `load()` fails and float32 products stay in OpenBLAS.
`build(shape)` compiles either micro-kernel the CPU can run (the tests run
the AVX2 one on AVX-512 machines too).

Why its own
===========
OpenBLAS, called single-threaded per chunk of msir's pool (`blas.py`,
"Threads"), packs the shared operand again in every chunk (8-18 % more CPU
time, `bench/gemm_chunks.py`); its own threads split a product statically
and wait for one another, which a loaded machine punishes. Here op(B) is
packed once per (NC, KC) panel and read by every thread, and every piece of
work is claimed dynamically from msir's pool: a descheduled thread delays
one task, never a static share, and no task ever waits for another. The
panels are a block of msir's allocator (`lowering.allocator`), kept for the
next product of the size: from the C library, 8 MiB of fresh pages a call
(512 page faults a 1024^3 product).

Blocking (Goto / BLIS)
======================
Steps s = (jc, pc): columns [jc, jc + NC), k in [pc, pc + kstep), in that
order; k is cut into ceil(k / KC) equal blocks (kstep <= KC), so no step is
a short one that pays a pass over C for a few k. One dispatch of the pool per step:

  tasks 0 .. npack - 1: pack the *next* step's panel of op(B) into
    NR-column slivers (KC x NR each, zero past n), PACK_SLIVERS a task,
    into the second of two panel buffers;
  then a task per (MC rows x NB columns) block of this step:
    pack op(A)[rows, pc] into MR-row micro-panels (zero past m);
    for each micro-panel (from L2) and each sliver (streamed from
    the panel in L2 or L3): the micro-kernel, an MR x NR tile of C in
    registers after KC rank-1 updates (2 vector loads of B, MR
    broadcasts of A, 2 MR FMAs each); the C tile's lines are prefetched
    before it; the tile goes to C as alpha t + beta C at pc = 0
    (alpha t when beta = 0) and C + alpha t after.

The first step's panel has no step before it to pack it: its tasks pack it
as they need it (`@sliver`). Each sliver is unpacked, claimed or packed (an
atomic state); a task that reaches an unpacked one claims and packs it, one
that reaches a sliver another thread is packing defers that tile to the end
of its micro-panel, and if it is still not packed then, copies the sliver
into a buffer of its own -- no task waits for another, and there is no
dispatch before the first FMA (512^3 at 2 threads 185 -> 194 GFLOP/s, 1024^3
196 -> 202 in 9 alternating processes; with a dispatch of its own the first
panel was a phase both threads finished before either computed).

Micro-kernels: AVX-512 12 x 32 (24 zmm accumulators), AVX2 6 x 16 (12 ymm),
k unrolled by 4. `blocking()` (cache sizes from sysfs): KC so that a
micro-panel of A and a sliver of B, which the micro-kernel streams together,
fill a quarter of L2, at most `KC_MAX`; NC so that a panel of B fills an
eighth of L3 (3/4 of L2 when L3 is unknown), at most `NC_MAX`. They are
large because what a product pays beyond its FMAs is passes over C (one read
and one write of every tile per KC block, from L3 or memory: C does not fit
in a cache) and packings of A (one per NC panel), while streaming the panel
from L3 costs the micro-kernel nothing: on a 2-core Zen 4 (32 KiB L1, 1 MiB
L2, 32 MiB L3), 1024^3 at 2 threads ran at 181 GFLOP/s with (KC, NC) = (256,
768), the earlier rule's (A micro-panel in 3/8 of L1, B panel in 3/4 of L2),
194 with (512, 1024) and 202-205 with (1024, 1024), this rule's; 2048^3 184,
202 and 207 (`bench/gemm_kernel.py`). A task has MC = 24 rows (`MC`; 48 with
an epilogue, `MC_EPILOGUE`); the columns of a panel are split into NB-wide
blocks only when the rows make fewer than `MIN_ROW_TASKS` blocks. Otherwise
a step's last `TAIL_ROWS` row blocks are cut into `TAIL_SPLIT` column blocks
each, so that its last tasks are short: the tasks are claimed in order, and
a thread that finds none left waits for the others' last one (1024^3 at 2
threads 210 -> 214 GFLOP/s, 512^3 199 -> 207, 7 alternating processes; one
thread unchanged: the tail packs its rows of A again, 3 x 96 KiB a block).

Bits
====
Every element of C is the sum over k in the same order -- within a KC block
the micro-kernel's fma chain in k order, blocks added to C in pc order --
whatever the thread count, the task grid or the timing: results are bitwise
equal across thread counts (not across machines whose KC differs).

Epilogue
========
When one column block covers all of n (n <= NC and rows for
`MIN_ROW_TASKS` blocks, or a panel split no further), a task of the last KC
block runs the epilogue on its rows right after writing them (they are in
cache; a tail row block's epilogue is run by the task that finishes the last
of its column blocks, counted in `%taildone`). Otherwise the epilogue runs
after the product, as a parallel loop of
its own with `epilogue_min_iters`. `Kernel.fuses_epilogue` says which.

Threads
=======
A product below 2 x `TASK_FLOPS` flops runs as one chunk in the calling
thread (no dispatch); a larger one runs each step in chunks of at least
`STEP_FLOPS` flops (at least two), through `__msir_parallel_for`.
"""

from __future__ import annotations

import threading
from pathlib import Path

from msir.lowering import runtime_object
from msir.lowering.load_once import load_once

SYMBOL = "__msir_sgemm"

TASK_FLOPS = 1 << 24
"""A product below 2 x TASK_FLOPS flops runs in the calling thread (as
`blas.GEMM_CHUNK_FLOPS`: ~70-500 us of one core, well above a dispatch)."""

STEP_FLOPS = 1 << 22
"""A larger product runs each (jc, pc) step in chunks of at least this many
flops (~30 us of a core: the workers are awake after the first step, and a
dispatch to awake workers costs ~1 us), at least two."""

OWN_MIN_FLOPS = 2 * TASK_FLOPS
"""Products below this many flops, which run as one task in the calling thread, go to OpenBLAS instead
(`blas.py` decides by `runs()`): packing both operands whole pays only when the panels are reused by many
tasks, and OpenBLAS's small-matrix kernels pack nothing (W6's 128 x 128 x 32 steps: 0.95x JAX with this
kernel, 0.80x with OpenBLAS, `bench/run.py --only W6`)."""


def runs(m: int, n: int, k: int) -> bool:
    """Whether an m x n x k float32 product runs in this kernel (when it is msir's float32 GEMM)."""
    return 2 * m * n * k >= OWN_MIN_FLOPS


MC = 24
"""Rows of a task: a multiple of both micro-kernels' MR (12, 6). Small, because the
tasks are claimed dynamically and the last ones decide the end of a step: 512
rows make 22 tasks, which two threads share 11 : 11 (with 48 rows, 11 tasks and
6 : 5 -- 183 against 193 GFLOP/s at 512^3 on 2 Zen 4 cores, `bench/gemm_kernel.py`);
a task's A block is packed once and every micro-panel streams the B panel
whatever MC is, so smaller tasks cost only their claims."""

MC_EPILOGUE = 48
"""Rows of a task when the product has an epilogue: also a multiple of the pool's
chunk alignment (16), so the epilogue's row ranges start where its own parallel
loop's chunks would."""

PACK_SLIVERS = 4
"""Slivers of B a packing task copies (4 x KC x NR floats: 512 KiB at KC = 1024, NR = 32)."""

MIN_ROW_TASKS = 8
"""Below this many row blocks per panel, the panel's columns are split too."""

TAIL_ROWS = 2
"""A step's last row blocks, cut into `TAIL_SPLIT` column blocks each when it has at least twice as many (with 2
threads the last task is then a quarter of a row block: 2 and 4 measured level with 3 and 8)."""

TAIL_SPLIT = 4
"""Column blocks of a tail row block."""

KC_MAX = 1024
"""The longest k block: one pass over C per 1024 of k (a micro-panel of A, 12 x 1024 floats, streams from L2)."""

NC_MAX = 2048
"""The widest panel of B (8 MiB at KC_MAX): the largest measured (module docstring, "Blocking")."""

_lock = threading.Lock()
_state: dict[str, object] = {}


def kernel_shape(features: set[str]) -> tuple[int, int] | None:
    """(vector width in floats, MR) of the micro-kernel for these LLVM CPU
    features ("+avx512f", ...), or None when there is none."""
    if "+avx512f" in features:
        return 16, 12
    if "+avx2" in features and "+fma" in features:
        return 8, 6
    return None


def cache_bytes(level: int) -> int | None:
    """The size of CPU 0's level-`level` data (or unified) cache from sysfs, None when unknown."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(base.glob("index*")):
            kind = (index / "type").read_text().strip()
            if (index / "level").read_text().strip() == str(level) and kind in ("Data", "Unified"):
                text = (index / "size").read_text().strip().upper()
                scale = {"K": 1024, "M": 1 << 20}.get(text[-1:], 1)
                return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return None


def blocking(vw: int, mr: int, l2: int | None, l3: int | None) -> tuple[int, int]:
    """(KC, NC) for this micro-kernel and these cache sizes (bytes, None when unknown): (MR + NR) x KC
    floats fill a quarter of L2, a multiple of 16 in [128, KC_MAX]; a KC x NC panel of B fills an eighth of
    L3 (3/4 of L2 without an L3), a multiple of NR in [4 NR, NC_MAX]."""
    nr = 2 * vw
    l2 = l2 or 512 * 1024
    kc = (l2 // 4) // ((mr + nr) * 4)
    kc = max(128, min(KC_MAX, kc // 16 * 16))
    panel = l3 // 8 if l3 else 3 * l2 // 4
    nc = panel // (kc * 4)
    nc = max(4 * nr, min(NC_MAX, nc // nr * nr))
    return kc, nc


# ---------------------------------------------------------------- IR text


class _Loop:
    """A counted loop `for %name in [lo, hi)` in LLVM IR text: `open()` ends
    the current block and starts the body, `close()` ends the body."""

    def __init__(self, name: str, lo: str, hi: str, step: str = "1"):
        self.name, self.lo, self.hi, self.step = name, lo, hi, step

    def open(self) -> str:
        n = self.name
        return (f"  br label %{n}.pre\n{n}.pre:\n  br label %{n}.head\n{n}.head:\n"
                f"  %{n} = phi i64 [ {self.lo}, %{n}.pre ], [ %{n}.next, %{n}.latch ]\n"
                f"  %{n}.go = icmp slt i64 %{n}, {self.hi}\n"
                f"  br i1 %{n}.go, label %{n}.body, label %{n}.exit\n{n}.body:\n")

    def close(self) -> str:
        n = self.name
        return (f"  br label %{n}.latch\n{n}.latch:\n  %{n}.next = add i64 %{n}, {self.step}\n"
                f"  br label %{n}.head\n{n}.exit:\n")


def _microkernel(vw: int, mr: int, unroll: int = 4) -> str:
    """`ukr(kc, ap, bp, t)`: t[MR x NR] = sum over p < kc of ap[p] (MR) x bp[p] (NR)."""
    nv = 2
    nr = nv * vw
    vt = f"<{vw} x float>"
    accs = [(i, v) for i in range(mr) for v in range(nv)]

    def step(p: str, tag: str, src: dict[tuple[int, int], str]) -> tuple[list[str], dict]:
        out = []
        new = {}
        out.append(f"  %bo{tag} = mul i64 {p}, {nr}")
        for v in range(nv):
            out.append(f"  %bq{tag}.{v} = getelementptr float, ptr %bp, i64 %bo{tag}")
            out.append(f"  %bv{tag}.{v}p = getelementptr float, ptr %bq{tag}.{v}, i64 {v * vw}")
            out.append(f"  %b{tag}.{v} = load {vt}, ptr %bv{tag}.{v}p, align 64")
        out.append(f"  %ao{tag} = mul i64 {p}, {mr}")
        for i in range(mr):
            out.append(f"  %ap{tag}.{i} = getelementptr float, ptr %ap, i64 %ao{tag}")
            out.append(f"  %aq{tag}.{i} = getelementptr float, ptr %ap{tag}.{i}, i64 {i}")
            out.append(f"  %as{tag}.{i} = load float, ptr %aq{tag}.{i}, align 4")
            out.append(f"  %ai{tag}.{i} = insertelement {vt} poison, float %as{tag}.{i}, i32 0")
            out.append(f"  %a{tag}.{i} = shufflevector {vt} %ai{tag}.{i}, {vt} poison, <{vw} x i32> zeroinitializer")
            for v in range(nv):
                name = f"%c{tag}.{i}.{v}"
                out.append(f"  {name} = call {vt} @llvm.fma.v{vw}f32({vt} %a{tag}.{i}, {vt} %b{tag}.{v}, "
                           f"{vt} {src[(i, v)]})")
                new[(i, v)] = name
        return out, new

    lines = [f"define internal void @ukr(i64 %kc, ptr noalias %ap, ptr noalias %bp, ptr noalias %t) #0 {{",
             "entry:",
             f"  %kmain = and i64 %kc, {-unroll}",
             "  %anymain = icmp sgt i64 %kmain, 0",
             "  br i1 %anymain, label %main, label %mid",
             "main:",
             "  %p = phi i64 [ 0, %entry ], [ %pn, %main ]"]
    cur = {(i, v): f"%m.{i}.{v}" for (i, v) in accs}
    body = []
    for u in range(unroll):
        body.append(f"  %p{u} = add i64 %p, {u}")
        more, cur = step(f"%p{u}", f"u{u}", cur)
        body += more
    main_out = cur
    for (i, v) in accs:
        lines.append(f"  %m.{i}.{v} = phi {vt} [ zeroinitializer, %entry ], [ {main_out[(i, v)]}, %main ]")
    lines += body
    lines += [f"  %pn = add i64 %p, {unroll}",
              "  %moremain = icmp slt i64 %pn, %kmain",
              "  br i1 %moremain, label %main, label %mid",
              "mid:",
              "  %q0 = phi i64 [ 0, %entry ], [ %pn, %main ]"]
    for (i, v) in accs:
        lines.append(f"  %d.{i}.{v} = phi {vt} [ zeroinitializer, %entry ], [ {main_out[(i, v)]}, %main ]")
    lines += ["  %anyrest = icmp slt i64 %q0, %kc",
              "  br i1 %anyrest, label %rest, label %done",
              "rest:",
              "  %q = phi i64 [ %q0, %mid ], [ %qn, %rest ]"]
    body, rest_out = step("%q", "r", {(i, v): f"%r.{i}.{v}" for (i, v) in accs})
    for (i, v) in accs:
        lines.append(f"  %r.{i}.{v} = phi {vt} [ %d.{i}.{v}, %mid ], [ {rest_out[(i, v)]}, %rest ]")
    lines += body
    lines += ["  %qn = add i64 %q, 1",
              "  %morerest = icmp slt i64 %qn, %kc",
              "  br i1 %morerest, label %rest, label %done",
              "done:"]
    for (i, v) in accs:
        lines.append(f"  %f.{i}.{v} = phi {vt} [ %d.{i}.{v}, %mid ], [ {rest_out[(i, v)]}, %rest ]")
    for (i, v) in accs:
        lines.append(f"  %tp.{i}.{v} = getelementptr float, ptr %t, i64 {i * nr + v * vw}")
        lines.append(f"  store {vt} %f.{i}.{v}, ptr %tp.{i}.{v}, align 64")
    lines += ["  ret void", "}"]
    return "\n".join(lines) + "\n"


def _store_tile(vw: int, mr: int) -> str:
    """`store_tile(t, c, ldc, mr, nr, alpha, beta, first)`: rows < mr, columns
    < nr of the tile t (MR x NR) into C: alpha t at the first KC block when
    beta is 0 (C is not read), else C factor + alpha t, factor = beta at the
    first block and 1 after it (so the same two operations in every case)."""
    nr = 2 * vw
    vt = f"<{vw} x float>"
    full_store, full_update = [], []
    for i in range(mr):
        for v in range(2):
            at = i * nr + v * vw
            common = [f"  %t{{m}}.{i}.{v}p = getelementptr float, ptr %t, i64 {at}",
                      f"  %t{{m}}.{i}.{v} = load {vt}, ptr %t{{m}}.{i}.{v}p, align 64",
                      f"  %x{{m}}.{i}.{v} = fmul {vt} %av, %t{{m}}.{i}.{v}",
                      f"  %r{{m}}.{i}.{v} = mul i64 %ldc, {i}",
                      f"  %o{{m}}.{i}.{v} = add i64 %r{{m}}.{i}.{v}, {v * vw}",
                      f"  %c{{m}}.{i}.{v}p = getelementptr float, ptr %c, i64 %o{{m}}.{i}.{v}"]
            full_store += [line.format(m="s") for line in common]
            full_store.append(f"  store {vt} %xs.{i}.{v}, ptr %cs.{i}.{v}p, align 4")
            full_update += [line.format(m="u") for line in common]
            full_update += [f"  %cu.{i}.{v} = load {vt}, ptr %cu.{i}.{v}p, align 4",
                            f"  %fu.{i}.{v} = fmul {vt} %cu.{i}.{v}, %fv",
                            f"  %yu.{i}.{v} = fadd {vt} %fu.{i}.{v}, %xu.{i}.{v}",
                            f"  store {vt} %yu.{i}.{v}, ptr %cu.{i}.{v}p, align 4"]
    rows, cols = _Loop("ei", "0", "%mr"), _Loop("ej", "0", "%nr")
    return f"""
; one element of C: x alone (C not read), or C factor + x
define internal void @put_c(ptr %cq, float %x, i1 %only, float %factor) {{
  br i1 %only, label %store, label %update
store:
  store float %x, ptr %cq, align 4
  ret void
update:
  %cval = load float, ptr %cq, align 4
  %f = fmul float %cval, %factor
  %y = fadd float %f, %x
  store float %y, ptr %cq, align 4
  ret void
}}
define internal void @store_tile(ptr noalias %t, ptr noalias %c, i64 %ldc, i64 %mr, i64 %nr, float %alpha,
                                 float %beta, i64 %first) #0 {{
entry:
  %fullm = icmp eq i64 %mr, {mr}
  %fulln = icmp eq i64 %nr, {nr}
  %full = and i1 %fullm, %fulln
  %isfirst = icmp ne i64 %first, 0
  %bzero = fcmp oeq float %beta, 0.0
  %only = and i1 %isfirst, %bzero
  %factor = select i1 %isfirst, float %beta, float 1.0
  %av0 = insertelement {vt} poison, float %alpha, i32 0
  %av = shufflevector {vt} %av0, {vt} poison, <{vw} x i32> zeroinitializer
  %fv0 = insertelement {vt} poison, float %factor, i32 0
  %fv = shufflevector {vt} %fv0, {vt} poison, <{vw} x i32> zeroinitializer
  br i1 %full, label %vec, label %edge
vec:
  br i1 %only, label %vstore, label %vupdate
vstore:
{chr(10).join(full_store)}
  ret void
vupdate:
{chr(10).join(full_update)}
  ret void
edge:
{rows.open()}  %erow = mul i64 %ei, %ldc
  %trow = mul i64 %ei, {nr}
{cols.open()}  %tix = add i64 %trow, %ej
  %tq = getelementptr float, ptr %t, i64 %tix
  %tval = load float, ptr %tq, align 4
  %x = fmul float %alpha, %tval
  %cix = add i64 %erow, %ej
  %cq = getelementptr float, ptr %c, i64 %cix
  call void @put_c(ptr %cq, float %x, i1 %only, float %factor)
{cols.close()}{rows.close()}  ret void
}}
"""


PACK_FIELDS = ("ptr %dst", "i64 %tb", "ptr %b", "i64 %ldb", "i64 %p0", "i64 %kc", "i64 %j0", "i64 %jend")
"""The fields of `%packb`, a packing task's context (as "type %name")."""


def _field_loads(struct: str, fields) -> str:
    """Loads of every field ("type %name") of the `%struct` at `%ctx` into `%name`."""
    return "\n".join(f"  %{struct}.f{n} = getelementptr %{struct}, ptr %ctx, i32 0, i32 {n}\n"
                     f"  {f.split()[1]} = load {f.split()[0]}, ptr %{struct}.f{n}" for n, f in enumerate(fields))


def _transpose(vw: int, rows: int) -> str:
    """`transpose{rows}(src, ld, dst, ds)`: the `rows` x vw block src[r ld + j] (rows <= vw lines of vw
    floats, each contiguous) into dst[j ds + r], as vw vector stores of vw lanes, j in increasing order;
    lanes r >= rows of each store are zeros that the next store (at ds = rows) or a later write covers, so
    the destination needs vw - rows floats of slack past its end. The transpose swaps blocks of h = vw / 2,
    vw / 4, ..., 1 lanes between lines r and r + h: log2(vw) rounds of vw two-source shuffles, where the
    copy one element at a time took vw x rows scattered stores."""
    vt = f"<{vw} x float>"
    out = [f"define internal void @transpose{rows}(ptr noalias %src, i64 %ld, ptr noalias %dst, i64 %ds) #0 {{"]
    cur = []
    for r in range(vw):
        if r < rows:
            out += [f"  %o{r} = mul i64 %ld, {r}", f"  %s{r} = getelementptr float, ptr %src, i64 %o{r}",
                    f"  %x0.{r} = load {vt}, ptr %s{r}, align 4"]
            cur.append(f"%x0.{r}")
        else:
            cur.append("zeroinitializer")
    h, stage = vw // 2, 0
    while h >= 1:
        stage += 1
        new = list(cur)
        for r in range(vw):
            if (r // h) % 2:
                continue
            lo = [j if (j // h) % 2 == 0 else vw + j - h for j in range(vw)]
            hi = [j + h if (j // h) % 2 == 0 else vw + j for j in range(vw)]
            for name, mask in ((r, lo), (r + h, hi)):
                m = ", ".join(f"i32 {i}" for i in mask)
                out.append(f"  %x{stage}.{name} = shufflevector {vt} {cur[r]}, {vt} {cur[r + h]}, <{vw} x i32> <{m}>")
                new[name] = f"%x{stage}.{name}"
        cur, h = new, h // 2
    for j in range(vw):
        out += [f"  %e{j} = mul i64 %ds, {j}", f"  %d{j} = getelementptr float, ptr %dst, i64 %e{j}",
                f"  store {vt} {cur[j]}, ptr %d{j}, align 4"]
    return "\n".join(out + ["  ret void", "}"]) + "\n"


def _packing(vw: int, mr: int) -> str:
    """`pack_a` (MR-row micro-panels of op(A), zero rows past the block) and
    the parallel task `pack_b_task` (NR-column slivers of op(B), zero columns
    past the panel)."""
    nr = 2 * vw
    q, r, rz = _Loop("aq", "0", "%panels"), _Loop("ar", "0", "%rows"), _Loop("az", "%rows", f"{mr}")
    tq, tp = _Loop("tq", "0", "%panels"), _Loop("tp", "0", "%kc")
    mask = ", ".join(f"i1 {'true' if lane < mr else 'false'}" for lane in range(vw))
    s = _Loop("bs", "%lo", "%hi")
    bp = _Loop("bp", "0", "%kc")
    tj, tzj = _Loop("cj", "0", "%cols"), _Loop("czj", "%cols", f"{nr}")
    cp = _Loop("cp", "0", "%len")
    av, bv = _Loop("av", "0", "%kv", str(vw)), _Loop("bv", "0", "%tkv", str(vw))
    halves = "".join(f"""  %th{h}c = add i64 %jb, {h * vw}
  %th{h}s0 = mul i64 %th{h}c, %ldb
  %th{h}s1 = add i64 %th{h}s0, %p0
  %th{h}s2 = add i64 %th{h}s1, %bv
  %th{h}s = getelementptr float, ptr %b, i64 %th{h}s2
  %th{h}d0 = mul i64 %bv, {nr}
  %th{h}d1 = add i64 %th{h}d0, {h * vw}
  %th{h}d = getelementptr float, ptr %sdst, i64 %th{h}d1
  call void @transpose{vw}(ptr %th{h}s, i64 %ldb, ptr %th{h}d, i64 {nr})
""" for h in range(2))
    return _transpose(vw, mr) + _transpose(vw, vw) + f"""
; dst[p stride] = src[p] for p < len (a line of op(X) contiguous in memory into a column of a packed
; panel); src null: zeros
define internal void @copy_strided(ptr noalias %src, i64 %len, ptr noalias %dst, i64 %stride) {{
entry:
  %zero = icmp eq ptr %src, null
{cp.open()}  %sq = getelementptr float, ptr %src, i64 %cp
  br i1 %zero, label %z, label %ld
ld:
  %lv = load float, ptr %sq, align 4
  br label %put
z:
  br label %put
put:
  %v = phi float [ %lv, %ld ], [ 0.0, %z ]
  %d = mul i64 %cp, %stride
  %dq = getelementptr float, ptr %dst, i64 %d
  store float %v, ptr %dq, align 4
{cp.close()}  ret void
}}

; dst[j] = src[j] for j < len, 0 for len <= j < width (a line of op(X) into a row of a packed panel)
define internal void @copy_row(ptr noalias %src, i64 %len, ptr noalias %dst, i64 %width) {{
  call void @copy_strided(ptr %src, i64 %len, ptr %dst, i64 1)
  %rest = sub i64 %width, %len
  %tail = getelementptr float, ptr %dst, i64 %len
  call void @copy_strided(ptr null, i64 %rest, ptr %tail, i64 1)
  ret void
}}

; op(A)[i0 : i0 + mc, p0 : p0 + kc] as micro-panels: dst[(q kc + p) MR + r] = op(A)[i0 + q MR + r, p0 + p]
define internal void @pack_a(ptr noalias %dst, i64 %ta, ptr noalias %a, i64 %lda, i64 %i0, i64 %mc, i64 %p0,
                             i64 %kc) {{
entry:
  %mc1 = add i64 %mc, {mr - 1}
  %panels = udiv i64 %mc1, {mr}
  %trans = icmp ne i64 %ta, 0
  br i1 %trans, label %t, label %n
n:
{q.open()}  %qrow = mul i64 %aq, {mr}
  %left = sub i64 %mc, %qrow
  %rows = call i64 @llvm.smin.i64(i64 %left, i64 {mr})
  %qbase0 = mul i64 %aq, %kc
  %qbase = mul i64 %qbase0, {mr}
  %arow0 = add i64 %i0, %qrow
  %asrc0 = mul i64 %arow0, %lda
  %asrc1 = add i64 %asrc0, %p0
  ; a whole micro-panel: k in blocks of {vw} by transposes, the rest one element at a time
  %full = icmp eq i64 %rows, {mr}
  %kvf = and i64 %kc, {-vw}
  %kv = select i1 %full, i64 %kvf, i64 0
{av.open()}  %avs0 = add i64 %asrc1, %av
  %avs = getelementptr float, ptr %a, i64 %avs0
  %avd0 = mul i64 %av, {mr}
  %avd1 = add i64 %qbase, %avd0
  %avd = getelementptr float, ptr %dst, i64 %avd1
  call void @transpose{mr}(ptr %avs, i64 %lda, ptr %avd, i64 {mr})
{av.close()}  %krest = sub i64 %kc, %kv
  %kvd = mul i64 %kv, {mr}
{r.open()}  %row0 = add i64 %i0, %qrow
  %row = add i64 %row0, %ar
  %srow0 = mul i64 %row, %lda
  %srow1 = add i64 %srow0, %p0
  %srow = add i64 %srow1, %kv
  %src = getelementptr float, ptr %a, i64 %srow
  %d0 = add i64 %qbase, %ar
  %d1 = add i64 %d0, %kvd
  %dcol = getelementptr float, ptr %dst, i64 %d1
  call void @copy_strided(ptr %src, i64 %krest, ptr %dcol, i64 {mr})
{r.close()}{rz.open()}  %z0 = add i64 %qbase, %az
  %zcol = getelementptr float, ptr %dst, i64 %z0
  call void @copy_strided(ptr null, i64 %kc, ptr %zcol, i64 {mr})
{rz.close()}{q.close()}  ret void
t:
{tq.open()}  %tqrow = mul i64 %tq, {mr}
  %tleft = sub i64 %mc, %tqrow
  %trows = call i64 @llvm.smin.i64(i64 %tleft, i64 {mr})
  %tqbase0 = mul i64 %tq, %kc
  %tqbase = mul i64 %tqbase0, {mr}
  %tcol = add i64 %i0, %tqrow
  ; a whole micro-panel: each k's {mr} floats by a masked vector load (no lane past them is read) and a
  ; {vw}-float store whose last {vw - mr} lanes the next k's store (or the next panel's) overwrites
  %tafull = icmp eq i64 %trows, {mr}
{tp.open()}  %tk = add i64 %p0, %tp
  %tks = mul i64 %tk, %lda
  %tks1 = add i64 %tks, %tcol
  %tsrc = getelementptr float, ptr %a, i64 %tks1
  %td0 = mul i64 %tp, {mr}
  %td1 = add i64 %td0, %tqbase
  %tdst = getelementptr float, ptr %dst, i64 %td1
  br i1 %tafull, label %tav, label %tas
tav:
  %tvrow = call <{vw} x float> @llvm.masked.load.v{vw}f32.p0(ptr %tsrc, i32 4, <{vw} x i1> <{mask}>,
                                                              <{vw} x float> zeroinitializer)
  store <{vw} x float> %tvrow, ptr %tdst, align 16
  br label %tadone
tas:
  call void @copy_row(ptr %tsrc, i64 %trows, ptr %tdst, i64 {mr})
  br label %tadone
tadone:
{tp.close()}{tq.close()}  ret void
}}

; slivers [lo, hi) of op(B)[p0 : p0 + kc, j0 : jend]: dst[(s kc + p) NR + j] = op(B)[p0 + p, j0 + s NR + j]
%packb = type {{ {", ".join(f.split()[0] for f in PACK_FIELDS)} }}
define internal void @pack_b_task(ptr %ctx, i64 %chunk, i64 %lo, i64 %hi) {{
entry:
{_field_loads("packb", PACK_FIELDS)}
  %trans = icmp ne i64 %tb, 0
{s.open()}  %soff = mul i64 %bs, {nr}
  %jb = add i64 %j0, %soff
  %cleft = sub i64 %jend, %jb
  %cols = call i64 @llvm.smin.i64(i64 %cleft, i64 {nr})
  %sb0 = mul i64 %bs, %kc
  %sb = mul i64 %sb0, {nr}
  %sdst = getelementptr float, ptr %dst, i64 %sb
  br i1 %trans, label %t, label %n
n:
  ; a whole sliver: each k's {nr} floats as two vectors (copy_row's loop of {nr} is too short for the
  ; vectoriser's unrolled body and runs scalar: 1024^3 at 2 threads 208 -> 211 GFLOP/s); a partial one by copy_row
  %nfull = icmp eq i64 %cols, {nr}
{bp.open()}  %k = add i64 %p0, %bp
  %srow0 = mul i64 %k, %ldb
  %srow = add i64 %srow0, %jb
  %src = getelementptr float, ptr %b, i64 %srow
  %drow = mul i64 %bp, {nr}
  %drp = getelementptr float, ptr %sdst, i64 %drow
  br i1 %nfull, label %nv, label %np
nv:
  %vsrc1 = getelementptr float, ptr %src, i64 {vw}
  %vrow0 = load <{vw} x float>, ptr %src, align 4
  %vrow1 = load <{vw} x float>, ptr %vsrc1, align 4
  %vdst1 = getelementptr float, ptr %drp, i64 {vw}
  store <{vw} x float> %vrow0, ptr %drp, align 64
  store <{vw} x float> %vrow1, ptr %vdst1, align 64
  br label %nnext
np:
  call void @copy_row(ptr %src, i64 %cols, ptr %drp, i64 {nr})
  br label %nnext
nnext:
{bp.close()}  br label %sdone
t:
  ; a whole sliver: k in blocks of {vw} by transposes of {vw} columns each, the rest one element at a time
  %tfull = icmp eq i64 %cols, {nr}
  %tkvf = and i64 %kc, {-vw}
  %tkv = select i1 %tfull, i64 %tkvf, i64 0
{bv.open()}{halves}{bv.close()}  %tkrest = sub i64 %kc, %tkv
  %tkvd = mul i64 %tkv, {nr}
{tj.open()}  %col = add i64 %jb, %cj
  %cs0 = mul i64 %col, %ldb
  %cs1 = add i64 %cs0, %p0
  %cs = add i64 %cs1, %tkv
  %csrc = getelementptr float, ptr %b, i64 %cs
  %cd0 = add i64 %cj, %tkvd
  %cdst = getelementptr float, ptr %sdst, i64 %cd0
  call void @copy_strided(ptr %csrc, i64 %tkrest, ptr %cdst, i64 {nr})
{tj.close()}{tzj.open()}  %zdst = getelementptr float, ptr %sdst, i64 %czj
  call void @copy_strided(ptr null, i64 %kc, ptr %zdst, i64 {nr})
{tzj.close()}  br label %sdone
sdone:
{s.close()}  ret void
}}
"""


def _driver(vw: int, mr: int, kc: int, nc: int, busy_first_panel: bool = False) -> str:
    """`gemm_task` (the tasks of one (jc, pc) step) and the entry point."""
    nr = 2 * vw
    t = _Loop("tk", "%tlo", "%thi")
    j, i = _Loop("jj", "%jlo", "%jhi", str(nr)), _Loop("ii", "0", "%mc", str(mr))
    j2 = _Loop("jj2", "%jlo", "%jhi", str(nr))
    st = _Loop("st", "0", "%nsteps")
    zi, zj = _Loop("zi", "0", "%m"), _Loop("zj", "0", "%n")
    # the C tile's cache lines, before the micro-kernel (its store then hits L1); rows past mr are
    # prefetched too (a prefetch never faults)
    prefetch = "".join(f"  %pf{r}.{h}o = add i64 %co, {h * 16}\n"
                       + (f"  %pf{r}.{h}r = mul i64 %ldc, {r}\n  %pf{r}.{h}s = add i64 %pf{r}.{h}o, %pf{r}.{h}r\n")
                       + f"  %pf{r}.{h} = getelementptr float, ptr %c, i64 %pf{r}.{h}s\n"
                       f"  call void @llvm.prefetch.p0(ptr %pf{r}.{h}, i32 1, i32 3, i32 1)\n"
                       for r in range(mr) for h in range(nr * 4 // 64))

    def tile(tag: str, jj: str, bs: str) -> str:
        """The tile at columns jj of this micro-panel, from sliver bs: prefetch C, the micro-kernel, store."""
        pf = prefetch.replace("%pf", f"%pf{tag}.").replace("%co,", f"%co{tag},")
        return (f"  %nleft{tag} = sub i64 %jhi, {jj}\n  %nr{tag} = call i64 @llvm.smin.i64(i64 %nleft{tag}, i64 {nr})\n"
                f"  %co{tag} = add i64 %co0, {jj}\n  %cp{tag} = getelementptr float, ptr %c, i64 %co{tag}\n"
                f"{pf}  call void @ukr(i64 %kc, ptr %ap, ptr {bs}, ptr %tile)\n"
                f"  call void @store_tile(ptr %tile, ptr %cp{tag}, i64 %ldc, i64 %mr, i64 %nr{tag}, float %alpha, "
                f"float %beta, i64 %first)\n")

    fields = ["i64 %ta", "ptr %a", "i64 %lda", "i64 %m", "ptr %c", "i64 %ldc", "float %alpha", "float %beta",
              "ptr %bpack", "i64 %p0", "i64 %kc", "i64 %j0", "i64 %jend", "i64 %nb", "i64 %cblocks", "i64 %first",
              "i64 %tailfrom", "i64 %nbt", "i64 %cbt", "ptr %taildone",
              "ptr %epi", "ptr %epictx", "i64 %epihere", "i64 %npack", "i64 %nslivers", "i64 %mcr", "i64 %lazy",
              "ptr %curpack", "ptr %states"]
    loads = _field_loads("job", fields)
    driver_names = {"%p0": "%pc", "%j0": "%jc"}  # the driver's names of two task fields
    fill = "\n".join(f"  %jb{n} = insertvalue %job {'undef' if n == 0 else f'%jb{n - 1}'}, "
                      f"{f.split()[0]} {driver_names.get(f.split()[1], f.split()[1])}, {n}"
                      for n, f in enumerate(fields))
    nf = len(fields)

    def pack_ctx(tag: str, dst: str, p0: str, kcv: str, j0: str, jend: str) -> str:
        vals = [f"ptr {dst}", "i64 %tb", "ptr %b", "i64 %ldb", f"i64 {p0}", f"i64 {kcv}", f"i64 {j0}", f"i64 {jend}"]
        return "\n".join(f"  %{tag}{n} = insertvalue %packb {'undef' if n == 0 else f'%{tag}{n - 1}'}, {v}, {n}"
                         for n, v in enumerate(vals))

    return f"""
; a step's job, then the packing of the next step's panel done by the same dispatch
%job = type {{ {", ".join(f.split()[0] for f in fields)}, %packb }}

; tasks [lo / 16, hi / 16) of a (jc, pc) step: tasks t < npack pack slivers [{PACK_SLIVERS} t, {PACK_SLIVERS} t + {PACK_SLIVERS})
; of the next step's panel; task npack + u computes row block u / cblocks, column block u % cblocks
define internal void @gemm_task(ptr %ctx, i64 %chunk, i64 %lo, i64 %hi) {{
entry:
  %abuf = alloca [{MC_EPILOGUE * kc + vw} x float], align 64
  %tile = alloca [{mr * nr} x float], align 64
  %deferp = alloca i64, align 8
  %scratchp = alloca ptr, align 8
  store ptr null, ptr %scratchp, align 8
{loads}
  %nextpack = getelementptr %job, ptr %ctx, i32 0, i32 {nf}
  %tlo = lshr i64 %lo, 4
  %thi = lshr i64 %hi, 4
  %epi_on = icmp ne i64 %epihere, 0
{t.open()}  %ispack = icmp ult i64 %tk, %npack
  br i1 %ispack, label %pack, label %compute
pack:
  %slo = mul i64 %tk, {PACK_SLIVERS}
  %shi0 = add i64 %slo, {PACK_SLIVERS}
  %shi = call i64 @llvm.smin.i64(i64 %shi0, i64 %nslivers)
  call void @pack_b_task(ptr %nextpack, i64 0, i64 %slo, i64 %shi)
  br label %tnext
compute:
  %u = sub i64 %tk, %npack
  ; tasks past tailfrom are the step's last row blocks, each cut into cbt column blocks of nbt
  %intail = icmp uge i64 %u, %tailfrom
  %ut = sub i64 %u, %tailfrom
  %rbm = udiv i64 %u, %cblocks
  %cbm = urem i64 %u, %cblocks
  %rbt0 = udiv i64 %ut, %cbt
  %rbt1 = udiv i64 %tailfrom, %cblocks
  %rbt = add i64 %rbt0, %rbt1
  %cbtl = urem i64 %ut, %cbt
  %rb = select i1 %intail, i64 %rbt, i64 %rbm
  %cb = select i1 %intail, i64 %cbtl, i64 %cbm
  %width = select i1 %intail, i64 %nbt, i64 %nb
  %i0 = mul i64 %rb, %mcr
  %mleft = sub i64 %m, %i0
  %mc = call i64 @llvm.smin.i64(i64 %mleft, i64 %mcr)
  %jo = mul i64 %cb, %width
  %jlo = add i64 %j0, %jo
  %jhi0 = add i64 %jlo, %width
  %jhi = call i64 @llvm.smin.i64(i64 %jhi0, i64 %jend)
  call void @pack_a(ptr %abuf, i64 %ta, ptr %a, i64 %lda, i64 %i0, i64 %mc, i64 %p0, i64 %kc)
{i.open()}  %q = udiv i64 %ii, {mr}
  %ao0 = mul i64 %q, %kc
  %ao = mul i64 %ao0, {mr}
  %ap = getelementptr float, ptr %abuf, i64 %ao
  %mleft2 = sub i64 %mc, %ii
  %mr = call i64 @llvm.smin.i64(i64 %mleft2, i64 {mr})
  %row = add i64 %i0, %ii
  %co0 = mul i64 %row, %ldc
  store i64 0, ptr %deferp, align 8
{j.open()}  %jrel = sub i64 %jj, %j0
  %sl = udiv i64 %jrel, {nr}
  ; a tile is deferred by a bit of a 64-bit mask; past 64 slivers a busy one is copied at once
  %maskable = icmp ult i64 %sl, 64
  %scr1 = select i1 %maskable, ptr null, ptr %scratchp
  %bs = call ptr @sliver(ptr %ctx, i64 %sl, ptr %scr1)
  %busy = icmp eq ptr %bs, null
  br i1 %busy, label %defer, label %tile1
defer:
  ; another thread is packing this sliver: its tile comes after the others of the micro-panel
  %dbit = shl i64 1, %sl
  %dm0 = load i64, ptr %deferp, align 8
  %dm1 = or i64 %dm0, %dbit
  store i64 %dm1, ptr %deferp, align 8
  br label %jnext1
tile1:
{tile("1", "%jj", "%bs")}  br label %jnext1
jnext1:
{j.close()}  %dm = load i64, ptr %deferp, align 8
  %anydef = icmp ne i64 %dm, 0
  br i1 %anydef, label %late, label %inext
late:
{j2.open()}  %jrel2 = sub i64 %jj2, %j0
  %sl2 = udiv i64 %jrel2, {nr}
  %maskable2 = icmp ult i64 %sl2, 64
  %lbit = shl i64 1, %sl2
  %lm = and i64 %dm, %lbit
  %wasdef0 = icmp ne i64 %lm, 0
  %wasdef = select i1 %maskable2, i1 %wasdef0, i1 false
  br i1 %wasdef, label %tile2, label %jnext2
tile2:
  %bs2 = call ptr @sliver(ptr %ctx, i64 %sl2, ptr %scratchp)
{tile("2", "%jj2", "%bs2")}  br label %jnext2
jnext2:
{j2.close()}  br label %inext
inext:
{i.close()}  br i1 %epi_on, label %epilogue, label %tnext
epilogue:
  br i1 %intail, label %epitail, label %epirun
epitail:
  ; a tail row block is final when the last of its column blocks is: that task runs its epilogue
  %tdi = sub i64 %rb, %rbt1
  %tdp = getelementptr i64, ptr %taildone, i64 %tdi
  %tdold = atomicrmw add ptr %tdp, i64 1 acq_rel
  %tdnow = add i64 %tdold, 1
  %tdlast = icmp eq i64 %tdnow, %cbt
  br i1 %tdlast, label %epirun, label %tnext
epirun:
  %rend = add i64 %i0, %mc
  call void %epi(ptr %epictx, i64 %chunk, i64 %i0, i64 %rend)
  br label %tnext
tnext:
{t.close()}  %scratch = load ptr, ptr %scratchp, align 8
  call void @__msir_free(ptr %scratch)
  ret void
}}

; sliver sl of this step's panel, packed. In a lazy step (the first: its panel is packed by the tasks that need
; it, no dispatch of its own before them) the first task to claim an unpacked sliver packs it; when another
; thread is packing it, null without scratch (the caller defers the tile), else a private copy packed into
; *scratch (allocated on first use, freed by the task), so that no task ever waits for another
define internal ptr @sliver(ptr %ctx, i64 %sl, ptr %scratch) {{
entry:
  %pctx = alloca %packb, align 8
{_field_loads("job", fields)}
  %bo0 = mul i64 %sl, %kc
  %bo = mul i64 %bo0, {nr}
  %packed = getelementptr float, ptr %bpack, i64 %bo
  %islazy = icmp ne i64 %lazy, 0
  br i1 %islazy, label %check, label %ready
check:
  %stp = getelementptr i64, ptr %states, i64 %sl
  %state = load atomic i64, ptr %stp acquire, align 8
  %done = icmp eq i64 %state, 2
  br i1 %done, label %ready, label %claim
claim:
  %cx = cmpxchg ptr %stp, i64 0, i64 1 acq_rel acquire
  %won = extractvalue {{ i64, i1 }} %cx, 1
  br i1 %won, label %pack, label %busy
pack:
  %sl1 = add i64 %sl, 1
  call void @pack_b_task(ptr %curpack, i64 0, i64 %sl, i64 %sl1)
  store atomic i64 2, ptr %stp release, align 8
  br label %ready
busy:
  %now = extractvalue {{ i64, i1 }} %cx, 0
  %nowdone = icmp eq i64 %now, 2
  br i1 %nowdone, label %ready, label %own
own:
  %noscratch = icmp eq ptr %scratch, null
  br i1 %noscratch, label %defer, label %private
defer:
  ret ptr null
private:
  %buf = load ptr, ptr %scratch, align 8
  %nobuf = icmp eq ptr %buf, null
  br i1 %nobuf, label %alloc, label %havebuf
alloc:
  %bytes = mul i64 %kc, {nr * 4}
  %new = call ptr @__msir_alloc(i64 %bytes)
  store ptr %new, ptr %scratch, align 8
  br label %havebuf
havebuf:
  %pb = phi ptr [ %buf, %private ], [ %new, %alloc ]
  %isnull = icmp eq ptr %pb, null
  br i1 %isnull, label %spin, label %copy
spin:
  ; no memory for a private copy: wait for the packer (it is running this sliver's copy)
  %st2 = load atomic i64, ptr %stp acquire, align 8
  %d2 = icmp eq i64 %st2, 2
  br i1 %d2, label %ready, label %spin
copy:
  ; the packing context with its destination moved so that sliver sl lands at the scratch buffer
  %neg = sub i64 0, %bo
  %pdst = getelementptr float, ptr %pb, i64 %neg
  %cur = load %packb, ptr %curpack, align 8
  %moved = insertvalue %packb %cur, ptr %pdst, 0
  store %packb %moved, ptr %pctx, align 8
  %sl1p = add i64 %sl, 1
  call void @pack_b_task(ptr %pctx, i64 0, i64 %sl, i64 %sl1p)
  ret ptr %pb
ready:
  ret ptr %packed
}}

; step s of the product: its columns [jc, jend) and k range [pc, pc + kc), k cut in nk blocks of kstep
define internal void @step_range(i64 %s, i64 %nk, i64 %kstep, i64 %n, i64 %k, ptr %out) {{
  %jci = udiv i64 %s, %nk
  %pci = urem i64 %s, %nk
  %jc = mul i64 %jci, {nc}
  %pc = mul i64 %pci, %kstep
  %kleft = sub i64 %k, %pc
  %kc = call i64 @llvm.smin.i64(i64 %kleft, i64 %kstep)
  %jend0 = add i64 %jc, {nc}
  %jend = call i64 @llvm.smin.i64(i64 %jend0, i64 %n)
  %r0 = insertvalue [4 x i64] undef, i64 %jc, 0
  %r1 = insertvalue [4 x i64] %r0, i64 %pc, 1
  %r2 = insertvalue [4 x i64] %r1, i64 %kc, 2
  %r3 = insertvalue [4 x i64] %r2, i64 %jend, 3
  store [4 x i64] %r3, ptr %out
  ret void
}}

define i64 @{SYMBOL}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a0, i64 %ao, i64 %lda, ptr %b0, i64 %bo,
                      i64 %ldb, ptr %c0, i64 %co, i64 %ldc, float %alpha, float %beta, ptr %epi, ptr %epictx,
                      i64 %epimin) {{
entry:
  %a = getelementptr float, ptr %a0, i64 %ao
  %b = getelementptr float, ptr %b0, i64 %bo
  %c = getelementptr float, ptr %c0, i64 %co
  %splitp = alloca i64, align 8
  store i64 0, ptr %splitp, align 8
  %pbctx = alloca %packb, align 8
  %jobctx = alloca %job, align 8
  %states = alloca [{nc // nr} x i64], align 8
  %taildone = alloca [{TAIL_ROWS} x i64], align 8
  %rangep = alloca [4 x i64], align 8
  %mz = icmp sle i64 %m, 0
  %nz = icmp sle i64 %n, 0
  %empty = or i1 %mz, %nz
  br i1 %empty, label %done, label %nonempty
nonempty:
  %haveepi = icmp ne ptr %epi, null
  %kz = icmp sle i64 %k, 0
  br i1 %kz, label %scale, label %blocked
scale:
  %bzero = fcmp oeq float %beta, 0.0
{zi.open()}  %zrow = mul i64 %zi, %ldc
{zj.open()}  %zo = add i64 %zrow, %zj
  %zq = getelementptr float, ptr %c, i64 %zo
  br i1 %bzero, label %zstore, label %zscale
zstore:
  store float 0.0, ptr %zq, align 4
  br label %znext
zscale:
  %zv = load float, ptr %zq, align 4
  %zs = fmul float %zv, %beta
  store float %zs, ptr %zq, align 4
  br label %znext
znext:
{zj.close()}{zi.close()}  br label %apart
blocked:
  ; the task grid: row blocks of {MC} ({MC_EPILOGUE} with an epilogue); a panel's columns split when the row
  ; blocks are few
  %mcr = select i1 %haveepi, i64 {MC_EPILOGUE}, i64 {MC}
  %mcr1 = sub i64 %mcr, 1
  %m1 = add i64 %m, %mcr1
  %rblocks = udiv i64 %m1, %mcr
  %pw = call i64 @llvm.smin.i64(i64 %n, i64 {nc})
  %few = icmp slt i64 %rblocks, {MIN_ROW_TASKS}
  %want0 = add i64 %rblocks, {MIN_ROW_TASKS - 1}
  %want1 = udiv i64 %want0, %rblocks
  %want = call i64 @llvm.smax.i64(i64 %want1, i64 1)
  %pw1 = add i64 %pw, %want
  %pw2 = sub i64 %pw1, 1
  %nbq = udiv i64 %pw2, %want
  %nbr0 = add i64 %nbq, {nr - 1}
  %nbr = and i64 %nbr0, {-nr}
  %nbsplit = call i64 @llvm.smax.i64(i64 %nbr, i64 {4 * nr})
  %nb = select i1 %few, i64 %nbsplit, i64 {nc}
  %onecol = icmp sge i64 %nb, %n
  %onecolpanel = xor i1 %few, true
  %fuse = and i1 %haveepi, %onecol
  %fuse64 = zext i1 %fuse to i64
  ; two panels: a step computes from one while its dispatch packs the next step's into the other
  %pwr0 = add i64 %pw, {nr - 1}
  %pwr = and i64 %pwr0, {-nr}
  %panel = mul i64 %pwr, {kc}
  %bbytes = mul i64 %panel, 8
  %buf0 = call ptr @__msir_alloc(i64 %bbytes)
  %buf1 = getelementptr float, ptr %buf0, i64 %panel
  %tf0 = mul i64 %m, %n
  %tf1 = mul i64 %tf0, %k
  %tf = shl i64 %tf1, 1
  %big = icmp sge i64 %tf, {2 * TASK_FLOPS}
  %nomem = icmp eq ptr %buf0, null
  br i1 %nomem, label %fallback, label %packed
packed:
  %nj0 = add i64 %n, {nc - 1}
  %nj = udiv i64 %nj0, {nc}
  ; k in equal blocks of at most {kc} (784 = 3 x 262 rather than 384 + 384 + 16: a short block costs a pass
  ; over C for little work); the blocks depend on k only
  %nkmax0 = add i64 %k, {kc - 1}
  %nkmax = udiv i64 %nkmax0, {kc}
  %ks0 = add i64 %k, %nkmax
  %ks1 = sub i64 %ks0, 1
  %kstep = udiv i64 %ks1, %nkmax
  %nk0 = add i64 %k, %kstep
  %nk1 = sub i64 %nk0, 1
  %nk = udiv i64 %nk1, %kstep
  %nsteps = mul i64 %nj, %nk
  ; the first panel is packed by the first step's tasks as they need its slivers (`@sliver`): every sliver
  ; unpacked (0) until one claims it (1) and has packed it (2)
  call void @step_range(i64 0, i64 %nk, i64 %kstep, i64 %n, i64 %k, ptr %rangep)
  %r0 = load [4 x i64], ptr %rangep
  %r0kc = extractvalue [4 x i64] %r0, 2
  %r0jend = extractvalue [4 x i64] %r0, 3
{pack_ctx("pf", "%buf0", "0", "%r0kc", "0", "%r0jend")}
  store %packb %pf7, ptr %pbctx
  call void @llvm.memset.p0.i64(ptr %states, i8 {int(busy_first_panel)}, i64 {8 * (nc // nr)}, i1 false)
  ; (the epilogue runs in one step only, the last k block of the one panel)
  call void @llvm.memset.p0.i64(ptr %taildone, i8 0, i64 {8 * TAIL_ROWS}, i1 false)
{st.open()}  call void @step_range(i64 %st, i64 %nk, i64 %kstep, i64 %n, i64 %k, ptr %rangep)
  %rs = load [4 x i64], ptr %rangep
  %jc = extractvalue [4 x i64] %rs, 0
  %pc = extractvalue [4 x i64] %rs, 1
  %kc = extractvalue [4 x i64] %rs, 2
  %jend = extractvalue [4 x i64] %rs, 3
  %odd0 = and i64 %st, 1
  %odd = icmp ne i64 %odd0, 0
  %bpack = select i1 %odd, ptr %buf1, ptr %buf0
  %bnext = select i1 %odd, ptr %buf0, ptr %buf1
  %w = sub i64 %jend, %jc
  %w2 = add i64 %w, %nb
  %w3 = sub i64 %w2, 1
  %cblocks = udiv i64 %w3, %nb
  ; the step's last {TAIL_ROWS} row blocks in {TAIL_SPLIT} column blocks each, so that the last tasks are short (not
  ; when the columns are split already); their finished column blocks are counted in %taildone for the epilogue
  %tailok0 = icmp sge i64 %rblocks, {2 * TAIL_ROWS}
  %tailok = and i1 %tailok0, %onecolpanel
  %tw0 = add i64 %w, {TAIL_SPLIT - 1}
  %tw1 = udiv i64 %tw0, {TAIL_SPLIT}
  %tw2 = add i64 %tw1, {nr - 1}
  %tw3 = and i64 %tw2, {-nr}
  %nbt = select i1 %tailok, i64 %tw3, i64 %nb
  %cbt0 = add i64 %w, %nbt
  %cbt1 = sub i64 %cbt0, 1
  %cbt = udiv i64 %cbt1, %nbt
  %tailrows = select i1 %tailok, i64 {TAIL_ROWS}, i64 0
  %rmain = sub i64 %rblocks, %tailrows
  %tailfrom = mul i64 %rmain, %cblocks
  %ntail = mul i64 %tailrows, %cbt
  %ntasks = add i64 %tailfrom, %ntail
  ; the next step's panel, packed by the first tasks of this dispatch
  %snext = add i64 %st, 1
  %hasnext = icmp ult i64 %snext, %nsteps
  %snext1 = select i1 %hasnext, i64 %snext, i64 %st
  call void @step_range(i64 %snext1, i64 %nk, i64 %kstep, i64 %n, i64 %k, ptr %rangep)
  %rn = load [4 x i64], ptr %rangep
  %njc = extractvalue [4 x i64] %rn, 0
  %npc = extractvalue [4 x i64] %rn, 1
  %nkc = extractvalue [4 x i64] %rn, 2
  %njend = extractvalue [4 x i64] %rn, 3
  %nw = sub i64 %njend, %njc
  %nw1 = add i64 %nw, {nr - 1}
  %nsl0 = udiv i64 %nw1, {nr}
  %nslivers = select i1 %hasnext, i64 %nsl0, i64 0
  %np0 = add i64 %nslivers, {PACK_SLIVERS - 1}
  %npack = udiv i64 %np0, {PACK_SLIVERS}
{pack_ctx("pn", "%bnext", "%npc", "%nkc", "%njc", "%njend")}
  %alltasks = add i64 %ntasks, %npack
  %range = shl i64 %alltasks, 4
  ; chunks of this step: one for a product below {2 * TASK_FLOPS} flops, else >= 2 of >= {STEP_FLOPS} flops
  %fl0 = mul i64 %m, %w
  %fl1 = mul i64 %fl0, %kc
  %fl = shl i64 %fl1, 1
  %cw0 = udiv i64 %fl, {STEP_FLOPS}
  %cw1 = call i64 @llvm.smax.i64(i64 %cw0, i64 2)
  %cw = select i1 %big, i64 %cw1, i64 1
  %tpc0 = add i64 %alltasks, %cw
  %tpc1 = sub i64 %tpc0, 1
  %tpc = udiv i64 %tpc1, %cw
  %mini = shl i64 %tpc, 4
  %isfirst = icmp eq i64 %pc, 0
  %first = zext i1 %isfirst to i64
  %pcend = add i64 %pc, %kc
  %islast = icmp sge i64 %pcend, %k
  %epilast = and i1 %islast, %fuse
  %epihere = zext i1 %epilast to i64
  %isst0 = icmp eq i64 %st, 0
  %lazy = zext i1 %isst0 to i64
  %curpack = select i1 %isst0, ptr %pbctx, ptr null
{fill}
  %jall = insertvalue %job %jb{nf - 1}, %packb %pn7, {nf}
  store %job %jall, ptr %jobctx
  %tasks = call i64 @__msir_parallel_for(ptr @gemm_task, ptr %jobctx, i64 0, i64 %range, i64 %mini)
  %many = icmp ugt i64 %tasks, 1
  %many64 = zext i1 %many to i64
  %sp = load i64, ptr %splitp, align 8
  %sp1 = or i64 %sp, %many64
  store i64 %sp1, ptr %splitp, align 8
{st.close()}  call void @__msir_free(ptr %buf0)
  %fusebit = shl i64 %fuse64, 1
  %spf = load i64, ptr %splitp, align 8
  %spf1 = or i64 %spf, %fusebit
  store i64 %spf1, ptr %splitp, align 8
  br i1 %fuse, label %done, label %apart
fallback:
  ; no memory for the packed panels: the unblocked product (k in one chain: other bits, still C's values)
  call void @naive(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %lda, ptr %b, i64 %ldb, ptr %c, i64 %ldc,
                   float %alpha, float %beta)
  br label %apart
apart:
  br i1 %haveepi, label %runepi, label %done
runepi:
  %epichunks = call i64 @__msir_parallel_for(ptr %epi, ptr %epictx, i64 0, i64 %m, i64 %epimin)
  br label %done
done:
  %splitv = load i64, ptr %splitp, align 8
  ret i64 %splitv
}}
"""


def _naive() -> str:
    """`naive`: C = alpha op(A) op(B) + beta C one element at a time (only
    when the packed panel cannot be allocated)."""
    i, j, p = _Loop("ni", "0", "%m"), _Loop("nj", "0", "%n"), _Loop("np", "0", "%k")
    return f"""
define internal void @naive(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %lda, ptr %b, i64 %ldb,
                            ptr %c, i64 %ldc, float %alpha, float %beta) {{
entry:
  %at = icmp ne i64 %ta, 0
  %bt = icmp ne i64 %tb, 0
  %bzero = fcmp oeq float %beta, 0.0
  %accp = alloca float, align 4
{i.open()}{j.open()}  store float 0.0, ptr %accp, align 4
{p.open()}  %acc = load float, ptr %accp, align 4
  %an = mul i64 %ni, %lda
  %an1 = add i64 %an, %np
  %att = mul i64 %np, %lda
  %att1 = add i64 %att, %ni
  %aix = select i1 %at, i64 %att1, i64 %an1
  %bn = mul i64 %np, %ldb
  %bn1 = add i64 %bn, %nj
  %btt = mul i64 %nj, %ldb
  %btt1 = add i64 %btt, %np
  %bix = select i1 %bt, i64 %btt1, i64 %bn1
  %aq = getelementptr float, ptr %a, i64 %aix
  %av = load float, ptr %aq, align 4
  %bq = getelementptr float, ptr %b, i64 %bix
  %bv = load float, ptr %bq, align 4
  %acc.next = call float @llvm.fma.f32(float %av, float %bv, float %acc)
  store float %acc.next, ptr %accp, align 4
{p.close()}  %sum = load float, ptr %accp, align 4
  %cr = mul i64 %ni, %ldc
  %cix = add i64 %cr, %nj
  %cq = getelementptr float, ptr %c, i64 %cix
  %x = fmul float %alpha, %sum
  call void @put_c(ptr %cq, float %x, i1 %bzero, float %beta)
{j.close()}{i.close()}  ret void
}}
"""


def module_ir(vw: int, mr: int, kc: int, nc: int, busy_first_panel: bool = False) -> str:
    """The whole module for a micro-kernel of `vw` floats x `mr` rows and this KC and NC. `busy_first_panel`
    (tests) starts every sliver of the first panel claimed by a thread that never packs them, so every tile of
    the first step takes the private copy."""
    width = 32 * vw
    return (f"""
declare i64 @llvm.smin.i64(i64, i64)
declare i64 @llvm.smax.i64(i64, i64)
declare float @llvm.fma.f32(float, float, float)
declare <{vw} x float> @llvm.fma.v{vw}f32(<{vw} x float>, <{vw} x float>, <{vw} x float>)
declare ptr @__msir_alloc(i64)
declare void @__msir_free(ptr)
declare void @llvm.prefetch.p0(ptr, i32, i32, i32)
declare <{vw} x float> @llvm.masked.load.v{vw}f32.p0(ptr, i32, <{vw} x i1>, <{vw} x float>)
declare i64 @__msir_parallel_for(ptr, ptr, i64, i64, i64)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
attributes #0 = {{ "min-legal-vector-width"="{width}" "prefer-vector-width"="{width}" }}
""" + _microkernel(vw, mr) + _store_tile(vw, mr) + _packing(vw, mr) + _naive()
            + _driver(vw, mr, kc, nc, busy_first_panel))


def host_features() -> set[str]:
    import llvmlite.binding as llvm

    return set(llvm.get_host_cpu_features().flatten().split(","))


def _optimise(mod, tm) -> None:
    """LLVM's O2 pipeline with the vectorisers (the packing loops) and without the loop unroller: the
    micro-kernel and the tile stores are unrolled in the IR already, and unrolling the rest doubled the
    code and its compile time (~1.1 s of CPU at O3 against ~0.6 s)."""
    from msir.lowering.jit import optimise

    optimise(mod, tm, speed_level=2, loop_unrolling=False)


class Kernel:
    """One compiled `__msir_sgemm` for a micro-kernel shape: `vw` floats a vector, `mr` rows, and its
    blocking (`kc`, `nc`); `sgemm()` calls it on NumPy arrays."""

    def __init__(self, vw: int, mr: int, kc: int, nc: int, busy_first_panel: bool = False):
        import llvmlite.binding as llvm

        self.vw, self.mr, self.kc, self.nc = vw, mr, kc, nc
        options = {"cpu": llvm.get_host_cpu_name(), "features": llvm.get_host_cpu_features().flatten(), "opt": 3,
                   "codemodel": "jitdefault"}
        self.engine = runtime_object.compile_cached(f"sgemm-{vw}x{mr}", module_ir(vw, mr, kc, nc, busy_first_panel),
                                                    options, SYMBOL, optimise=_optimise)
        self.address = self.engine.get_function_address(SYMBOL)
        self._fn = None

    def describe(self) -> str:
        return f"msir {'avx512' if self.vw == 16 else 'avx2'} {self.mr}x{2 * self.vw} kc={self.kc} nc={self.nc}"

    def fuses_epilogue(self, m: int, n: int) -> bool:
        """Whether an m x n product runs its epilogue per task (one column block covers n; the rows in blocks of
        `MC_EPILOGUE`)."""
        if m <= 0 or n <= 0:
            return False
        nr = 2 * self.vw
        rblocks = -(-m // MC_EPILOGUE)
        if rblocks >= MIN_ROW_TASKS:
            nb = self.nc
        else:
            want = -(-MIN_ROW_TASKS // rblocks)
            nb = max(-(-(-(-min(n, self.nc) // want)) // nr) * nr, 4 * nr)
        return nb >= n

    def sgemm(self, a, b, *, trans_a: bool = False, trans_b: bool = False, c=None, alpha: float = 1.0,
              beta: float = 0.0):
        """C = alpha op(a) op(b) + beta c for 2-D float32 NumPy arrays (`c` is written in place when given);
        returns (C, the entry point's flags)."""
        import ctypes

        import numpy as np

        a = np.ascontiguousarray(a, np.float32)
        b = np.ascontiguousarray(b, np.float32)
        m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
        kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
        if kb != k:
            raise ValueError(f"inner dimensions differ: {k} and {kb}")
        out = np.empty((m, n), np.float32) if c is None else c
        if out.dtype != np.float32 or out.shape != (m, n) or not out.flags.c_contiguous:
            raise ValueError(f"c must be a C-contiguous float32 array of shape {(m, n)}")
        if self._fn is None:
            i64, p, f32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
            self._fn = ctypes.CFUNCTYPE(i64, i64, i64, i64, i64, i64, p, i64, i64, p, i64, i64, p, i64, i64, f32,
                                        f32, p, p, i64)(self.address)
        flags = self._fn(int(trans_a), int(trans_b), m, n, k, a.ctypes.data, 0, max(a.shape[1], 1), b.ctypes.data,
                         0, max(b.shape[1], 1), out.ctypes.data, 0, max(n, 1), alpha, beta, None, None, 1)
        return out, flags


def build(shape: tuple[int, int] | None = None) -> Kernel:
    """The kernel for `shape` ((vw, mr), by default this CPU's `kernel_shape`), blocked for this CPU's caches.
    A shape the CPU cannot run raises RuntimeError."""
    import llvmlite.binding as llvm

    from msir.lowering import allocator, threads

    if not llvm.get_process_triple().startswith("x86_64"):
        raise RuntimeError("msir's GEMM micro-kernels are x86-64 only")
    features = host_features()
    best = kernel_shape(features)
    shape = shape or best
    if shape is None:
        raise RuntimeError("this CPU has neither AVX-512F nor AVX2 + FMA")
    if shape not in ((16, 12), (8, 6)) or (shape == (16, 12) and best != shape):
        raise RuntimeError(f"this CPU cannot run the {shape} micro-kernel")
    if not threads.load():
        raise RuntimeError(f"msir's thread pool, which runs the GEMM, is unavailable: {threads.load_error()}")
    allocator.install()  # the panels are its blocks
    vw, mr = shape
    kc, nc = blocking(vw, mr, cache_bytes(2), cache_bytes(3))
    return Kernel(vw, mr, kc, nc)


def load() -> bool:
    """Build (or load from the cache) this CPU's kernel and register `__msir_sgemm` (once per process;
    thread-safe). False when the CPU has no micro-kernel or the runtime fails."""
    return load_once(_state, _lock, _load)


def _load() -> None:
    import llvmlite.binding as llvm

    kernel = build()
    llvm.add_symbol(SYMBOL, kernel.address)
    _state["kernel"] = kernel


def kernel() -> Kernel:
    """This process's kernel (raises RuntimeError when `load()` fails)."""
    if not load():
        raise RuntimeError(f"msir's GEMM is unavailable: {load_error()}")
    return _state["kernel"]  # type: ignore[return-value]


def load_error() -> str | None:
    """Why `load()` failed, if it did."""
    return _state.get("error")  # type: ignore[return-value]
