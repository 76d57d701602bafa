// RUN: msir-opt %s -p msir-fuse | filecheck %s

// BUG: a chain whose values are all unused (dead code, e.g. straight from the
// frontend, before any dce) becomes an msir.fusion with no results, which
// its verifier rejects: "'msir.fusion' must have at least one result". The
// pass contract promises that the module verifies after the pass and accepts
// msir functions in any order of passes, so the pass must leave such a group
// alone (or drop it).

func.func @dead(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.exp %x : tensor<4xf32>
  %1 = msir.neg %0 : tensor<4xf32>
  func.return %x : tensor<4xf32>
}

// CHECK-LABEL: func.func @dead(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NOT:     msir.fusion () : (tensor<4xf32>) -> ()
// CHECK:         func.return %x : tensor<4xf32>

// Only part of the chain is dead: the live value is a result, the dead one is not.

func.func @half_dead(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.exp %x : tensor<4xf32>
  %1 = msir.neg %0 : tensor<4xf32>
  %2 = msir.abs %1 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @half_dead(
// CHECK:         %[[F:.*]] = msir.fusion (%x) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK:         func.return %[[F]] : tensor<4xf32>
