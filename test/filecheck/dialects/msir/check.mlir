// RUN: msir-opt %s | msir-opt | filecheck %s
// RUN: msir-opt %s --print-op-generic | msir-opt | filecheck %s

// msir.check in its custom syntax: without values, and with runtime values
// (one of them a Python number) formatted by its str.format template.

func.func @checks(%c: tensor<i1>, %x: tensor<f32>, %n: tensor<i64>) {
  msir.check %c, "AssertionError", "" : tensor<i1>
  msir.check %c, "ValueError", "x is {0:.2f} at {1!r} {{literal}}"(%x, %n : tensor<f32>, tensor<i64>) {python_numbers = array<i64: 1>} : tensor<i1>
  func.return
}

// CHECK-LABEL: func.func @checks(%c: tensor<i1>, %x: tensor<f32>, %n: tensor<i64>) {
// CHECK-NEXT:    msir.check %c, "AssertionError", "" : tensor<i1>
// CHECK-NEXT:    msir.check %c, "ValueError", "x is {0:.2f} at {1!r} {{[{][{]}}literal{{[}][}]}}"(%x, %n : tensor<f32>, tensor<i64>) {python_numbers = array<i64: 1>} : tensor<i1>
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
