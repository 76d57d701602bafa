// RUN: msir-opt %s -p convert-msir-to-loops --split-input-file | filecheck %s

// Buffers of loops (lowering/to_loops.py, `_Carry` and `hoisting`): no buffer is
// allocated inside a loop body, and no carried value is copied whole per
// iteration.

// A while whose new value is computed elementwise from the old one (Newton's
// iteration for sqrt): the fusion writes straight over the carried buffer, here
// the function's output buffer. The condition's |x * x - a| is computed inside
// its reduction's loop (no buffer: `_reduction_of`); its other intermediates get
// buffers allocated once before the loop and freed after it.
func.func @newton(%a: tensor<1024xf64>) -> tensor<1024xf64> {
  %r = msir.while (%a) : (tensor<1024xf64>) {
  ^bb0(%x: tensor<1024xf64>):
    %e = msir.fusion (%x, %a) : (tensor<1024xf64>, tensor<1024xf64>) -> tensor<1024xf64> {
    ^bb0(%xa: tensor<1024xf64>, %aa: tensor<1024xf64>):
      %0 = msir.mul %xa, %xa : tensor<1024xf64>
      %1 = msir.sub %0, %aa : tensor<1024xf64>
      %2 = msir.abs %1 : tensor<1024xf64>
      msir.yield %2 : tensor<1024xf64>
    }
    %m = msir.reduce_max %e axes array<i64: 0> : tensor<1024xf64> to tensor<f64>
    %tol = msir.constant dense<1.0e-10> : tensor<f64>
    %c = msir.compare ge, %m, %tol : tensor<f64>
    msir.condition %c : tensor<i1>
  } do {
  ^bb0(%x: tensor<1024xf64>):
    %n = msir.fusion (%x, %a) : (tensor<1024xf64>, tensor<1024xf64>) -> tensor<1024xf64> {
    ^bb0(%xa: tensor<1024xf64>, %aa: tensor<1024xf64>):
      %h = msir.constant dense<0.5> : tensor<f64>
      %hb = msir.broadcast_to %h : tensor<f64> to tensor<1024xf64>
      %0 = msir.div %aa, %xa : tensor<1024xf64>
      %1 = msir.add %xa, %0 : tensor<1024xf64>
      %2 = msir.mul %hb, %1 : tensor<1024xf64>
      msir.yield %2 : tensor<1024xf64>
    }
    msir.yield %n : tensor<1024xf64>
  }
  func.return %r : tensor<1024xf64>
}

// CHECK-LABEL: func.func @newton(
// CHECK-SAME:    %[[A:[^:]*]]: memref<1024xf64>, %[[OUT:[^:]*]]: memref<1024xf64>)
// The initial value is copied once into the output buffer, which the loop carries.
// CHECK:         memref.store %{{.*}}, %[[OUT]][%{{.*}}] : memref<1024xf64>
// CHECK-NOT:     memref.alloc() {{.*}} : memref<1024xf64>
// CHECK:         %[[M:.*]] = memref.alloc() {{.*}} : memref<f64>
// CHECK-NEXT:    %[[TOL:.*]] = memref.alloc() {{.*}} : memref<f64>
// CHECK-NEXT:    %[[C:.*]] = memref.alloc() {{.*}} : memref<i1>
// CHECK-NEXT:    scf.while () : () -> () {
// CHECK-NOT:       memref.alloc
// CHECK-NOT:       memref.dealloc
// The condition is one pass over x and a, accumulating the max in a register.
// CHECK-NEXT:      %[[MAX:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f64) {
// CHECK-NEXT:        %[[XV:.*]] = memref.load %[[OUT]][%{{.*}}] : memref<1024xf64>
// CHECK-NEXT:        arith.mulf %[[XV]], %[[XV]] : f64
// CHECK-NEXT:        memref.load %[[A]][%{{.*}}] : memref<1024xf64>
// CHECK-NEXT:        arith.subf
// CHECK-NEXT:        %[[ABS:.*]] = math.absf
// CHECK-NEXT:        %[[NEXT:.*]] = arith.maximumf %[[ACC]], %[[ABS]] : f64
// CHECK-NEXT:        scf.yield %[[NEXT]] : f64
// CHECK-NEXT:      }
// CHECK-NEXT:      memref.store %[[MAX]], %[[M]][] : memref<f64>
// CHECK:           scf.condition(%{{.*}})
// CHECK-NEXT:    } do {
// CHECK-NOT:       memref.alloc
// CHECK-NOT:       memref.dealloc
// The body is one loop nest that loads a and x and stores x' over x, in place.
// CHECK-NEXT:      scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        memref.load %[[A]][%[[I]]] : memref<1024xf64>
// CHECK-NEXT:        memref.load %[[OUT]][%[[I]]] : memref<1024xf64>
// CHECK:             memref.store %{{.*}}, %[[OUT]][%[[I]]] : memref<1024xf64>
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.dealloc %[[M]] : memref<f64>
// CHECK-NEXT:    memref.dealloc %[[TOL]] : memref<f64>
// CHECK-NEXT:    memref.dealloc %[[C]] : memref<i1>
// CHECK-NEXT:    func.return

// -----

// An RNN step h = tanh(W h): the matmul reads every element of h, but h is dead
// once it has run, so tanh writes the new h over the carried buffer (the output
// buffer). The matmul's and the counter's buffers are allocated once, outside
// the loop.
func.func @rnn(%w: tensor<8x8xf32>, %h0: tensor<8x4xf32>, %n: tensor<i64>) -> tensor<8x4xf32> {
  %zero = msir.constant dense<0> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %r = msir.for %zero to %n step %one (%h0) : (tensor<8x4xf32>) {
  ^bb0(%i: tensor<i64>, %h: tensor<8x4xf32>):
    %m = msir.matmul %w, %h : tensor<8x8xf32>, tensor<8x4xf32> to tensor<8x4xf32>
    %t = msir.tanh %m : tensor<8x4xf32>
    msir.yield %t : tensor<8x4xf32>
  }
  func.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: func.func @rnn(
// CHECK-SAME:    %[[W:[^:]*]]: memref<8x8xf32>, %[[H0:[^:]*]]: memref<8x4xf32>, %{{[^:]*}}: memref<i64>, %[[OUT:[^:]*]]: memref<8x4xf32>)
// The counter's buffer is the last memref<i64> allocated before the loop.
// CHECK:         scf.for
// CHECK:         %[[COUNTER:.*]] = memref.alloc() {{.*}} : memref<i64>
// CHECK-NOT:     memref.store %{{.*}}, %[[COUNTER]]
// CHECK:         %[[MM:.*]] = memref.alloc() {{.*}} : memref<8x4xf32>
// CHECK-NEXT:    scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NOT:       memref.alloc
// CHECK-NOT:       memref.dealloc
// CHECK:           memref.load %[[OUT]]
// CHECK:           memref.store %{{.*}}, %[[MM]]
// CHECK:           math.tanh
// CHECK-NEXT:      memref.store %{{.*}}, %[[OUT]]
// CHECK-NOT:       memref.store
// CHECK-NOT:       memref.alloc
// CHECK:         memref.dealloc %[[MM]] : memref<8x4xf32>
// CHECK-NEXT:    memref.dealloc %[[COUNTER]] : memref<i64>

// -----

// Power iteration h = W h: the op computing the new value reads the old one at
// every index, so the new value goes into the other of two buffers, which swap
// each iteration as loop-carried memrefs with a parity flag; after the loop the
// result is copied back once if the count was odd.
func.func @power(%w: tensor<8x8xf32>, %h0: tensor<8x4xf32>, %n: tensor<i64>) -> tensor<8x4xf32> {
  %zero = msir.constant dense<0> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %r = msir.for %zero to %n step %one (%h0) : (tensor<8x4xf32>) {
  ^bb0(%i: tensor<i64>, %h: tensor<8x4xf32>):
    %m = msir.matmul %w, %h : tensor<8x8xf32>, tensor<8x4xf32> to tensor<8x4xf32>
    msir.yield %m : tensor<8x4xf32>
  }
  func.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: func.func @power(
// CHECK-SAME:    %[[W:[^:]*]]: memref<8x8xf32>, %[[H0:[^:]*]]: memref<8x4xf32>, %{{[^:]*}}: memref<i64>, %[[OUT:[^:]*]]: memref<8x4xf32>)
// CHECK:         %[[SPARE:.*]] = memref.alloc() {{.*}} : memref<8x4xf32>
// CHECK-NEXT:    %[[COUNTER:.*]] = memref.alloc() {{.*}} : memref<i64>
// CHECK:         %{{.*}}, %{{.*}}, %[[ODD:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[CUR:.*]] = %[[OUT]], %[[NEXT:.*]] = %[[SPARE]], %[[FLAG:.*]] = %{{.*}}) -> (memref<8x4xf32>, memref<8x4xf32>, i1) {
// CHECK-NOT:       memref.alloc
// CHECK-NOT:       memref.dealloc
// CHECK-NOT:       memref.store %{{.*}}, %[[CUR]]
// CHECK:           memref.load %[[CUR]]
// CHECK-NOT:       memref.store %{{.*}}, %[[CUR]]
// CHECK:           memref.store %{{.*}}, %[[NEXT]]
// CHECK-NOT:       memref.store %{{.*}}, %[[CUR]]
// CHECK:           %[[FLIP:.*]] = arith.xori %[[FLAG]], %{{.*}} : i1
// CHECK-NEXT:      scf.yield %[[NEXT]], %[[CUR]], %[[FLIP]] : memref<8x4xf32>, memref<8x4xf32>, i1
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.if %[[ODD]] {
// CHECK:           memref.load %[[SPARE]]
// CHECK:           memref.store %{{.*}}, %[[OUT]]
// CHECK-NOT:       memref.store
// CHECK:         memref.dealloc %[[SPARE]] : memref<8x4xf32>
// CHECK-NEXT:    memref.dealloc %[[COUNTER]] : memref<i64>

// -----

// A tape grown by msir.tape_push in a while: the buffer (whose first dim is the
// capacity) and the length are loop-carried; a push that finds the buffer full
// moves it to one of twice the capacity (at least 4 rows), else it writes row
// `length` in place. The only allocation in the loop is that growth.
func.func @record(%x0: tensor<3xf32>, %limit: tensor<f32>) -> (tensor<i64>, tensor<?x3xf32>) {
  %zero = msir.constant dense<0> : tensor<i64>
  %t0 = msir.tape_alloc %zero : tensor<i64> to tensor<?x3xf32>
  %r, %n, %t = msir.while (%x0, %zero, %t0) : (tensor<3xf32>, tensor<i64>, tensor<?x3xf32>) {
  ^bb0(%x: tensor<3xf32>, %k: tensor<i64>, %tt: tensor<?x3xf32>):
    %s = msir.reduce_sum %x axes array<i64: 0> : tensor<3xf32> to tensor<f32>
    %c = msir.compare lt, %s, %limit : tensor<f32>
    msir.condition %c : tensor<i1>
  } do {
  ^bb0(%x: tensor<3xf32>, %k: tensor<i64>, %tt: tensor<?x3xf32>):
    %one = msir.constant dense<1> : tensor<i64>
    %k1 = msir.add %k, %one : tensor<i64>
    %t1 = msir.tape_push %tt, %x : tensor<?x3xf32>, tensor<3xf32>
    %x1 = msir.exp %x : tensor<3xf32>
    msir.yield %x1, %k1, %t1 : tensor<3xf32>, tensor<i64>, tensor<?x3xf32>
  }
  func.return %n, %t : tensor<i64>, tensor<?x3xf32>
}

// CHECK-LABEL: func.func @record(
// CHECK:         %[[T0:.*]] = memref.alloc(%{{.*}}) {{.*}} : memref<?x3xf32>
// CHECK:         scf.while (%[[BUF:.*]] = %[[T0]], %[[LEN:.*]] = %{{.*}}) : (memref<?x3xf32>, index) -> (memref<?x3xf32>, index) {
// CHECK:         } do {
// CHECK-NEXT:    ^{{.*}}(%[[B:.*]]: memref<?x3xf32>, %[[L:.*]]: index):
// CHECK-NOT:       memref.alloc
// CHECK:           %[[CAP:.*]] = memref.dim %[[B]], %{{.*}} : memref<?x3xf32>
// CHECK-NEXT:      %[[FULL:.*]] = arith.cmpi uge, %[[L]], %[[CAP]] : index
// CHECK-NEXT:      %[[NEW:.*]] = scf.if %[[FULL]] -> (memref<?x3xf32>) {
// CHECK-NEXT:        %[[TWICE:.*]] = arith.muli %[[CAP]], %{{.*}} : index
// CHECK-NEXT:        %[[GROWN:.*]] = arith.maxsi %[[TWICE]], %{{.*}} : index
// CHECK-NEXT:        %[[BIG:.*]] = memref.alloc(%[[GROWN]]) {{.*}} : memref<?x3xf32>
// CHECK:             memref.dealloc %[[B]] : memref<?x3xf32>
// CHECK-NEXT:        scf.yield %[[BIG]] : memref<?x3xf32>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        scf.yield %[[B]] : memref<?x3xf32>
// CHECK-NEXT:      }
// CHECK-NOT:       memref.alloc
// CHECK:           memref.store %{{.*}}, %[[NEW]][%[[L]], %{{.*}}] : memref<?x3xf32>
// CHECK-NOT:       memref.alloc
// CHECK:           %[[L1:.*]] = arith.addi %[[L]], %{{.*}} : index
// CHECK:           scf.yield %[[NEW]], %[[L1]]
// The returned tape is recast to its length (the buffer keeps its capacity).
// CHECK:         %[[EXACT:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [%{{.*}}, 3], strides: [3, 1] : memref<?x3xf32> to memref<?x3xf32>
// CHECK-NEXT:    func.return %[[EXACT]] : memref<?x3xf32>
