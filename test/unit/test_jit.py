"""msir-lower-to-llvm + the llvmlite JIT, on hand-written loops-level IR,
compared with NumPy."""

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, llvm, math, memref, scf
from xdsl.parser import Parser

import msir
from msir.errors import (
    CompileError,
    DTypeError,
    MsirIndexError,
    MsirMemoryError,
    MsirZeroDivisionError,
    ShapeError,
    SourceLoc,
)
from msir.lowering.jit import compile_llvm_module
from msir.lowering.to_llvm import MsirLowerToLlvm


def _context() -> Context:
    ctx = Context()
    for dialect in (builtin.Builtin, func.Func, scf.Scf, arith.Arith, math.Math, memref.MemRef, llvm.LLVM):
        ctx.load_dialect(dialect)
    return ctx


def lower(src: str, vector_abi: str = "host", math_impl: str = "auto") -> builtin.ModuleOp:
    ctx = _context()
    module = Parser(ctx, src).parse_module()
    MsirLowerToLlvm(vector_abi=vector_abi, math_impl=math_impl).apply(ctx, module)
    module.verify()
    return module


def build(src: str, sites=None):
    return compile_llvm_module(lower(src), sites=sites)


ERROR_DECL = "func.func private @__msir_error(i32, i64)"

ELEMENTWISE = """
func.func @f(%a: memref<?xT>, %b: memref<?xT>, %out: memref<?xT>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xT>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<?xT>
    %y = memref.load %b[%i] : memref<?xT>
    %e = math.exp %x : T
    %p = arith.mulf %e, %y : T
    %ab = math.absf %x : T
    %r = math.sqrt %ab : T
    %s = arith.addf %p, %r : T
    %t = math.tanh %s : T
    %m = arith.maximumf %t, %y : T
    %d = arith.divf %m, %e : T
    %ng = arith.negf %d : T
    memref.store %ng, %out[%i] : memref<?xT>
  }
  func.return
}
"""


@pytest.mark.parametrize("dtype, t", [(np.float32, "f32"), (np.float64, "f64")])
def test_elementwise(dtype, t):
    f = build(ELEMENTWISE.replace("T", t)).function("f")
    rng = np.random.default_rng(0)
    a = rng.normal(size=1003).astype(dtype)
    b = rng.normal(size=1003).astype(dtype)
    (out,) = f(a, b, out=[np.empty(1003, dtype)])
    expected = -np.maximum(np.tanh(np.exp(a) * b + np.sqrt(np.abs(a))), b) / np.exp(a)
    assert out.dtype == dtype
    tol = dict(rtol=1e-5, atol=1e-6) if t == "f32" else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, expected, **tol)


def test_elementwise_f32_vectorises():
    src = """
func.func @add(%a: memref<1024xf32>, %b: memref<1024xf32>, %out: memref<1024xf32>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1024 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<1024xf32>
    %y = memref.load %b[%i] : memref<1024xf32>
    %z = arith.mulf %x, %y : f32
    memref.store %z, %out[%i] : memref<1024xf32>
  }
  func.return
}
"""
    native = build(src)
    assert "<8 x float>" in native.llvm_ir or "<16 x float>" in native.llvm_ir
    a, b = np.arange(1024, dtype=np.float32), np.full(1024, 0.5, np.float32)
    (out,) = native.function("add")(a, b)
    np.testing.assert_array_equal(out, a * b)
    assert "ret" in native.asm



def test_a_vectorised_loop_has_one_vector_body_and_a_scalar_remainder():
    # jit._initialise turns off LLVM's vectorised epilogue (a third copy of
    # each loop, ~20 % of a fused loop's code generation); the remainder
    # iterations run in the scalar loop, for every size
    from msir.compiler import compile_module
    from msir.frontend.driver import spec_of, trace

    def f(x, y):
        return np.tanh(x) * y + 0.5

    for n in (1, 15, 17, 1003):
        x = np.linspace(-2.0, 2.0, n, dtype=np.float32)
        y = np.full(n, 1.5, np.float32)
        native = compile_module(trace(f, [spec_of(x), spec_of(y)]).module, "f").native_module
        if n == 1003:
            assert "vector.body" in native.llvm_ir
            assert "vec.epilog" not in native.llvm_ir
        np.testing.assert_allclose(msir.jit(f)(x, y), f(x, y), rtol=2e-6, atol=1e-6)


def test_a_heavy_loop_has_its_remainder_folded_into_masked_vector_code():
    # an iteration of at least to_llvm.FOLD_TAIL_MIN_COST work units gets
    # LLVM's predicate hint: no scalar copy of the body, the last partial
    # vector (of each thread's chunk) is masked
    from heavy_chain import heavy_chain

    from msir.compiler import compile_module
    from msir.frontend.driver import spec_of, trace

    for n in (1, 15, 17, 1003, 100_003):
        x = np.linspace(-2.0, 2.0, n, dtype=np.float32)
        y = np.full(n, 1.5, np.float32)
        if n >= 1003:
            ir = compile_module(trace(heavy_chain, [spec_of(x), spec_of(y)]).module, "heavy_chain").native_module.llvm_ir
            assert "vector.body" in ir and "@llvm.masked.store" in ir
            assert "store float" not in ir and "call float @tanhf" not in ir  # no scalar remainder
        expected = heavy_chain(x.astype(np.float64), y.astype(np.float64))
        np.testing.assert_allclose(msir.jit(heavy_chain)(x, y), expected, rtol=1e-5, atol=1e-6)


def test_f32_and_f64_intrinsics_in_one_module():
    src = """
func.func @g(%a: memref<8xf32>, %b: memref<8xf64>, %o1: memref<8xf32>, %o2: memref<8xf64>) attributes {msir.num_outputs = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = memref.load %b[%i] : memref<8xf64>
    %ex = math.exp %x : f32
    %ey = math.exp %y : f64
    %lx = math.log1p %ex : f32
    %ly = math.log %ey : f64
    %fx = math.floor %lx : f32
    %wy = math.powf %ly, %y : f64
    %ry = math.rsqrt %wy : f64
    %ex2 = arith.extf %fx : f32 to f64
    %sum = math.fma %ry, %ex2, %y : f64
    %tx = arith.truncf %sum : f64 to f32
    %ex3 = math.erf %tx : f32
    memref.store %ex3, %o1[%i] : memref<8xf32>
    memref.store %sum, %o2[%i] : memref<8xf64>
  }
  func.return
}
"""
    # intrinsics, not libmvec-backed libm calls nor inline polynomials
    module = lower(src, vector_abi="none", math_impl="libm")
    text = str(module)
    assert '"llvm.exp.f32"' in text and '"llvm.exp.f64"' in text
    a = np.linspace(0.5, 2.0, 8, dtype=np.float32)
    b = np.linspace(0.5, 2.0, 8)
    o1, o2 = compile_llvm_module(module).function("g")(a, b)
    fx = np.floor(np.log1p(np.exp(a))).astype(np.float64)
    s = 1 / np.sqrt(b**b) * fx + b
    np.testing.assert_allclose(o2, s, rtol=1e-12)
    from math import erf

    np.testing.assert_allclose(o1, [erf(v) for v in s.astype(np.float32)], rtol=1e-6)


def test_reduction_with_iter_args():
    src = """
func.func @sum(%a: memref<?x?xf64>, %out: memref<f64>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?x?xf64>
  %m = memref.dim %a, %c1 : memref<?x?xf64>
  %zero = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f64) {
    %r2 = scf.for %j = %c0 to %m step %c1 iter_args(%acc2 = %acc) -> (f64) {
      %x = memref.load %a[%i, %j] : memref<?x?xf64>
      %ij = arith.muli %i, %j : index
      %k = arith.index_cast %ij : index to i64
      %kf = arith.sitofp %k : i64 to f64
      %xk = arith.mulf %x, %kf : f64
      %s = arith.addf %acc2, %xk : f64
      scf.yield %s : f64
    }
    scf.yield %r2 : f64
  }
  memref.store %r, %out[] : memref<f64>
  func.return
}
"""
    f = build(src).function("sum")
    a = np.random.default_rng(1).normal(size=(7, 13))
    (out,) = f(a)
    assert out.shape == () and out.dtype == np.float64
    weights = np.arange(7)[:, None] * np.arange(13)[None, :]
    np.testing.assert_allclose(out, (a * weights).sum(), rtol=1e-12)
    # non-contiguous and byte-swapped inputs are copied, not misread
    big = np.random.default_rng(2).normal(size=(14, 26))
    np.testing.assert_allclose(f(big[::2, ::2])[0], (big[::2, ::2] * weights).sum(), rtol=1e-12)
    swapped = a.astype(">f8")
    np.testing.assert_allclose(f(swapped)[0], (a * weights).sum(), rtol=1e-12)


def test_bool_buffers():
    src = """
func.func @mask(%a: memref<5xf32>, %m: memref<5xi1>, %out: memref<5xi1>, %cnt: memref<i32>) attributes {msir.num_outputs = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %zero = arith.constant 0.0 : f32
  %i0 = arith.constant 0 : i32
  %true = arith.constant true
  %n = scf.for %i = %c0 to %c5 step %c1 iter_args(%acc = %i0) -> (i32) {
    %x = memref.load %a[%i] : memref<5xf32>
    %b = memref.load %m[%i] : memref<5xi1>
    %pos = arith.cmpf ogt, %x, %zero : f32
    %nb = arith.xori %b, %true : i1
    %r = arith.andi %pos, %nb : i1
    memref.store %r, %out[%i] : memref<5xi1>
    %ri = arith.extui %r : i1 to i32
    %acc2 = arith.addi %acc, %ri : i32
    scf.yield %acc2 : i32
  }
  memref.store %n, %cnt[] : memref<i32>
  func.return
}
"""
    f = build(src).function("mask")
    a = np.array([1.0, -1.0, 2.0, 3.0, np.nan], np.float32)
    m = np.array([False, False, True, False, False])
    out, cnt = f(a, m)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, (a > 0) & ~m)
    assert cnt == 2
    assert out.view(np.uint8).max() == 1


def test_returned_dynamic_buffer_and_scf_if():
    # keep the positive entries: a data-dependent output size
    src = """
func.func @positives(%a: memref<?xf64>) -> memref<?xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %n = memref.dim %a, %c0 : memref<?xf64>
  %count = scf.for %i = %c0 to %n step %c1 iter_args(%k = %c0) -> (index) {
    %x = memref.load %a[%i] : memref<?xf64>
    %pos = arith.cmpf ogt, %x, %zero : f64
    %k2 = scf.if %pos -> (index) {
      %k1 = arith.addi %k, %c1 : index
      scf.yield %k1 : index
    } else {
      scf.yield %k : index
    }
    scf.yield %k2 : index
  }
  %out = memref.alloc(%count) : memref<?xf64>
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%k = %c0) -> (index) {
    %x = memref.load %a[%i] : memref<?xf64>
    %pos = arith.cmpf ogt, %x, %zero : f64
    %k2 = scf.if %pos -> (index) {
      memref.store %x, %out[%k] : memref<?xf64>
      %k1 = arith.addi %k, %c1 : index
      scf.yield %k1 : index
    } else {
      scf.yield %k : index
    }
    scf.yield %k2 : index
  }
  func.return %out : memref<?xf64>
}
"""
    f = build(src).function("positives")
    a = np.random.default_rng(3).normal(size=101)
    (out,) = f(a)
    np.testing.assert_array_equal(out, a[a > 0])
    assert out.flags.owndata is False and out.base is not None
    assert out.ctypes.data % 64 == 0
    (empty,) = f(-np.ones(4))
    assert empty.shape == (0,)


def test_rank0_and_scalar_arguments():
    src = """
func.func @axpy(%a: memref<f32>, %s: f64, %flag: i1, %n: index, %out: memref<f32>) -> (f64, i1) attributes {msir.num_outputs = 1 : i64} {
  %x = memref.load %a[] : memref<f32>
  %sf = arith.truncf %s : f64 to f32
  %ni = arith.index_cast %n : index to i64
  %nf = arith.sitofp %ni : i64 to f32
  %y = arith.mulf %x, %sf : f32
  %z = arith.addf %y, %nf : f32
  %w = arith.select %flag, %z, %x : f32
  memref.store %w, %out[] : memref<f32>
  %d = arith.extf %w : f32 to f64
  %true = arith.constant true
  %nflag = arith.xori %flag, %true : i1
  func.return %d, %nflag : f64, i1
}
"""
    f = build(src).function("axpy")
    out, d, nflag = f(np.array(2.0, np.float32), 1.5, True, 10)
    assert out.shape == () and out.dtype == np.float32 and out == 13.0
    assert d == 13.0 and d.dtype == np.float64
    assert nflag.dtype == np.bool_ and not nflag
    out, _, nflag = f(np.array(2.0, np.float32), 1.5, False, 10)
    assert out == 2.0 and nflag


INDEX_ERROR = ERROR_DECL + """
func.func @take(%a: memref<4xf32>, %i: index, %out: memref<f32>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %lo = arith.cmpi slt, %i, %c0 : index
  %hi = arith.cmpi sge, %i, %c4 : index
  %bad = arith.ori %lo, %hi : i1
  %safe = scf.if %bad -> (index) {
    %code = arith.constant 1 : i32
    %site = arith.constant 1 : i64
    func.call @__msir_error(%code, %site) : (i32, i64) -> ()
    scf.yield %c0 : index
  } else {
    scf.yield %i : index
  }
  %x = memref.load %a[%safe] : memref<4xf32>
  memref.store %x, %out[] : memref<f32>
  func.return
}
"""


def test_index_error_reports_site_location():
    sites = [SourceLoc("model.py", 3, 5), SourceLoc("model.py", 12, 9)]
    f = build(INDEX_ERROR, sites=sites).function("take")
    a = np.arange(4, dtype=np.float32)
    assert f(a, 2)[0] == 2.0
    with pytest.raises(MsirIndexError) as info:
        f(a, 7)
    assert info.value.loc == SourceLoc("model.py", 12, 9)
    assert "model.py:12:9" in str(info.value)
    assert f(a, 3)[0] == 3.0  # the status is reset on each call
    with pytest.raises(IndexError):
        f(a, -1)


ALLOC = ERROR_DECL + """
func.func private @make(%n: index) -> memref<?xf64> {
  %m = memref.alloc(%n) {msir.site = 0 : i64} : memref<?xf64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f64
  scf.for %i = %c0 to %n step %c1 {
    memref.store %one, %m[%i] : memref<?xf64>
  }
  func.return %m : memref<?xf64>
}
func.func @ones(%n: index) -> (memref<?xf64>, index) {
  %m = func.call @make(%n) : (index) -> memref<?xf64>
  %c0 = arith.constant 0 : index
  %x = memref.load %m[%c0] : memref<?xf64>
  memref.store %x, %m[%c0] : memref<?xf64>
  func.return %m, %n : memref<?xf64>, index
}
"""


def test_alloc_failure_becomes_memory_error():
    f = build(ALLOC, sites=[SourceLoc("m.py", 1, 1)]).function("ones")
    out, n = f(3)
    np.testing.assert_array_equal(out, np.ones(3))
    assert n == 3
    for huge in (1 << 50, 1 << 61, -1):
        with pytest.raises(MsirMemoryError) as info:
            f(huge)
        assert info.value.loc == SourceLoc("m.py", 1, 1)
    np.testing.assert_array_equal(f(2)[0], np.ones(2))


INT_DIV = ERROR_DECL + """
func.func @divs(%a: memref<?xi32>, %b: memref<?xi32>, %q: memref<6x?xi32>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %zero = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %n = memref.dim %a, %c0 : memref<?xi32>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<?xi32>
    %y0 = memref.load %b[%i] : memref<?xi32>
    %isz = arith.cmpi eq, %y0, %zero : i32
    %y = scf.if %isz -> (i32) {
      %code = arith.constant 2 : i32
      %site = arith.constant 0 : i64
      func.call @__msir_error(%code, %site) : (i32, i64) -> ()
      scf.yield %one : i32
    } else {
      scf.yield %y0 : i32
    }
    %d = arith.divsi %x, %y : i32
    %r = arith.remsi %x, %y : i32
    %fd = arith.floordivsi %x, %y : i32
    %cd = arith.ceildivsi %x, %y : i32
    %ud = arith.divui %x, %y : i32
    %ur = arith.remui %x, %y : i32
    memref.store %d, %q[%c0, %i] : memref<6x?xi32>
    memref.store %r, %q[%c1, %i] : memref<6x?xi32>
    memref.store %fd, %q[%c2, %i] : memref<6x?xi32>
    memref.store %cd, %q[%c3, %i] : memref<6x?xi32>
    memref.store %ud, %q[%c4, %i] : memref<6x?xi32>
    memref.store %ur, %q[%c5, %i] : memref<6x?xi32>
  }
  func.return
}
"""


def test_integer_division():
    f = build(INT_DIV).function("divs")
    a = np.array([7, -7, 7, -7, 0, 5, -2147483648, 123456], np.int32)
    b = np.array([2, 2, -2, -2, 3, 1, -1, -1000], np.int32)
    (q,) = f(a, b, out=[np.empty((6, 8), np.int32)])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(q[0], _trunc_div(a, b))
    np.testing.assert_array_equal(q[1], a - _trunc_div(a, b) * b)
    np.testing.assert_array_equal(q[2], np.floor_divide(a.astype(np.int64), b).astype(np.int32))
    np.testing.assert_array_equal(q[3], -np.floor_divide(-a.astype(np.int64), b).astype(np.int32))
    ua, ub = a.view(np.uint32), b.view(np.uint32)
    np.testing.assert_array_equal(q[4].view(np.uint32), ua // ub)
    np.testing.assert_array_equal(q[5].view(np.uint32), ua % ub)
    with pytest.raises(MsirZeroDivisionError):
        f(a, np.where(b == 3, 0, b).astype(np.int32), out=[np.empty((6, 8), np.int32)])


def _trunc_div(a, b):
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64)) * np.sign(a.astype(np.int64) * b)
    return q.astype(np.int32)


def test_while_loop_and_integer_ops():
    src = """
func.func @collatz(%n: i64) -> (i64, i64) {
  %one = arith.constant 1 : i64
  %two = arith.constant 2 : i64
  %three = arith.constant 3 : i64
  %zero = arith.constant 0 : i64
  %r:2 = scf.while (%x = %n, %steps = %zero) : (i64, i64) -> (i64, i64) {
    %more = arith.cmpi ugt, %x, %one : i64
    scf.condition(%more) %x, %steps : i64, i64
  } do {
  ^bb0(%x: i64, %steps: i64):
    %bit = arith.andi %x, %one : i64
    %odd = arith.cmpi ne, %bit, %zero : i64
    %half = arith.shrui %x, %one : i64
    %t = arith.muli %x, %three : i64
    %t1 = arith.addi %t, %one : i64
    %next = arith.select %odd, %t1, %half : i64
    %s1 = arith.addi %steps, %one : i64
    scf.yield %next, %s1 : i64, i64
  }
  %m = arith.maxsi %r#1, %three : i64
  func.return %r#1, %m : i64, i64
}
"""
    f = build(src).function("collatz")
    steps, m = f(27)
    assert steps == 111 and m == 111
    assert f(1)[0] == 0 and f(1)[1] == 3


def test_conversions():
    src = """
func.func @conv(%a: memref<4xi64>, %f: memref<4xf64>, %o: memref<4x4xf64>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xi64>
    %y = memref.load %f[%i] : memref<4xf64>
    %u = arith.uitofp %x : i64 to f64
    %s = arith.sitofp %x : i64 to f64
    %t = arith.fptosi %y : f64 to i32
    %te = arith.sitofp %t : i32 to f64
    %bits = arith.bitcast %y : f64 to i64
    %sh = arith.constant 63 : i64
    %sign = arith.shrui %bits, %sh : i64
    %sf = arith.uitofp %sign : i64 to f64
    memref.store %u, %o[%c0, %i] : memref<4x4xf64>
    memref.store %s, %o[%c1, %i] : memref<4x4xf64>
    memref.store %te, %o[%c2, %i] : memref<4x4xf64>
    memref.store %sf, %o[%c3, %i] : memref<4x4xf64>
  }
  func.return
}
"""
    f = build(src).function("conv")
    a = np.array([1, -1, 1 << 62, -(1 << 40)], np.int64)
    x = np.array([2.7, -2.7, 1e300, -0.0])
    (o,) = f(a, x)
    np.testing.assert_array_equal(o[0], a.view(np.uint64).astype(np.float64))
    np.testing.assert_array_equal(o[1], a.astype(np.float64))
    np.testing.assert_array_equal(o[2], [2, -2, 2147483647, 0])
    np.testing.assert_array_equal(o[3], [0, 1, 0, 1])


def test_input_validation():
    f = build(ELEMENTWISE.replace("T", "f32")).function("f")
    a = np.ones(4, np.float32)
    with pytest.raises(DTypeError):
        f(a.astype(np.float64), a, out=[np.empty(4, np.float32)])
    with pytest.raises(ShapeError):
        f(np.ones((2, 2), np.float32), a, out=[np.empty(4, np.float32)])
    with pytest.raises(ShapeError):
        f(a, a)  # the output's size is dynamic: it must be passed
    with pytest.raises(TypeError):
        f(a)
    g = build(INDEX_ERROR).function("take")
    with pytest.raises(ShapeError):
        g(np.ones(5, np.float32), 1)


def test_unsupported_op_is_a_compile_error():
    src = """
func.func @f(%x: i32) -> i32 {
  %y = math.ctpop %x : i32
  func.return %y : i32
}
"""
    with pytest.raises(CompileError, match="math.ctpop"):
        lower(src)


def test_memref_iter_args_ping_pong():
    # three smoothing steps, swapping two buffers through scf.for iter_args
    src = """
func.func @smooth(%a: memref<?xf64>) -> memref<?xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %half = arith.constant 0.5 : f64
  %n = memref.dim %a, %c0 : memref<?xf64>
  %x = memref.alloc(%n) : memref<?xf64>
  %y = memref.alloc(%n) : memref<?xf64>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %a[%i] : memref<?xf64>
    memref.store %v, %x[%i] : memref<?xf64>
  }
  %nm1 = arith.subi %n, %c1 : index
  %r:2 = scf.for %t = %c0 to %c3 step %c1 iter_args(%src = %x, %dst = %y) -> (memref<?xf64>, memref<?xf64>) {
    scf.for %i = %c0 to %n step %c1 {
      %j0 = arith.addi %i, %c1 : index
      %j = arith.minsi %j0, %nm1 : index
      %u = memref.load %src[%i] : memref<?xf64>
      %v = memref.load %src[%j] : memref<?xf64>
      %s = arith.addf %u, %v : f64
      %m = arith.mulf %s, %half : f64
      memref.store %m, %dst[%i] : memref<?xf64>
    }
    scf.yield %dst, %src : memref<?xf64>, memref<?xf64>
  }
  memref.dealloc %r#1 : memref<?xf64>
  func.return %r#0 : memref<?xf64>
}
"""
    f = build(src).function("smooth")
    a = np.random.default_rng(4).normal(size=9)
    expected = a.copy()
    for _ in range(3):
        expected = 0.5 * (expected + np.append(expected[1:], expected[-1]))
    np.testing.assert_allclose(f(a)[0], expected, rtol=1e-15)
