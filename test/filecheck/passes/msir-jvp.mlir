// RUN: msir-opt %s -p msir-jvp | filecheck %s
// The output parses back, verifies, and is a fixed point of the pass:
// RUN: msir-opt %s -p msir-jvp | msir-opt -p msir-jvp | filecheck %s
// RUN: msir-opt %s -p msir-jvp | filecheck %s --check-prefix=GONE
// GONE-NOT: msir.jvp
// GONE-NOT: msir.closure
// GONE-NOT: msir.apply
// End to end, at x = 0 (sin 0 = 0, cos 0 = 1), so that the values are exact:
// d/dt sum(sin(x + t tx) * (y + t ty)) = sum(cos(x) tx y + sin(x) ty) = 1 + 4 + 9.
// RUN: msir-run %s --entry jvp_sin_mul --input '[0.0, 0.0, 0.0]:f64' --input '[1.0, 2.0, 3.0]:f64' --input '[1.0, 2.0, 3.0]:f64' --input '[5.0, 5.0, 5.0]:f64' | filecheck %s --check-prefix=VAL
// VAL-LABEL: result 0: tensor<f64> = 0.
// VAL-NEXT:  result 1: tensor<f64> = 14.
// d/dt sum(tanh(x + t tx) * c + tanh(c) * c) = sum((1 - tanh(x)^2) tx c), at x = 0:
// RUN: msir-run %s --entry jvp_caller --input '[0.0, 0.0, 0.0]:f64' --input '[1.0, 2.0, 3.0]:f64' --input '[1.0, 1.0, 2.0]:f64' | filecheck %s --check-prefix=CALL
// CALL: result 1: tensor<f64> = 9.

// Each msir.jvp becomes a call of @f__jvp(params..., tangents of the active
// params...) -> (results..., tangents...).

// The tangent of sum(sin(x) * y) along (tx, ty).
func.func @sin_mul(%x: tensor<3xf64>, %y: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.sin %x : tensor<3xf64>
  %1 = msir.mul %0, %y : tensor<3xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func @jvp_sin_mul(%x: tensor<3xf64>, %y: tensor<3xf64>, %tx: tensor<3xf64>, %ty: tensor<3xf64>) -> (tensor<f64>, tensor<f64>) {
  %0 = msir.closure @sin_mul() : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>
  %1 = msir.jvp %0 argnums array<i64: 0, 1> : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> (tensor<f64>, tensor<f64>)
  %2, %3 = msir.apply %1(%x, %y, %tx, %ty) : (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> (tensor<f64>, tensor<f64>)
  func.return %2, %3 : tensor<f64>, tensor<f64>
}

// Along x only: y gets no tangent parameter, and its terms are not computed.
func.func @jvp_sin_mul_x(%x: tensor<3xf64>, %y: tensor<3xf64>, %tx: tensor<3xf64>) -> (tensor<f64>, tensor<f64>) {
  %0 = msir.closure @sin_mul() : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>
  %1 = msir.jvp %0 argnums array<i64: 0> : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> (tensor<f64>, tensor<f64>)
  %2, %3 = msir.apply %1(%x, %y, %tx) : (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> (tensor<f64>, tensor<f64>)
  func.return %2, %3 : tensor<f64>, tensor<f64>
}

// Through calls: a call with an active argument calls @helper__jvp (for that
// active set), a call with none stays a call of @helper.
func.func @helper(%a: tensor<3xf64>, %b: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.tanh %a : tensor<3xf64>
  %1 = msir.mul %0, %b : tensor<3xf64>
  func.return %1 : tensor<3xf64>
}

func.func @caller(%x: tensor<3xf64>, %c: tensor<3xf64>) -> tensor<f64> {
  %0 = func.call @helper(%x, %c) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %1 = func.call @helper(%c, %c) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.add %0, %1 : tensor<3xf64>
  %3 = msir.reduce_sum %2 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %3 : tensor<f64>
}

func.func @jvp_caller(%x: tensor<3xf64>, %c: tensor<3xf64>, %tx: tensor<3xf64>) -> (tensor<f64>, tensor<f64>) {
  %0 = msir.closure @caller() : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>
  %1 = msir.jvp %0 argnums array<i64: 0> : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> (tensor<f64>, tensor<f64>)
  %2, %3 = msir.apply %1(%x, %c, %tx) : (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> (tensor<f64>, tensor<f64>)
  func.return %2, %3 : tensor<f64>, tensor<f64>
}

// CHECK-LABEL: func.func @jvp_sin_mul(
// CHECK-NEXT:    %{{.*}}, %{{.*}} = func.call @sin_mul__jvp(%x, %y, %tx, %ty)
// CHECK-LABEL: func.func @jvp_sin_mul_x(
// CHECK-NEXT:    %{{.*}}, %{{.*}} = func.call @sin_mul__jvp_1(%x, %y, %tx)
// CHECK-LABEL: func.func @jvp_caller(
// CHECK-NEXT:    %{{.*}}, %{{.*}} = func.call @caller__jvp(%x, %c, %tx)

// The tangent of sin(x) is cos(x) * tx; of a product, the sum of both terms.
// CHECK-LABEL: func.func private @sin_mul__jvp(%0: tensor<3xf64>, %1: tensor<3xf64>, %2: tensor<3xf64>, %3: tensor<3xf64>) -> (tensor<f64>, tensor<f64>) {
// CHECK-NEXT:    %[[SIN:.*]] = msir.sin %0
// CHECK-NEXT:    %[[COS:.*]] = msir.cos %0
// CHECK-NEXT:    %[[TSIN:.*]] = msir.mul %2, %[[COS]]
// CHECK-NEXT:    %[[MUL:.*]] = msir.mul %[[SIN]], %1
// CHECK-DAG:     %[[T1:.*]] = msir.mul %[[TSIN]], %1
// CHECK-DAG:     %[[T2:.*]] = msir.mul %3, %[[SIN]]
// CHECK:         %[[TMUL:.*]] = msir.add %[[T1]], %[[T2]]
// CHECK-NEXT:    %[[OUT:.*]] = msir.reduce_sum %[[MUL]]
// CHECK-NEXT:    %[[TOUT:.*]] = msir.reduce_sum %[[TMUL]]
// CHECK-NEXT:    func.return %[[OUT]], %[[TOUT]] : tensor<f64>, tensor<f64>

// CHECK-LABEL: func.func private @sin_mul__jvp_1(%0: tensor<3xf64>, %1: tensor<3xf64>, %2: tensor<3xf64>) -> (tensor<f64>, tensor<f64>) {
// CHECK-NEXT:    %[[SIN:.*]] = msir.sin %0
// CHECK-NEXT:    %[[COS:.*]] = msir.cos %0
// CHECK-NEXT:    %[[TSIN:.*]] = msir.mul %2, %[[COS]]
// CHECK-NEXT:    %[[MUL:.*]] = msir.mul %[[SIN]], %1
// CHECK-NEXT:    %[[TMUL:.*]] = msir.mul %[[TSIN]], %1
// CHECK-NOT:     msir.add
// CHECK:         %[[OUT:.*]] = msir.reduce_sum %[[MUL]]
// CHECK-NEXT:    %[[TOUT:.*]] = msir.reduce_sum %[[TMUL]]
// CHECK-NEXT:    func.return %[[OUT]], %[[TOUT]]

// CHECK-LABEL: func.func private @helper__jvp(%0: tensor<3xf64>, %1: tensor<3xf64>, %2: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
// CHECK:         msir.tanh %0
// CHECK:         func.return
// CHECK-LABEL: func.func private @caller__jvp(%0: tensor<3xf64>, %1: tensor<3xf64>, %2: tensor<3xf64>) -> (tensor<f64>, tensor<f64>) {
// CHECK-NEXT:    %{{.*}}, %{{.*}} = func.call @helper__jvp(%0, %1, %2)
// CHECK-NEXT:    %{{.*}} = func.call @helper(%1, %1)
