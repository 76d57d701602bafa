// RUN: msir-run %s --entry h --input '[1.0, 2.0, 3.0]:f64' --input '[2.0, 3.0, 4.0]:f64' --input '[1.0, 1.0, 1.0]:f64' | filecheck %s
// Regression test for a fixed bug: the tangent function of a closure with captures, @lambda__jvp, takes
// (params..., captures..., tangents...), but the expanded msir.jvp calls it with
// (applied args (params, tangents)..., captures...): the capture w and the tangent v
// trade places, and h returns (x * v, w * v) = ([1, 2, 3], [2, 3, 4]).

// jvp of (y -> y * w) at x along v: (x * w, v * w).
func.func @h(%x: tensor<3xf64>, %w: tensor<3xf64>, %v: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
  %0 = msir.closure @lambda(%w) : (tensor<3xf64>) -> tensor<3xf64> captures tensor<3xf64>
  %1 = msir.jvp %0 argnums array<i64: 0> : (tensor<3xf64>) -> tensor<3xf64> to (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  %2, %3 = msir.apply %1(%x, %v) : (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  func.return %2, %3 : tensor<3xf64>, tensor<3xf64>
}

func.func @lambda(%y: tensor<3xf64>, %w: tensor<3xf64>) -> tensor<3xf64> {
  %0 = msir.mul %y, %w : tensor<3xf64>
  func.return %0 : tensor<3xf64>
}

// CHECK:      result 0: tensor<3xf64> = {{\[ *2\., +6\., +12\.\]}}
// CHECK-NEXT: result 1: tensor<3xf64> = {{\[ *2\., +3\., +4\.\]}}
