// RUN: msir-opt %s -p "msir-lower-to-llvm{parallel=false}" | filecheck %s
// RUN: msir-opt %s -p "msir-lower-to-llvm{parallel=false}" | msir-opt | filecheck %s
// RUN: msir-opt %s -p "msir-lower-to-llvm{parallel=false}" -t llvm | filecheck %s --check-prefix=IR

// An innermost loop without carried values whose iteration costs at least
// FOLD_TAIL_MIN_COST work units (16 tanh: 8 each) has its latch marked
// msir.fold_tail: LLVM folds its vector remainder into masked vector code
// instead of a scalar copy (llvm_abi, "Loop hints"). The mark is the width of
// the elements the loop loads, stores and computes when it is one width (the
// JIT asks LLVM for that many lanes), a unit attribute when it is not. A light
// loop, a loop that carries a value and a loop around another loop are not
// marked.

func.func @heavy(%a: memref<?xf32>, %o: memref<?xf32>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<?xf32>
    %t0 = math.tanh %x : f32
    %t1 = math.tanh %t0 : f32
    %t2 = math.tanh %t1 : f32
    %t3 = math.tanh %t2 : f32
    %t4 = math.tanh %t3 : f32
    %t5 = math.tanh %t4 : f32
    %t6 = math.tanh %t5 : f32
    %t7 = math.tanh %t6 : f32
    %t8 = math.tanh %t7 : f32
    %t9 = math.tanh %t8 : f32
    %t10 = math.tanh %t9 : f32
    %t11 = math.tanh %t10 : f32
    %t12 = math.tanh %t11 : f32
    %t13 = math.tanh %t12 : f32
    %t14 = math.tanh %t13 : f32
    %t15 = math.tanh %t14 : f32
    memref.store %t15, %o[%i] : memref<?xf32>
  }
  func.return
}
// CHECK-LABEL: llvm.func @heavy(
// CHECK:         llvm.call @tanhf
// CHECK:         llvm.br ^{{.*}}(%{{.*}} : i64) {msir.fold_tail = 32 : i64}
// CHECK-LABEL: llvm.func @heavy__entry(

func.func @mixed(%a: memref<?xf32>, %o: memref<?xf64>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<?xf32>
    %t0 = math.tanh %x : f32
    %t1 = math.tanh %t0 : f32
    %t2 = math.tanh %t1 : f32
    %t3 = math.tanh %t2 : f32
    %t4 = math.tanh %t3 : f32
    %t5 = math.tanh %t4 : f32
    %t6 = math.tanh %t5 : f32
    %t7 = math.tanh %t6 : f32
    %t8 = math.tanh %t7 : f32
    %t9 = math.tanh %t8 : f32
    %t10 = math.tanh %t9 : f32
    %t11 = math.tanh %t10 : f32
    %t12 = math.tanh %t11 : f32
    %t13 = math.tanh %t12 : f32
    %t14 = math.tanh %t13 : f32
    %t15 = math.tanh %t14 : f32
    %w = arith.extf %t15 : f32 to f64
    memref.store %w, %o[%i] : memref<?xf64>
  }
  func.return
}
// CHECK-LABEL: llvm.func @mixed(
// CHECK:         llvm.br ^{{.*}}(%{{.*}} : i64) {msir.fold_tail}
// CHECK-LABEL: llvm.func @mixed__entry(

func.func @light(%a: memref<?xf32>, %o: memref<?xf32>) attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<?xf32>
    %t = math.tanh %x : f32
    memref.store %t, %o[%i] : memref<?xf32>
  }
  func.return
}
// CHECK-LABEL: llvm.func @light(
// CHECK-NOT:     msir.fold_tail
// CHECK-LABEL: llvm.func @light__entry(

func.func @carried(%a: memref<?xf32>) -> f32 attributes {msir.num_outputs = 0 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %n = memref.dim %a, %c0 : memref<?xf32>
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (f32) {
    %x = memref.load %a[%i] : memref<?xf32>
    %t0 = math.tanh %x : f32
    %t1 = math.tanh %t0 : f32
    %t2 = math.tanh %t1 : f32
    %t3 = math.tanh %t2 : f32
    %t4 = math.tanh %t3 : f32
    %t5 = math.tanh %t4 : f32
    %t6 = math.tanh %t5 : f32
    %t7 = math.tanh %t6 : f32
    %t8 = math.tanh %t7 : f32
    %t9 = math.tanh %t8 : f32
    %t10 = math.tanh %t9 : f32
    %t11 = math.tanh %t10 : f32
    %t12 = math.tanh %t11 : f32
    %t13 = math.tanh %t12 : f32
    %t14 = math.tanh %t13 : f32
    %t15 = math.tanh %t14 : f32
    %next = arith.addf %acc, %t15 : f32
    scf.yield %next : f32
  }
  func.return %s : f32
}
// CHECK-LABEL: llvm.func @carried(
// CHECK-NOT:     msir.fold_tail
// CHECK-LABEL: llvm.func @carried__entry(

// In LLVM IR (what the JIT compiles), the marked latch carries the hint:
// IR-LABEL: define void @"heavy"(
// IR:         br label %{{b[0-9]+}}, !llvm.loop !1
// IR-LABEL: define void @"light"(
// IR-NOT:     !llvm.loop
// IR:       !0 = !{!"llvm.loop.vectorize.predicate.enable", i1 true}
// IR-NEXT:  !1 = distinct !{!1, !0}
