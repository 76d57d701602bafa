// RUN: msir-opt %s -p convert-msir-to-loops --split-input-file | filecheck %s

// An msir.fusion becomes one loop nest over its iteration shape. Each input is
// loaded inside the nest: a broadcast input with fewer axes is indexed by the
// trailing induction variables only, a stretched axis of size 1 by constant 0,
// a rank-0 input with no index. Values inside the body live in registers (no
// memref.alloc); each result is stored into its output buffer in the same
// iteration; splat constants become scalar constants.

func.func @fusion(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %s: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %r:2 = msir.fusion (%b, %x, %s) : (tensor<8xf32>, tensor<4x8xf32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%ba: tensor<8xf32>, %xa: tensor<4x8xf32>, %sa: tensor<f32>):
    %c = msir.constant dense<2.0> : tensor<f32>
    %cb = msir.broadcast_to %c : tensor<f32> to tensor<4x8xf32>
    %0 = msir.broadcast_to %ba : tensor<8xf32> to tensor<4x8xf32>
    %1 = msir.add %xa, %0 : tensor<4x8xf32>
    %2 = msir.mul %1, %cb : tensor<4x8xf32>
    %sb = msir.broadcast_to %sa : tensor<f32> to tensor<4x8xf32>
    %3 = msir.sub %2, %sb : tensor<4x8xf32>
    %4 = msir.tanh %3 : tensor<4x8xf32>
    msir.yield %4, %1 : tensor<4x8xf32>, tensor<4x8xf32>
  }
  func.return %r#0, %r#1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @fusion
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<8xf32>, %[[S:.*]]: memref<f32>, %[[OUT0:.*]]: memref<4x8xf32>, %[[OUT1:.*]]: memref<4x8xf32>)
// CHECK-SAME:    attributes {msir.num_outputs = 2 : i64}
// CHECK-NOT:     memref.alloc
// CHECK:         %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NOT:     memref.alloc
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-DAG:         %[[BV:.*]] = memref.load %[[B]][%[[J]]] : memref<8xf32>
// CHECK-DAG:         %[[XV:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK:             %[[ADD:.*]] = arith.addf %[[XV]], %[[BV]] : f32
// CHECK-NEXT:        %[[MUL:.*]] = arith.mulf %[[ADD]], %[[TWO]] : f32
// CHECK-NEXT:        %[[SV:.*]] = memref.load %[[S]][] : memref<f32>
// CHECK-NEXT:        %[[SUB:.*]] = arith.subf %[[MUL]], %[[SV]] : f32
// CHECK-NEXT:        %[[T:.*]] = math.tanh %[[SUB]] : f32
// CHECK-NEXT:        memref.store %[[T]], %[[OUT0]][%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:        memref.store %[[ADD]], %[[OUT1]][%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NOT:     scf.for
// CHECK-NOT:     memref.alloc
// CHECK:         func.return

// -----

// A size-1 axis stretched by the broadcast is read at index 0.

func.func @stretch(%x: tensor<3x4xf32>, %c: tensor<3x1xf32>) -> tensor<3x4xf32> {
  %r = msir.fusion (%c, %x) : (tensor<3x1xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> {
  ^bb0(%ca: tensor<3x1xf32>, %xa: tensor<3x4xf32>):
    %0 = msir.broadcast_to %ca : tensor<3x1xf32> to tensor<3x4xf32>
    %1 = msir.div %xa, %0 : tensor<3x4xf32>
    %2 = msir.exp %1 : tensor<3x4xf32>
    msir.yield %2 : tensor<3x4xf32>
  }
  func.return %r : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @stretch
// CHECK-SAME:    (%[[X:.*]]: memref<3x4xf32>, %[[C:.*]]: memref<3x1xf32>, %[[OUT:.*]]: memref<3x4xf32>)
// CHECK:         %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NOT:     memref.alloc
// CHECK:         scf.for %[[I:.*]] = %[[ZERO]] to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      scf.for %[[J:.*]] = %[[ZERO]] to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        %[[CV:.*]] = memref.load %[[C]][%[[I]], %[[ZERO]]] : memref<3x1xf32>
// CHECK-NEXT:        %[[XV:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<3x4xf32>
// CHECK-NEXT:        %[[D:.*]] = arith.divf %[[XV]], %[[CV]] : f32
// CHECK-NEXT:        %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:        memref.store %[[E]], %[[OUT]][%[[I]], %[[J]]] : memref<3x4xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return

// -----

// A fusion whose only use is the next op, a reduction (here over the rows,
// which no row group takes), is computed inside the reduction's loop nest: its
// result is never stored, no buffer is allocated (`_reduction_of`).

func.func @feeds_reduce(%x: tensor<4x8xf32>) -> tensor<1x8xf32> {
  %f = msir.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x8xf32>):
    %0 = msir.exp %xa : tensor<4x8xf32>
    %1 = msir.neg %0 : tensor<4x8xf32>
    msir.yield %1 : tensor<4x8xf32>
  } loc("m.py":3:5)
  %2 = msir.reduce_sum %f axes array<i64: 0> : tensor<4x8xf32> to tensor<1x8xf32> loc("m.py":4:5)
  func.return %2 : tensor<1x8xf32>
}

// CHECK:       builtin.module attributes {msir.sites = []} {
// CHECK-LABEL: func.func @feeds_reduce
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<1x8xf32>)
// CHECK-NOT:     memref.alloc
// CHECK:         scf.for
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        memref.store %{{.*}}, %[[OUT]]
// CHECK:         scf.for
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        %[[ACC:.*]] = memref.load %[[OUT]]
// CHECK-NEXT:        memref.load %[[X]]
// CHECK-NEXT:        math.exp
// CHECK-NEXT:        %[[N:.*]] = arith.negf
// CHECK-NEXT:        %[[S:.*]] = arith.addf %[[ACC]], %[[N]] : f32
// CHECK-NEXT:        memref.store %[[S]], %[[OUT]]
// CHECK-NOT:     memref.dealloc
// CHECK:         func.return

// -----

// A fusion result with another use besides the reduction is materialised in
// one buffer, allocated at the fusion's location and freed after its last use.

func.func @feeds_reduce_and_more(%x: tensor<4x8xf32>) -> (tensor<1x8xf32>, tensor<4x8xf32>) {
  %f = msir.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x8xf32>):
    %0 = msir.exp %xa : tensor<4x8xf32>
    %1 = msir.neg %0 : tensor<4x8xf32>
    msir.yield %1 : tensor<4x8xf32>
  } loc("m.py":3:5)
  %2 = msir.reduce_sum %f axes array<i64: 0> : tensor<4x8xf32> to tensor<1x8xf32> loc("m.py":4:5)
  %3 = msir.mul %f, %f : tensor<4x8xf32> loc("m.py":5:5)
  func.return %2, %3 : tensor<1x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @feeds_reduce_and_more
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<1x8xf32>, %[[OUT2:.*]]: memref<4x8xf32>)
// CHECK:         %[[BUF:.*]] = memref.alloc() {msir.site = 0 : i64} : memref<4x8xf32>
// CHECK:         scf.for
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        memref.load %[[X]]
// CHECK-NEXT:        math.exp
// CHECK-NEXT:        %[[N:.*]] = arith.negf
// CHECK-NEXT:        memref.store %[[N]], %[[BUF]]
// CHECK:         memref.load %[[BUF]]
// CHECK:         memref.dealloc %[[BUF]] : memref<4x8xf32>
// CHECK-NEXT:    func.return

// -----

// Row groups: consecutive fusions and reductions that keep axis 0 run inside
// one loop over the rows (a row softmax here), so each row is read while it is
// in cache. A value used only inside the group lives in a one-row buffer
// indexed at row 0, allocated before the loop and freed after it; a value used
// after the group (%e, by the last op) keeps its full buffer, written at the
// row; the returned value is written straight into the output.

func.func @row_softmax(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = msir.reduce_max %x axes array<i64: 1> : tensor<4x8xf32> to tensor<4x1xf32>
  %e = msir.fusion (%m, %x) : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%ma: tensor<4x1xf32>, %xa: tensor<4x8xf32>):
    %0 = msir.broadcast_to %ma : tensor<4x1xf32> to tensor<4x8xf32>
    %1 = msir.sub %xa, %0 : tensor<4x8xf32>
    %2 = msir.exp %1 : tensor<4x8xf32>
    msir.yield %2 : tensor<4x8xf32>
  }
  %s = msir.reduce_sum %e axes array<i64: 1> : tensor<4x8xf32> to tensor<4x1xf32>
  %y = msir.fusion (%s, %e) : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%sa: tensor<4x1xf32>, %ea: tensor<4x8xf32>):
    %3 = msir.broadcast_to %sa : tensor<4x1xf32> to tensor<4x8xf32>
    %4 = msir.div %ea, %3 : tensor<4x8xf32>
    msir.yield %4 : tensor<4x8xf32>
  }
  %z = msir.neg %e : tensor<4x8xf32>
  func.return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @row_softmax
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32>, %[[Y:.*]]: memref<4x8xf32>, %[[Z:.*]]: memref<4x8xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK:         %[[M:.*]] = memref.alloc() {{.*}} : memref<1x1xf32>
// CHECK-NEXT:    %[[E:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK-NEXT:    %[[S:.*]] = memref.alloc() {{.*}} : memref<1x1xf32>
// CHECK-NEXT:    scf.for %[[R:.*]] = %[[C0]] to
// CHECK-NEXT:      %[[MAX:.*]] = scf.for %[[J:.*]] = {{.*}} iter_args
// CHECK-NEXT:        memref.load %[[X]][%[[R]], %[[J]]]
// CHECK-NEXT:        arith.maximumf
// CHECK-NEXT:        scf.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      memref.store %[[MAX]], %[[M]][%[[C0]], %[[C0]]]
// CHECK-NEXT:      scf.for %[[J2:.*]] = %[[C0]] to
// CHECK-NEXT:        memref.load %[[M]][%[[C0]], %[[C0]]]
// CHECK-NEXT:        memref.load %[[X]][%[[R]], %[[J2]]]
// CHECK-NEXT:        arith.subf
// CHECK-NEXT:        %[[EXP:.*]] = math.exp
// CHECK-NEXT:        memref.store %[[EXP]], %[[E]][%[[R]], %[[J2]]]
// CHECK:           memref.store {{.*}}, %[[S]][%[[C0]], %[[C0]]]
// CHECK:           scf.for %[[J3:.*]] = %[[C0]] to
// CHECK-NEXT:        memref.load %[[S]][%[[C0]], %[[C0]]]
// CHECK-NEXT:        memref.load %[[E]][%[[R]], %[[J3]]]
// CHECK-NEXT:        %[[D:.*]] = arith.divf
// CHECK-NEXT:        memref.store %[[D]], %[[Y]][%[[R]], %[[J3]]]
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.dealloc %[[M]]
// CHECK-NEXT:    memref.dealloc %[[S]]
// CHECK-NEXT:    scf.for
// CHECK:         arith.negf
// CHECK:         memref.dealloc %[[E]]
// CHECK-NEXT:    func.return

// -----

// A rank-0 fusion is straight-line code, with no loop; a dynamic one loops up
// to memref.dim of its input and allocates its returned result.

func.func @scalar(%s: tensor<f32>) -> tensor<f32> {
  %f = msir.fusion (%s) : (tensor<f32>) -> tensor<f32> {
  ^bb0(%sa: tensor<f32>):
    %0 = msir.exp %sa : tensor<f32>
    %1 = msir.neg %0 : tensor<f32>
    msir.yield %1 : tensor<f32>
  }
  func.return %f : tensor<f32>
}

// CHECK-LABEL: func.func @scalar
// CHECK-SAME:    (%[[S:.*]]: memref<f32>, %[[OUT:.*]]: memref<f32>)
// CHECK-NEXT:    %[[V:.*]] = memref.load %[[S]][] : memref<f32>
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:    %[[N:.*]] = arith.negf %[[E]] : f32
// CHECK-NEXT:    memref.store %[[N]], %[[OUT]][] : memref<f32>
// CHECK-NEXT:    func.return

func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %f = msir.fusion (%x) : (tensor<?x4xf32>) -> tensor<?x4xf32> {
  ^bb0(%xa: tensor<?x4xf32>):
    %0 = msir.exp %xa : tensor<?x4xf32>
    %1 = msir.neg %0 : tensor<?x4xf32>
    msir.yield %1 : tensor<?x4xf32>
  }
  func.return %f : tensor<?x4xf32>
}

// CHECK-LABEL: func.func @dynamic
// CHECK-SAME:    (%[[X:.*]]: memref<?x4xf32>) -> memref<?x4xf32>
// CHECK:         %[[N:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x4xf32>
// CHECK-NEXT:    %[[R:.*]] = memref.alloc(%[[N]]) {{.*}}: memref<?x4xf32>
// CHECK-NOT:     memref.alloc
// CHECK-NEXT:    scf.for %{{.*}} = %{{.*}} to %[[N]] step
// CHECK-NEXT:      scf.for
// CHECK:             math.exp
// CHECK-NEXT:        arith.negf
// CHECK-NEXT:        memref.store %{{.*}}, %[[R]]
// CHECK:         func.return %[[R]] : memref<?x4xf32>

// -----

// compare, select and cast inside a fusion become scalar arith ops.

func.func @cmpsel(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xi32> {
  %f = msir.fusion (%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi32> {
  ^bb0(%xa: tensor<3xf32>, %ya: tensor<3xf32>):
    %m = msir.compare lt, %xa, %ya : tensor<3xf32>
    %s = msir.select %m, %xa, %ya : tensor<3xi1>, tensor<3xf32>
    %c = msir.cast %s : tensor<3xf32> to tensor<3xi32>
    msir.yield %c : tensor<3xi32>
  }
  func.return %f : tensor<3xi32>
}

// CHECK-LABEL: func.func @cmpsel
// CHECK:         scf.for %[[I:.*]] =
// CHECK-NEXT:      %[[A:.*]] = memref.load %{{.*}}[%[[I]]] : memref<3xf32>
// CHECK-NEXT:      %[[B:.*]] = memref.load %{{.*}}[%[[I]]] : memref<3xf32>
// CHECK-NEXT:      %[[LT:.*]] = arith.cmpf olt, %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.select %[[LT]], %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[C:.*]] = arith.fptosi %[[S]] : f32 to i32
// CHECK-NEXT:      memref.store %[[C]], %{{.*}}[%[[I]]] : memref<3xi32>
