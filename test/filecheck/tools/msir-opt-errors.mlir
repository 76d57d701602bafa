// RUN: not msir-opt %s 2>&1 | filecheck %s

// msir-opt reports a malformed input like mlir-opt: "file:line:col: error:
// message", the offending line and a caret under it, exit status 1, no
// Python traceback.

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.add %x, %x : tensor<4xf32>
  func.return %0 : tensor<3xf32>
}

// CHECK-NOT:  Traceback
// CHECK:      {{^}}{{.*}}msir-opt-errors.mlir:9:15: error: operand is used with type tensor<3xf32>, but has been previously used or defined with type tensor<4xf32>{{$}}
// CHECK-NEXT: {{^}}  func.return %0 : tensor<3xf32>{{$}}
// CHECK-NEXT: {{^}}              ^^{{$}}
// CHECK-NOT:  Traceback
