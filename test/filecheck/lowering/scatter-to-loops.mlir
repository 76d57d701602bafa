// RUN: msir-opt %s -p convert-msir-to-loops --split-input-file | filecheck %s

// scatter_slice: zero-fill the whole result, then one loop nest over the input
// writing at start + k*step (negative steps included).

func.func @scatter_slice(%a: tensor<2x4xf32>) -> tensor<5x4xf32> {
  %r = msir.scatter_slice %a starts array<i64: 1, 3> steps array<i64: 2, -1> : tensor<2x4xf32> to tensor<5x4xf32>
  func.return %r : tensor<5x4xf32>
}

// CHECK-LABEL: func.func @scatter_slice(%{{.*}}: memref<2x4xf32>, %{{.*}}: memref<5x4xf32>)
// CHECK-SAME:      attributes {msir.num_outputs = 1 : i64}
// CHECK-DAG:     %[[ZERO:[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[C5:[0-9]+]] = arith.constant 5 : index
// CHECK-DAG:     %[[C4:[0-9]+]] = arith.constant 4 : index
// CHECK-DAG:     %[[C2:[0-9]+]] = arith.constant 2 : index
// CHECK-DAG:     %[[C1:[0-9]+]] = arith.constant 1 : index
// CHECK-DAG:     %[[CM1:[0-9]+]] = arith.constant -1 : index
// CHECK-DAG:     %[[C3:[0-9]+]] = arith.constant 3 : index
// CHECK:         scf.for %[[I:[0-9]+]] = %{{.*}} to %[[C5]] step %[[C1]] {
// CHECK-NEXT:      scf.for %[[J:[0-9]+]] = %{{.*}} to %[[C4]] step %[[C1]] {
// CHECK-NEXT:        memref.store %[[ZERO]], %[[OUT:[0-9]+]][%[[I]], %[[J]]] : memref<5x4xf32>
// CHECK:         scf.for %[[K0:[0-9]+]] = %{{.*}} to %[[C2]] step %[[C1]] {
// CHECK-NEXT:      scf.for %[[K1:[0-9]+]] = %{{.*}} to %[[C4]] step %[[C1]] {
// CHECK-NEXT:        %[[M0:[0-9]+]] = arith.muli %[[K0]], %[[C2]] : index
// CHECK-NEXT:        %[[R0:[0-9]+]] = arith.addi %[[M0]], %[[C1]] : index
// CHECK-NEXT:        %[[M1:[0-9]+]] = arith.muli %[[K1]], %[[CM1]] : index
// CHECK-NEXT:        %[[R1:[0-9]+]] = arith.addi %[[M1]], %[[C3]] : index
// CHECK-NEXT:        %[[V:[0-9]+]] = memref.load %[[IN:[0-9]+]][%[[K0]], %[[K1]]] : memref<2x4xf32>
// CHECK-NEXT:        memref.store %[[V]], %[[OUT]][%[[R0]], %[[R1]]] : memref<5x4xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         func.return

// -----

// scatter_add: zero-fill, then a loop over the updates. The index is widened,
// wrapped when negative, reported (code 1) when still out of range, and the
// read-modify-write into the result only happens when it is in range.

func.func @scatter_add(%u: tensor<3x4xf64>, %i: tensor<3xi32>) -> tensor<5x4xf64> {
  %r = msir.scatter_add %u[%i] axis 0 : tensor<3x4xf64>, tensor<3xi32> to tensor<5x4xf64> loc("m.py":2:3)
  func.return %r : tensor<5x4xf64>
}

// CHECK:       builtin.module attributes {msir.sites = ["m.py:2:3"]} {
// CHECK-LABEL:   func.func @scatter_add(
// CHECK-SAME:        %[[U:[0-9]+]]: memref<3x4xf64>, %[[IND:[0-9]+]]: memref<3xi32>, %[[OUT:[0-9]+]]: memref<5x4xf64>)
// CHECK-DAG:       %[[FZERO:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG:       %[[N:[0-9]+]] = arith.constant 5 : i64
// CHECK-DAG:       %[[ZERO:[0-9]+]] = arith.constant 0 : i64
// CHECK-DAG:       %[[CODE1:[0-9]+]] = arith.constant 1 : i32
// CHECK:           memref.store %[[FZERO]], %[[OUT]][%{{.*}}, %{{.*}}] : memref<5x4xf64>
// CHECK:           scf.for %[[K:[0-9]+]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        scf.for %[[J:[0-9]+]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:          %[[RAW32:[0-9]+]] = memref.load %[[IND]][%[[K]]] : memref<3xi32>
// CHECK-NEXT:          %[[RAW:[0-9]+]] = arith.extsi %[[RAW32]] : i32 to i64
// CHECK-NEXT:          %[[NEG:[0-9]+]] = arith.cmpi slt, %[[RAW]], %[[ZERO]] : i64
// CHECK-NEXT:          %[[PLUS:[0-9]+]] = arith.addi %[[RAW]], %[[N]] : i64
// CHECK-NEXT:          %[[W:[0-9]+]] = arith.select %[[NEG]], %[[PLUS]], %[[RAW]] : i64
// CHECK-NEXT:          %[[BAD:[0-9]+]] = arith.cmpi uge, %[[W]], %[[N]] : i64
// CHECK-NEXT:          scf.if %[[BAD]] {
// CHECK-NEXT:            func.call @__msir_error(%[[CODE1]], %[[ZERO]]) : (i32, i64) -> ()
// CHECK-NEXT:          }
// CHECK-NEXT:          %[[OK:[0-9]+]] = arith.cmpi ult, %[[W]], %[[N]] : i64
// CHECK-NEXT:          scf.if %[[OK]] {
// CHECK-NEXT:            %[[IDX:[0-9]+]] = arith.index_cast %[[W]] : i64 to index
// CHECK-NEXT:            %[[OLD:[0-9]+]] = memref.load %[[OUT]][%[[IDX]], %[[J]]] : memref<5x4xf64>
// CHECK-NEXT:            %[[UPD:[0-9]+]] = memref.load %[[U]][%[[K]], %[[J]]] : memref<3x4xf64>
// CHECK-NEXT:            %[[SUM:[0-9]+]] = arith.addf %[[OLD]], %[[UPD]] : f64
// CHECK-NEXT:            memref.store %[[SUM]], %[[OUT]][%[[IDX]], %[[J]]] : memref<5x4xf64>
// CHECK-NEXT:          }
// CHECK:         func.func private @__msir_error(i32, i64) -> ()

// -----

// scatter_add along an inner axis with a 2-D index tensor and a dynamic leading
// dim: the result's dynamic dim is read from the updates; integers accumulate
// with addi.

func.func @scatter_add_inner(%u: tensor<?x2x3xi64>, %i: tensor<2x3xi64>) -> tensor<?x4xi64> {
  %r = msir.scatter_add %u[%i] axis 1 : tensor<?x2x3xi64>, tensor<2x3xi64> to tensor<?x4xi64>
  func.return %r : tensor<?x4xi64>
}

// CHECK-LABEL: func.func @scatter_add_inner(
// CHECK-SAME:      %[[U:[0-9]+]]: memref<?x2x3xi64>, %[[IND:[0-9]+]]: memref<2x3xi64>) -> memref<?x4xi64>
// CHECK:         %[[D0:[0-9]+]] = memref.dim %[[U]], %{{.*}} : memref<?x2x3xi64>
// CHECK:         %[[OUT:[0-9]+]] = memref.alloc(%[[D0]]) {msir.site = {{.*}}} : memref<?x4xi64>
// CHECK:         memref.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}] : memref<?x4xi64>
// CHECK:         scf.for %[[A:[0-9]+]] = %{{.*}} to %[[D0]] step
// CHECK:           scf.for %[[B:[0-9]+]] = %{{.*}} to
// CHECK:             scf.for %[[C:[0-9]+]] = %{{.*}} to
// CHECK-NEXT:          %[[RAW:[0-9]+]] = memref.load %[[IND]][%[[B]], %[[C]]] : memref<2x3xi64>
// CHECK-NOT:           arith.extsi
// CHECK:               scf.if
// CHECK:                 %[[IDX:[0-9]+]] = arith.index_cast %{{.*}} : i64 to index
// CHECK-NEXT:            %[[OLD:[0-9]+]] = memref.load %[[OUT]][%[[A]], %[[IDX]]] : memref<?x4xi64>
// CHECK-NEXT:            %[[UPD:[0-9]+]] = memref.load %[[U]][%[[A]], %[[B]], %[[C]]] : memref<?x2x3xi64>
// CHECK-NEXT:            %[[SUM:[0-9]+]] = arith.addi %[[OLD]], %[[UPD]] : i64
// CHECK-NEXT:            memref.store %[[SUM]], %[[OUT]][%[[A]], %[[IDX]]] : memref<?x4xi64>
// CHECK:         func.return %[[OUT]] : memref<?x4xi64>

// -----

// stop_gradient is the identity on values: a copy into its own buffer.

func.func @stop_gradient(%a: tensor<4xf64>) -> tensor<4xf64> {
  %r = msir.stop_gradient %a : tensor<4xf64>
  %s = msir.mul %r, %a : tensor<4xf64>
  func.return %s : tensor<4xf64>
}

// CHECK-LABEL: func.func @stop_gradient(
// CHECK-SAME:      %[[A:[0-9]+]]: memref<4xf64>, %[[OUT:[0-9]+]]: memref<4xf64>)
// CHECK:         %[[BUF:[0-9]+]] = memref.alloc() {msir.site = {{.*}}} : memref<4xf64>
// CHECK-NEXT:    scf.for %[[I:[0-9]+]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      %[[V:[0-9]+]] = memref.load %[[A]][%[[I]]] : memref<4xf64>
// CHECK-NEXT:      memref.store %[[V]], %[[BUF]][%[[I]]] : memref<4xf64>
// CHECK-NEXT:    }
// CHECK:         arith.mulf
// CHECK:         memref.dealloc %[[BUF]] : memref<4xf64>
// CHECK-NOT:     msir.
