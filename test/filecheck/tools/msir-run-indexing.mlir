// RUN: msir-run %s --entry slices --input '[0, 1, 2, 3, 4]:i64' --input '[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]:f32' | filecheck %s --check-prefix=SLICE
// RUN: msir-run %s --entry takes --input '[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]:f32' --input=-1:i64 --input '[2, -3, 0, -1]:i64' | filecheck %s --check-prefix=TAKE
// RUN: msir-run %s --entry bcast --input '[[10], [20], [30]]:i32' --input '[1, 2, 3, 4]:i32' | filecheck %s --check-prefix=BCAST

// Slices with negative steps (x[::-1], x[3::-2], m[:, 3::-2]).

func.func @slices(%x: tensor<5xi64>, %m: tensor<3x4xf32>) -> (tensor<5xi64>, tensor<2xi64>, tensor<3x2xf32>) {
  %0 = msir.slice %x starts array<i64: 4> steps array<i64: -1> : tensor<5xi64> to tensor<5xi64>
  %1 = msir.slice %x starts array<i64: 3> steps array<i64: -2> : tensor<5xi64> to tensor<2xi64>
  %2 = msir.slice %m starts array<i64: 0, 3> steps array<i64: 1, -2> : tensor<3x4xf32> to tensor<3x2xf32>
  func.return %0, %1, %2 : tensor<5xi64>, tensor<2xi64>, tensor<3x2xf32>
}

// SLICE:      result 0: tensor<5xi64> = [4, 3, 2, 1, 0]
// SLICE-NEXT: result 1: tensor<2xi64> = [3, 1]
// SLICE-NEXT: result 2: tensor<3x2xf32> = {{\[\[}} 3.,  1.],
// SLICE-NEXT: {{^}} [ 7.,  5.],
// SLICE-NEXT: {{^}} [11.,  9.]]

// take with a runtime scalar index (negative counts from the end) and with an
// index vector along either axis.

func.func @takes(%m: tensor<3x4xf32>, %i: tensor<i64>, %l: tensor<4xi64>) -> (tensor<4xf32>, tensor<4x4xf32>, tensor<3x4xf32>) {
  %0 = msir.take %m[%i] axis 0 : tensor<3x4xf32>, tensor<i64> to tensor<4xf32>
  %1 = msir.take %m[%l] axis 0 : tensor<3x4xf32>, tensor<4xi64> to tensor<4x4xf32>
  %2 = msir.take %m[%l] axis 1 : tensor<3x4xf32>, tensor<4xi64> to tensor<3x4xf32>
  func.return %0, %1, %2 : tensor<4xf32>, tensor<4x4xf32>, tensor<3x4xf32>
}

// TAKE:      result 0: tensor<4xf32> = [ 8.,  9., 10., 11.]
// TAKE-NEXT: result 1: tensor<4x4xf32> = {{\[\[}} 8.,  9., 10., 11.],
// TAKE-NEXT: {{^}} [ 0.,  1.,  2.,  3.],
// TAKE-NEXT: {{^}} [ 0.,  1.,  2.,  3.],
// TAKE-NEXT: {{^}} [ 8.,  9., 10., 11.]]
// TAKE-NEXT: result 2: tensor<3x4xf32> = {{\[\[}} 2.,  1.,  0.,  3.],
// TAKE-NEXT: {{^}} [ 6.,  5.,  4.,  7.],
// TAKE-NEXT: {{^}} [10.,  9.,  8., 11.]]

// Broadcasts: a column and a row to a matrix (fused with the add), and a new
// leading axis.

func.func @bcast(%c: tensor<3x1xi32>, %r: tensor<4xi32>) -> (tensor<3x4xi32>, tensor<2x3x1xi32>) {
  %0 = msir.broadcast_to %c : tensor<3x1xi32> to tensor<3x4xi32>
  %1 = msir.broadcast_to %r : tensor<4xi32> to tensor<3x4xi32>
  %2 = msir.add %0, %1 : tensor<3x4xi32>
  %3 = msir.broadcast_to %c : tensor<3x1xi32> to tensor<2x3x1xi32>
  func.return %2, %3 : tensor<3x4xi32>, tensor<2x3x1xi32>
}

// BCAST:      result 0: tensor<3x4xi32> = {{\[\[}}11, 12, 13, 14],
// BCAST-NEXT: {{^}} [21, 22, 23, 24],
// BCAST-NEXT: {{^}} [31, 32, 33, 34]]
// BCAST-NEXT: result 1: tensor<2x3x1xi32> = {{\[\[\[}}10],
// BCAST-NEXT: {{^}}  [20],
// BCAST-NEXT: {{^}}  [30]],
// BCAST-EMPTY:
// BCAST-NEXT: {{^}} {{\[\[}}10],
// BCAST-NEXT: {{^}}  [20],
// BCAST-NEXT: {{^}}  [30]]]
