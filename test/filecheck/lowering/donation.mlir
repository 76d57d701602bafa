// RUN: msir-opt %s -p convert-msir-to-loops --split-input-file | filecheck %s
// RUN: msir-opt %s -p convert-msir-to-loops,msir-lower-to-llvm --split-input-file | filecheck %s --check-prefix=LLVM

// Donation (lowering/to_loops.py, "Donation"): an output may be written into
// the buffer of a donated argument (`{msir.donate}`) when the argument is dead
// once the op computing the output has read it.

// An SGD update: w is read by the matmul, then by the update that computes
// output 0 elementwise. Output 0 may be w's buffer (`msir.alias_of = 0`).
// b is read by the op computing output 2, then by the reduction: refused,
// with the reason. The pair (w, output 0) loses `noalias` in LLVM; every other
// pointer keeps it.
func.func @sgd(%w: tensor<8x4xf32> {msir.donate}, %x: tensor<2x8xf32>, %b: tensor<4xf32> {msir.donate}) -> (tensor<8x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<f32>) {
  %h = msir.matmul %x, %w : tensor<2x8xf32>, tensor<8x4xf32> to tensor<2x4xf32>
  %lr = msir.constant dense<5.000000e-01> : tensor<8x4xf32>
  %s = msir.mul %lr, %w : tensor<8x4xf32>
  %nw = msir.sub %w, %s : tensor<8x4xf32>
  %nb = msir.add %b, %b : tensor<4xf32>
  %t = msir.reduce_sum %b axes array<i64: 0> : tensor<4xf32> to tensor<f32>
  func.return %nw, %h, %nb, %t : tensor<8x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @sgd(
// CHECK-SAME: %{{.*}}: memref<8x4xf32> {msir.donate}, %{{.*}}: memref<2x8xf32>, %{{.*}}: memref<4xf32> {msir.donate},
// CHECK-SAME: %{{.*}}: memref<8x4xf32> {msir.alias_of = 0 : i64}, %{{.*}}: memref<2x4xf32>, %{{.*}}: memref<4xf32>, %{{.*}}: memref<f32>)
// CHECK-SAME: msir.donation_refused = ["argument 2 ('b'): 'msir.reduce_sum' reads it after 'msir.add' writes output 2"]

// LLVM-LABEL: llvm.func @sgd(
// LLVM-SAME: %{{[0-9]+}}: !llvm.ptr, %{{[0-9]+}}: !llvm.ptr {llvm.noalias}, %{{[0-9]+}}: !llvm.ptr {llvm.noalias}, %{{[0-9]+}}: !llvm.ptr, %{{[0-9]+}}: !llvm.ptr {llvm.noalias}
// LLVM: llvm.func @sgd__entry(
// LLVM-SAME: msir.output_aliases = array<i64: 0, -1, -1, -1>
// LLVM-SAME: msir.donation_refused = ["argument 2 ('b'): 'msir.reduce_sum' reads it after 'msir.add' writes output 2"]

// -----

// A matmul never writes over its operand: refused.
func.func @mm(%w: tensor<4x4xf32> {msir.donate}, %v: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = msir.matmul %w, %v : tensor<4x4xf32>, tensor<4x4xf32> to tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}

// CHECK-LABEL: func.func @mm(
// CHECK-SAME: %{{.*}}: memref<4x4xf32> {msir.donate}, %{{.*}}: memref<4x4xf32>, %{{.*}}: memref<4x4xf32>)
// CHECK-SAME: msir.donation_refused = ["argument 0 ('w'): 'msir.matmul' writes output 0 and reads it, but not elementwise"]

// LLVM-LABEL: llvm.func @mm(
// LLVM-SAME: !llvm.ptr {llvm.noalias}, %{{[0-9]+}}: !llvm.ptr {llvm.noalias}, %{{[0-9]+}}: !llvm.ptr {llvm.noalias})

// -----

// A row softmax in place: the reductions read row r of x in the row loop
// before the division writes row r.
func.func @softmax(%x: tensor<16x32xf32> {msir.donate}) -> tensor<16x32xf32> {
  %m = msir.reduce_max %x axes array<i64: 1> : tensor<16x32xf32> to tensor<16xf32>
  %mb = msir.reshape %m : tensor<16xf32> to tensor<16x1xf32>
  %e = msir.fusion (%x, %mb) : (tensor<16x32xf32>, tensor<16x1xf32>) -> tensor<16x32xf32> {
  ^bb0(%xa: tensor<16x32xf32>, %ma: tensor<16x1xf32>):
    %b = msir.broadcast_to %ma : tensor<16x1xf32> to tensor<16x32xf32>
    %d = msir.sub %xa, %b : tensor<16x32xf32>
    %z = msir.exp %d : tensor<16x32xf32>
    msir.yield %z : tensor<16x32xf32>
  }
  func.return %e : tensor<16x32xf32>
}

// CHECK-LABEL: func.func @softmax(
// CHECK-SAME: %{{.*}}: memref<16x32xf32> {msir.donate}, %{{.*}}: memref<16x32xf32> {msir.alias_of = 0 : i64})
// CHECK-NOT: msir.donation_refused
