// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=none math_impl=libm}" -t llvm | filecheck %s

// msir-lower-to-llvm fuses a product and the loop marked msir.gemm_epilogue
// after it only when the loop may run per chunk of C's rows
// (parallel_outline.epilogue_plan): iteration i reads C only at row i, and
// the loop runs over exactly C's rows. Otherwise the mark is a no-op.

builtin.module {
  func.func private @__msir_gemm_f32(i64, i64, i64, i64, i64, memref<f32>, i64, i64, memref<f32>, i64, i64, memref<f32>, i64, i64) -> ()

  // CHECK-LABEL: define void @"rows"(
  // CHECK:         call void @"__msir_gemm_epilogue_f32"(i64 0, i64 0, i64 64, i64 64, i64 64,
  func.func @rows(%a: memref<64x64xf32>, %c: memref<64x64xf32>) attributes {msir.num_outputs = 1 : i64} {
    %z = arith.constant 0 : i64
    %n = arith.constant 64 : i64
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %i64 = arith.constant 64 : index
    %pa = "memref.cast"(%a) : (memref<64x64xf32>) -> memref<f32>
    %pc = "memref.cast"(%c) : (memref<64x64xf32>) -> memref<f32>
    func.call @__msir_gemm_f32(%z, %z, %n, %n, %n, %pa, %z, %n, %pa, %z, %n, %pc, %z, %n) : (i64, i64, i64, i64, i64, memref<f32>, i64, i64, memref<f32>, i64, i64, memref<f32>, i64, i64) -> ()
    scf.for %i = %i0 to %i64 step %i1 {
      scf.for %j = %i0 to %i64 step %i1 {
        %v = memref.load %c[%i, %j] : memref<64x64xf32>
        %w = arith.addf %v, %v : f32
        memref.store %w, %c[%i, %j] : memref<64x64xf32>
      }
    } {msir.gemm_epilogue}
    func.return
  }

  // Iteration i reads column i of C, which other chunks' gemms write: not fused.
  // CHECK-LABEL: define void @"columns"(
  // CHECK-NOT:     __msir_gemm_epilogue
  // CHECK:         call void @"__msir_gemm_f32"(
  // CHECK:         ret void
  func.func @columns(%a: memref<64x64xf32>, %c: memref<64x64xf32>, %out: memref<64x64xf32>) attributes {msir.num_outputs = 1 : i64} {
    %z = arith.constant 0 : i64
    %n = arith.constant 64 : i64
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %i64 = arith.constant 64 : index
    %pa = "memref.cast"(%a) : (memref<64x64xf32>) -> memref<f32>
    %pc = "memref.cast"(%c) : (memref<64x64xf32>) -> memref<f32>
    func.call @__msir_gemm_f32(%z, %z, %n, %n, %n, %pa, %z, %n, %pa, %z, %n, %pc, %z, %n) : (i64, i64, i64, i64, i64, memref<f32>, i64, i64, memref<f32>, i64, i64, memref<f32>, i64, i64) -> ()
    scf.for %i = %i0 to %i64 step %i1 {
      scf.for %j = %i0 to %i64 step %i1 {
        %v = memref.load %c[%j, %i] : memref<64x64xf32>
        memref.store %v, %out[%i, %j] : memref<64x64xf32>
      }
    } {msir.gemm_epilogue}
    func.return
  }

  // The loop covers half of C's rows: not fused.
  // CHECK-LABEL: define void @"half"(
  // CHECK-NOT:     __msir_gemm_epilogue
  // CHECK:         call void @"__msir_gemm_f32"(
  func.func @half(%a: memref<64x64xf32>, %c: memref<64x64xf32>) attributes {msir.num_outputs = 1 : i64} {
    %z = arith.constant 0 : i64
    %n = arith.constant 64 : i64
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %i32 = arith.constant 32 : index
    %i64 = arith.constant 64 : index
    %pa = "memref.cast"(%a) : (memref<64x64xf32>) -> memref<f32>
    %pc = "memref.cast"(%c) : (memref<64x64xf32>) -> memref<f32>
    func.call @__msir_gemm_f32(%z, %z, %n, %n, %n, %pa, %z, %n, %pa, %z, %n, %pc, %z, %n) : (i64, i64, i64, i64, i64, memref<f32>, i64, i64, memref<f32>, i64, i64, memref<f32>, i64, i64) -> ()
    scf.for %i = %i0 to %i32 step %i1 {
      scf.for %j = %i0 to %i64 step %i1 {
        %v = memref.load %c[%i, %j] : memref<64x64xf32>
        %w = arith.addf %v, %v : f32
        memref.store %w, %c[%i, %j] : memref<64x64xf32>
      }
    } {msir.gemm_epilogue}
    func.return
  }
}
