// RUN: msir-opt %s -p convert-msir-to-loops | filecheck %s --check-prefix=LOOPS
// RUN: msir-opt %s -p convert-msir-to-loops | msir-opt -p "msir-lower-to-llvm{vector_abi=none math_impl=libm parallel=false}" | filecheck %s --check-prefix=LLVM

// A failed msir.check calls @__msir_raise (code 6) with its values' 64 bits
// (a float widened to f64 and bitcast, an i64 as is, unused slots 0) and its
// message as JSON on the call; msir-lower-to-llvm puts the message in a
// constant global whose address the call records.

func.func @checked(%x: tensor<f32>, %n: tensor<i64>) -> tensor<f32> {
  %0 = msir.constant dense<0.000000e+00> : tensor<f32>
  %1 = msir.compare gt, %x, %0 : tensor<f32>
  msir.check %1, "ValueError", "x is {0:.2f} at {1}"(%x, %n : tensor<f32>, tensor<i64>) {python_numbers = array<i64: 1>} : tensor<i1>
  func.return %x : tensor<f32>
}

// LOOPS:         %[[TRUE:.*]] = arith.constant true
// LOOPS:         %[[ZERO:.*]] = arith.constant 0 : i64
// LOOPS:         %[[CODE:.*]] = arith.constant 6 : i32
// LOOPS:         %[[OK:.*]] = memref.load %{{.*}}[] : memref<i1>
// LOOPS-NEXT:    %[[FAILED:.*]] = arith.xori %[[OK]], %[[TRUE]] : i1
// LOOPS-NEXT:    %[[X:.*]] = memref.load %0[] : memref<f32>
// LOOPS-NEXT:    %[[N:.*]] = memref.load %1[] : memref<i64>
// LOOPS-NEXT:    scf.if %[[FAILED]] {
// LOOPS-NEXT:      %[[WIDE:.*]] = arith.extf %[[X]] : f32 to f64
// LOOPS-NEXT:      %[[BITS:.*]] = arith.bitcast %[[WIDE]] : f64 to i64
// LOOPS-NEXT:      func.call @__msir_raise(%[[CODE]], %[[ZERO]], %[[BITS]], %[[N]], %[[ZERO]], %[[ZERO]]) {msir.message = "{\22error\22: \22ValueError\22, \22message\22: \22x is {0:.2f} at {1}\22, \22dtypes\22: [\22float32\22, \22int64\22], \22python_numbers\22: [1]}"} : (i32, i64, i64, i64, i64, i64) -> ()
// LOOPS-NEXT:    }
// LOOPS:       func.func private @__msir_raise(i32, i64, i64, i64, i64, i64) -> ()

// LLVM:        llvm.mlir.global weak @__msir_message(0 : i64)
// LLVM:        llvm.mlir.global weak @__msir_value3(0 : i64)
// LLVM:        llvm.func internal @__msir_raise(%{{.*}}: i32, %{{.*}}: i64, %[[MSG:.*]]: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64) {
// LLVM:          %[[ADDR:.*]] = llvm.ptrtoint %[[MSG]] : !llvm.ptr to i64
// LLVM-NEXT:     llvm.store %[[ADDR]], %{{.*}} : i64, !llvm.ptr
// LLVM:        llvm.func @checked(
// LLVM:          %[[TEXT:.*]] = llvm.mlir.addressof @__msir_message_text0 : !llvm.ptr
// LLVM-NEXT:     llvm.call @__msir_raise(%{{.*}}, %{{.*}}, %[[TEXT]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i32, i64, !llvm.ptr, i64, i64, i64, i64) -> ()
// LLVM:        llvm.mlir.global internal constant @__msir_message_text0("{\22error\22: \22ValueError\22, \22message\22: \22x is {0:.2f} at {1}\22, \22dtypes\22: [\22float32\22, \22int64\22], \22python_numbers\22: [1]}\00")
