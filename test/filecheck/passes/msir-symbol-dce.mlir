// RUN: msir-opt %s -p msir-symbol-dce | filecheck %s

// Private functions that no public function reaches, through calls or
// closures, are erased; what a public function reaches stays, however
// indirectly, and so do public functions nobody calls.

func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %0 = func.call @called(%x) : (tensor<f32>) -> tensor<f32>
  func.return %0 : tensor<f32>
}

func.func private @called(%x: tensor<f32>) -> tensor<f32> {
  %0 = msir.closure @captured() : (tensor<f32>) -> tensor<f32>
  %1 = msir.apply %0(%x) : (tensor<f32>) -> tensor<f32>
  func.return %1 : tensor<f32>
}

func.func private @captured(%x: tensor<f32>) -> tensor<f32> {
  %0 = func.call @deep(%x) : (tensor<f32>) -> tensor<f32>
  func.return %0 : tensor<f32>
}

func.func private @deep(%x: tensor<f32>) -> tensor<f32> {
  func.return %x : tensor<f32>
}

func.func private @unreached(%x: tensor<f32>) -> tensor<f32> {
  %0 = func.call @only_from_unreached(%x) : (tensor<f32>) -> tensor<f32>
  func.return %0 : tensor<f32>
}

func.func private @only_from_unreached(%x: tensor<f32>) -> tensor<f32> {
  func.return %x : tensor<f32>
}

func.func @public_uncalled(%x: tensor<f32>) -> tensor<f32> {
  func.return %x : tensor<f32>
}

// A closure at the module's top level, outside any function, keeps its
// callee and what that reaches (the IR fuzzer's 24:1858 erased it and left
// the closure naming a missing function).
func.func private @closed_at_top_level(%x: tensor<f32>) -> tensor<f32> {
  %0 = func.call @deep_from_top_level(%x) : (tensor<f32>) -> tensor<f32>
  func.return %0 : tensor<f32>
}

func.func private @deep_from_top_level(%x: tensor<f32>) -> tensor<f32> {
  func.return %x : tensor<f32>
}

%top = msir.closure @closed_at_top_level() : (tensor<f32>) -> tensor<f32>

// CHECK-NOT:   @unreached
// CHECK-NOT:   @only_from_unreached
// CHECK-LABEL: func.func @main(
// CHECK-LABEL: func.func private @called(
// CHECK-LABEL: func.func private @captured(
// CHECK-LABEL: func.func private @deep(
// CHECK-LABEL: func.func @public_uncalled(
// CHECK-LABEL: func.func private @closed_at_top_level(
// CHECK-LABEL: func.func private @deep_from_top_level(
// CHECK:       msir.closure @closed_at_top_level()
// CHECK-NOT:   @unreached
// CHECK-NOT:   @only_from_unreached
