"""Vector math: transcendental functions and reductions in vectorised loops.

msir-lower-to-llvm lowers exp/log/sin/cos/pow/tanh/log1p/expm1/... to libm calls
that offer LLVM's loop vectoriser glibc's libmvec variants (`_ZGVdN8v_expf` on
AVX2, `_ZGVeN16v_expf` on AVX-512) through the `vector-function-abi-variant`
attribute; sqrt is LLVM's intrinsic (a vector instruction). Float sums
accumulate with `reassoc`, so LLVM keeps 8-16 partial sums per loop.

Stated accuracy, checked here through `msir.jit`:
* float64: within 4 ulp of NumPy (glibc's libm), everywhere including
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
    from msir.lowering.to_llvm import _host_vector_abi

    return _host_vector_abi()


def _optimised_ir(fn, *args) -> str:
    from msir.compiler import compile_module
    from msir.frontend.driver import spec_of, trace

    traced = trace(fn, [spec_of(a) for a in args])
    return compile_module(traced.module, traced.entry).native_module.llvm_ir


@pytest.mark.skipif(
    _host_vector_abi() not in ("avx2", "avx512"), reason="needs AVX2 or AVX-512 and libmvec"
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_exp_loop_calls_libmvec(dtype):
    ir = _optimised_ir(f_exp, np.ones(1000, dtype))
    variants = (
        {"avx512": ["_ZGVeN16v_expf", "_ZGVdN8v_expf"], "avx2": ["_ZGVdN8v_expf"]}
        if dtype == np.float32
        else {"avx512": ["_ZGVeN8v_exp", "_ZGVdN4v_exp"], "avx2": ["_ZGVdN4v_exp"]}
    )[_host_vector_abi()]
    called = set(re.findall(r"call [^@]*@(\w+)\(", ir))
    assert called & set(variants), f"no call to {variants} in the optimised IR: {sorted(called)}"
    assert not re.search(r"@llvm\.exp\.v\d+f(32|64)", ir)


@pytest.mark.skipif(
    _host_vector_abi() not in ("avx2", "avx512"), reason="needs AVX2 or AVX-512 and libmvec"
)
def test_fused_chain_is_one_vector_loop():
    ir = _optimised_ir(f_chain, np.ones(4096, np.float32))
    called = set(re.findall(r"call [^@]*@(\w+)\(", ir))
    assert any(c.startswith("_ZGV") and c.endswith("_tanhf") for c in called), sorted(called)
    assert any(c.startswith("_ZGV") and c.endswith("_expf") for c in called), sorted(called)


def test_sum_is_reassociated_only_at_the_accumulator():
    ir = _optimised_ir(f_sum, np.ones(4096, np.float32))
    assert re.search(r"fadd reassoc <\d+ x float>", ir)
    ir = _optimised_ir(f_chain, np.ones(4096, np.float32))
    assert "reassoc" not in ir and "fast" not in ir.split("attributes #")[0]


def test_without_libmvec_variants_math_stays_scalar_and_correct():
    """vector_abi=none: the intrinsics (scalar libm calls after codegen)."""
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
    MsirLowerToLlvm(vector_abi="none").apply(ctx, module)
    assert "_ZGV" not in str(module) and '"llvm.exp.f32"' in str(module)
    native = compile_llvm_module(module)
    assert "_ZGV" not in native.llvm_ir
    x = np.linspace(-5, 3, 37, dtype=np.float32)
    (out,) = native.function("g")(x)
    assert_ulp(out, reference(lambda v: np.tanh(np.exp(v)), x), [x], MAX_ULP, "tanh(exp)")
