// RUN: msir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier message of msir.compress and msir.expand.

func.func @f(%x: tensor<5x4xf32>, %m: tensor<4xi1>) {
  %0 = msir.compress %x[%m] : tensor<5x4xf32>, tensor<4xi1> to tensor<?x4xf32>
  func.return
}
// CHECK: {{^}}'msir.compress' a mask of shape (4,) does not match the leading dims of shape (5, 4) (input: tensor<5x4xf32>, mask: tensor<4xi1>, result: tensor<?x4xf32>){{$}}

// -----

func.func @f(%x: tensor<5xf32>, %m: tensor<5xi64>) {
  %0 = msir.compress %x[%m] : tensor<5xf32>, tensor<5xi64> to tensor<?xf32>
  func.return
}
// CHECK: {{^}}'msir.compress' mask has type tensor<5xi64>, expected element type in {bool}{{$}}

// -----

func.func @f(%x: tensor<5xf32>, %m: tensor<5xi1>) {
  %0 = msir.compress %x[%m] : tensor<5xf32>, tensor<5xi1> to tensor<5xf32>
  func.return
}
// CHECK: {{^}}'msir.compress' result has type tensor<5xf32>, but the operands imply tensor<?xf32> (input: tensor<5xf32>, mask: tensor<5xi1>){{$}}

// -----

func.func @f(%x: tensor<f32>, %m: tensor<i1>) {
  %0 = msir.compress %x[%m] : tensor<f32>, tensor<i1> to tensor<?xf32>
  func.return
}
// CHECK: {{^}}'msir.compress' a mask of shape () does not match the leading dims of shape () (input: tensor<f32>, mask: tensor<i1>, result: tensor<?xf32>){{$}}

// -----

func.func @f(%u: tensor<?x3xf32>, %m: tensor<5xi1>) {
  %0 = msir.expand %u[%m] : tensor<?x3xf32>, tensor<5xi1> to tensor<5x4xf32>
  func.return
}
// CHECK: {{^}}'msir.expand' updates has type tensor<?x3xf32>, but the operands imply tensor<?x4xf32> (updates: tensor<?x3xf32>, mask: tensor<5xi1>){{$}}

// -----

func.func @f(%u: tensor<?xf32>, %m: tensor<5xi32>) {
  %0 = msir.expand %u[%m] : tensor<?xf32>, tensor<5xi32> to tensor<5xf32>
  func.return
}
// CHECK: {{^}}'msir.expand' mask has type tensor<5xi32>, expected element type in {bool}{{$}}
