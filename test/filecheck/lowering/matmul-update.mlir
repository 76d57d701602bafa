// RUN: msir-opt %s -p msir-fuse,convert-msir-to-loops | filecheck %s

// Matmul updates (lowering/to_loops.py, `_gemm_updates`): `r = c + alpha * (a @ b)`
// whose product has no other use is one BLAS call that starts from c and
// accumulates into r's buffer (`__msir_gemm_update_<t>`, beta = 1): the
// product gets no buffer and the update no loop of its own.

// An SGD update w - 0.1 * (x^T @ g): the transpose is a BLAS flag, alpha = -0.1.
func.func @sgd(%w: tensor<64x48xf32>, %x: tensor<32x64xf32>, %g: tensor<32x48xf32>) -> tensor<64x48xf32> {
  %xt = msir.transpose %x, array<i64: 1, 0> : tensor<32x64xf32> to tensor<64x32xf32>
  %p = msir.matmul %xt, %g : tensor<64x32xf32>, tensor<32x48xf32> to tensor<64x48xf32>
  %lr = msir.constant dense<1.000000e-01> : tensor<f32>
  %lrb = msir.broadcast_to %lr : tensor<f32> to tensor<64x48xf32>
  %s = msir.mul %lrb, %p : tensor<64x48xf32>
  %r = msir.sub %w, %s : tensor<64x48xf32>
  func.return %r : tensor<64x48xf32>
}

// CHECK-LABEL: func.func @sgd(
// CHECK-SAME:    %[[W:[0-9]+]]: memref<64x48xf32>, %[[X:[0-9]+]]: memref<32x64xf32>, %[[G:[0-9]+]]: memref<32x48xf32>, %[[OUT:[0-9]+]]: memref<64x48xf32>)
// CHECK-NOT:     memref.alloc
// CHECK-DAG:     %[[ALPHA:.*]] = arith.constant -1.000000e-01 : f32
// CHECK-DAG:     %[[TA:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[PX:.*]] = "memref.cast"(%[[X]]) : (memref<32x64xf32>) -> memref<f32>
// CHECK-DAG:     %[[PG:.*]] = "memref.cast"(%[[G]]) : (memref<32x48xf32>) -> memref<f32>
// CHECK-DAG:     %[[PO:.*]] = "memref.cast"(%[[OUT]]) : (memref<64x48xf32>) -> memref<f32>
// CHECK-DAG:     %[[PW:.*]] = "memref.cast"(%[[W]]) : (memref<64x48xf32>) -> memref<f32>
// CHECK:         func.call @__msir_gemm_update_f32(%[[TA]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PX]], %{{.*}}, %{{.*}}, %[[PG]], %{{.*}}, %{{.*}}, %[[PO]], %{{.*}}, %{{.*}}, %[[PW]], %[[ALPHA]])
// CHECK-NOT:     scf.for
// CHECK:         func.return

// A residual connection h + h @ w (one unfused add): alpha = 1.
func.func @residual(%h: tensor<64x64xf64>, %w: tensor<64x64xf64>) -> tensor<64x64xf64> {
  %p = msir.matmul %h, %w : tensor<64x64xf64>, tensor<64x64xf64> to tensor<64x64xf64>
  %r = msir.add %h, %p : tensor<64x64xf64>
  func.return %r : tensor<64x64xf64>
}

// CHECK-LABEL: func.func @residual(
// CHECK-NOT:     memref.alloc
// CHECK:         func.call @__msir_gemm_update_f64(
// CHECK-NOT:     scf.for
// CHECK:         func.return

// A product with another use is computed on its own.
func.func @two_uses(%w: tensor<64x64xf32>, %x: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %p = msir.matmul %x, %x : tensor<64x64xf32>, tensor<64x64xf32> to tensor<64x64xf32>
  %r = msir.sub %w, %p : tensor<64x64xf32>
  func.return %r, %p : tensor<64x64xf32>, tensor<64x64xf32>
}

// CHECK-LABEL: func.func @two_uses(
// CHECK:         func.call @__msir_gemm_f32(
// CHECK-NOT:     __msir_gemm_update
// CHECK:         scf.for
// CHECK:         func.return
