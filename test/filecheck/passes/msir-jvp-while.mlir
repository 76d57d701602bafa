// RUN: msir-opt %s -p msir-jvp | filecheck %s
// The output parses back and verifies (the while's condition region takes
// every carried value, tangents included):
// RUN: msir-opt %s -p msir-jvp | msir-opt | filecheck %s
// x = 3 is halved twice (3 -> 1.5 -> 0.75): value 0.75, tangent 0.25 * t.
// RUN: msir-run %s --entry jvp_shrink --input '3.0:f64' --input '2.0:f64' | filecheck %s --check-prefix=VAL
// VAL:       result 0: tensor<f64> = 0.75
// VAL-NEXT:  result 1: tensor<f64> = 0.5

func.func @shrink(%x0: tensor<f64>) -> tensor<f64> {
  %one = msir.constant dense<1.000000e+00> : tensor<f64>
  %r = msir.while (%x0) : (tensor<f64>) {
  ^bb0(%x: tensor<f64>):
    %c = msir.compare gt, %x, %one : tensor<f64>
    msir.condition %c : tensor<i1>
  } do {
  ^bb0(%x: tensor<f64>):
    %half = msir.constant dense<5.000000e-01> : tensor<f64>
    %h = msir.mul %x, %half : tensor<f64>
    msir.yield %h : tensor<f64>
  }
  func.return %r : tensor<f64>
}
func.func @jvp_shrink(%x: tensor<f64>, %t: tensor<f64>) -> (tensor<f64>, tensor<f64>) {
  %0 = msir.closure @shrink() : (tensor<f64>) -> tensor<f64>
  %1 = msir.jvp %0 argnums array<i64: 0> : (tensor<f64>) -> tensor<f64> to (tensor<f64>, tensor<f64>) -> (tensor<f64>, tensor<f64>)
  %2:2 = msir.apply %1(%x, %t) : (tensor<f64>, tensor<f64>) -> (tensor<f64>, tensor<f64>)
  func.return %2#0, %2#1 : tensor<f64>, tensor<f64>
}

// CHECK-LABEL: func.func private @shrink__jvp(
// CHECK:         %{{.*}}, %{{.*}} = msir.while (%{{.*}}, %{{.*}}) : (tensor<f64>, tensor<f64>) {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<f64>, %{{.*}}: tensor<f64>):
// CHECK-NEXT:      %[[C:.*]] = func.call @shrink__while_region0(%[[X]], %{{.*}})
// CHECK-NEXT:      msir.condition %[[C]] : tensor<i1>
// CHECK-NEXT:    } do {
// CHECK-NEXT:    ^bb0(%[[X2:.*]]: tensor<f64>, %[[T2:.*]]: tensor<f64>):
// CHECK-NEXT:      %{{.*}}, %{{.*}} = func.call @shrink__while_region1__jvp(%[[X2]], %[[T2]])
