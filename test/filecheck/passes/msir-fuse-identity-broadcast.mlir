// RUN: msir-opt %s -p msir-fuse | filecheck %s

// BUG: a broadcast_to whose result shape equals its input shape (a valid
// identity broadcast) of a value computed in a group is merged into that group,
// so the fusion body broadcasts an internal value, and the module no longer
// verifies: "'msir.fusion' body broadcast_to must broadcast an input or a
// constant". The pass promises that the module verifies after the pass.

func.func @identity_bcast(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.exp %x : tensor<4xf32>
  %1 = msir.broadcast_to %0 : tensor<4xf32> to tensor<4xf32>
  %2 = msir.add %0, %1 : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

// CHECK-LABEL: func.func @identity_bcast(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK:         msir.exp
// CHECK:         %[[R:.*]] = msir.add
// CHECK:         func.return
