// RUN: msir-opt %s -p convert-msir-to-loops | filecheck %s --check-prefix=LOOPS
// RUN: msir-opt %s -p convert-msir-to-loops,msir-lower-to-llvm | filecheck %s --check-prefix=LLVM

// A recursive call is marked for a stack check (with its site); the LLVM
// lowering compares the stack used since the entry wrapper (which records its
// frame address in @__msir_stack_base) with STACK_LIMIT before the call, and
// reports error 4 and returns at once beyond it.

func.func @count(%x: tensor<2xf64>, %n: tensor<i64>) -> tensor<2xf64> {
  %zero = msir.constant dense<0> : tensor<i64>
  %stop = msir.compare le, %n, %zero : tensor<i64>
  %r = msir.if %stop -> (tensor<2xf64>) {
    msir.yield %x : tensor<2xf64>
  } else {
    %s = msir.sin %x : tensor<2xf64>
    %one = msir.constant dense<1> : tensor<i64>
    %m = msir.sub %n, %one : tensor<i64>
    %z = func.call @count(%s, %m) : (tensor<2xf64>, tensor<i64>) -> tensor<2xf64> loc("m.py":3:12)
    msir.yield %z : tensor<2xf64>
  }
  func.return %r : tensor<2xf64>
}

// LOOPS:      builtin.module attributes {msir.sites = [{{.*}}"m.py:3:12"]} {
// LOOPS:        func.call @count(%{{.*}}) {msir.site = [[SITE:[0-9]+]] : i64, msir.stack_check} : (memref<2xf64>, memref<i64>, memref<2xf64>) -> ()

// LLVM:       llvm.mlir.global weak @__msir_stack_base(0 : i64)
// LLVM-LABEL: llvm.func @count(
// LLVM:         %[[BASE_PTR:.*]] = llvm.mlir.addressof @__msir_stack_base : !llvm.ptr
// LLVM-NEXT:    %[[BASE:.*]] = llvm.load %[[BASE_PTR]] : !llvm.ptr -> i64
// LLVM-NEXT:    %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// LLVM-NEXT:    %[[FRAME:.*]] = llvm.call_intrinsic "llvm.frameaddress.p0"(%[[ZERO]]) : (i32) -> !llvm.ptr
// LLVM-NEXT:    %[[SP:.*]] = llvm.ptrtoint %[[FRAME]] : !llvm.ptr to i64
// LLVM-NEXT:    %[[USED:.*]] = llvm.sub %[[BASE]], %[[SP]] : i64
// LLVM-NEXT:    %[[DEEP:.*]] = llvm.icmp "ugt" %[[USED]], %{{.*}} : i64
// LLVM-NEXT:    llvm.cond_br %[[DEEP]], ^[[REPORT:.*]], ^[[CALL:.*]]
// LLVM:       ^[[CALL]]:
// LLVM-NEXT:    llvm.call @count(
// LLVM:       ^[[REPORT]]:
// LLVM-NEXT:    llvm.call @__msir_error(
// LLVM-LABEL: llvm.func @count__entry(
// LLVM:         %[[F:.*]] = llvm.call_intrinsic "llvm.frameaddress.p0"
// LLVM-NEXT:    %[[A:.*]] = llvm.ptrtoint %[[F]] : !llvm.ptr to i64
// LLVM-NEXT:    %[[P:.*]] = llvm.mlir.addressof @__msir_stack_base : !llvm.ptr
// LLVM-NEXT:    llvm.store %[[A]], %[[P]] : i64, !llvm.ptr
// LLVM-NEXT:    llvm.call @count(
