// RUN: msir-opt %s -p msir-grad | filecheck %s
// The output parses back, verifies, and is a fixed point of the pass (second-order
// functions included):
// RUN: msir-opt %s -p msir-grad | msir-opt -p msir-grad | filecheck %s
// After the pass no differentiation op and no function value is left:
// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=GONE
// GONE-NOT: msir.grad
// GONE-NOT: msir.closure
// GONE-NOT: msir.apply

// Each msir.grad becomes a call of @f__grad, which calls the augmented forward
// @f__fwd (results, then residuals) and the adjoint @f__bwd (output cotangents,
// then residuals). The generated functions follow the originals, in the order the
// pass creates them: a gradient taken inside a differentiated function is expanded
// before the outer one.

// The gradient of sum(sin(x) * y) w.r.t. both arguments.
func.func @sin_mul(%x: tensor<3xf64>, %y: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.sin %x : tensor<3xf64>
  %1 = msir.mul %0, %y : tensor<3xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func @grad_sin_mul(%x: tensor<3xf64>, %y: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
  %0 = msir.closure @sin_mul() : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0, 1> : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  %2, %3 = msir.apply %1(%x, %y) : (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  func.return %2, %3 : tensor<3xf64>, tensor<3xf64>
}

// The gradient w.r.t. the operand broadcast in an add.
func.func @bcast(%x: tensor<2x3xf64>, %b: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.broadcast_to %b : tensor<3xf64> to tensor<2x3xf64>
  %1 = msir.add %x, %0 : tensor<2x3xf64>
  %2 = msir.exp %1 : tensor<2x3xf64>
  %3 = msir.reduce_sum %2 axes array<i64: 0, 1> : tensor<2x3xf64> to tensor<f64>
  func.return %3 : tensor<f64>
}

func.func @grad_bcast(%x: tensor<2x3xf64>, %b: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @bcast() : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 1> : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<f64> to (tensor<2x3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x, %b) : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}

// The gradient through a call.
func.func @helper(%a: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.tanh %a : tensor<3xf64>
  %1 = msir.mul %0, %a : tensor<3xf64>
  func.return %1 : tensor<3xf64>
}

func.func @caller(%x: tensor<3xf64>) -> tensor<f64> {
  %0 = func.call @helper(%x) : (tensor<3xf64>) -> tensor<3xf64>
  %1 = msir.mul %0, %x : tensor<3xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func @grad_caller(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @caller() : (tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x) : (tensor<3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}

// Second order: the gradient of a function whose body takes a gradient.
func.func @outer(%x: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.closure @sin_sq() : (tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x) : (tensor<3xf64>) -> tensor<3xf64>
  %3 = msir.mul %2, %2 : tensor<3xf64>
  %4 = msir.reduce_sum %3 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %4 : tensor<f64>
}

func.func @sin_sq(%x: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.sin %x : tensor<3xf64>
  %1 = msir.mul %0, %x : tensor<3xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func @grad_outer(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @outer() : (tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x) : (tensor<3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}

// The gradient of a closure w.r.t. its parameter: the captured value becomes an
// argument of the generated functions.
func.func @scaled(%v: tensor<3xf64>, %w: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.mul %v, %w : tensor<3xf64>
  %1 = msir.tanh %0 : tensor<3xf64>
  %2 = msir.reduce_sum %1 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %2 : tensor<f64>
}

func.func @grad_scaled(%x: tensor<3xf64>, %w: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @scaled(%w) : (tensor<3xf64>) -> tensor<f64> captures tensor<3xf64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x) : (tensor<3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}

// The callers now call the generated gradient functions.
// CHECK-LABEL: func.func @grad_sin_mul(
// CHECK-NEXT:    %{{.*}}, %{{.*}} = func.call @sin_mul__grad(%x, %y)
// CHECK-LABEL: func.func @grad_bcast(
// CHECK-NEXT:    %{{.*}} = func.call @bcast__grad(%x, %b)
// CHECK-LABEL: func.func @grad_caller(
// CHECK-NEXT:    %{{.*}} = func.call @caller__grad(%x)
// The body of a function that takes a gradient is rewritten too:
// CHECK-LABEL: func.func @outer(
// CHECK-NEXT:    %[[G:.*]] = func.call @sin_sq__grad(%x)
// CHECK-NEXT:    msir.mul %[[G]], %[[G]]
// CHECK-LABEL: func.func @grad_outer(
// CHECK-NEXT:    %{{.*}} = func.call @outer__grad(%x)
// CHECK-LABEL: func.func @grad_scaled(
// CHECK-NEXT:    %{{.*}} = func.call @scaled__grad(%x, %w)

// sum(sin(x) * y): the forward saves y, sin(x) and x, each read by the adjoint;
// the adjoint of sin is cos.
// CHECK-LABEL: func.func private @sin_mul__fwd(%0: tensor<3xf64>, %1: tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) {
// CHECK-NEXT:    %[[SIN:.*]] = msir.sin %0
// CHECK-NEXT:    %[[MUL:.*]] = msir.mul %[[SIN]], %1
// CHECK-NEXT:    %[[SUM:.*]] = msir.reduce_sum %[[MUL]]
// CHECK-NEXT:    func.return %[[SUM]], %1, %[[SIN]], %0 :
// CHECK-LABEL: func.func private @sin_mul__bwd(%0: tensor<f64>, %1: tensor<3xf64>, %2: tensor<3xf64>, %3: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
// CHECK-NEXT:    %[[CT:.*]] = msir.broadcast_to %0 : tensor<f64> to tensor<3xf64>
// CHECK-NEXT:    %[[CTSIN:.*]] = msir.mul %[[CT]], %1
// CHECK-NEXT:    %[[GY:.*]] = msir.mul %[[CT]], %2
// CHECK-NEXT:    %[[COS:.*]] = msir.cos %3
// CHECK-NEXT:    %[[GX:.*]] = msir.mul %[[CTSIN]], %[[COS]]
// CHECK-NEXT:    func.return %[[GX]], %[[GY]] : tensor<3xf64>, tensor<3xf64>
// CHECK-LABEL: func.func private @sin_mul__grad(%0: tensor<3xf64>, %1: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
// CHECK-NEXT:    %[[F:.*]], %[[R1:.*]], %[[R2:.*]], %[[R3:.*]] = func.call @sin_mul__fwd(%0, %1)
// CHECK-NEXT:    %[[ONE:.*]] = msir.constant dense<1.000000e+00> : tensor<f64>
// CHECK-NEXT:    %[[GX:.*]], %[[GY:.*]] = func.call @sin_mul__bwd(%[[ONE]], %[[R1]], %[[R2]], %[[R3]])
// CHECK-NEXT:    func.return %[[GX]], %[[GY]]

// sum(exp(x + broadcast(b))): only exp's result is saved (not x, b or the
// broadcast), and the cotangent of b is the broadcast cotangent summed over the
// broadcast axis.
// CHECK-LABEL: func.func private @bcast__fwd(%0: tensor<2x3xf64>, %1: tensor<3xf64>) -> (tensor<f64>, tensor<2x3xf64>) {
// CHECK:         %[[EXP:.*]] = msir.exp
// CHECK-NEXT:    %[[SUM:.*]] = msir.reduce_sum %[[EXP]]
// CHECK-NEXT:    func.return %[[SUM]], %[[EXP]] : tensor<f64>, tensor<2x3xf64>
// Only the requested cotangent (of b) is computed: the adjoint has one result.
// CHECK-LABEL: func.func private @bcast__bwd(%0: tensor<f64>, %1: tensor<2x3xf64>) -> tensor<3xf64> {
// CHECK-NEXT:    %[[CT:.*]] = msir.broadcast_to %0 : tensor<f64> to tensor<2x3xf64>
// CHECK-NEXT:    %[[GADD:.*]] = msir.mul %[[CT]], %1 : tensor<2x3xf64>
// CHECK-NEXT:    %[[GB:.*]] = msir.reduce_sum %[[GADD]] axes array<i64: 0> : tensor<2x3xf64> to tensor<3xf64>
// CHECK-NEXT:    func.return %[[GB]]
// CHECK-LABEL: func.func private @bcast__grad(
// CHECK:         %[[GB:.*]] = func.call @bcast__bwd(
// CHECK-NEXT:    func.return %[[GB]] : tensor<3xf64>

// A call stays a call: @helper gets its own pair, the caller's forward calls
// @helper__fwd and keeps its residuals, the caller's adjoint calls @helper__bwd and
// adds its cotangent to the one of the direct use of x (fan-out).
// CHECK-LABEL: func.func private @helper__fwd(%0: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) {
// CHECK-LABEL: func.func private @helper__bwd(
// CHECK:         msir.sub
// CHECK-LABEL: func.func private @caller__fwd(%0: tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) {
// CHECK-NEXT:    %[[H:.*]], %[[HR1:.*]], %[[HR2:.*]] = func.call @helper__fwd(%0)
// CHECK-NEXT:    %[[M:.*]] = msir.mul %[[H]], %0
// CHECK-NEXT:    %[[S:.*]] = msir.reduce_sum %[[M]]
// CHECK-NEXT:    func.return %[[S]], %0, %[[H]], %[[HR1]], %[[HR2]] :
// CHECK-LABEL: func.func private @caller__bwd(%0: tensor<f64>, %1: tensor<3xf64>, %2: tensor<3xf64>, %3: tensor<3xf64>, %4: tensor<3xf64>) -> tensor<3xf64> {
// CHECK:         %[[GH:.*]] = msir.mul %{{.*}}, %1
// CHECK-NEXT:    %[[GX1:.*]] = msir.mul %{{.*}}, %2
// CHECK-NEXT:    %[[GX2:.*]] = func.call @helper__bwd(%[[GH]], %3, %4)
// CHECK-NEXT:    %[[GX:.*]] = msir.add %[[GX1]], %[[GX2]]
// CHECK-NEXT:    func.return %[[GX]]

// Second order: the inner gradient is expanded first; differentiating @outer then
// differentiates @sin_sq__grad, which gets its own pair like any called function
// (and so do @sin_sq__fwd and @sin_sq__bwd, which it calls).
// CHECK-LABEL: func.func private @sin_sq__fwd(
// CHECK-LABEL: func.func private @sin_sq__bwd(
// CHECK:         msir.cos
// CHECK-LABEL: func.func private @sin_sq__grad(
// In the same first round: the closure's adjoint gives only the cotangent of the
// parameter that is differentiated (argnums 0), not of the capture.
// CHECK-LABEL: func.func private @scaled__fwd(%0: tensor<3xf64>, %1: tensor<3xf64>)
// CHECK-LABEL: func.func private @scaled__bwd(
// CHECK:         func.return %[[GV:.*]] : tensor<3xf64>
// CHECK-LABEL: func.func private @scaled__grad(%0: tensor<3xf64>, %1: tensor<3xf64>) -> tensor<3xf64> {
// CHECK:         %[[GV:.*]] = func.call @scaled__bwd(
// CHECK-NEXT:    func.return %[[GV]] : tensor<3xf64>
// Then, in the second round, the second-order functions:
// CHECK-LABEL: func.func private @sin_sq__fwd__fwd(
// CHECK-LABEL: func.func private @sin_sq__fwd__bwd(
// CHECK-LABEL: func.func private @sin_sq__bwd__fwd(
// CHECK-LABEL: func.func private @sin_sq__bwd__bwd(
// The derivative of cos is -sin:
// CHECK:         msir.sin
// CHECK-NEXT:    msir.mul
// CHECK-NEXT:    msir.neg
// CHECK-LABEL: func.func private @sin_sq__grad__fwd(
// CHECK-NEXT:    func.call @sin_sq__fwd__fwd(
// CHECK:         func.call @sin_sq__bwd__fwd(
// CHECK-LABEL: func.func private @sin_sq__grad__bwd(
// CHECK-NEXT:    func.call @sin_sq__bwd__bwd(
// CHECK:         func.call @sin_sq__fwd__bwd(
// CHECK-LABEL: func.func private @outer__fwd(
// CHECK-NEXT:    func.call @sin_sq__grad__fwd(
// CHECK-LABEL: func.func private @outer__bwd(
// CHECK:         func.call @sin_sq__grad__bwd(
// CHECK-LABEL: func.func private @outer__grad(
// CHECK-NEXT:    func.call @outer__fwd(
// CHECK-NEXT:    msir.constant dense<1.000000e+00>
// CHECK-NEXT:    func.call @outer__bwd(
