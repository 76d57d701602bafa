// RUN: msir-run %s --entry f --input '[0.1, 300.0, -2.5, 0.0001, 65504.0]:f16' --input '[0.1, 300.0, -2.5, 0.0001, 65504.0]:bf16' | filecheck %s
// RUN: %python -c "import numpy as np, ml_dtypes; v = [0.1, 300.0, -2.5, 0.0001, 65504.0]; np.save('%t.f16.npy', np.array(v, np.float16)); np.save('%t.bf16.npy', np.array(v, ml_dtypes.bfloat16))"
// RUN: msir-run %s --entry f --input @%t.f16.npy --input @%t.bf16.npy:bf16 | filecheck %s
// RUN: not msir-run %s --entry f --input @%t.f16.npy --input @%t.bf16.npy 2>&1 | filecheck %s --check-prefix=RAW
// RUN: msir-run %s --entry narrow --input '[1.0009765625, 1.0004882812509095, 65519.99, 1e-300, 1e10]:f64' | filecheck %s --check-prefix=NARROW
// RUN: msir-run %s --entry sums --input '[[0.1, 0.2, 0.3], [1000.0, 0.5, 0.25]]:f16' | filecheck %s --check-prefix=SUMS

// float16 and bfloat16 inputs (rounded to nearest as NumPy's astype does) and
// results, printed as NumPy prints them; every expected line is NumPy's (with
// ml_dtypes) on the same values. Each op computes in float32 and rounds
// once: 300 * 300 overflows float16 (max 65504) but not bfloat16; 1e-4 squared
// underflows float16 to 0.

func.func @f(%a: tensor<5xf16>, %b: tensor<5xbf16>) -> (tensor<5xf16>, tensor<5xbf16>, tensor<5xf32>, tensor<5xi1>) {
  %0 = msir.mul %a, %a : tensor<5xf16>
  %1 = msir.mul %b, %b : tensor<5xbf16>
  %2 = msir.cast %b : tensor<5xbf16> to tensor<5xf32>
  %3 = msir.cast %a : tensor<5xf16> to tensor<5xbf16>
  %4 = msir.compare eq, %3, %b : tensor<5xbf16>
  func.return %0, %1, %2, %4 : tensor<5xf16>, tensor<5xbf16>, tensor<5xf32>, tensor<5xi1>
}

// CHECK:      result 0: tensor<5xf16> = [0.009995,      inf, 6.25    , 0.      ,      inf]
// CHECK-NEXT: result 1: tensor<5xbf16> = [0.0100098, 90112, 6.25, 1.00117e-08, 4.29497e+09]
// CHECK-NEXT: result 2: tensor<5xf32> = [ 1.00097656e-01,  3.00000000e+02, -2.50000000e+00,  1.00135803e-04,  6.55360000e+04]
// CHECK-NEXT: result 3: tensor<5xi1> = [ True,  True,  True,  True,  True]

// RAW: msir-run: error: {{.*}}.bf16.npy holds raw |V2 records (how NumPy saves ml_dtypes types): read bfloat16 as @{{.*}}.bf16.npy:bf16

// float64 -> float16 rounds once, as NumPy does: 1.0004882812509095 (1 + 2**-11
// + 2**-40) is just above a tie, so up to 1 + 2**-10, where rounding through
// float32 would tie to even, 1. float64 -> bfloat16 goes through float32, as
// in ml_dtypes.

func.func @narrow(%a: tensor<5xf64>) -> (tensor<5xf16>, tensor<5xbf16>) {
  %0 = msir.cast %a : tensor<5xf64> to tensor<5xf16>
  %1 = msir.cast %a : tensor<5xf64> to tensor<5xbf16>
  func.return %0, %1 : tensor<5xf16>, tensor<5xbf16>
}

// NARROW:      result 0: tensor<5xf16> = [1.001e+00, 1.001e+00, 6.550e+04, 0.000e+00,       inf]
// NARROW-NEXT: result 1: tensor<5xbf16> = [1, 1, 65536, 0, 9.99922e+09]

// Reductions accumulate in float32 and round once.

func.func @sums(%a: tensor<2x3xf16>) -> (tensor<2xf16>, tensor<f16>, tensor<2xi64>) {
  %0 = msir.reduce_sum %a axes array<i64: 1> : tensor<2x3xf16> to tensor<2xf16>
  %1 = msir.reduce_max %a axes array<i64: 0, 1> : tensor<2x3xf16> to tensor<f16>
  %2 = msir.argmin %a axis 1 : tensor<2x3xf16> to tensor<2xi64>
  func.return %0, %1, %2 : tensor<2xf16>, tensor<f16>, tensor<2xi64>
}

// SUMS:      result 0: tensor<2xf16> = [6.001e-01, 1.001e+03]
// SUMS-NEXT: result 1: tensor<f16> = 1.e+03
// SUMS-NEXT: result 2: tensor<2xi64> = [0, 2]
