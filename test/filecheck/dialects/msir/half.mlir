// RUN: msir-opt %s | msir-opt | filecheck %s
// RUN: msir-opt %s --print-op-generic | msir-opt | filecheck %s

// float16 and bfloat16 are msir element types like f32: constants (rounded to
// the type), elementwise ops, casts, reductions and matmul verify and round-trip.

func.func @half(%a: tensor<2x3xf16>, %b: tensor<3x2xf16>, %c: tensor<2x3xbf16>) -> (tensor<2x2xf16>, tensor<2xbf16>, tensor<2x3xi1>, tensor<2x3xf32>) {
  %k = msir.constant dense<[[0.1, 65504.0, -2.5], [1.0, 0.0, 3.0]]> : tensor<2x3xf16>
  %kb = msir.constant dense<0.1> : tensor<bf16>
  %0 = msir.add %a, %k : tensor<2x3xf16>
  %1 = msir.tanh %0 : tensor<2x3xf16>
  %2 = msir.matmul %1, %b : tensor<2x3xf16>, tensor<3x2xf16> to tensor<2x2xf16>
  %3 = msir.reduce_sum %c axes array<i64: 1> : tensor<2x3xbf16> to tensor<2xbf16>
  %4 = msir.broadcast_to %kb : tensor<bf16> to tensor<2xbf16>
  %5 = msir.mul %3, %4 : tensor<2xbf16>
  %6 = msir.cast %a : tensor<2x3xf16> to tensor<2x3xbf16>
  %7 = msir.compare lt, %6, %c : tensor<2x3xbf16>
  %8 = msir.cast %c : tensor<2x3xbf16> to tensor<2x3xf32>
  func.return %2, %5, %7, %8 : tensor<2x2xf16>, tensor<2xbf16>, tensor<2x3xi1>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @half(%a: tensor<2x3xf16>, %b: tensor<3x2xf16>, %c: tensor<2x3xbf16>)
// CHECK-NEXT:    %k = msir.constant dense<{{\[\[}}9.997560e-02, 6.550400e+04, -2.500000e+00], [1.000000e+00, 0.000000e+00, 3.000000e+00]]> : tensor<2x3xf16>
// CHECK-NEXT:    %kb = msir.constant dense<1.000980e-01> : tensor<bf16>
// CHECK-NEXT:    %0 = msir.add %a, %k : tensor<2x3xf16>
// CHECK-NEXT:    %1 = msir.tanh %0 : tensor<2x3xf16>
// CHECK-NEXT:    %2 = msir.matmul %1, %b : tensor<2x3xf16>, tensor<3x2xf16> to tensor<2x2xf16>
// CHECK-NEXT:    %3 = msir.reduce_sum %c axes array<i64: 1> : tensor<2x3xbf16> to tensor<2xbf16>
// CHECK-NEXT:    %4 = msir.broadcast_to %kb : tensor<bf16> to tensor<2xbf16>
// CHECK-NEXT:    %5 = msir.mul %3, %4 : tensor<2xbf16>
// CHECK-NEXT:    %6 = msir.cast %a : tensor<2x3xf16> to tensor<2x3xbf16>
// CHECK-NEXT:    %7 = msir.compare lt, %6, %c : tensor<2x3xbf16>
// CHECK-NEXT:    %8 = msir.cast %c : tensor<2x3xbf16> to tensor<2x3xf32>
