// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=avx2 math_impl=libm}" | filecheck %s --check-prefixes=CHECK,AVX2
// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=avx512 math_impl=libm}" | filecheck %s --check-prefixes=CHECK,AVX512
// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=none math_impl=libm}" | filecheck %s --check-prefix=NONE

// Vector math through libm (math_impl=libm; the default `auto` emits exp, tanh
// and log inline instead, see vector-math-inline.mlir): with libmvec variants
// for the target, transcendental math ops
// become libm calls whose declarations name their vector variants (LLVM's
// VFABI mangling) for the loop vectoriser, and the variants are declared.
// Without (vector_abi=none), exp/log/sin/cos/pow stay LLVM intrinsics and only
// functions without one (tanh, ...) call libm. Every libm declaration is pure
// (memory(none)): msir never reads errno.

builtin.module {
  func.func @w(%a: memref<?xf32>, %b: memref<?xf64>, %o: memref<?xf32>, %p: memref<?xf64>) attributes {msir.num_outputs = 2 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = memref.dim %a, %c0 : memref<?xf32>
    scf.for %i = %c0 to %n step %c1 {
      %x = memref.load %a[%i] : memref<?xf32>
      %y = memref.load %b[%i] : memref<?xf64>
      %e = math.exp %x : f32
      %t = math.tanh %e : f32
      %q = math.powf %t, %x : f32
      %s = math.sqrt %q : f32
      %l = math.log %y : f64
      %c = math.cos %l : f64
      memref.store %s, %o[%i] : memref<?xf32>
      memref.store %c, %p[%i] : memref<?xf64>
    }
    func.return
  }

  // A float sum: only the accumulating fadd is `reassoc`.
  func.func @sum(%a: memref<?xf32>) -> f32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %zero = arith.constant 0.0 : f32
    %half = arith.constant 0.5 : f32
    %n = memref.dim %a, %c0 : memref<?xf32>
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %a[%i] : memref<?xf32>
      %h = arith.mulf %x, %half : f32
      %s = arith.addf %acc, %h : f32
      scf.yield %s : f32
    }
    func.return %r : f32
  }
}

// CHECK-LABEL: llvm.func @w(
// CHECK:         %[[E:.*]] = llvm.call @expf(%{{.*}}) : (f32) -> f32
// CHECK-NEXT:    %[[T:.*]] = llvm.call @tanhf(%[[E]]) : (f32) -> f32
// CHECK-NEXT:    %[[Q:.*]] = llvm.call @powf(%[[T]], %{{.*}}) : (f32, f32) -> f32
// CHECK-NEXT:    llvm.call_intrinsic "llvm.sqrt.f32"(%[[Q]]) : (f32) -> f32
// CHECK-NEXT:    %[[L:.*]] = llvm.call @log(%{{.*}}) : (f64) -> f64
// CHECK-NEXT:    llvm.call @cos(%[[L]]) : (f64) -> f64

// CHECK-LABEL: llvm.func @sum(
// CHECK:         %[[H:.*]] = llvm.fmul %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    llvm.fadd %{{.*}}, %[[H]] {fastmathFlags = #llvm.fastmath<reassoc>} : f32

// AVX2:      llvm.func @expf(f32) -> f32 attributes {passthrough = ["nounwind", "willreturn", ["memory", "none"], ["vector-function-abi-variant", "_ZGV_LLVM_N8v_expf(_ZGVdN8v_expf),_ZGV_LLVM_N4v_expf(_ZGVbN4v_expf)"]]}
// AVX2-NEXT: llvm.func @_ZGVdN8v_expf(vector<8xf32>) -> vector<8xf32> attributes {passthrough = ["nounwind", "willreturn", ["memory", "none"]]}
// AVX2-NEXT: llvm.func @_ZGVbN4v_expf(vector<4xf32>) -> vector<4xf32>
// AVX2:      llvm.func @tanhf(f32) -> f32 attributes {passthrough = {{.*}}"_ZGV_LLVM_N8v_tanhf(_ZGVdN8v_tanhf),_ZGV_LLVM_N4v_tanhf(_ZGVbN4v_tanhf)"]]}
// AVX2:      llvm.func @powf(f32, f32) -> f32 attributes {passthrough = {{.*}}"_ZGV_LLVM_N8vv_powf(_ZGVdN8vv_powf),_ZGV_LLVM_N4vv_powf(_ZGVbN4vv_powf)"]]}
// AVX2-NEXT: llvm.func @_ZGVdN8vv_powf(vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// AVX2:      llvm.func @log(f64) -> f64 attributes {passthrough = {{.*}}"_ZGV_LLVM_N4v_log(_ZGVdN4v_log),_ZGV_LLVM_N2v_log(_ZGVbN2v_log)"]]}
// AVX2-NEXT: llvm.func @_ZGVdN4v_log(vector<4xf64>) -> vector<4xf64>
// AVX2:      llvm.func @cos(f64) -> f64 attributes {passthrough = {{.*}}"_ZGV_LLVM_N4v_cos(_ZGVdN4v_cos),_ZGV_LLVM_N2v_cos(_ZGVbN2v_cos)"]]}

// AVX512:      llvm.func @expf(f32) -> f32 attributes {passthrough = ["nounwind", "willreturn", ["memory", "none"], ["vector-function-abi-variant", "_ZGV_LLVM_N16v_expf(_ZGVeN16v_expf),_ZGV_LLVM_N8v_expf(_ZGVdN8v_expf),_ZGV_LLVM_N4v_expf(_ZGVbN4v_expf)"]]}
// AVX512-NEXT: llvm.func @_ZGVeN16v_expf(vector<16xf32>) -> vector<16xf32>
// AVX512:      llvm.func @log(f64) -> f64 attributes {passthrough = {{.*}}"_ZGV_LLVM_N8v_log(_ZGVeN8v_log),_ZGV_LLVM_N4v_log(_ZGVdN4v_log),_ZGV_LLVM_N2v_log(_ZGVbN2v_log)"]]}
// AVX512-NEXT: llvm.func @_ZGVeN8v_log(vector<8xf64>) -> vector<8xf64>

// NONE-LABEL: llvm.func @w(
// NONE:         %[[E:.*]] = llvm.call_intrinsic "llvm.exp.f32"(%{{.*}}) : (f32) -> f32
// NONE-NEXT:    %[[T:.*]] = llvm.call @tanhf(%[[E]]) : (f32) -> f32
// NONE-NEXT:    llvm.call_intrinsic "llvm.pow.f32"(%[[T]], %{{.*}}) : (f32, f32) -> f32
// NONE:         llvm.call_intrinsic "llvm.log.f64"
// NONE-NEXT:    llvm.call_intrinsic "llvm.cos.f64"
// NONE-NOT:     _ZGV
// NONE:         llvm.func @tanhf(f32) -> f32 attributes {passthrough = ["nounwind", "willreturn", ["memory", "none"]]}
// NONE-NOT:     _ZGV
