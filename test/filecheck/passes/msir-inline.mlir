// RUN: msir-opt %s -p msir-inline | filecheck %s
// RUN: msir-opt %s -p msir-inline | msir-opt | filecheck %s

// msir-inline (passes/inline.py): private straight-line functions called once
// are inlined, to a fixed point (a wrapper and the function it wraps both
// disappear into the caller); functions called twice, with control flow, or
// public stay calls.

func.func private @inner(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.exp %a : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func private @wrapper(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = func.call @inner(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = msir.neg %0 : tensor<4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
func.func private @twice(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.sin %a : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func private @branchy(%c: tensor<i1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.if %c -> (tensor<4xf32>) {
    msir.yield %a : tensor<4xf32>
  } else {
    %n = msir.neg %a : tensor<4xf32>
    msir.yield %n : tensor<4xf32>
  }
  func.return %0 : tensor<4xf32>
}
func.func @main(%x: tensor<4xf32>, %c: tensor<i1>) -> tensor<4xf32> {
  %0, %1 = func.call @wrapper(%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %2 = func.call @twice(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = func.call @twice(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %4 = func.call @branchy(%c, %2) : (tensor<i1>, tensor<4xf32>) -> tensor<4xf32>
  %5 = msir.add %3, %4 : tensor<4xf32>
  func.return %5 : tensor<4xf32>
}

// CHECK-NOT:   func.func private @inner
// CHECK-NOT:   func.func private @wrapper
// CHECK:       func.func private @twice(
// CHECK:       func.func private @branchy(
// CHECK-LABEL: func.func @main(
// CHECK-NEXT:    %[[E:.*]] = msir.exp %x : tensor<4xf32>
// CHECK-NEXT:    %[[N:.*]] = msir.neg %[[E]] : tensor<4xf32>
// CHECK-NEXT:    %[[S1:.*]] = func.call @twice(%[[E]])
// CHECK-NEXT:    %[[S2:.*]] = func.call @twice(%[[N]])
// CHECK-NEXT:    %[[B:.*]] = func.call @branchy(%c, %[[S1]])
// CHECK-NEXT:    %[[R:.*]] = msir.add %[[S2]], %[[B]] : tensor<4xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<4xf32>
