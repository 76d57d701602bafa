// RUN: msir-run %s --entry mm --input '[[1, 2, 3], [4, 5, 6]]:f32' --input '[[1, 0], [0, 1], [2, -1]]:f32' | filecheck %s --check-prefix=MM
// RUN: msir-run %s --entry mv --input '[[1, 2, 3], [4, 5, 6]]:f64' --input '[1, -1, 2]:f64' | filecheck %s --check-prefix=MV
// RUN: msir-run %s --entry red --input '[[1, 2, 3], [4, -5, 6]]:f64' | filecheck %s --check-prefix=RED
// RUN: msir-run %s --entry am --input '[[1, 7, 3], [9, -5, 9]]:f32' | filecheck %s --check-prefix=ARG

func.func @mm(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
  %0 = msir.matmul %a, %b : tensor<2x3xf32>, tensor<3x2xf32> to tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}

// MM:      result 0: tensor<2x2xf32> = {{\[\[}} 7., -1.],
// MM-NEXT: {{^}} [16., -1.]]

func.func @mv(%a: tensor<2x3xf64>, %v: tensor<3xf64>) -> (tensor<2xf64>, tensor<f64>) {
  %0 = msir.matmul %a, %v : tensor<2x3xf64>, tensor<3xf64> to tensor<2xf64>
  %1 = msir.matmul %v, %v : tensor<3xf64>, tensor<3xf64> to tensor<f64>
  func.return %0, %1 : tensor<2xf64>, tensor<f64>
}

// MV:      result 0: tensor<2xf64> = [ 5., 11.]
// MV-NEXT: result 1: tensor<f64> = 6.{{$}}

// keepdims shows in the result type; the mean of 1+2+3+4-5+6 = 11 over 6.

func.func @red(%x: tensor<2x3xf64>) -> (tensor<2x1xf64>, tensor<3xf64>, tensor<f64>, tensor<2xf64>, tensor<3xf64>) {
  %0 = msir.reduce_sum %x axes array<i64: 1> : tensor<2x3xf64> to tensor<2x1xf64>
  %1 = msir.reduce_max %x axes array<i64: 0> : tensor<2x3xf64> to tensor<3xf64>
  %2 = msir.reduce_mean %x axes array<i64: 0, 1> : tensor<2x3xf64> to tensor<f64>
  %3 = msir.reduce_prod %x axes array<i64: 1> : tensor<2x3xf64> to tensor<2xf64>
  %4 = msir.reduce_min %x axes array<i64: 0> : tensor<2x3xf64> to tensor<3xf64>
  func.return %0, %1, %2, %3, %4 : tensor<2x1xf64>, tensor<3xf64>, tensor<f64>, tensor<2xf64>, tensor<3xf64>
}

// RED:      result 0: tensor<2x1xf64> = {{\[\[}}6.],
// RED-NEXT: {{^}} [5.]]
// RED-NEXT: result 1: tensor<3xf64> = [4., 2., 6.]
// RED-NEXT: result 2: tensor<f64> = 1.83333333
// RED-NEXT: result 3: tensor<2xf64> = [   6., -120.]
// RED-NEXT: result 4: tensor<3xf64> = [ 1., -5.,  3.]

// argmax/argmin give i64 indices of the first extreme element (9 appears
// twice in row 1: index 0 wins; over the flattened tensor it is index 3).

func.func @am(%x: tensor<2x3xf32>) -> (tensor<2xi64>, tensor<i64>, tensor<3xi64>) {
  %0 = msir.argmax %x axis 1 : tensor<2x3xf32> to tensor<2xi64>
  %1 = msir.argmax %x : tensor<2x3xf32> to tensor<i64>
  %2 = msir.argmin %x axis 0 : tensor<2x3xf32> to tensor<3xi64>
  func.return %0, %1, %2 : tensor<2xi64>, tensor<i64>, tensor<3xi64>
}

// ARG:      result 0: tensor<2xi64> = [1, 0]
// ARG-NEXT: result 1: tensor<i64> = 3
// ARG-NEXT: result 2: tensor<3xi64> = [0, 1, 0]
