// RUN: msir-opt %s -p convert-msir-to-loops | filecheck %s
// msir.ramp: the count, clamped at 0, sizes the result's buffer (returned, as
// every result of runtime size); each row is start + i * step. A step of
// constant zeros (a broadcast to a runtime length) copies start.

func.func @ramp(%a: tensor<f64>, %d: tensor<f64>, %n: tensor<i64>) -> tensor<?xf64> {
  %0 = msir.ramp %a, %d, %n : tensor<f64>, tensor<i64> to tensor<?xf64>
  func.return %0 : tensor<?xf64>
}
// CHECK-LABEL: func.func @ramp(%{{.*}}: memref<f64>, %{{.*}}: memref<f64>, %{{.*}}: memref<i64>) -> memref<?xf64>
// CHECK: %[[N:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: %[[ROWS:.*]] = arith.maxsi %[[N]], %{{.*}} : index
// CHECK: %[[OUT:.*]] = memref.alloc(%[[ROWS]]) {{.*}}: memref<?xf64>
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[ROWS]] step %{{.*}} {
// CHECK: arith.sitofp %{{.*}} : i64 to f64
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[I]]] : memref<?xf64>
// CHECK: func.return %[[OUT]] : memref<?xf64>

func.func @repeat(%r: tensor<3xf32>, %n: tensor<i64>) -> tensor<?x3xf32> {
  %z = msir.constant dense<0.0> : tensor<3xf32>
  %0 = msir.ramp %r, %z, %n : tensor<3xf32>, tensor<i64> to tensor<?x3xf32>
  func.return %0 : tensor<?x3xf32>
}
// CHECK-LABEL: func.func @repeat
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}) {{.*}}: memref<?x3xf32>
// CHECK-NOT: arith.mulf
// CHECK: %[[V:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<3xf32>
// CHECK-NEXT: memref.store %[[V]], %[[OUT]][%{{.*}}, %{{.*}}] : memref<?x3xf32>
// CHECK: func.return %[[OUT]] : memref<?x3xf32>
