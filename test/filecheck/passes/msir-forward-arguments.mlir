// RUN: msir-opt -p msir-forward-arguments %s | filecheck %s

// An augmented forward returns the weight its adjoint reads; the wrapper
// returns what the inner call returned. After the pass the callers pass their
// own argument on: neither private function returns a parameter any more.

builtin.module {
  func.func private @f__fwd(%w: tensor<4x4xf32>, %x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %y = msir.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> to tensor<4x4xf32>
    func.return %y, %w, %x : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.func private @wrap(%w: tensor<4x4xf32>, %x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %y, %rw, %rx = func.call @f__fwd(%w, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
    func.return %y, %rw, %rx : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %y, %rw, %rx = func.call @wrap(%a, %b) : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
    %s = msir.add %rw, %rx : tensor<4x4xf32>
    %t = msir.mul %s, %y : tensor<4x4xf32>
    func.return %t, %a : tensor<4x4xf32>, tensor<4x4xf32>
  }
  // A public function keeps its signature (it is the native ABI), and a
  // function referenced as a value keeps its results.
  func.func private @g(%w: tensor<4xf32>) -> tensor<4xf32> {
    func.return %w : tensor<4xf32>
  }
  func.func @uses_g(%a: tensor<4xf32>) -> tensor<4xf32> {
    %c = msir.closure @g() : (tensor<4xf32>) -> tensor<4xf32>
    %r = msir.apply %c(%a) : (tensor<4xf32>) -> tensor<4xf32>
    func.return %r : tensor<4xf32>
  }
}

// CHECK-LABEL: func.func private @f__fwd(%w: tensor<4x4xf32>, %x: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:    %y = msir.matmul %x, %w
// CHECK-NEXT:    func.return %y : tensor<4x4xf32>
// CHECK-LABEL: func.func private @wrap(%w: tensor<4x4xf32>, %x: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:    %y = func.call @f__fwd(%w, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    func.return %y : tensor<4x4xf32>
// CHECK-LABEL: func.func @main(
// CHECK-NEXT:    %y = func.call @wrap(%a, %b) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %s = msir.add %a, %b : tensor<4x4xf32>
// CHECK-NEXT:    %t = msir.mul %s, %y : tensor<4x4xf32>
// CHECK-NEXT:    func.return %t, %a : tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-LABEL: func.func private @g(%w: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    func.return %w : tensor<4xf32>
