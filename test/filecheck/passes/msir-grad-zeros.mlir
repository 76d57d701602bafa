// RUN: msir-opt %s -p msir-grad | filecheck %s
// Symbolic zero cotangents: a result nobody differentiates takes no cotangent,
// and no rule runs on its behalf (sqrt's rule at 0 would make 0 / 0 = NaN of
// a zero cotangent).

// @stats returns (sum(x), sqrt(x)); @loss reads only the sum.
func.func @stats(%x: tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>) {
  %0 = msir.sqrt %x : tensor<3xf64>
  %1 = msir.reduce_sum %x axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %1, %0 : tensor<f64>, tensor<3xf64>
}

func.func @loss(%x: tensor<3xf64>) -> tensor<f64> {
  %0, %1 = func.call @stats(%x) : (tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>)
  func.return %0 : tensor<f64>
}

func.func @grad_loss(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @loss() : (tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x) : (tensor<3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}

// The call's unused result is dropped from its pair: the adjoint of @stats
// takes one cotangent and has no residual (sqrt's rule would read sqrt(x)).
// CHECK-LABEL: func.func private @stats__fwd(%{{.*}}: tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>) {
// CHECK-LABEL: func.func private @stats__bwd(%{{.*}}: tensor<f64>) -> tensor<3xf64> {
// CHECK-NOT:     msir.sqrt
// CHECK-NOT:     msir.div
// CHECK:         msir.broadcast_to
// CHECK-NOT:     msir.div
// CHECK:         func.return

// has_aux: the aux output (here sqrt(x), a vjp's second result) takes no
// cotangent either; the pullback calls the adjoint with the main one only.
func.func @with_aux(%x: tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>) {
  %0 = msir.sqrt %x : tensor<3xf64>
  %1 = msir.mul %x, %x : tensor<3xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %2, %0 : tensor<f64>, tensor<3xf64>
}

func.func @grad_aux(%x: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
  %0 = msir.closure @with_aux() : (tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>)
  %1 = msir.grad %0 argnums array<i64: 0> has_aux : (tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>) to (tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  %2, %3 = msir.apply %1(%x) : (tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  func.return %2, %3 : tensor<3xf64>, tensor<3xf64>
}

// CHECK-LABEL: func.func private @with_aux__bwd(%{{.*}}: tensor<f64>, %{{.*}}: tensor<3xf64>) -> tensor<3xf64> {
// CHECK-NOT:     msir.div
// CHECK:         msir.mul
// CHECK-NOT:     msir.div
// CHECK:         func.return
// CHECK-LABEL: func.func private @with_aux__grad(
// CHECK:         func.call @with_aux__bwd(%{{[^,]*}}, %{{[^,]*}}) : (tensor<f64>, tensor<3xf64>) -> tensor<3xf64>
