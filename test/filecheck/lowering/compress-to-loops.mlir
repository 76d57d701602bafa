// RUN: msir-opt %s -p convert-msir-to-loops | filecheck %s
// msir.compress: a loop counts the true elements of the mask, the count sizes
// the result's buffer, a second loop copies the selected rows to consecutive
// rows. msir.expand: zeros, then the rows written in order where the mask is
// true, a row past the updates' last reported (code 1) and skipped.

func.func @compress(%x: tensor<5x4xf32>, %m: tensor<5xi1>) -> tensor<?x4xf32> {
  %0 = msir.compress %x[%m] : tensor<5x4xf32>, tensor<5xi1> to tensor<?x4xf32>
  func.return %0 : tensor<?x4xf32>
}
// CHECK-LABEL: func.func @compress(%{{.*}}: memref<5x4xf32>, %{{.*}}: memref<5xi1>) -> memref<?x4xf32>
// CHECK: %[[COUNT:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (index) {
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : index
// CHECK: %[[OUT:.*]] = memref.alloc(%[[COUNT]]) {{.*}}: memref<?x4xf32>
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK: memref.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}] : memref<?x4xf32>
// CHECK: func.return %[[OUT]] : memref<?x4xf32>

func.func @expand(%u: tensor<?x4xf32>, %m: tensor<5xi1>) -> tensor<5x4xf32> {
  %0 = msir.expand %u[%m] : tensor<?x4xf32>, tensor<5xi1> to tensor<5x4xf32>
  func.return %0 : tensor<5x4xf32>
}
// CHECK-LABEL: func.func @expand(%{{.*}}: memref<?x4xf32>, %{{.*}}: memref<5xi1>, %{{.*}}: memref<5x4xf32>)
// CHECK: %[[ROWS:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<?x4xf32>
// CHECK: memref.store %{{.*}}, %[[OUT:.*]][%{{.*}}, %{{.*}}] : memref<5x4xf32>
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK: %[[BAD:.*]] = arith.cmpi uge, %{{.*}}, %[[ROWS]] : index
// CHECK: func.call @__msir_error
// CHECK: arith.cmpi ult, %{{.*}}, %[[ROWS]] : index
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x4xf32>
