// RUN: msir-opt %s -p msir-fuse,convert-msir-to-loops | filecheck %s
// RUN: msir-opt %s -p "msir-fuse,convert-msir-to-loops,msir-lower-to-llvm{vector_abi=none math_impl=libm}" -t llvm | filecheck %s --check-prefix=LLVM
// RUN: msir-opt %s -p "msir-fuse,convert-msir-to-loops,msir-lower-to-llvm{vector_abi=none math_impl=libm parallel=false}" -t llvm | filecheck %s --check-prefix=SERIAL

// Matmul epilogues (lowering/to_loops.py, `_gemm_epilogues`): an elementwise
// fusion whose input is a product with no other use gets the product computed
// straight into one of its results (no buffer for the product) and its loop
// marked msir.gemm_epilogue. msir-lower-to-llvm outlines that loop as a task
// and makes the product and the loop one call __msir_gemm_epilogue_<t>(gemm
// arguments, task, ctx, min_iters), which runs the task on each chunk of rows
// after the chunk's gemm (lowering/blas.py, "Epilogues"). Without parallel
// loops the pair is lowered as written: a gemm, then the loop.

// relu(x @ w + b): C is the output buffer, read and written in place.
func.func @dense_relu(%x: tensor<256x128xf32>, %w: tensor<128x64xf32>, %b: tensor<64xf32>) -> tensor<256x64xf32> {
  %p = msir.matmul %x, %w : tensor<256x128xf32>, tensor<128x64xf32> to tensor<256x64xf32>
  %bb = msir.broadcast_to %b : tensor<64xf32> to tensor<256x64xf32>
  %z = msir.add %p, %bb : tensor<256x64xf32>
  %zero = msir.constant dense<0.000000e+00> : tensor<f32>
  %zb = msir.broadcast_to %zero : tensor<f32> to tensor<256x64xf32>
  %r = msir.maximum %z, %zb : tensor<256x64xf32>
  func.return %r : tensor<256x64xf32>
}

// CHECK-LABEL: func.func @dense_relu(
// CHECK-SAME:    %[[X:[0-9]+]]: memref<256x128xf32>, %[[W:[0-9]+]]: memref<128x64xf32>, %[[B:[0-9]+]]: memref<64xf32>, %[[OUT:[0-9]+]]: memref<256x64xf32>)
// CHECK-NOT:     memref.alloc
// CHECK:         %[[PO:.*]] = "memref.cast"(%[[OUT]]) : (memref<256x64xf32>) -> memref<f32>
// CHECK-NEXT:    func.call @__msir_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PO]], %{{.*}}, %{{.*}})
// CHECK-NEXT:    scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-DAG:         memref.load %[[B]][%[[J]]] : memref<64xf32>
// CHECK-DAG:         memref.load %[[OUT]][%[[I]], %[[J]]] : memref<256x64xf32>
// CHECK:             arith.addf
// CHECK:             arith.maximumf
// CHECK:             memref.store %{{.*}}, %[[OUT]][%[[I]], %[[J]]] : memref<256x64xf32>
// CHECK:         } {msir.gemm_epilogue}
// CHECK-NEXT:    func.return

// LLVM-LABEL: define void @"dense_relu"(
// LLVM-NOT:     __msir_parallel_for
// LLVM-NOT:     call void @"__msir_gemm_f32"
// LLVM:         call void @"__msir_gemm_epilogue_f32"(i64 0, i64 0, i64 256, i64 64, i64 128, ptr %{{.*}}, i64 0, i64 128, ptr %{{.*}}, i64 0, i64 64, ptr %[[C:.*]], i64 0, i64 64, ptr @"dense_relu.par0.task", ptr %{{.*}}, i64 {{[0-9]+}})
// LLVM-NEXT:    ret void
// LLVM:       define void @"dense_relu.par0"(i64 %{{.*}}, i64 %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}})
// LLVM:         @"llvm.maximum.f32"
// LLVM:       define void @"dense_relu.par0.task"(ptr %{{.*}}, i64 %{{.*}}, i64 %{{.*}}, i64 %{{.*}})

// SERIAL-LABEL: define void @"dense_relu"(
// SERIAL-NOT:     __msir_gemm_epilogue
// SERIAL:         call void @"__msir_gemm_f32"(
// SERIAL:         @"llvm.maximum.f32"
// SERIAL:         ret void

// The forward layer of a training step, z and relu(z) both returned (f64, x
// transposed): the product is computed into z's buffer, relu(z) into its own.
func.func @layer_two_results(%xt: tensor<96x128xf64>, %w: tensor<96x64xf64>, %b: tensor<64xf64>) -> (tensor<128x64xf64>, tensor<128x64xf64>) {
  %x = msir.transpose %xt, array<i64: 1, 0> : tensor<96x128xf64> to tensor<128x96xf64>
  %p = msir.matmul %x, %w : tensor<128x96xf64>, tensor<96x64xf64> to tensor<128x64xf64>
  %bb = msir.broadcast_to %b : tensor<64xf64> to tensor<128x64xf64>
  %z = msir.add %p, %bb : tensor<128x64xf64>
  %zero = msir.constant dense<0.000000e+00> : tensor<f64>
  %zb = msir.broadcast_to %zero : tensor<f64> to tensor<128x64xf64>
  %r = msir.maximum %z, %zb : tensor<128x64xf64>
  func.return %z, %r : tensor<128x64xf64>, tensor<128x64xf64>
}

// CHECK-LABEL: func.func @layer_two_results(
// CHECK-SAME:    %[[Z:[0-9]+]]: memref<128x64xf64>, %[[R:[0-9]+]]: memref<128x64xf64>)
// CHECK-NOT:     memref.alloc
// CHECK:         %[[TA:.*]] = arith.constant 1 : i64
// CHECK:         %[[PZ:.*]] = "memref.cast"(%[[Z]]) : (memref<128x64xf64>) -> memref<f64>
// CHECK-NEXT:    func.call @__msir_gemm_f64(%[[TA]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PZ]], %{{.*}}, %{{.*}})
// CHECK:           memref.load %[[Z]]
// CHECK-DAG:       memref.store %{{.*}}, %[[Z]]
// CHECK-DAG:       memref.store %{{.*}}, %[[R]]
// CHECK:         } {msir.gemm_epilogue}

// LLVM-LABEL: define void @"layer_two_results"(
// LLVM:         call void @"__msir_gemm_epilogue_f64"(i64 1, i64 0, i64 128, i64 64, i64 96,

// A product with another use keeps its buffer; its consumer is a loop of its own.
func.func @two_uses(%x: tensor<64x64xf32>, %b: tensor<64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %p = msir.matmul %x, %x : tensor<64x64xf32>, tensor<64x64xf32> to tensor<64x64xf32>
  %bb = msir.broadcast_to %b : tensor<64xf32> to tensor<64x64xf32>
  %z = msir.add %p, %bb : tensor<64x64xf32>
  %t = msir.tanh %z : tensor<64x64xf32>
  func.return %t, %p : tensor<64x64xf32>, tensor<64x64xf32>
}

// CHECK-LABEL: func.func @two_uses(
// CHECK:         func.call @__msir_gemm_f32(
// CHECK:         scf.for
// CHECK-NOT:     msir.gemm_epilogue
// CHECK:         func.return

// LLVM-LABEL: define void @"two_uses"(
// LLVM-NOT:     __msir_gemm_epilogue
// LLVM:         call void @"__msir_gemm_f32"(
// LLVM:         ret void

// A consumer whose results have another type (a mask) cannot take the product's place.
func.func @mask(%x: tensor<64x64xf32>) -> tensor<64x64xi1> {
  %p = msir.matmul %x, %x : tensor<64x64xf32>, tensor<64x64xf32> to tensor<64x64xf32>
  %zero = msir.constant dense<0.000000e+00> : tensor<f32>
  %zb = msir.broadcast_to %zero : tensor<f32> to tensor<64x64xf32>
  %m = msir.compare gt, %p, %zb : tensor<64x64xf32>
  func.return %m : tensor<64x64xi1>
}

// CHECK-LABEL: func.func @mask(
// CHECK:         memref.alloc
// CHECK:         func.call @__msir_gemm_f32(
// CHECK-NOT:     msir.gemm_epilogue
// CHECK:         func.return
