"""The BLAS behind `msir.matmul`: OpenBLAS from the PyPI package `scipy-openblas32`.

Why a BLAS and not a kernel of msir's own
=========================================
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
and compiles, once per process in a tiny engine of its own, two trampolines::

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

A module that references `__msir_gemm_*` must be compiled in a process where
`load()` succeeded; the lowering calls it before emitting such a call (a
persistent compile cache that loads object code must call it too).

Threads
=======
OpenBLAS starts its own thread pool. Its size is msir's thread count
(`msir.lowering.threads.get_num_threads()`: `msir.set_num_threads(n)`, else
`MSIR_NUM_THREADS`, else `OMP_NUM_THREADS`, else the usable CPUs), applied at
`load()` and by every `msir.set_num_threads`.

Disabling
=========
`MSIR_BLAS=0` in the environment (read at import) or `msir.lowering.blas.enabled =
False` makes `available()` false: matmuls lowered afterwards use msir's loop
kernel, with the same results up to float rounding. So does a missing or
unloadable library.
"""

from __future__ import annotations

import ctypes
import os
import threading

from msir.lowering.load_once import load_once

LIBRARY_NAME = "libscipy_openblas.so"
GEMM_SYMBOLS = {"f32": "__msir_gemm_f32", "f64": "__msir_gemm_f64"}
GEMM_UPDATE_SYMBOLS = {"f32": "__msir_gemm_update_f32", "f64": "__msir_gemm_update_f64"}

enabled = os.environ.get("MSIR_BLAS", "1").strip().lower() not in ("0", "false", "no", "off")
"""Whether the lowering may call the BLAS (tests switch it off to check the
loop kernel)."""

_lock = threading.Lock()
_state: dict[str, object] = {}  # "ok": bool, "engine", "cdll", "path", "error"

_TRAMPOLINE = """
declare void @scipy_cblas_{p}gemm(i32, i32, i32, i32, i32, i32, {t}, ptr, i32, ptr, i32, {t}, ptr, i32)

define internal void @gemm_{p}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k,
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

define void @{name}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k,
                    ptr %a, i64 %ao, i64 %lda, ptr %b, i64 %bo, i64 %ldb,
                    ptr %c, i64 %co, i64 %ldc) {{
  call void @gemm_{p}(i64 %ta, i64 %tb, i64 %m, i64 %n, i64 %k, ptr %a, i64 %ao, i64 %lda,
                      ptr %b, i64 %bo, i64 %ldb, ptr %c, i64 %co, i64 %ldc, {t} 1.0, {t} 0.0)
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
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.load_library_permanently(path)
    for p in "sd":
        if not llvm.address_of_symbol(f"scipy_cblas_{p}gemm"):
            raise RuntimeError(f"{path} does not export scipy_cblas_{p}gemm")
    ir = "declare i64 @llvm.smax.i64(i64, i64)\ndeclare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)\n" + "".join(
        _TRAMPOLINE.format(p=p, t=t, name=GEMM_SYMBOLS[k], update=GEMM_UPDATE_SYMBOLS[k], size=size)
        for p, t, k, size in (("s", "float", "f32", 4), ("d", "double", "f64", 8))
    )
    mod = llvm.parse_assembly(ir)
    mod.verify()
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(opt=2, codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    for name in (*GEMM_SYMBOLS.values(), *GEMM_UPDATE_SYMBOLS.values()):
        llvm.add_symbol(name, engine.get_function_address(name))
    cdll = ctypes.CDLL(path)
    cdll.scipy_openblas_set_num_threads.argtypes = [ctypes.c_int]
    cdll.scipy_openblas_set_num_threads.restype = None
    cdll.scipy_openblas_get_num_threads.restype = ctypes.c_int
    cdll.scipy_openblas_get_corename.restype = ctypes.c_char_p
    _state.update(engine=engine, cdll=cdll, path=path)
    from msir.lowering import threads

    cdll.scipy_openblas_set_num_threads(threads.get_num_threads())


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
        _state["cdll"].scipy_openblas_set_num_threads(int(n))  # type: ignore[attr-defined]


def get_num_threads() -> int | None:
    """OpenBLAS's thread count (None without the library)."""
    if not load():
        return None
    return int(_state["cdll"].scipy_openblas_get_num_threads())  # type: ignore[attr-defined]


def core_name() -> str | None:
    """The kernel family OpenBLAS picked for this CPU ("Haswell", "Zen", "SkylakeX"...)."""
    if not load():
        return None
    return _state["cdll"].scipy_openblas_get_corename().decode()  # type: ignore[attr-defined]
