// RUN: msir-opt %s -p convert-msir-to-loops | filecheck %s
// RUN: msir-opt %s -p 'convert-msir-to-loops,msir-lower-to-llvm{parallel=false}' | filecheck %s --check-prefix=LLVM

// The CPU target computes float16 and bfloat16 in float32 (msir.lowering.widen_half):
// a reduction over trailing axes reads the half elements into an f32 accumulator
// and rounds once (a mean divides in f32 first, as NumPy's float16 mean does); a
// reduction over leading axes or a matmul reads its half operands into f32
// buffers. Half values are only loaded, stored and converted.

func.func @sum(%a: tensor<4x8xf16>) -> (tensor<4xf16>, tensor<4xf16>) {
  %0 = msir.reduce_sum %a axes array<i64: 1> : tensor<4x8xf16> to tensor<4xf16>
  %1 = msir.reduce_mean %a axes array<i64: 1> : tensor<4x8xf16> to tensor<4xf16>
  func.return %0, %1 : tensor<4xf16>, tensor<4xf16>
}

// CHECK-LABEL: func.func @sum(%0: memref<4x8xf16>, %1: memref<4xf16>, %2: memref<4xf16>)
// CHECK-NOT:     memref.alloc
// CHECK:         %[[S:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK-NEXT:      %[[X:.*]] = memref.load %0[{{.*}}] : memref<4x8xf16>
// CHECK-NEXT:      %[[XW:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK-NEXT:      %[[NEXT:.*]] = arith.addf %[[ACC]], %[[XW]] : f32
// CHECK-NEXT:      scf.yield %[[NEXT]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[SH:.*]] = arith.truncf %[[S]] : f32 to f16
// CHECK-NEXT:    memref.store %[[SH]], %1[{{.*}}] : memref<4xf16>
// CHECK:         %[[M:.*]] = scf.for {{.*}} -> (f32) {
// CHECK:         }
// CHECK-NEXT:    %[[MEAN:.*]] = arith.divf %[[M]], %{{.*}} : f32
// CHECK-NEXT:    %[[MH:.*]] = arith.truncf %[[MEAN]] : f32 to f16
// CHECK-NEXT:    memref.store %[[MH]], %2[{{.*}}] : memref<4xf16>

func.func @columns(%a: tensor<4x8xf16>) -> tensor<8xf16> {
  %0 = msir.reduce_sum %a axes array<i64: 0> : tensor<4x8xf16> to tensor<8xf16>
  func.return %0 : tensor<8xf16>
}

// CHECK-LABEL: func.func @columns(%0: memref<4x8xf16>, %1: memref<8xf16>)
// CHECK:         %[[W:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK:           %[[X:.*]] = memref.load %0[{{.*}}] : memref<4x8xf16>
// CHECK-NEXT:      %[[XW:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK-NEXT:      memref.store %[[XW]], %[[W]][{{.*}}] : memref<4x8xf32>
// CHECK:         %[[T:.*]] = memref.alloc() {{.*}} : memref<8xf32>
// CHECK:           arith.addf {{.*}} : f32
// CHECK:           %[[C:.*]] = memref.load %[[T]][{{.*}}] : memref<8xf32>
// CHECK-NEXT:      %[[CH:.*]] = arith.truncf %[[C]] : f32 to f16
// CHECK-NEXT:      memref.store %[[CH]], %1[{{.*}}] : memref<8xf16>

func.func @mm(%a: tensor<4x8xbf16>, %b: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  %0 = msir.matmul %a, %b : tensor<4x8xbf16>, tensor<8x2xbf16> to tensor<4x2xbf16>
  func.return %0 : tensor<4x2xbf16>
}

// CHECK-LABEL: func.func @mm(%0: memref<4x8xbf16>, %1: memref<8x2xbf16>, %2: memref<4x2xbf16>)
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK-NOT:     arith.mulf {{.*}} : bf16

// float64 -> float16 is one conversion (rounded once, as NumPy does); int32 ->
// bfloat16 goes through float32, as ml_dtypes does.

func.func @casts(%a: tensor<4xf64>, %i: tensor<4xi32>) -> (tensor<4xf16>, tensor<4xbf16>) {
  %0 = msir.cast %a : tensor<4xf64> to tensor<4xf16>
  %1 = msir.cast %i : tensor<4xi32> to tensor<4xbf16>
  func.return %0, %1 : tensor<4xf16>, tensor<4xbf16>
}

// CHECK-LABEL: func.func @casts
// CHECK:         %[[A:.*]] = memref.load %0[{{.*}}] : memref<4xf64>
// CHECK-NEXT:    %[[AH:.*]] = arith.truncf %[[A]] : f64 to f16
// CHECK:         %[[I:.*]] = memref.load %1[{{.*}}] : memref<4xi32>
// CHECK-NEXT:    %[[IF:.*]] = arith.sitofp %[[I]] : i32 to f32
// CHECK-NEXT:    %[[IB:.*]] = arith.truncf %[[IF]] : f32 to bf16

// In LLVM, f64 -> f16 rounds to f32 *to odd* first (truncate, then set the last
// bit if inexact), so that f32 -> f16 rounds once; bf16 is an i16, rounded to
// nearest even with integer ops (NaN to the quiet NaN of its sign).

// LLVM-LABEL: llvm.func @casts(
// LLVM:         %[[D:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f64
// LLVM-NEXT:    %[[N:.*]] = llvm.fptrunc %[[D]] : f64 to f32
// LLVM-NEXT:    %[[BACK:.*]] = llvm.fpext %[[N]] : f32 to f64
// LLVM-NEXT:    %[[NB:.*]] = llvm.bitcast %[[N]] : f32 to i32
// LLVM-NEXT:    %[[AB:.*]] = llvm.call_intrinsic "llvm.fabs.f64"(%[[BACK]])
// LLVM-NEXT:    %[[AD:.*]] = llvm.call_intrinsic "llvm.fabs.f64"(%[[D]])
// LLVM-NEXT:    %[[OVER:.*]] = llvm.fcmp "ogt" %[[AB]], %[[AD]] : f64
// LLVM-NEXT:    %[[OVER32:.*]] = llvm.zext %[[OVER]] : i1 to i32
// LLVM-NEXT:    %[[TRUNC:.*]] = llvm.sub %[[NB]], %[[OVER32]] : i32
// LLVM-NEXT:    %[[INEXACT:.*]] = llvm.fcmp "une" %[[BACK]], %[[D]] : f64
// LLVM-NEXT:    %[[INEXACT32:.*]] = llvm.zext %[[INEXACT]] : i1 to i32
// LLVM-NEXT:    %[[ODD:.*]] = llvm.or %[[TRUNC]], %[[INEXACT32]] : i32
// LLVM-NEXT:    %[[ODDF:.*]] = llvm.bitcast %[[ODD]] : i32 to f32
// LLVM-NEXT:    %[[H:.*]] = llvm.fptrunc %[[ODDF]] : f32 to f16
// LLVM:         llvm.store %[[H]], %{{.*}} : f16, !llvm.ptr
// LLVM:         %[[F:.*]] = llvm.sitofp %{{.*}} : i32 to f32
// LLVM-NEXT:    %[[FB:.*]] = llvm.bitcast %[[F]] : f32 to i32
// LLVM-NEXT:    %[[SH:.*]] = llvm.lshr %[[FB]], %{{.*}} : i32
// LLVM-NEXT:    %[[LSB:.*]] = llvm.and %[[SH]], %{{.*}} : i32
// LLVM-NEXT:    %[[BIAS:.*]] = llvm.add %[[LSB]], %{{.*}} : i32
// LLVM-NEXT:    %[[RND:.*]] = llvm.add %[[FB]], %[[BIAS]] : i32
// LLVM-NEXT:    %[[SIGN:.*]] = llvm.and %[[FB]], %{{.*}} : i32
// LLVM-NEXT:    %[[QNAN:.*]] = llvm.or %[[SIGN]], %{{.*}} : i32
// LLVM-NEXT:    %[[ISNAN:.*]] = llvm.fcmp "uno" %[[F]], %[[F]] : f32
// LLVM-NEXT:    %[[PICK:.*]] = llvm.select %[[ISNAN]], %[[QNAN]], %[[RND]] : i1, i32
// LLVM-NEXT:    %[[HI:.*]] = llvm.lshr %[[PICK]], %{{.*}} : i32
// LLVM-NEXT:    %[[B16:.*]] = llvm.trunc %[[HI]] : i32 to i16
// LLVM:         llvm.store %[[B16]], %{{.*}} : i16, !llvm.ptr

// scatter_add adds each update in f32 and rounds, as np.add.at on float16 does.

func.func @scatter(%u: tensor<3xf16>, %i: tensor<3xi64>) -> tensor<5xf16> {
  %0 = msir.scatter_add %u[%i] axis 0 : tensor<3xf16>, tensor<3xi64> to tensor<5xf16>
  func.return %0 : tensor<5xf16>
}

// CHECK-LABEL: func.func @scatter
// CHECK:         %[[OLD:.*]] = memref.load %2[{{.*}}] : memref<5xf16>
// CHECK-NEXT:    %[[U:.*]] = memref.load %0[{{.*}}] : memref<3xf16>
// CHECK-NEXT:    %[[OW:.*]] = arith.extf %[[OLD]] : f16 to f32
// CHECK-NEXT:    %[[UW:.*]] = arith.extf %[[U]] : f16 to f32
// CHECK-NEXT:    %[[SUM:.*]] = arith.addf %[[OW]], %[[UW]] : f32
// CHECK-NEXT:    %[[SUMH:.*]] = arith.truncf %[[SUM]] : f32 to f16
// CHECK-NEXT:    memref.store %[[SUMH]], %2[{{.*}}] : memref<5xf16>
