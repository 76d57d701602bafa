// RUN: msir-opt %s | msir-opt | filecheck %s
// RUN: msir-opt %s --print-op-generic | msir-opt | filecheck %s

// msir.ramp: `%n` rows of start + i * step (np.arange with runtime bounds, and
// a value broadcast to that runtime length with a step of zeros).

func.func @ramp(%a: tensor<f64>, %d: tensor<f64>, %n: tensor<i64>, %r: tensor<3xi32>, %s: tensor<3xi32>) -> (tensor<?xf64>, tensor<?x3xi32>) {
  %0 = msir.ramp %a, %d, %n : tensor<f64>, tensor<i64> to tensor<?xf64>
  %1 = msir.ramp %r, %s, %n : tensor<3xi32>, tensor<i64> to tensor<?x3xi32>
  func.return %0, %1 : tensor<?xf64>, tensor<?x3xi32>
}
// CHECK-LABEL: func.func @ramp
// CHECK-NEXT: %0 = msir.ramp %a, %d, %n : tensor<f64>, tensor<i64> to tensor<?xf64>
// CHECK-NEXT: %1 = msir.ramp %r, %s, %n : tensor<3xi32>, tensor<i64> to tensor<?x3xi32>
