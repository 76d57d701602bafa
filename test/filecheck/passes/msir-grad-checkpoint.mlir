// RUN: msir-opt -p msir-grad %s | filecheck %s

// A call marked msir.checkpoint (a msir.checkpoint function) keeps only its
// argument: the augmented forward calls the primal @g, not @g__fwd, and the
// adjoint calls @g__rebwd, which recomputes @g's residuals before its adjoint.

func.func private @g(%x: tensor<4xf64>) -> tensor<4xf64> {
  %0 = msir.sin %x : tensor<4xf64>
  %1 = msir.exp %0 : tensor<4xf64>
  func.return %1 : tensor<4xf64>
}

func.func private @f(%x: tensor<4xf64>) -> tensor<f64> {
  %0 = msir.cos %x : tensor<4xf64>
  %1 = func.call @g(%0) {msir.checkpoint} : (tensor<4xf64>) -> tensor<4xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<4xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {
  %0 = msir.closure @f() : (tensor<4xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<4xf64>) -> tensor<f64> to (tensor<4xf64>) -> tensor<4xf64>
  %2 = msir.apply %1(%x) : (tensor<4xf64>) -> tensor<4xf64>
  func.return %2 : tensor<4xf64>
}

// CHECK-LABEL: func.func private @g__rebwd(%0: tensor<4xf64>, %1: tensor<4xf64>) -> tensor<4xf64> {
// CHECK-NEXT:    %2, %3 = func.call @g__fwd__part(%1)
// CHECK-NEXT:    %4 = func.call @g__bwd(%0, %2, %3)
// CHECK-NEXT:    func.return %4
// CHECK-LABEL: func.func private @f__fwd(%0: tensor<4xf64>) -> (tensor<f64>, tensor<4xf64>, tensor<4xf64>) {
// CHECK-NEXT:    %1 = msir.cos %0
// CHECK-NEXT:    %2 = func.call @g(%1) {msir.checkpoint}
// CHECK-NEXT:    %3 = msir.reduce_sum %2
// CHECK-NEXT:    func.return %3, %1, %0
// CHECK-LABEL: func.func private @f__bwd(
// CHECK:         func.call @g__rebwd(%{{.*}}, %1)
// CHECK-NOT:     func.call @g__bwd
