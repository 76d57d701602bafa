// RUN: msir-opt %S/Inputs/half.py --entry scale --args 'tensor<4xf16>,tensor<4xbf16>' | filecheck %s
// RUN: msir-opt %S/Inputs/half.py --entry scale --args 'tensor<4xf16>,tensor<4xbf16>' -p dce,msir-fuse,convert-msir-to-loops | filecheck %s --check-prefix=LOOPS
// RUN: not msir-opt %S/Inputs/half.py --entry mixed --args 'tensor<4xbf16>,tensor<4xi32>' 2>&1 | filecheck %s --check-prefix=NORULE
// RUN: not msir-opt %S/Inputs/half.py --entry scale --args 'tensor<4xf16>,tensor<4xf80>' 2>&1 | filecheck %s --check-prefix=BADTYPE

// --args takes f16 and bf16 tensors. A weak Python float keeps float16; the
// bfloat16 argument is cast to float16 explicitly.

// CHECK:      func.func @scale(%x: tensor<4xf16>, %y: tensor<4xbf16>) -> tensor<4xf16> {
// CHECK:        %{{.*}} = msir.tanh %x : tensor<4xf16>
// CHECK:        %{{.*}} = msir.constant dense<2.000000e+00> : tensor<f16>
// CHECK:        %{{.*}} = msir.mul %{{.*}}, %{{.*}} : tensor<4xf16>
// CHECK:        %{{.*}} = msir.cast %y : tensor<4xbf16> to tensor<4xf16>
// CHECK:        %{{.*}} = msir.add %{{.*}}, %{{.*}} : tensor<4xf16>

// The CPU lowering computes each op in f32 and rounds it back (NumPy's float16
// semantics), inside the one fused loop; bf16 -> f16 goes through f32.

// LOOPS:      func.func @scale(%0: memref<4xf16>, %1: memref<4xbf16>, %2: memref<4xf16>)
// LOOPS:        scf.for
// LOOPS-NEXT:     %[[X:.*]] = memref.load %0[%{{.*}}] : memref<4xf16>
// LOOPS-NEXT:     %[[XW:.*]] = arith.extf %[[X]] : f16 to f32
// LOOPS-NEXT:     %[[T:.*]] = math.tanh %[[XW]] : f32
// LOOPS-NEXT:     %[[TH:.*]] = arith.truncf %[[T]] : f32 to f16
// LOOPS-NEXT:     %[[TW:.*]] = arith.extf %[[TH]] : f16 to f32
// LOOPS-NEXT:     %[[CW:.*]] = arith.extf %{{.*}} : f16 to f32
// LOOPS-NEXT:     %[[M:.*]] = arith.mulf %[[TW]], %[[CW]] : f32
// LOOPS-NEXT:     %[[MH:.*]] = arith.truncf %[[M]] : f32 to f16
// LOOPS-NEXT:     %[[Y:.*]] = memref.load %1[%{{.*}}] : memref<4xbf16>
// LOOPS-NEXT:     %[[YW:.*]] = arith.extf %[[Y]] : bf16 to f32
// LOOPS-NEXT:     %[[YH:.*]] = arith.truncf %[[YW]] : f32 to f16
// LOOPS-NEXT:     %[[A:.*]] = arith.extf %[[MH]] : f16 to f32
// LOOPS-NEXT:     %[[B:.*]] = arith.extf %[[YH]] : f16 to f32
// LOOPS-NEXT:     %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// LOOPS-NEXT:     %[[R:.*]] = arith.truncf %[[S]] : f32 to f16
// LOOPS-NEXT:     memref.store %[[R]], %2[%{{.*}}] : memref<4xf16>
// LOOPS-NEXT:   }

// NumPy has no promotion rule for bfloat16 with an integer array: refused at the user's line.

// NORULE-NOT: Traceback
// NORULE:     half.py:9:12: error: NumPy has no promotion rule for bfloat16 and int32: cast one of them explicitly (e.g. x.astype(np.float32))
// NORULE-NOT: Traceback

// BADTYPE-NOT: Traceback
// BADTYPE:     error: --args: element type f80 of tensor<4xf80> is not supported (use one of i1, i32, i64, f16, bf16, f32, f64)
