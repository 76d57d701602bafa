// RUN: msir-opt %s -p msir-grad | filecheck %s
// Regression test for a fixed bug: a rule's cotangent for an operand that needs none (here the constant factor
// of a mul) is still emitted; it is dead in the adjoint, but the primal value it
// reads (y) is still saved as a residual of the augmented forward.

// sum(exp(x) + y * 2): the adjoint reads exp(x) and nothing else, so the
// augmented forward returns only the result and exp(x), and the adjoint holds no
// dead cotangent of the constant.
func.func @exp_plus_linear(%x: tensor<3xf64>, %y: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.exp %x : tensor<3xf64>
  %1 = msir.constant dense<2.000000e+00> : tensor<3xf64>
  %2 = msir.mul %y, %1 : tensor<3xf64>
  %3 = msir.add %0, %2 : tensor<3xf64>
  %4 = msir.reduce_sum %3 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %4 : tensor<f64>
}

func.func @grad_exp_plus_linear(%x: tensor<3xf64>, %y: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
  %0 = msir.closure @exp_plus_linear() : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0, 1> : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  %2, %3 = msir.apply %1(%x, %y) : (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  func.return %2, %3 : tensor<3xf64>, tensor<3xf64>
}

// CHECK-LABEL: func.func private @exp_plus_linear__fwd(%0: tensor<3xf64>, %1: tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>) {
// CHECK-NEXT:    %[[EXP:.*]] = msir.exp %0
// CHECK:         %[[SUM:.*]] = msir.reduce_sum
// CHECK-NEXT:    func.return %[[SUM]], %[[EXP]] : tensor<f64>, tensor<3xf64>
// CHECK-LABEL: func.func private @exp_plus_linear__bwd(%0: tensor<f64>, %1: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
// CHECK-NEXT:    %[[CT:.*]] = msir.broadcast_to %0
// CHECK-NEXT:    %[[TWO:.*]] = msir.constant dense<2.000000e+00>
// CHECK-NEXT:    %[[GY:.*]] = msir.mul %[[CT]], %[[TWO]]
// CHECK-NEXT:    %[[GX:.*]] = msir.mul %[[CT]], %1
// CHECK-NEXT:    func.return %[[GX]], %[[GY]]
