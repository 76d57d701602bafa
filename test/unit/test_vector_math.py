"""Vector math: transcendental functions and reductions in vectorised loops.

msir-lower-to-llvm emits exp and tanh (and log where libmvec has no vector
variant) inline as range-reduced polynomials (msir.lowering.vector_math, tested
at the end of this file on dense sweeps against long double), and lowers
log/sin/cos/pow/log1p/expm1/... to libm calls that offer LLVM's loop vectoriser
glibc's libmvec variants (`_ZGVdN8v_expf` on AVX2, `_ZGVeN16v_expf` on
AVX-512) through the `vector-function-abi-variant` attribute; sqrt is LLVM's
intrinsic (a vector instruction). Float sums accumulate with `reassoc`, so
LLVM keeps 8-16 partial sums per loop.

Stated accuracy, checked here through `msir.jit`:
* float64: within 4 ulp of NumPy (glibc's libm), whichever route, everywhere including
  special values (inf, -inf, nan, +-0, denormals, huge arguments); libmvec
  measured at most 3 ulp on this machine.
* float32: within 4 ulp of the float64 result rounded to float32 (NumPy in
  float64 as the reference, so NumPy's own float32 error does not count twice).
* sqrt: exact (0 ulp).
* float32 sum of 1e6 (and 1e7) elements: within 2e-6 relative of NumPy's
  pairwise sum (measured 2e-7..5e-7; the bound grows like n/32 * 2^-24 in the
  worst case, as each of 32 partial sums is sequential).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import msir

MAX_ULP = 4
SIZES = [1, 7, 16, 17, 33, 1000, 4099]


# -- the functions, at module level so msir can read their source ------------


def f_exp(x):
    return np.exp(x)


def f_log(x):
    return np.log(x)


def f_sin(x):
    return np.sin(x)


def f_cos(x):
    return np.cos(x)


def f_tanh(x):
    return np.tanh(x)


def f_log1p(x):
    return np.log1p(x)


def f_expm1(x):
    return np.expm1(x)


def f_sqrt(x):
    return np.sqrt(x)


def f_pow(x, y):
    return x**y


def f_sum(x):
    return np.sum(x)


def f_mean(x):
    return np.mean(x)


def f_chain(x):
    return np.tanh(0.5 * x + 0.1) * (1 / (1 + np.exp(-x))) + x**2


UNARY = {
    "exp": f_exp,
    "log": f_log,
    "sin": f_sin,
    "cos": f_cos,
    "tanh": f_tanh,
    "log1p": f_log1p,
    "expm1": f_expm1,
    "sqrt": f_sqrt,
}
_JITTED = {name: msir.jit(f) for name, f in UNARY.items()}
_JITTED["pow"] = msir.jit(f_pow)

# (low, high, log-uniform) sampling ranges per function and dtype: the core
# range, plus where it matters tiny, huge, overflowing and underflowing values
RANGES = {
    "exp": {np.float32: [(-104, 89, False)], np.float64: [(-746, 710, False)]},
    "log": {np.float32: [(1e-45, 3e38, True)], np.float64: [(5e-324, 1e308, True)]},
    "sin": {
        np.float32: [(-1e4, 1e4, False), (1e5, 3e38, True)],
        np.float64: [(-1e4, 1e4, False), (1e5, 1e300, True)],
    },
    "cos": {
        np.float32: [(-1e4, 1e4, False), (1e5, 3e38, True)],
        np.float64: [(-1e4, 1e4, False), (1e5, 1e300, True)],
    },
    "tanh": {np.float32: [(-20, 20, False), (1e-30, 1, True)], np.float64: [(-30, 30, False), (1e-300, 1, True)]},
    "log1p": {np.float32: [(-1, 1, False), (1e-30, 1e30, True)], np.float64: [(-1, 1, False), (1e-300, 1e300, True)]},
    "expm1": {np.float32: [(-100, 89, False), (1e-30, 1, True)], np.float64: [(-100, 710, False), (1e-300, 1, True)]},
    "sqrt": {np.float32: [(0, 3e38, False)], np.float64: [(0, 1e308, False)]},
}

SPECIALS = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-3, 30.0, -30.0, 88.8, -104.0, 710.0, -746.0, 1e30, -1e30, 1e300]


def _denormals(dtype) -> list[float]:
    tiny = np.finfo(dtype).smallest_subnormal
    return [float(tiny), -float(tiny), float(tiny) * 1000, float(np.finfo(dtype).tiny) / 3]


def _ordered(a: np.ndarray) -> np.ndarray:
    """Floats as integers in the same order, so a difference counts ulps."""
    it = np.int32 if a.dtype == np.float32 else np.int64
    i = a.view(it).astype(np.int64)
    return np.where(i < 0, np.iinfo(it).min - i, i)


def ulp_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Per element: ulps between `got` and `ref` (in `got`'s dtype); 0 where
    both are NaN, huge where only one is; +0 and -0 are one ulp apart."""
    got = np.asarray(got)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.asarray(ref).astype(got.dtype)
    d = np.abs(_ordered(got) - _ordered(ref)).astype(np.float64)
    d[np.isnan(got) & np.isnan(ref)] = 0.0
    d[np.isnan(got) != np.isnan(ref)] = np.inf
    return d


def reference(f, *args):
    """NumPy's result: float64 for float64, float64 rounded for float32."""
    with np.errstate(all="ignore"):
        if args[0].dtype == np.float32:
            return f(*[a.astype(np.float64) for a in args]).astype(np.float32)
        return f(*args)


def assert_ulp(got, ref, inputs, limit=MAX_ULP, what=""):
    err = ulp_error(got, ref)
    if err.max() > limit:
        i = int(err.argmax())
        pos = np.unravel_index(i, err.shape)
        args = ", ".join(repr(a[pos]) for a in inputs)
        raise AssertionError(
            f"{what}: {err.max()} ulp at f({args}) = {got[pos]!r}, NumPy {ref[pos]!r}"
        )


def _sample(rng, lo, hi, log, n, dtype):
    if log:
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    else:
        x = rng.uniform(lo, hi, n)
    return x.astype(dtype)


# -- elementwise accuracy -------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_ranges(name, dtype):
    rng = np.random.default_rng(hash(name) % 1000)
    limit = 0 if name == "sqrt" else MAX_ULP
    for lo, hi, log in RANGES[name][dtype]:
        x = _sample(rng, lo, hi, log, 100_003, dtype)
        got = _JITTED[name](x)
        assert got.dtype == dtype
        assert_ulp(got, reference(UNARY[name], x), [x], limit, f"{name} {np.dtype(dtype)} on [{lo}, {hi}]")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_sizes_and_special_values(name, dtype, size):
    """Odd lengths run the vector body and the scalar remainder; the special
    values are spread over both."""
    rng = np.random.default_rng(size)
    pool = np.array(SPECIALS + _denormals(dtype), dtype=np.float64)
    with np.errstate(over="ignore"):
        pool = pool.astype(dtype)
    x = rng.uniform(-3, 3, size).astype(dtype)
    if name in ("log", "sqrt"):
        x = np.abs(x)
    where = rng.permutation(size)[: min(size, len(pool))]
    x[where] = rng.permutation(pool)[: len(where)]
    got = _JITTED[name](x)
    ref = reference(UNARY[name], x)
    assert_ulp(got, ref, [x], 0 if name == "sqrt" else MAX_ULP, f"{name} {np.dtype(dtype)}")
    # signed zeros, infinities and NaNs as NumPy (a NaN's sign bit is not
    # specified: glibc's log(-1) is -nan, NumPy's float32 one +nan)
    exact = (ref == 0) | np.isinf(ref)
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(ref[exact]))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_pow(dtype):
    rng = np.random.default_rng(5)
    n = 50_003
    x = _sample(rng, 1e-3, 100, True, n, dtype)
    y = rng.uniform(-15, 15, n).astype(dtype)
    assert_ulp(_JITTED["pow"](x, y), reference(f_pow, x, y), [x, y], MAX_ULP, "pow")
    # negative bases with integer exponents, and IEEE special cases
    xs = np.array([-2.0, -2.0, -2.0, 0.0, -0.0, 0.0, np.nan, 1.0, np.inf, -np.inf, -np.inf, 2.0, -1.0, 0.5, 1e-300, 3.0, -3.5], dtype)
    ys = np.array([3.0, 0.5, -2.0, -1.0, -1.0, 0.0, 0.0, np.nan, -1.0, 3.0, 2.0, np.inf, np.inf, -np.inf, 2.0, 200.0, 7.0], dtype)
    for k in (1, 4):  # through the scalar remainder and the vector body
        xk, yk = np.tile(xs, k), np.tile(ys, k)
        got = _JITTED["pow"](xk, yk)
        ref = reference(f_pow, xk, yk)
        assert_ulp(got, ref, [xk, yk], MAX_ULP, "pow special")
        exact = (ref == 0) | np.isinf(ref)
        np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(ref[exact]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_fused_chain(dtype):
    """W1's shape: several transcendental calls in one fused loop."""
    x = np.random.default_rng(2).standard_normal(10_007).astype(dtype)
    got = msir.jit(f_chain)(x)
    ref = reference(f_chain, x)
    # a composition: each step within 4 ulp, a few ulp of the result overall
    np.testing.assert_allclose(got, ref, rtol=16 * np.finfo(dtype).eps, atol=4 * np.finfo(dtype).eps)


# -- reductions -----------------------------------------------------------------


@pytest.mark.parametrize("n", [10**6, 10**7])
def test_sum_float32_reassociated(n):
    """Sums reassociate (partial sums per vector lane): within 2e-6 relative of
    NumPy's pairwise sum, and of the exact sum."""
    rng = np.random.default_rng(n)
    for x in (rng.random(n, dtype=np.float32), (rng.standard_normal(n) + 0.1).astype(np.float32)):
        exact = np.sum(x, dtype=np.float64)
        got = float(msir.jit(f_sum)(x))
        assert abs(got - float(np.sum(x))) <= 2e-6 * abs(exact)
        assert abs(got - exact) <= 2e-6 * abs(exact)
        assert abs(float(msir.jit(f_mean)(x)) - exact / n) <= 2e-6 * abs(exact / n)


def test_sum_small_and_odd_sizes():
    for n in (1, 3, 17, 129, 1001):
        x = np.random.default_rng(n).random(n).astype(np.float32)
        np.testing.assert_allclose(msir.jit(f_sum)(x), np.sum(x), rtol=1e-6)
    x = np.array([1.0, np.inf, 2.0] * 11, np.float32)
    assert msir.jit(f_sum)(x) == np.inf
    x[5] = np.nan
    assert np.isnan(msir.jit(f_sum)(x))


# -- the generated code ---------------------------------------------------------


def _host_vector_abi() -> str:
    from msir.lowering.vector_abi import host_vector_abi

    return host_vector_abi()


def _optimised_ir(fn, *args) -> str:
    from msir.compiler import compile_module
    from msir.frontend.driver import spec_of, trace

    traced = trace(fn, [spec_of(a) for a in args])
    return compile_module(traced.module, traced.entry).native_module.llvm_ir


_LOOP = """
func.func @f(%a: memref<{n}x{t}>, %o: memref<{n}x{t}>) attributes {{msir.num_outputs = 1 : i64}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {n} : index
  scf.for %i = %c0 to %n step %c1 {{
    %x = memref.load %a[%i] : memref<{n}x{t}>
    %y = math.{fn} %x : {t}
    memref.store %y, %o[%i] : memref<{n}x{t}>
  }}
  func.return
}}
"""


def _loop_module(fn: str, t: str, n: int = 1000, **options):
    """`out[i] = math.fn(in[i])` lowered by msir-lower-to-llvm with `options`."""
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, math, memref, scf
    from xdsl.parser import Parser

    from msir.lowering.to_llvm import MsirLowerToLlvm

    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, memref.MemRef, scf.Scf):
        ctx.load_dialect(d)
    module = Parser(ctx, _LOOP.format(n=n, t=t, fn=fn)).parse_module()
    MsirLowerToLlvm(**options).apply(ctx, module)
    return module


def _calls(ir: str) -> set[str]:
    return set(re.findall(r"call [^@]*@([\w.]+)\(", ir))


@pytest.mark.skipif(
    _host_vector_abi() not in ("avx2", "avx512"), reason="needs AVX2 or AVX-512 and libmvec"
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_libm_route_calls_libmvec(dtype):
    """math_impl=libm (and sin, which has no inline polynomial): libmvec."""
    from msir.lowering.jit import compile_llvm_module

    t = "f32" if dtype == np.float32 else "f64"
    suffix = "f" if dtype == np.float32 else ""
    lanes = {"avx512": [16, 8], "avx2": [8]}[_host_vector_abi()] if t == "f32" else {"avx512": [8, 4], "avx2": [4]}[_host_vector_abi()]
    for fn, options in (("exp", {"math_impl": "libm"}), ("sin", {})):
        ir = compile_llvm_module(_loop_module(fn, t, **options)).llvm_ir
        variants = {f"_ZGV{isa}N{n}v_{fn}{suffix}" for isa in "ed" for n in lanes}
        assert _calls(ir) & variants, f"no call to {variants} in the optimised IR: {sorted(_calls(ir))}"
        assert not re.search(rf"@llvm\.{fn}\.v\d+f(32|64)", ir)


@pytest.mark.parametrize("fn", ["exp", "tanh", "log"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_inline_route_is_a_vector_loop_without_calls(fn, dtype):
    """The polynomial is vectorised inline: vector fmuladd, no call at all
    (for any vector ABI, libmvec or not)."""
    from msir.lowering.jit import compile_llvm_module

    t = "f32" if dtype == np.float32 else "f64"
    for abi in ("host", "none"):
        ir = compile_llvm_module(_loop_module(fn, t, vector_abi=abi, math_impl="inline")).llvm_ir
        body = ir.split("attributes #")[0]
        external = {c for c in _calls(body) if not c.startswith("llvm.")} - {"f"}
        assert not external, sorted(external)
        assert re.search(rf"@llvm\.fmuladd\.v\d+{t}", body), body[:2000]
        assert "fast" not in body and "reassoc" not in body


def test_fused_chain_is_one_vector_loop():
    """W1's shape: tanh and exp inline in one vector loop, no math calls."""
    ir = _optimised_ir(f_chain, np.ones(4096, np.float32))
    called = _calls(ir)
    assert not any("tanh" in c or "exp" in c for c in called), sorted(called)
    assert "llvm.fmuladd.v8f32" in called or "llvm.fmuladd.v16f32" in called, sorted(called)


def test_sum_is_reassociated_only_at_the_accumulator():
    ir = _optimised_ir(f_sum, np.ones(4096, np.float32))
    assert re.search(r"fadd reassoc <\d+ x float>", ir)
    ir = _optimised_ir(f_chain, np.ones(4096, np.float32))
    assert "reassoc" not in ir and "fast" not in ir.split("attributes #")[0]


def test_without_libmvec_variants_math_stays_scalar_and_correct():
    """vector_abi=none, math_impl=libm: the intrinsics (scalar libm calls
    after codegen)."""
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, math, memref, scf
    from xdsl.parser import Parser

    from msir.lowering.jit import compile_llvm_module
    from msir.lowering.to_llvm import MsirLowerToLlvm

    src = """
func.func @g(%a: memref<37xf32>, %o: memref<37xf32>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 37 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<37xf32>
    %e = math.exp %x : f32
    %t = math.tanh %e : f32
    memref.store %t, %o[%i] : memref<37xf32>
  }
  func.return
}
"""
    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, memref.MemRef, scf.Scf):
        ctx.load_dialect(d)
    module = Parser(ctx, src).parse_module()
    MsirLowerToLlvm(vector_abi="none", math_impl="libm").apply(ctx, module)
    assert "_ZGV" not in str(module) and '"llvm.exp.f32"' in str(module)
    native = compile_llvm_module(module)
    assert "_ZGV" not in native.llvm_ir
    x = np.linspace(-5, 3, 37, dtype=np.float32)
    (out,) = native.function("g")(x)
    assert_ulp(out, reference(lambda v: np.tanh(np.exp(v)), x), [x], MAX_ULP, "tanh(exp)")


# -- the inline polynomials (msir.lowering.vector_math) ---------------------------
#
# Compiled as a bare loop with math_impl=inline, so they are tested whatever route
# msir.jit takes by default; the reference is NumPy in long double (x87 extended,
# 64-bit significand) rounded once to the dtype, i.e. the correctly rounded result
# up to a double rounding of 2**-11 ulp at most.

# the stated bound per (function, dtype), in ulps of the correctly rounded result
# (with FMA; without, tanh f64 measured 3 ulp: `_inline_ulp`)
INLINE_ULP = {
    ("exp", "f32"): 1,
    ("exp", "f64"): 1,
    ("tanh", "f32"): 2,
    ("tanh", "f64"): 2,
    ("log", "f32"): 1,
    ("log", "f64"): 1,
}
LONGDOUBLE_FN = {"exp": np.exp, "tanh": np.tanh, "log": np.log}
_needs_long_double = pytest.mark.skipif(
    np.finfo(np.longdouble).nmant < 63, reason="needs x87 extended long double for the reference"
)

# the whole non-trivial range of each function (beyond it the result is a
# constant, checked with the special values)
SWEEP = {
    ("exp", "f32"): (-104.0, 89.0),
    ("exp", "f64"): (-746.0, 710.0),
    ("tanh", "f32"): (-10.0, 10.0),
    ("tanh", "f64"): (-20.0, 20.0),
    ("log", "f32"): (float(np.finfo(np.float32).smallest_subnormal), float(np.finfo(np.float32).max)),
    ("log", "f64"): (float(np.finfo(np.float64).smallest_subnormal), float(np.finfo(np.float64).max)),
}
# where the function varies most: a uniform sample there too
CORE = {"exp": (-10.0, 10.0), "tanh": (-2.0, 2.0), "log": (0.25, 4.0)}

_INLINE_CACHE: dict = {}


def _inline(fn: str, dtype, n: int, fma: bool = True):
    """The compiled loop `out[i] = fn(in[i])` for n elements, inline route;
    fma=False emulates a target without FMA (fmuladd as a multiply and an add)."""
    from msir.lowering import vector_math
    from msir.lowering.jit import compile_llvm_module

    t = "f32" if dtype == np.float32 else "f64"
    key = (fn, t, n, fma)
    if key not in _INLINE_CACHE:
        saved = vector_math._Builder.fma
        if not fma:
            vector_math._Builder.fma = lambda self, a, b, c: self.add(self.mul(a, b), c)
        try:
            module = _loop_module(fn, t, n, math_impl="inline")
        finally:
            vector_math._Builder.fma = saved
        native = compile_llvm_module(module)
        assert fma == ("fmuladd" in native.llvm_ir)
        _INLINE_CACHE[key] = native.function("f")
    return _INLINE_CACHE[key]


def _ordered_sweep(lo: float, hi: float, n: int, dtype) -> np.ndarray:
    """n floats evenly spaced in *representation* between lo and hi: every
    binade (denormals included) gets points in proportion to its floats."""
    it = np.int32 if dtype == np.float32 else np.int64
    a, b = _ordered(np.array([lo, hi], dtype))
    k = np.linspace(float(a), float(b), n).astype(np.int64)
    k = np.unique(k)
    bits = np.where(k < 0, np.iinfo(it).min - k, k).astype(it)
    return bits.view(dtype)


def _inline_inputs(fn: str, dtype, n: int) -> np.ndarray:
    t = "f32" if dtype == np.float32 else "f64"
    lo, hi = SWEEP[(fn, t)]
    rng = np.random.default_rng(7)
    ordered = _ordered_sweep(lo, hi, n // 2, dtype)
    clo, chi = CORE[fn]
    core = rng.uniform(clo, chi, n - len(ordered)).astype(dtype)
    return np.concatenate([ordered, core])


def _long_double_reference(fn: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return LONGDOUBLE_FN[fn](x.astype(np.longdouble)).astype(x.dtype)


@_needs_long_double
@pytest.mark.parametrize("fma", [True, False], ids=["fma", "no-fma"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("fn", ["exp", "tanh", "log"])
def test_inline_accuracy_dense_sweep(fn, dtype, fma):
    """10**6 points: half spread over every float of the whole range, half
    uniform in the core range; within the stated ulps of the correctly
    rounded result, with FMA; without, tanh may lose one more ulp."""
    n = 10**6
    x = _inline_inputs(fn, dtype, n)
    f = _inline(fn, dtype, len(x), fma)
    (got,) = f(x)
    t = "f32" if dtype == np.float32 else "f64"
    limit = INLINE_ULP[(fn, t)] + (fn == "tanh" and not fma)
    assert_ulp(got, _long_double_reference(fn, x), [x], limit, f"inline {fn} {t}")


def _special_values(fn: str, dtype) -> list[tuple[float, float]]:
    """(x, exact result) pairs."""
    fi = np.finfo(dtype)
    tiny, huge = float(fi.smallest_subnormal), float(fi.max)
    inf, nan = np.inf, np.nan
    if fn == "exp":
        over = 89.0 if dtype == np.float32 else 710.0
        under = -104.0 if dtype == np.float32 else -746.0
        return [(0.0, 1.0), (-0.0, 1.0), (inf, inf), (-inf, 0.0), (nan, nan), (over, inf),
                (huge, inf), (under, 0.0), (-huge, 0.0), (tiny, 1.0), (-tiny, 1.0)]
    if fn == "tanh":
        sat = 9.1 if dtype == np.float32 else 19.1
        return [(0.0, 0.0), (-0.0, -0.0), (inf, 1.0), (-inf, -1.0), (nan, nan), (sat, 1.0),
                (-sat, -1.0), (huge, 1.0), (-huge, -1.0), (tiny, tiny), (-tiny, -tiny),
                (float(fi.tiny), float(fi.tiny))]
    return [(0.0, -inf), (-0.0, -inf), (inf, inf), (-inf, nan), (nan, nan), (-1.0, nan),
            (-tiny, nan), (1.0, 0.0), (2.0 ** -10, -10 * np.log(2.0)), (huge, float(np.log(np.longdouble(huge))))]


@pytest.mark.parametrize("fma", [True, False], ids=["fma", "no-fma"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("fn", ["exp", "tanh", "log"])
def test_inline_special_values(fn, dtype, fma):
    """Infinities, NaN, signed zeros, overflow, underflow, saturation, log of
    0 and of negatives: exact, in the vector body and in the scalar remainder."""
    pairs = _special_values(fn, dtype)
    xs = np.array([p[0] for p in pairs], dtype)
    with np.errstate(over="ignore"):
        want = np.array([p[1] for p in pairs], dtype)
    for reps in (1, 9):  # 11 or 99 elements: the remainder loop, then the vector body too
        x, w = np.tile(xs, reps), np.tile(want, reps)
        (got,) = _inline(fn, dtype, len(x), fma)(x)
        assert_ulp(got, w, [x], 0 if fn != "log" else 1, f"inline {fn} special")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(w))
        exact = np.isinf(w) | (w == 0) | (np.abs(w) == 1)
        np.testing.assert_array_equal(got[exact], w[exact])
        np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(w[exact]))


def test_exp_gradual_underflow_is_rounded_once():
    """Results in the denormal range are the correctly rounded denormal (the
    scaling by 2**k rounds once), not flushed to zero."""
    for dtype, lo, hi in ((np.float32, -103.9, -87.4), (np.float64, -745.1, -708.4)):
        x = np.linspace(lo, hi, 20_011).astype(dtype)
        (got,) = _inline("exp", dtype, len(x))(x)
        ref = _long_double_reference("exp", x)
        assert (got > 0).all() and (got < np.finfo(dtype).tiny).any()
        assert_ulp(got, ref, [x], 1, "exp denormal results")


def f_fused_three(x):
    return np.exp(x) + np.tanh(x) * np.log(x)


@_needs_long_double
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_inline_functions_fused_in_one_loop(dtype):
    """exp, tanh and log in one fused loop through msir.jit: each term within a
    few ulps, so the sum within 4 eps of its terms' magnitudes."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(1e-3, 20, 30_001), _denormals(dtype)[:1], [np.finfo(dtype).tiny]]).astype(dtype)
    got = msir.jit(f_fused_three)(x)
    xl = x.astype(np.longdouble)
    e, t, lg = np.exp(xl), np.tanh(xl), np.log(xl)
    ref = e + t * lg
    scale = np.abs(e) + np.abs(t * lg)
    err = np.abs(got.astype(np.longdouble) - ref) / scale
    assert float(err.max()) <= 4 * float(np.finfo(dtype).eps), float(err.max())


def test_math_impl_option_is_checked():
    from msir.errors import CompileError

    with pytest.raises(CompileError, match="unknown math_impl 'fast'"):
        _loop_module("exp", "f32", math_impl="fast")


def test_default_route_follows_the_measured_table():
    """auto: the table of vector_math within the per-function budget, and
    inline wherever libmvec has no vector variant (the alternative being a
    scalar call)."""
    from xdsl.dialects.builtin import f32, f64

    from msir.lowering import vector_math as vm

    over = vm.MAX_INLINE_PER_FUNCTION + 1
    for (fn, t), inline in vm.INLINE_BY_DEFAULT.items():
        ty = f32 if t == "f32" else f64
        assert vm.choose(fn, ty, "auto", True) is inline
        assert vm.choose(fn, ty, "auto", True, over) is False
        assert vm.choose(fn, ty, "auto", False, over) is True
        assert vm.choose(fn, ty, "libm", False) is False
        assert vm.choose(fn, ty, "inline", True, over) is True
    assert vm.choose("sin", f32, "inline", True) is False


def f_nine_exps(x):
    return (
        np.exp(x) + np.exp(x * 2.0) + np.exp(x * 3.0) + np.exp(x * 4.0) + np.exp(x * 5.0)
        + np.exp(x * 6.0) + np.exp(x * 7.0) + np.exp(x * 8.0) + np.exp(x * 9.0)
    )


def f_eight_exps(x):
    return (
        np.exp(x) + np.exp(x * 2.0) + np.exp(x * 3.0) + np.exp(x * 4.0) + np.exp(x * 5.0)
        + np.exp(x * 6.0) + np.exp(x * 7.0) + np.exp(x * 8.0)
    )


@pytest.mark.skipif(
    _host_vector_abi() not in ("avx2", "avx512"), reason="needs AVX2 or AVX-512 and libmvec"
)
def test_inline_budget_per_function():
    """auto inlines up to MAX_INLINE_PER_FUNCTION math ops per function; past
    it, all take libmvec (compile time), with the same values."""
    from msir.lowering import vector_math as vm

    assert vm.MAX_INLINE_PER_FUNCTION == 8
    x = np.linspace(-2, 2, 1001).astype(np.float32)
    few = _calls(_optimised_ir(f_eight_exps, x))
    many = _calls(_optimised_ir(f_nine_exps, x))
    assert not any(c == "expf" or c.endswith("_expf") for c in few), sorted(few)
    assert any(c.startswith("_ZGV") and c.endswith("_expf") for c in many), sorted(many)
    for f in (f_eight_exps, f_nine_exps):
        # against NumPy in float32 (the products x*k round as in msir)
        np.testing.assert_allclose(msir.jit(f)(x), f(x), rtol=8 * np.finfo(np.float32).eps)
