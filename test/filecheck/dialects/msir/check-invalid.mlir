// RUN: msir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier message of msir.check.

func.func @f(%c: tensor<2xi1>) {
  msir.check %c, "ValueError", "" : tensor<2xi1>
  func.return
}
// CHECK: {{^}}'msir.check' condition must be a tensor<i1>, got tensor<2xi1>{{$}}

// -----

func.func @f(%c: tensor<i1>) {
  msir.check %c, "KeyError", "" : tensor<i1>
  func.return
}
// CHECK: {{^}}'msir.check' error must be one of AssertionError, ValueError, TypeError, IndexError, RuntimeError, ZeroDivisionError, NotImplementedError, got KeyError{{$}}

// -----

func.func @f(%c: tensor<i1>, %x: tensor<3xf32>) {
  msir.check %c, "ValueError", "{0}"(%x : tensor<3xf32>) : tensor<i1>
  func.return
}
// CHECK: {{^}}'msir.check' values must be rank-0 tensors, got tensor<3xf32>{{$}}

// -----

func.func @f(%c: tensor<i1>, %x: tensor<f32>) {
  msir.check %c, "ValueError", "{0}{1}{2}{3}{4}"(%x, %x, %x, %x, %x : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) : tensor<i1>
  func.return
}
// CHECK: {{^}}'msir.check' shows at most 4 runtime values, got 5{{$}}

// -----

func.func @f(%c: tensor<i1>, %x: tensor<f32>) {
  msir.check %c, "ValueError", "{1} {0}"(%x, %x : tensor<f32>, tensor<f32>) : tensor<i1>
  func.return
}
// CHECK: {{^}}'msir.check' the fields of a check message must be {0}, {1}, ... in order, got ['1', '0']{{$}}

// -----

func.func @f(%c: tensor<i1>, %x: tensor<f32>) {
  msir.check %c, "ValueError", "{0} {1}"(%x : tensor<f32>) : tensor<i1>
  func.return
}
// CHECK: {{^}}'msir.check' message formats 2 values, but 1 are given{{$}}
