// RUN: msir-opt %s -p msir-grad-jvp | filecheck %s
// RUN: msir-opt %s -p msir-grad-jvp | msir-opt -p msir-grad-jvp | filecheck %s
// RUN: msir-opt %s -p msir-grad-jvp,msir-symbol-dce | grep func.func | filecheck %s --check-prefix=DCE
// RUN: msir-run %s --entry reverse_over_forward --input '[1.0, 2.0, -1.0]:f64' --input '[1.0, 1.0, 2.0]:f64' | filecheck %s --check-prefix=VAL
// RUN: msir-run %s --entry forward_over_reverse --input '[1.0, 2.0, -1.0]:f64' --input '[1.0, 1.0, 2.0]:f64' | filecheck %s --check-prefix=VAL2

// Both nestings of the two modes in one module: the gradient of a function
// holding an msir.jvp (which msir-grad alone cannot expand), and the tangent of
// a function holding an msir.grad (which msir-jvp alone cannot). msir-grad-jvp
// expands the innermost first, whatever its mode; both are Hessian-vector
// products of sum(x^3): H v = 6 x v.

func.func private @cube(%x: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.mul %x, %x : tensor<3xf64>
  %1 = msir.mul %0, %x : tensor<3xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func private @directional(%x: tensor<3xf64>, %v: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.closure @cube() : (tensor<3xf64>) -> tensor<f64>
  %1 = msir.jvp %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>) -> (tensor<f64>, tensor<f64>)
  %2, %3 = msir.apply %1(%x, %v) : (tensor<3xf64>, tensor<3xf64>) -> (tensor<f64>, tensor<f64>)
  func.return %3 : tensor<f64>
}

func.func @reverse_over_forward(%x: tensor<3xf64>, %v: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @directional() : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x, %v) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}

func.func private @gradient(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @cube() : (tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x) : (tensor<3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}

func.func @forward_over_reverse(%x: tensor<3xf64>, %v: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @gradient() : (tensor<3xf64>) -> tensor<3xf64>
  %1 = msir.jvp %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<3xf64> to (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  %2, %3 = msir.apply %1(%x, %v) : (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  func.return %3 : tensor<3xf64>
}

// CHECK-NOT:   msir.grad
// CHECK-NOT:   msir.jvp
// CHECK-LABEL: func.func private @directional(
// CHECK-NEXT:    %{{.*}}, %{{.*}} = func.call @cube__jvp(%x, %v)
// CHECK-LABEL: func.func @reverse_over_forward(
// CHECK-NEXT:    func.call @directional__grad(%x, %v)
// CHECK-LABEL: func.func private @gradient(
// CHECK-NEXT:    func.call @cube__grad(%x)
// CHECK-LABEL: func.func @forward_over_reverse(
// CHECK-NEXT:    %{{.*}}, %{{.*}} = func.call @gradient__jvp(%x, %v)
// The gradient of the tangent function, and the tangent of the gradient:
// CHECK-LABEL: func.func private @directional__fwd(
// CHECK-NEXT:    func.call @cube__jvp__fwd(
// CHECK-LABEL: func.func private @directional__bwd(
// CHECK:         func.call @cube__jvp__bwd(
// CHECK-LABEL: func.func private @cube__grad__jvp(
// CHECK-NEXT:    func.call @cube__fwd__jvp(
// CHECK:         func.call @cube__bwd__jvp(
// CHECK-NOT:   msir.grad
// CHECK-NOT:   msir.jvp

// msir-symbol-dce then keeps only what the public functions reach: not the
// primals whose derivatives replaced them, nor @cube__jvp and @cube__grad,
// which the derivatives of their callers do not call.
// DCE:      func.func @reverse_over_forward(
// DCE-NEXT: func.func @forward_over_reverse(
// DCE-NEXT: func.func private @cube__jvp__fwd(
// DCE-NEXT: func.func private @cube__jvp__bwd(
// DCE-NEXT: func.func private @directional__fwd(
// DCE-NEXT: func.func private @directional__bwd(
// DCE-NEXT: func.func private @directional__grad(
// DCE-NEXT: func.func private @cube__fwd__jvp(
// DCE-NEXT: func.func private @cube__bwd__jvp(
// DCE-NEXT: func.func private @cube__grad__jvp(
// DCE-NEXT: func.func private @gradient__jvp(
// DCE-NOT:  func.func

// VAL:  result 0: tensor<3xf64> = {{\[ *6\., +12\., +-12\.\]}}
// VAL2: result 0: tensor<3xf64> = {{\[ *6\., +12\., +-12\.\]}}
