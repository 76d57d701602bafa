// RUN: msir-opt %s | msir-opt | filecheck %s --check-prefix=ROUND
// RUN: msir-opt %s -p convert-msir-to-loops | filecheck %s --check-prefix=LOOPS
// RUN: msir-opt %S/Inputs/arctan2-invalid.mlir --verify-diagnostics | filecheck %s --check-prefix=INVALID
// RUN: msir-opt %S/Inputs/arctan2-grad.mlir -p msir-grad | filecheck %s --check-prefix=GRAD

// msir.arctan2, the elementwise row of np.arctan2: its custom syntax, its verifier
// (floats only, like np.arctan2, which computes integers in float64) and its
// scalar lowering, one math.atan2 (a libm call) per element, and its reverse
// rule: d atan2(a, b) = (b da - a db) / (a^2 + b^2), from the operands alone.

func.func @atan2(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<f64>) -> tensor<4xf32> {
  %r = msir.arctan2 %a, %b : tensor<4xf32>
  %s = msir.arctan2 %c, %c : tensor<f64>
  func.return %r : tensor<4xf32>
}

// ROUND:      func.func @atan2(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<f64>) -> tensor<4xf32> {
// ROUND-NEXT:   %r = msir.arctan2 %a, %b : tensor<4xf32>
// ROUND-NEXT:   %s = msir.arctan2 %c, %c : tensor<f64>

// LOOPS:        scf.for
// LOOPS:          math.atan2 %{{.*}}, %{{.*}} : f32

// INVALID: {{^}}'msir.arctan2' operand has type tensor<4xi64>, expected element type in {float16, bfloat16, float32, float64}{{$}}

// GRAD:      func.func private @atan2_sum__bwd(%[[CT:.*]]: tensor<f64>, %[[A:.*]]: tensor<3xf64>, %[[B:.*]]: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
// GRAD-NEXT:   %[[G:.*]] = msir.broadcast_to %[[CT]] : tensor<f64> to tensor<3xf64>
// GRAD-NEXT:   %[[AA:.*]] = msir.mul %[[A]], %[[A]] : tensor<3xf64>
// GRAD-NEXT:   %[[BB:.*]] = msir.mul %[[B]], %[[B]] : tensor<3xf64>
// GRAD-NEXT:   %[[R2:.*]] = msir.add %[[AA]], %[[BB]] : tensor<3xf64>
// GRAD-NEXT:   %[[S:.*]] = msir.div %[[G]], %[[R2]] : tensor<3xf64>
// GRAD-NEXT:   %[[DA:.*]] = msir.mul %[[S]], %[[B]] : tensor<3xf64>
// GRAD-NEXT:   %[[SA:.*]] = msir.mul %[[S]], %[[A]] : tensor<3xf64>
// GRAD-NEXT:   %[[DB:.*]] = msir.neg %[[SA]] : tensor<3xf64>
// GRAD-NEXT:   func.return %[[DA]], %[[DB]] : tensor<3xf64>, tensor<3xf64>
