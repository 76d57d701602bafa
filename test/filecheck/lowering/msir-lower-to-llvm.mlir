// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=none math_impl=libm parallel=false}" | filecheck %s

builtin.module {
  func.func private @__msir_error(i32, i64)

  // A 2-D load with a dynamic dim: the address is a GEP on i*n+j, the loops
  // are blocks with the induction variable and iter-args as block arguments.
  func.func @rowsum(%a: memref<4x?xf32>, %out: memref<4xf32>) attributes {msir.num_outputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %zero = arith.constant 0.0 : f32
    %n = memref.dim %a, %c1 : memref<4x?xf32>
    scf.for %i = %c0 to %c4 step %c1 {
      %s = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
        %x = memref.load %a[%i, %j] : memref<4x?xf32>
        %e = math.exp %x : f32
        %acc2 = arith.addf %acc, %e : f32
        scf.yield %acc2 : f32
      }
      memref.store %s, %out[%i] : memref<4xf32>
    }
    func.return
  }

  // CHECK:      llvm.mlir.global weak @__msir_status(0 : i32)
  // CHECK:      llvm.mlir.global weak @__msir_site(0 : i64)
  // CHECK:      llvm.func internal @__msir_error(%{{.*}}: i32, %{{.*}}: i64)

  // CHECK-LABEL: llvm.func @rowsum(
  // CHECK-SAME:   %[[A:.*]]: !llvm.ptr {llvm.noalias}, %[[N:.*]]: i64, %[[OUT:.*]]: !llvm.ptr {llvm.noalias}) {
  // CHECK:        llvm.br ^[[OUTER:bb[0-9]+]](%{{.*}} : i64)
  // CHECK:      ^[[OUTER]](%[[I:.*]]: i64):
  // CHECK-NEXT:   %[[C:.*]] = llvm.icmp "slt" %[[I]], %{{.*}} : i64
  // CHECK-NEXT:   llvm.cond_br %[[C]], ^{{.*}}, ^{{.*}}
  // CHECK:      ^[[INNER:bb[0-9]+]](%[[J:.*]]: i64, %[[ACC:.*]]: f32):
  // CHECK:        %[[ROW:.*]] = llvm.mul %[[I]], %[[N]] overflow<nsw> : i64
  // CHECK-NEXT:   %[[LIN:.*]] = llvm.add %[[ROW]], %[[J]] overflow<nsw> : i64
  // CHECK-NEXT:   %[[P:.*]] = llvm.getelementptr inbounds %[[A]][%[[LIN]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  // CHECK-NEXT:   %[[X:.*]] = llvm.load %[[P]] : !llvm.ptr -> f32
  // CHECK-NEXT:   %[[E:.*]] = llvm.call_intrinsic "llvm.exp.f32"(%[[X]]) : (f32) -> f32
  // CHECK-NEXT:   %[[SUM:.*]] = llvm.fadd %[[ACC]], %[[E]] {fastmathFlags = #llvm.fastmath<reassoc>} : f32
  // CHECK:        llvm.br ^[[INNER]](%{{.*}}, %[[SUM]] : i64, f32)
  // CHECK:        llvm.getelementptr inbounds %[[OUT]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  // CHECK-NOT:    llvm.ptrtoint
  // CHECK:        llvm.return

  // The entry wrapper: data pointers from the args array, dynamic dims from
  // the dims array, the status reset before and returned after the call.
  // CHECK-LABEL: llvm.func @rowsum__entry(
  // CHECK-SAME:   %[[ARGS:.*]]: !llvm.ptr, %[[DIMS:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32 attributes {msir.num_outputs = 1 : i64, msir.arg_types = [memref<4x?xf32>, memref<4xf32>], msir.result_types = []} {
  // CHECK-NEXT:   %[[P0:.*]] = llvm.load %[[ARGS]] : !llvm.ptr -> !llvm.ptr
  // CHECK-NEXT:   %[[D0:.*]] = llvm.load %[[DIMS]] : !llvm.ptr -> i64
  // CHECK-NEXT:   %[[S1:.*]] = llvm.getelementptr inbounds %[[ARGS]][1] : (!llvm.ptr) -> !llvm.ptr, i64
  // CHECK-NEXT:   %[[P1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
  // CHECK-NEXT:   %[[ST:.*]] = llvm.mlir.addressof @__msir_status : !llvm.ptr
  // CHECK-NEXT:   %[[Z:.*]] = llvm.mlir.constant(0 : i32) : i32
  // CHECK-NEXT:   llvm.store %[[Z]], %[[ST]] : i32, !llvm.ptr
  // CHECK-NEXT:   llvm.call @rowsum(%[[P0]], %[[D0]], %[[P1]]) : (!llvm.ptr, i64, !llvm.ptr) -> ()
  // CHECK-NEXT:   %[[R:.*]] = llvm.load %[[ST]] : !llvm.ptr -> i32
  // CHECK-NEXT:   llvm.return %[[R]] : i32

  // f32 and f64 math in one module: fully suffixed intrinsics, libm by name.
  // A returned dynamic buffer: msir's allocator, a null check that records
  // error 3 at the op's site and returns at once, and a {ptr, i64} result.
  func.func private @make(%x: f64, %n: index) -> memref<?xf64> {
    %m = memref.alloc(%n) {msir.site = 7 : i64} : memref<?xf64>
    %e = math.exp %x : f64
    %t = math.tanh %e : f64
    %c0 = arith.constant 0 : index
    memref.store %t, %m[%c0] : memref<?xf64>
    func.return %m : memref<?xf64>
  }
  // CHECK-LABEL: llvm.func internal @make(
  // CHECK-SAME:   %{{.*}}: f64, %{{.*}}: i64) -> !llvm.struct<(!llvm.ptr, i64)> {
  // CHECK-DAG:    %[[SITE:.*]] = llvm.mlir.constant(7) : i64
  // CHECK-DAG:    %[[CODE:.*]] = llvm.mlir.constant(3 : i32) : i32
  // CHECK:        llvm.call_intrinsic "llvm.umul.with.overflow.i64"
  // CHECK:        %[[MEM:.*]] = llvm.call @__msir_alloc(%{{.*}}) : (i64) -> !llvm.ptr
  // CHECK-NEXT:   %[[ADDR:.*]] = llvm.ptrtoint %[[MEM]] : !llvm.ptr to i64
  // CHECK-NEXT:   %[[NULL:.*]] = llvm.icmp "eq" %[[ADDR]], %{{.*}} : i64
  // CHECK-NEXT:   llvm.cond_br %[[NULL]], ^[[FAIL:bb[0-9]+]], ^[[OK:bb[0-9]+]]
  // CHECK:      ^[[OK]]:
  // CHECK-NEXT:   llvm.call_intrinsic "llvm.exp.f64"
  // CHECK-NEXT:   llvm.call @tanh(%{{.*}}) : (f64) -> f64
  // CHECK:        llvm.return %{{.*}} : !llvm.struct<(!llvm.ptr, i64)>
  // CHECK:      ^[[BAIL:bb[0-9]+]]:
  // CHECK-NEXT:   %[[ZERO:.*]] = llvm.mlir.zero : !llvm.struct<(!llvm.ptr, i64)>
  // CHECK-NEXT:   llvm.return %[[ZERO]]
  // CHECK:      ^[[FAIL]]:
  // CHECK-NEXT:   llvm.call @__msir_error(%[[CODE]], %[[SITE]]) : (i32, i64) -> ()
  // CHECK-NEXT:   llvm.br ^[[BAIL]]

  // After a call that can fail, the caller checks the status and returns.
  func.func @twice(%x: f32, %n: index) -> (memref<?xf64>, f32) {
    %xd = arith.extf %x : f32 to f64
    %m = func.call @make(%xd, %n) : (f64, index) -> memref<?xf64>
    %e = math.exp %x : f32
    %t = math.tanh %e : f32
    func.return %m, %t : memref<?xf64>, f32
  }
  // CHECK-LABEL: llvm.func @twice(
  // CHECK-SAME:   %{{.*}}: f32, %{{.*}}: i64) -> !llvm.struct<(!llvm.ptr, i64, f32)> {
  // CHECK:        %[[RES:.*]] = llvm.call @make(%{{.*}}, %{{.*}}) : (f64, i64) -> !llvm.struct<(!llvm.ptr, i64)>
  // CHECK-NEXT:   llvm.extractvalue %[[RES]][0]
  // CHECK-NEXT:   llvm.extractvalue %[[RES]][1]
  // CHECK-NEXT:   %[[SP:.*]] = llvm.mlir.addressof @__msir_status : !llvm.ptr
  // CHECK-NEXT:   %[[S:.*]] = llvm.load %[[SP]] : !llvm.ptr -> i32
  // CHECK-NEXT:   %[[BAD:.*]] = llvm.icmp "ne" %[[S]], %{{.*}} : i32
  // CHECK-NEXT:   llvm.cond_br %[[BAD]], ^{{.*}}, ^{{.*}}
  // CHECK:        llvm.call_intrinsic "llvm.exp.f32"(%{{.*}}) : (f32) -> f32
  // CHECK-NEXT:   llvm.call @tanhf(%{{.*}}) : (f32) -> f32
  // CHECK:        llvm.insertvalue

  // The wrapper writes a returned memref's pointer and dims, then scalars.
  // CHECK-LABEL: llvm.func @twice__entry(
  // CHECK:        llvm.call @twice
  // CHECK:        llvm.store %{{.*}}, %[[O:.*]] : !llvm.ptr, !llvm.ptr
  // CHECK:        llvm.getelementptr inbounds %[[O]][1] : (!llvm.ptr) -> !llvm.ptr, i64
  // CHECK:        llvm.getelementptr inbounds %[[O]][2] : (!llvm.ptr) -> !llvm.ptr, i64

  // CHECK-DAG:  llvm.func @__msir_alloc(i64) -> !llvm.ptr attributes {passthrough = ["nounwind", "willreturn", "allockind(\22alloc,uninitialized\22)", "allocsize(0)", ["alloc-family", "msir"]]}
  // CHECK-DAG:  llvm.func @tanh(f64) -> f64
  // CHECK-DAG:  llvm.func @tanhf(f32) -> f32
}
