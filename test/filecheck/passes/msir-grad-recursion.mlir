// RUN: msir-opt %s -p msir-grad | filecheck %s
// RUN: msir-opt %s -p msir-jvp | filecheck %s --check-prefix=JVP
// The output parses back, verifies, and differentiates again:
// RUN: msir-opt %s -p msir-grad | msir-opt -p msir-grad | filecheck %s
// RUN: msir-opt %s -p msir-grad,msir-jvp | filecheck %s --check-prefix=GONE
// GONE-NOT: msir.vjp
// GONE-NOT: msir.jvp
// GONE-NOT: msir.apply

// Differentiating a recursive function with a runtime depth (passes/grad.py,
// passes/jvp.py). The recursive call sits in an if region (outlined to
// @sin_n__if_region1). Reverse mode: the augmented forward of the region calls
// the primal @sin_n and keeps only the call's arguments (%y, %m); the region's
// adjoint first calls @sin_n__rebwd on them, which recomputes the callee's
// residuals and runs its adjoint. Forward mode: @sin_n__jvp reaches
// itself through the region's __jvp.

func.func @sin_n(%x: tensor<2xf64>, %n: tensor<i64>) -> tensor<2xf64> {
  %zero = msir.constant dense<0> : tensor<i64>
  %stop = msir.compare le, %n, %zero : tensor<i64>
  %r = msir.if %stop -> (tensor<2xf64>) {
    msir.yield %x : tensor<2xf64>
  } else {
    %s = msir.sin %x : tensor<2xf64>
    %y = msir.mul %s, %x : tensor<2xf64>
    %one = msir.constant dense<1> : tensor<i64>
    %m = msir.sub %n, %one : tensor<i64>
    %z = func.call @sin_n(%y, %m) : (tensor<2xf64>, tensor<i64>) -> tensor<2xf64>
    msir.yield %z : tensor<2xf64>
  }
  func.return %r : tensor<2xf64>
}

func.func @grad_sin_n(%x: tensor<2xf64>, %n: tensor<i64>, %ct: tensor<2xf64>) -> tensor<2xf64> {
  %f = msir.closure @sin_n() : (tensor<2xf64>, tensor<i64>) -> tensor<2xf64>
  %v = msir.vjp %f argnums array<i64: 0> : (tensor<2xf64>, tensor<i64>) -> tensor<2xf64> to (tensor<2xf64>, tensor<i64>) -> (tensor<2xf64>, (tensor<2xf64>) -> tensor<2xf64>)
  %y, %pb = msir.apply %v(%x, %n) : (tensor<2xf64>, tensor<i64>) -> (tensor<2xf64>, (tensor<2xf64>) -> tensor<2xf64>)
  %g = msir.apply %pb(%ct) : (tensor<2xf64>) -> tensor<2xf64>
  func.return %g : tensor<2xf64>
}
func.func @jvp_sin_n(%x: tensor<2xf64>, %n: tensor<i64>, %t: tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>) {
  %f = msir.closure @sin_n() : (tensor<2xf64>, tensor<i64>) -> tensor<2xf64>
  %j = msir.jvp %f argnums array<i64: 0> : (tensor<2xf64>, tensor<i64>) -> tensor<2xf64> to (tensor<2xf64>, tensor<i64>, tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>)
  %y, %ty = msir.apply %j(%x, %n, %t) : (tensor<2xf64>, tensor<i64>, tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>)
  func.return %y, %ty : tensor<2xf64>, tensor<2xf64>
}

// CHECK-LABEL: func.func private @sin_n__if_region1__fwd(%0: tensor<2xf64>, %1: tensor<i64>) -> (tensor<2xf64>, tensor<2xf64>, tensor<i64>, {{.*}}) {
// CHECK:         %[[Y:.*]] = msir.mul %{{.*}}, %0 : tensor<2xf64>
// CHECK:         %[[M:.*]] = msir.sub %1, %{{.*}} : tensor<i64>
// CHECK-NEXT:    %[[Z:.*]] = func.call @sin_n(%[[Y]], %[[M]]) : (tensor<2xf64>, tensor<i64>) -> tensor<2xf64>
// CHECK-NEXT:    func.return %[[Z]], %[[Y]], %[[M]], {{.*}}

// CHECK-LABEL: func.func private @sin_n__if_region1__bwd(%0: tensor<2xf64>, %1: tensor<2xf64>, %2: tensor<i64>, {{.*}}) -> tensor<2xf64> {
// CHECK-NEXT:    %[[CT:.*]] = func.call @sin_n__rebwd(%0, %1, %2) : (tensor<2xf64>, tensor<2xf64>, tensor<i64>) -> tensor<2xf64>
// CHECK:         msir.mul %[[CT]]
// CHECK:         func.return

// CHECK-LABEL: func.func private @sin_n__fwd(%0: tensor<2xf64>, %1: tensor<i64>)
// CHECK:         msir.if
// CHECK:           func.call @sin_n__if_region1__fwd(%0, %1)
// CHECK-LABEL: func.func private @sin_n__bwd(
// CHECK:         msir.if
// CHECK:           func.call @sin_n__if_region1__bwd(

// The recomputed forward returns only the residuals: the copy of the region's
// forward has no primal recursive call left (its result is not a residual), so
// the adjoint of a depth-d recursion does O(d) work.
// CHECK-LABEL: func.func private @sin_n__if_region1__fwd__part(%0: tensor<2xf64>, %1: tensor<i64>) -> (tensor<2xf64>, tensor<i64>, {{.*}}) {
// CHECK-NOT:     func.call
// CHECK:         func.return
// CHECK-LABEL: func.func private @sin_n__fwd__part(%0: tensor<2xf64>, %1: tensor<i64>)
// CHECK:           func.call @sin_n__if_region1__fwd__part(%0, %1)
// CHECK-LABEL: func.func private @sin_n__rebwd(%0: tensor<2xf64>, %1: tensor<2xf64>, %2: tensor<i64>) -> tensor<2xf64> {
// CHECK:         %[[R:.*]] = func.call @sin_n__fwd__part(%1, %2) :
// CHECK-NEXT:    func.call @sin_n__bwd(%0, %[[R]])
// CHECK-NEXT:    func.return %{{[0-9]+}} : tensor<2xf64>

// JVP-LABEL: func.func private @sin_n__if_region1__jvp(%0: tensor<2xf64>, %1: tensor<i64>, %2: tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>) {
// JVP:         %[[Y:.*]] = msir.mul %{{.*}}, %0 : tensor<2xf64>
// JVP:         %[[TY:.*]] = msir.add
// JVP:         %[[M:.*]] = msir.sub %1, %{{.*}} : tensor<i64>
// JVP-NEXT:    %[[Z:.*]], %[[TZ:.*]] = func.call @sin_n__jvp(%[[Y]], %[[M]], %[[TY]]) : (tensor<2xf64>, tensor<i64>, tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>)
// JVP-NEXT:    func.return %[[Z]], %[[TZ]] : tensor<2xf64>, tensor<2xf64>
// JVP-LABEL: func.func private @sin_n__jvp(%0: tensor<2xf64>, %1: tensor<i64>, %2: tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>) {
// JVP:         msir.if
// JVP:           func.call @sin_n__if_region1__jvp(%0, %1, %2)
