// RUN: msir-opt %s -p msir-grad | filecheck %s
// RUN: msir-opt %s -p msir-grad,msir-fuse,convert-msir-to-loops | filecheck %s --check-prefix=LOOPS
// Dimensions unknown until run time (`?`) through reverse mode and the
// lowering: the gradient functions keep the `?` shapes (this once failed
// inside msir-grad with an OverflowError).

func.func @sin_mul(%x: tensor<?xf64>, %y: tensor<?xf64>) -> tensor<f64> {
  %0 = msir.sin %x : tensor<?xf64>
  %1 = msir.mul %0, %y : tensor<?xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<?xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func @grad_sin_mul(%x: tensor<?xf64>, %y: tensor<?xf64>) -> (tensor<?xf64>, tensor<?xf64>) {
  %0 = msir.closure @sin_mul() : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0, 1> : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64> to (tensor<?xf64>, tensor<?xf64>) -> (tensor<?xf64>, tensor<?xf64>)
  %2, %3 = msir.apply %1(%x, %y) : (tensor<?xf64>, tensor<?xf64>) -> (tensor<?xf64>, tensor<?xf64>)
  func.return %2, %3 : tensor<?xf64>, tensor<?xf64>
}

// CHECK-LABEL: func.func @grad_sin_mul
// CHECK: func.call @sin_mul__grad(%x, %y) : (tensor<?xf64>, tensor<?xf64>) -> (tensor<?xf64>, tensor<?xf64>)
// CHECK-LABEL: func.func private @sin_mul__bwd
// CHECK: msir.cos %{{.*}} : tensor<?xf64>
// CHECK: func.return %{{.*}}, %{{.*}} : tensor<?xf64>, tensor<?xf64>

// LOOPS-LABEL: func.func @grad_sin_mul(%{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>)
