// RUN: msir-run %s --entry f --input '[0.5, -1.25, 2.0, 0.0]:f32' --input '[1.5, 0.25, -3.0, 8.0]:f32' | filecheck %s
// RUN: msir-run %s --entry exponential --input '[0.0, -200.0, 200.0, -0.0]:f32' | filecheck %s --check-prefix=EXP
// RUN: msir-run %s --entry chain --input '[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]:f64' --input '[10.0, 20.0, 30.0]:f64' | filecheck %s --check-prefix=CHAIN
// RUN: msir-run %s --entry bools --input '[1.0, 2.0, 3.0, 4.0]:f32' --input '[4.0, 2.0, 1.0, 3.0]:f32' | filecheck %s --check-prefix=BOOL

// End to end through dce, msir-fuse, the lowering and the JIT; inputs are chosen
// so that every printed value is exact in binary floating point.

func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = msir.add %a, %b : tensor<4xf32>
  %1 = msir.mul %a, %b : tensor<4xf32>
  %z = msir.sub %a, %a : tensor<4xf32>
  %2 = msir.exp %z : tensor<4xf32>
  func.return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// CHECK:      result 0: tensor<4xf32> = [ 2., -1., -1.,  8.]
// CHECK-NEXT: result 1: tensor<4xf32> = [ 0.75  , -0.3125, -6.    ,  0.    ]
// CHECK-NEXT: result 2: tensor<4xf32> = [1., 1., 1., 1.]

// exp where f32 has exact answers: 1, underflow to 0, overflow to inf.

func.func @exponential(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.exp %a : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// EXP: result 0: tensor<4xf32> = [ 1.,  0., inf,  1.]

// A broadcast row, a splat constant and a fused chain, with an intermediate
// that is also returned.

func.func @chain(%x: tensor<2x3xf64>, %row: tensor<3xf64>) -> (tensor<2x3xf64>, tensor<2x3xf64>) {
  %rb = msir.broadcast_to %row : tensor<3xf64> to tensor<2x3xf64>
  %c = msir.constant dense<0.5> : tensor<f64>
  %cb = msir.broadcast_to %c : tensor<f64> to tensor<2x3xf64>
  %0 = msir.add %x, %rb : tensor<2x3xf64>
  %1 = msir.mul %0, %cb : tensor<2x3xf64>
  %2 = msir.neg %1 : tensor<2x3xf64>
  func.return %2, %0 : tensor<2x3xf64>, tensor<2x3xf64>
}

// CHAIN:      result 0: tensor<2x3xf64> = {{\[\[}} -5.5, -11. , -16.5],
// CHAIN-NEXT: {{^}} [ -7. , -12.5, -18. ]]
// CHAIN-NEXT: result 1: tensor<2x3xf64> = {{\[\[}}11., 22., 33.],
// CHAIN-NEXT: {{^}} [14., 25., 36.]]

// Comparisons give bool (i1) results; select picks per element.

func.func @bools(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xi1>, tensor<4xf32>) {
  %lt = msir.compare lt, %a, %b : tensor<4xf32>
  %ne = msir.compare ne, %a, %b : tensor<4xf32>
  %both = msir.and %lt, %ne : tensor<4xi1>
  %not = msir.not %both : tensor<4xi1>
  %s = msir.select %lt, %a, %b : tensor<4xi1>, tensor<4xf32>
  func.return %lt, %not, %s : tensor<4xi1>, tensor<4xi1>, tensor<4xf32>
}

// BOOL:      result 0: tensor<4xi1> = [ True, False, False, False]
// BOOL-NEXT: result 1: tensor<4xi1> = [False,  True,  True,  True]
// BOOL-NEXT: result 2: tensor<4xf32> = [1., 2., 1., 3.]
