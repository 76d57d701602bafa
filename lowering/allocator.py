"""msir's buffer allocator: a bounded cache of large blocks, in native code.

Every buffer compiled code allocates (`memref.alloc`: intermediates, tapes and
the results it hands to NumPy), every large output buffer `lowering.jit`
allocates for a call and the packed panels of msir's GEMM (`lowering.gemm_kernel`)
come from `__msir_alloc` and go back through
`__msir_free` (for outputs: when the NumPy array dies). Large blocks are not returned to the C library at once: they wait
in a small cache and serve the next allocation of the same size class. Without
it, each call of a jitted function gets fresh pages from the kernel for every
large buffer (glibc serves large requests with `mmap` and unmaps them on
`free`), and the first touch of each 4 KiB page costs ~1.7 µs on this kind of
machine: 1,700 page faults (~3 ms) per call of an MLP training step.

Contract
--------
* `__msir_alloc(n)` (n > 0, a multiple of 64) returns a 64-byte aligned block of
  at least n bytes, uninitialised, or null if the C library has no memory or
  n > 2^48. `__msir_free(p)` accepts null and any pointer `__msir_alloc`
  returned, from any thread. Both are thread-safe (one spinlock, held for a
  scan of at most `SLOTS` entries; never across a system call except `free`).
* Blocks of at least `CACHED_FROM` bytes are rounded up to a size class (eight
  classes per power of two, so at most 12.5 % more than asked) and recycled;
  smaller ones are allocated exactly and freed at once.
* The cache holds at most `SLOTS` blocks and `limit` bytes (environment
  variable `MSIR_BUFFER_CACHE_MB`, default 512; 0 disables caching). When a
  freed block does not fit, cached blocks are released in round-robin order until it
  does, so the cache follows a program whose shapes change.
  `release_cached()` frees every cached block.
* Each block has a 64-byte header holding its capacity, so `__msir_free` needs
  no size, and a block's owner can be a NumPy array (`lowering.jit`).

The runtime is one LLVM IR module compiled once per machine (its object code
kept beside the compile cache by `runtime_object`) and loaded once per process; its two
functions are registered with LLVM's symbol table, so every module the JIT
compiles or loads from the persistent cache links against them.
"""

from __future__ import annotations

import ctypes
import os
import threading

from llvmlite import binding as llvm
from msir.lowering import runtime_object

ALLOC = "__msir_alloc"
FREE = "__msir_free"
SLOTS = 256
CACHED_FROM = 64 << 10
MAX_BYTES = 1 << 48
HEADER = 64

_IR = f"""
@lock = internal global i32 0
@cached_bytes = global i64 0
@limit = global i64 0
@cursor = internal global i64 0
@caps = internal global [{SLOTS} x i64] zeroinitializer
@blocks = internal global [{SLOTS} x ptr] zeroinitializer

declare noalias ptr @aligned_alloc(i64, i64)
declare void @free(ptr)
declare i64 @llvm.ctlz.i64(i64, i1)

define internal void @acquire() {{
entry:
  br label %spin
spin:
  %r = cmpxchg weak ptr @lock, i32 0, i32 1 acquire monotonic
  %ok = extractvalue {{ i32, i1 }} %r, 1
  br i1 %ok, label %done, label %spin
done:
  ret void
}}

define internal void @release() {{
  store atomic i32 0, ptr @lock release, align 4
  ret void
}}

; the capacity of a block for n bytes: n rounded to 64 below CACHED_FROM,
; else rounded up to a multiple of 1/8 of n's highest power of two
define internal i64 @capacity(i64 %n) {{
entry:
  %small = icmp ult i64 %n, {CACHED_FROM}
  br i1 %small, label %exact, label %classed
exact:
  %a = add i64 %n, 63
  %e = and i64 %a, -64
  ret i64 %e
classed:
  %lz = call i64 @llvm.ctlz.i64(i64 %n, i1 true)
  %bit = sub i64 63, %lz
  %p = shl i64 1, %bit
  %step = lshr i64 %p, 3
  %mask = sub i64 %step, 1
  %b = add i64 %n, %mask
  %not = xor i64 %mask, -1
  %c = and i64 %b, %not
  ret i64 %c
}}

; free cached blocks, oldest first, until `need` more bytes fit (under the lock)
define internal void @evict(i64 %need) {{
entry:
  br label %loop
loop:
  %k = phi i64 [0, %entry], [%k1, %next]
  %tot = load i64, ptr @cached_bytes
  %lim = load i64, ptr @limit
  %want = add i64 %tot, %need
  %fits = icmp ule i64 %want, %lim
  %end = icmp eq i64 %k, {SLOTS}
  %stop = or i1 %fits, %end
  br i1 %stop, label %done, label %visit
visit:
  %cur = load i64, ptr @cursor
  %cur1 = add i64 %cur, 1
  %wrapped = urem i64 %cur1, {SLOTS}
  store i64 %wrapped, ptr @cursor
  %cp = getelementptr [{SLOTS} x i64], ptr @caps, i64 0, i64 %cur
  %c = load i64, ptr %cp
  %empty = icmp eq i64 %c, 0
  br i1 %empty, label %next, label %drop
drop:
  %bp = getelementptr [{SLOTS} x ptr], ptr @blocks, i64 0, i64 %cur
  %blk = load ptr, ptr %bp
  store i64 0, ptr %cp
  %t2 = load i64, ptr @cached_bytes
  %t3 = sub i64 %t2, %c
  store i64 %t3, ptr @cached_bytes
  call void @free(ptr %blk)
  br label %next
next:
  %k1 = add i64 %k, 1
  br label %loop
done:
  ret void
}}

define noalias ptr @{ALLOC}(i64 %n) {{
entry:
  %huge = icmp ugt i64 %n, {MAX_BYTES}
  br i1 %huge, label %fail, label %sized
sized:
  %cap = call i64 @capacity(i64 %n)
  %big = icmp uge i64 %cap, {CACHED_FROM}
  br i1 %big, label %search, label %fresh
search:
  call void @acquire()
  br label %loop
loop:
  %i = phi i64 [0, %search], [%i1, %next]
  %cp = getelementptr [{SLOTS} x i64], ptr @caps, i64 0, i64 %i
  %c = load i64, ptr %cp
  %hit = icmp eq i64 %c, %cap
  br i1 %hit, label %take, label %next
next:
  %i1 = add i64 %i, 1
  %end = icmp eq i64 %i1, {SLOTS}
  br i1 %end, label %miss, label %loop
take:
  store i64 0, ptr %cp
  %bp = getelementptr [{SLOTS} x ptr], ptr @blocks, i64 0, i64 %i
  %base = load ptr, ptr %bp
  %tot = load i64, ptr @cached_bytes
  %tot1 = sub i64 %tot, %cap
  store i64 %tot1, ptr @cached_bytes
  call void @release()
  %user = getelementptr i8, ptr %base, i64 {HEADER}
  ret ptr %user
miss:
  call void @release()
  br label %fresh
fresh:
  %total = add i64 %cap, {HEADER}
  %nb = call ptr @aligned_alloc(i64 64, i64 %total)
  %null = icmp eq ptr %nb, null
  br i1 %null, label %fail, label %ok
ok:
  store i64 %cap, ptr %nb
  %u = getelementptr i8, ptr %nb, i64 {HEADER}
  ret ptr %u
fail:
  ret ptr null
}}

define void @{FREE}(ptr %p) {{
entry:
  %isnull = icmp eq ptr %p, null
  br i1 %isnull, label %out, label %go
go:
  %base = getelementptr i8, ptr %p, i64 -{HEADER}
  %cap = load i64, ptr %base
  %big = icmp uge i64 %cap, {CACHED_FROM}
  %lim = load i64, ptr @limit
  %within = icmp ule i64 %cap, %lim
  %keep = and i1 %big, %within
  br i1 %keep, label %try, label %drop
try:
  call void @acquire()
  call void @evict(i64 %cap)
  %tot = load i64, ptr @cached_bytes
  %new = add i64 %tot, %cap
  %lim2 = load i64, ptr @limit
  %fits = icmp ule i64 %new, %lim2
  br i1 %fits, label %loop, label %full
loop:
  %i = phi i64 [0, %try], [%i1, %next]
  %cp = getelementptr [{SLOTS} x i64], ptr @caps, i64 0, i64 %i
  %c = load i64, ptr %cp
  %empty = icmp eq i64 %c, 0
  br i1 %empty, label %put, label %next
next:
  %i1 = add i64 %i, 1
  %end = icmp eq i64 %i1, {SLOTS}
  br i1 %end, label %full, label %loop
put:
  %bp = getelementptr [{SLOTS} x ptr], ptr @blocks, i64 0, i64 %i
  store ptr %base, ptr %bp
  store i64 %cap, ptr %cp
  store i64 %new, ptr @cached_bytes
  call void @release()
  ret void
full:
  call void @release()
  br label %drop
drop:
  call void @free(ptr %base)
  br label %out
out:
  ret void
}}

define void @release_cached() {{
entry:
  call void @acquire()
  %lim = load i64, ptr @limit
  store i64 0, ptr @limit
  call void @evict(i64 1)
  store i64 %lim, ptr @limit
  call void @release()
  ret void
}}
"""

_engine = None
_install_lock = threading.Lock()
_alloc_fn = None
_free_fn = None
_release_fn = None
_cached_bytes: ctypes.c_int64 | None = None
_limit: ctypes.c_int64 | None = None


_TARGET_MACHINE = {"opt": 0, "codemodel": "jitdefault"}
"""O0 (fast instruction selection), as the thread pool's runtime: code generation
takes 3-6 ms instead of 10-20 ms at O3, and the hot path is a lock, a size
class and at most one scan of 256 slots per large block."""


def install() -> None:
    """Compile the runtime (its object code kept by `runtime_object`, so later
    processes only load it) and register `__msir_alloc`/`__msir_free` with
    LLVM's symbol table. Once per process; thread-safe (the JIT's first compile and
    `gemm_kernel.build`, whose panels are its blocks, both call it)."""
    if _engine is None:
        with _install_lock:
            if _engine is None:
                _install()


def _install() -> None:
    global _engine, _alloc_fn, _free_fn, _release_fn, _cached_bytes, _limit
    engine = runtime_object.compile_cached("allocator-runtime", _IR, _TARGET_MACHINE, ALLOC)
    for name in (ALLOC, FREE):
        llvm.add_symbol(name, engine.get_function_address(name))
    _alloc_fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)(engine.get_function_address(ALLOC))
    _free_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.get_function_address(FREE))
    _release_fn = ctypes.CFUNCTYPE(None)(engine.get_function_address("release_cached"))
    _cached_bytes = ctypes.c_int64.from_address(engine.get_global_value_address("cached_bytes"))
    _limit = ctypes.c_int64.from_address(engine.get_global_value_address("limit"))
    _limit.value = _limit_from_env()
    _engine = engine


def _limit_from_env() -> int:
    text = os.environ.get("MSIR_BUFFER_CACHE_MB", "512")
    try:
        mb = float(text)
    except ValueError:
        raise ValueError(f"MSIR_BUFFER_CACHE_MB must be a number of MiB, got {text!r}") from None
    return max(0, int(mb * (1 << 20)))


def alloc(nbytes: int) -> int:
    """A block of at least `nbytes` (the DPS outputs `lowering.jit` allocates
    for large results); MemoryError if there is none."""
    assert _alloc_fn is not None, "the allocator runtime is not installed"
    ptr = _alloc_fn(max(64, -(-nbytes // 64) * 64))
    if not ptr:
        raise MemoryError(f"msir could not allocate {nbytes} bytes for an output")
    return ptr


def free(ptr: int) -> None:
    """Give back a block `__msir_alloc` returned (the owner of a NumPy result)."""
    assert _free_fn is not None, "the allocator runtime is not installed"
    _free_fn(ptr)


def cached_bytes() -> int:
    """Bytes held in the cache now (0 before the runtime is installed)."""
    return _cached_bytes.value if _cached_bytes is not None else 0


def release_cached() -> None:
    """Return every cached block to the C library."""
    if _release_fn is not None:
        _release_fn()
