// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=avx2 math_impl=inline}" | filecheck %s
// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=none math_impl=inline}" | filecheck %s
// RUN: msir-opt %s -p "msir-lower-to-llvm{math_impl=libm}" | filecheck %s --check-prefix=LIBM
// RUN: not msir-opt %s -p "msir-lower-to-llvm{math_impl=fast}" 2>&1 | filecheck %s --check-prefix=BAD

// Inline vector math (msir.lowering.vector_math): exp, tanh and log become
// straight-line code, special cases by select, 2**k by integer operations on
// the exponent field, polynomials by llvm.fmuladd; no call, whatever the
// vector ABI. (The default `auto` picks inline for exp and tanh, libmvec for
// log where it has a vector variant, as measured: vector_math.py.)

builtin.module {
  func.func @exp32(%x: f32) -> f32 {
    %y = math.exp %x : f32
    func.return %y : f32
  }
  func.func @tanh64(%x: f64) -> f64 {
    %y = math.tanh %x : f64
    func.return %y : f64
  }
  func.func @log32(%x: f32) -> f32 {
    %y = math.log %x : f32
    func.return %y : f32
  }
}

// exp: clamp to [-104, 89] keeping NaN, k = round(x*log2(e)) by the shifter
// 1.5*2**23 (0x4B400000 = 1262485504), Cody-Waite reduction, polynomial,
// p*2**(k>>1) as an exponent add, then one multiply by 2**(k - (k>>1)).
// CHECK-LABEL: llvm.func @exp32(
// CHECK-NOT:     llvm.call @
// CHECK:         %[[GT:.*]] = llvm.fcmp "ogt" %[[X:.*]], %[[HI:.*]] : f32
// CHECK-NEXT:    %[[X1:.*]] = llvm.select %[[GT]], %[[HI]], %[[X]] : i1, f32
// CHECK-NEXT:    %[[LT:.*]] = llvm.fcmp "olt" %[[X1]], %[[LO:.*]] : f32
// CHECK-NEXT:    %[[X2:.*]] = llvm.select %[[LT]], %[[LO]], %[[X1]] : i1, f32
// CHECK-NEXT:    %[[T:.*]] = llvm.call_intrinsic "llvm.fmuladd.f32"(%[[X2]], %{{.*}}, %{{.*}})
// CHECK:         llvm.bitcast %[[T]] : f32 to i32
// CHECK:         llvm.ashr
// CHECK:         llvm.shl
// CHECK:         llvm.fmul
// CHECK-NEXT:    llvm.return

// tanh: |x|, 2|x| clamped, expm1, e/(e+2), the sign of x by and/or.
// CHECK-LABEL: llvm.func @tanh64(
// CHECK-NOT:     llvm.call @
// CHECK:         llvm.call_intrinsic "llvm.fabs.f64"
// CHECK:         llvm.fcmp "ogt"
// CHECK:         llvm.call_intrinsic "llvm.fmuladd.f64"
// CHECK:         %[[D:.*]] = llvm.fadd %[[E:.*]], %{{.*}} : f64
// CHECK-NEXT:    %[[Q:.*]] = llvm.fdiv %[[E]], %[[D]] : f64
// CHECK:         llvm.and %{{.*}}, %{{.*}} : i64
// CHECK:         llvm.or
// CHECK-NEXT:    %[[R:.*]] = llvm.bitcast %{{.*}} : i64 to f64
// CHECK-NEXT:    llvm.return %[[R]]

// log: denormals scaled by 2**25, the exponent and mantissa from the bits,
// then NaN for x < 0 or NaN, -inf at +-0, inf at inf.
// CHECK-LABEL: llvm.func @log32(
// CHECK-NOT:     llvm.call @
// CHECK:         llvm.fcmp "olt"
// CHECK:         llvm.ashr
// CHECK:         llvm.fcmp "ult" %[[X:.*]], %{{.*}} : f32
// CHECK:         llvm.fcmp "oeq" %[[X]], %{{.*}} : f32
// CHECK:         llvm.fcmp "oeq" %[[X]], %{{.*}} : f32
// CHECK-NEXT:    %[[R:.*]] = llvm.select
// CHECK-NEXT:    llvm.return %[[R]]

// LIBM-LABEL: llvm.func @exp32(
// LIBM:         llvm.call @expf
// LIBM-LABEL: llvm.func @tanh64(
// LIBM:         llvm.call @tanh(
// LIBM-LABEL: llvm.func @log32(
// LIBM:         llvm.call @logf

// BAD: unknown math_impl 'fast' (expected one of auto, inline, libm)
