// RUN: msir-opt %s -p convert-msir-to-loops --split-input-file | filecheck %s

// Static results become trailing output buffers (msir.num_outputs); a dynamic
// result is allocated inside and returned. Intermediates are freed after their
// last use; a returned value is written straight into its output buffer. Each
// alloc names the site of its op (for allocation failures).

func.func @dps(%a: tensor<4xf32>, %d: tensor<?xf32>) -> (tensor<4xf32>, tensor<?xf32>) {
  %e = msir.exp %a : tensor<4xf32> loc("m.py":1:5)
  %r = msir.add %e, %a : tensor<4xf32> loc("m.py":2:5)
  %n = msir.neg %d : tensor<?xf32> loc("m.py":3:5)
  func.return %r, %n : tensor<4xf32>, tensor<?xf32>
}

// CHECK:      builtin.module attributes {msir.sites = ["m.py:1:5", "m.py:3:5"]} {
// CHECK-NEXT:   func.func @dps(%[[A:.*]]: memref<4xf32>, %[[D:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<4xf32>) -> memref<?xf32> attributes {msir.num_outputs = 1 : i64} {
// CHECK:          %[[DIM:.*]] = memref.dim %[[D]], %{{.*}} : memref<?xf32>
// CHECK:          %[[E:.*]] = memref.alloc() {msir.site = 0 : i64} : memref<4xf32>
// CHECK-NEXT:     scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:       %[[X:.*]] = memref.load %[[A]][%[[I]]] : memref<4xf32>
// CHECK-NEXT:       %[[Y:.*]] = math.exp %[[X]] : f32
// CHECK-NEXT:       memref.store %[[Y]], %[[E]][%[[I]]] : memref<4xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     scf.for
// CHECK:            arith.addf
// CHECK-NEXT:       memref.store %{{.*}}, %[[OUT]][%{{.*}}] : memref<4xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     memref.dealloc %[[E]] : memref<4xf32>
// CHECK-NEXT:     %[[N:.*]] = memref.alloc(%[[DIM]]) {msir.site = 1 : i64} : memref<?xf32>
// CHECK-NEXT:     scf.for %{{.*}} = %{{.*}} to %[[DIM]] step
// CHECK:            arith.negf
// CHECK-NOT:      memref.dealloc
// CHECK:          func.return %[[N]] : memref<?xf32>

// -----

// Calls follow the same convention: the caller allocates the static output,
// passes it, and frees it after its last use.

func.func @callee(%x: tensor<3xf64>) -> tensor<3xf64> {
  %y = msir.sqrt %x : tensor<3xf64>
  func.return %y : tensor<3xf64>
}
func.func @caller(%x: tensor<3xf64>) -> tensor<3xf64> {
  %y = func.call @callee(%x) : (tensor<3xf64>) -> tensor<3xf64>
  %z = msir.mul %y, %y : tensor<3xf64>
  func.return %z : tensor<3xf64>
}

// CHECK-LABEL: func.func @caller
// CHECK-SAME:    (%[[X:.*]]: memref<3xf64>, %[[OUT:.*]]: memref<3xf64>) attributes {msir.num_outputs = 1 : i64}
// CHECK:         %[[TMP:.*]] = memref.alloc() {{.*}}: memref<3xf64>
// CHECK-NEXT:    func.call @callee(%[[X]], %[[TMP]]) : (memref<3xf64>, memref<3xf64>) -> ()
// CHECK-NEXT:    scf.for
// CHECK:           arith.mulf
// CHECK:         memref.dealloc %[[TMP]] : memref<3xf64>
// CHECK-NEXT:    func.return

// -----

// matmul: loop order i, k, j with the contiguous j innermost, accumulating into
// the zeroed output; A[i, k] is read once per (i, k).

func.func @mm(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %r = msir.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @mm
// CHECK-SAME:    (%[[A:.*]]: memref<2x3xf32>, %[[B:.*]]: memref<3x4xf32>, %[[C:.*]]: memref<2x4xf32>)
// CHECK:         memref.store %{{.*}}, %[[C]]
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %[[TWO:.*]] step
// CHECK-NEXT:      scf.for %[[K:.*]] = %{{.*}} to %[[THREE:.*]] step
// CHECK-NEXT:        %[[AIK:.*]] = memref.load %[[A]][%[[I]], %[[K]]] : memref<2x3xf32>
// CHECK-NEXT:        scf.for %[[J:.*]] = %{{.*}} to %[[FOUR:.*]] step
// CHECK-NEXT:          %[[ACC:.*]] = memref.load %[[C]][%[[I]], %[[J]]]
// CHECK-NEXT:          %[[BKJ:.*]] = memref.load %[[B]][%[[K]], %[[J]]]
// CHECK-NEXT:          %[[P:.*]] = arith.mulf %[[AIK]], %[[BKJ]] : f32
// CHECK-NEXT:          %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:          memref.store %[[S]], %[[C]][%[[I]], %[[J]]]

// -----

// Runtime errors: integer floordiv by zero (code 2) and take out of range
// (code 1) call @__msir_error with the op's site in the msir.sites table, then
// go on with divisor 1 / index 0.

func.func @errors(%a: tensor<4xi64>, %b: tensor<4xi64>, %i: tensor<2xi32>) -> tensor<2xi64> {
  %q = msir.floordiv %a, %b : tensor<4xi64> loc("m.py":3:7)
  %t = msir.take %q[%i] axis 0 : tensor<4xi64>, tensor<2xi32> to tensor<2xi64> loc("m.py":4:9)
  func.return %t : tensor<2xi64>
}

// CHECK:       builtin.module attributes {msir.sites = ["m.py:3:7", "m.py:4:9"]} {
// CHECK-LABEL:   func.func @errors
// CHECK-DAG:       %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-DAG:       %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG:       %[[CODE2:.*]] = arith.constant 2 : i32
// CHECK-DAG:       %[[CODE1:.*]] = arith.constant 1 : i32
// CHECK:           %[[BZ:.*]] = arith.cmpi eq, %[[B:.*]], %[[ZERO]] : i64
// CHECK-NEXT:      scf.if %[[BZ]] {
// CHECK-NEXT:        func.call @__msir_error(%[[CODE2]], %[[ZERO]]) : (i32, i64) -> ()
// CHECK-NEXT:      }
// CHECK:           %[[SAFE:.*]] = arith.select %{{.*}}, %[[ONE]], %[[B]] : i64
// CHECK-NEXT:      arith.floordivsi %{{.*}}, %[[SAFE]] : i64
// CHECK:           %[[BAD:.*]] = arith.cmpi uge, %[[WRAPPED:.*]], %{{.*}} : i64
// CHECK-NEXT:      scf.if %[[BAD]] {
// CHECK-NEXT:        func.call @__msir_error(%[[CODE1]], %[[ONE]]) : (i32, i64) -> ()
// CHECK-NEXT:      }
// CHECK-NEXT:      %[[CLAMPED:.*]] = arith.select %[[BAD]], %[[ZERO]], %[[WRAPPED]] : i64
// CHECK-NEXT:      %[[IDX:.*]] = arith.index_cast %[[CLAMPED]] : i64 to index
// CHECK-NEXT:      memref.load %{{.*}}[%[[IDX]]] : memref<4xi64>
// CHECK:           memref.dealloc
// CHECK:         func.func private @__msir_error(i32, i64) -> ()

// -----

// Tuples fold away; identity casts are free; a returned argument is copied.

func.func @tuples(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %t = msir.make_tuple %a, %b : tensor<2xf32>, tensor<2xf32>
  %x = msir.get_tuple %t[1] : tuple<tensor<2xf32>, tensor<2xf32>> to tensor<2xf32>
  %y = msir.cast %x : tensor<2xf32> to tensor<2xf32>
  func.return %y, %y : tensor<2xf32>, tensor<2xf32>
}

// CHECK-LABEL: func.func @tuples
// CHECK-SAME:    (%{{.*}}: memref<2xf32>, %[[B:.*]]: memref<2xf32>, %[[O1:.*]]: memref<2xf32>, %[[O2:.*]]: memref<2xf32>)
// CHECK-NOT:     = msir.
// CHECK:         memref.load %[[B]]
// CHECK-NEXT:    memref.store %{{.*}}, %[[O1]]
// CHECK:         memref.load %[[B]]
// CHECK-NEXT:    memref.store %{{.*}}, %[[O2]]
// CHECK-NOT:     memref.alloc
// CHECK:         func.return

// -----

// A cotangent tape: msir.tape_zeros allocates and zero-fills a tape of as many
// rows as its operand; msir.tape_add, like msir.tape_set, updates the tape in
// place (no allocation in the loop: the new tape is the carried buffer, here
// the zero-filled one).
func.func @tape_acc(%t: tensor<?x2xf64>, %n: tensor<i64>, %v: tensor<2xf64>) -> tensor<?x2xf64> {
  %z = msir.tape_zeros %t : tensor<?x2xf64>
  %one = msir.constant dense<1> : tensor<i64>
  %zero = msir.constant dense<0> : tensor<i64>
  %r = msir.for %zero to %n step %one (%z) : (tensor<?x2xf64>) {
  ^bb0(%k: tensor<i64>, %a: tensor<?x2xf64>):
    %a2 = msir.tape_add %a[%k], %v : tensor<?x2xf64>, tensor<i64>, tensor<2xf64>
    msir.yield %a2 : tensor<?x2xf64>
  }
  func.return %r : tensor<?x2xf64>
}

// CHECK-LABEL: func.func @tape_acc(
// CHECK-SAME:    %[[T:.*]]: memref<?x2xf64>, %{{.*}}: memref<i64>, %[[V:.*]]: memref<2xf64>) -> memref<?x2xf64>
// CHECK:         %[[ROWS:.*]] = memref.dim %[[T]], %{{.*}} : memref<?x2xf64>
// CHECK-NEXT:    %[[Z:.*]] = memref.alloc(%[[ROWS]]) {{.*}} : memref<?x2xf64>
// CHECK-NEXT:    scf.for %{{.*}} = %{{.*}} to %[[ROWS]] step %{{.*}} {
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        memref.store %{{.*}}, %[[Z]][%{{.*}}, %{{.*}}] : memref<?x2xf64>
// The loop over k (its counter cast to i64 first) adds into the zero-filled
// tape itself: the carried buffer is updated in place, not copied.
// CHECK:           arith.index_cast %{{.*}} : index to i64
// CHECK-NOT:       memref.alloc(
// CHECK:           %[[ROW:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK-NEXT:      scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        %[[OLD:.*]] = memref.load %[[Z]][%[[ROW]], %[[J]]] : memref<?x2xf64>
// CHECK-NEXT:        %[[X:.*]] = memref.load %[[V]][%[[J]]] : memref<2xf64>
// CHECK-NEXT:        %[[SUM:.*]] = arith.addf %[[OLD]], %[[X]] : f64
// CHECK-NEXT:        memref.store %[[SUM]], %[[Z]][%[[ROW]], %[[J]]] : memref<?x2xf64>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NOT:     memref.alloc(
// CHECK:         func.return %[[Z]] : memref<?x2xf64>
