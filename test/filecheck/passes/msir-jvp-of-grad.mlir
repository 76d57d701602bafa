// RUN: msir-opt %s -p msir-grad,msir-jvp | filecheck %s
// RUN: msir-opt %s -p msir-grad,msir-jvp | msir-opt -p msir-grad,msir-jvp | filecheck %s
// Hessian-vector product of sum(x^3) (written with mul, exact in binary):
// gradient 3x^2, H v = 6 x v.
// RUN: msir-run %s --entry hvp --input '[1.0, 2.0, -1.0]:f64' --input '[1.0, 1.0, 2.0]:f64' | filecheck %s --check-prefix=VAL
// VAL:      result 0: tensor<3xf64> = {{\[ *3\., +12\., +3\.\]}}
// VAL-NEXT: result 1: tensor<3xf64> = {{\[ *6\., +12\., +-12\.\]}}

// Forward over reverse: once msir-grad has expanded the gradient into ordinary
// functions, msir-jvp differentiates them like any other: the tangent of
// @cube__grad calls the tangents of its augmented forward and of its adjoint.

func.func @cube(%x: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.mul %x, %x : tensor<3xf64>
  %1 = msir.mul %0, %x : tensor<3xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func @grad_cube(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @cube() : (tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x) : (tensor<3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}

func.func @hvp(%x: tensor<3xf64>, %v: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
  %0 = msir.closure @grad_cube() : (tensor<3xf64>) -> tensor<3xf64>
  %1 = msir.jvp %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<3xf64> to (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  %2, %3 = msir.apply %1(%x, %v) : (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  func.return %2, %3 : tensor<3xf64>, tensor<3xf64>
}

// CHECK-LABEL: func.func @hvp(
// CHECK-NEXT:    %{{.*}}, %{{.*}} = func.call @grad_cube__jvp(%x, %v)
// CHECK-NOT:     msir.jvp
// CHECK-LABEL: func.func private @cube__fwd__jvp(%0: tensor<3xf64>, %1: tensor<3xf64>)
// The adjoint's parameters (the cotangent 1 and the residuals) and the tangents of
// the residuals (the cotangent is a constant: it has none):
// CHECK-LABEL: func.func private @cube__bwd__jvp(%0: tensor<f64>, %1: tensor<3xf64>, %2: tensor<3xf64>, %3: tensor<3xf64>, %4: tensor<3xf64>)
// CHECK-LABEL: func.func private @cube__grad__jvp(%0: tensor<3xf64>, %1: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
// CHECK-NEXT:    %{{.*}}, %[[R1:.*]], %[[R2:.*]], %{{.*}}, %[[T1:.*]], %[[T2:.*]] = func.call @cube__fwd__jvp(%0, %1)
// CHECK-NEXT:    %[[ONE:.*]] = msir.constant dense<1.000000e+00> : tensor<f64>
// CHECK-NEXT:    %[[G:.*]], %[[HV:.*]] = func.call @cube__bwd__jvp(%[[ONE]], %[[R1]], %[[R2]], %[[T1]], %[[T2]])
// CHECK-NEXT:    func.return %[[G]], %[[HV]]
// CHECK-LABEL: func.func private @grad_cube__jvp(
// CHECK-NEXT:    func.call @cube__grad__jvp(%0, %1)
