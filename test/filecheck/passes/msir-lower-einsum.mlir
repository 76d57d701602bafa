// RUN: msir-opt %s -p msir-lower-einsum | filecheck %s
// RUN: msir-opt %s -p msir-lower-einsum | msir-opt | filecheck %s
// RUN: msir-opt %s -p msir-lower-einsum | filecheck %s --check-prefix=GONE
// RUN: msir-opt %s -p msir-lower-einsum,convert-msir-to-loops | filecheck %s --check-prefix=LOOPS

// msir-lower-einsum (passes/lower_einsum.py): every msir.einsum becomes
// transposes, reshapes and one (batched) msir.matmul when it contracts a
// subscript and keeps a free one, with the orders chosen so that nothing is
// copied where the matmul can read its operands in place; otherwise
// broadcasts, msir.mul and msir.reduce_sum. Diagonals are strided slices.

// GONE-NOT: msir.einsum

// A matrix product is the matmul itself.
func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %r = msir.einsum "ij,jk->ik" %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:    %r = msir.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
// CHECK-NEXT:    func.return %r : tensor<2x4xf32>
// CHECK-NEXT:  }

// Transposed operands: a transpose of the last two axes, which the matmul reads in place.
func.func @rhs_transposed(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<2x4xf32> {
  %r = msir.einsum "ij,kj->ik" %a, %b : tensor<2x3xf32>, tensor<4x3xf32> to tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @rhs_transposed(
// CHECK-NEXT:    %0 = msir.transpose %b, array<i64: 1, 0> : tensor<4x3xf32> to tensor<3x4xf32>
// CHECK-NEXT:    %r = msir.matmul %a, %0 : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
// CHECK-NEXT:    func.return %r : tensor<2x4xf32>

func.func @lhs_transposed(%a: tensor<3x2xf64>, %b: tensor<3x4xf64>) -> tensor<2x4xf64> {
  %r = msir.einsum "ji,jk->ik" %a, %b : tensor<3x2xf64>, tensor<3x4xf64> to tensor<2x4xf64>
  func.return %r : tensor<2x4xf64>
}

// CHECK-LABEL: func.func @lhs_transposed(
// CHECK-NEXT:    %0 = msir.transpose %a, array<i64: 1, 0> : tensor<3x2xf64> to tensor<2x3xf64>
// CHECK-NEXT:    %r = msir.matmul %0, %b : tensor<2x3xf64>, tensor<3x4xf64> to tensor<2x4xf64>
// CHECK-NEXT:    func.return %r : tensor<2x4xf64>

// A transposed result is the product of the transposes, in the other order: (ab)^T = b^T a^T.
func.func @result_transposed(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<4x2xf32> {
  %r = msir.einsum "ij,jk->ki" %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<4x2xf32>
  func.return %r : tensor<4x2xf32>
}

// CHECK-LABEL: func.func @result_transposed(
// CHECK-NEXT:    %0 = msir.transpose %b, array<i64: 1, 0> : tensor<3x4xf32> to tensor<4x3xf32>
// CHECK-NEXT:    %1 = msir.transpose %a, array<i64: 1, 0> : tensor<2x3xf32> to tensor<3x2xf32>
// CHECK-NEXT:    %r = msir.matmul %0, %1 : tensor<4x3xf32>, tensor<3x2xf32> to tensor<4x2xf32>
// CHECK-NEXT:    func.return %r : tensor<4x2xf32>

// Batch subscripts are the matmul's batch axis; one that is not leading is moved there.
func.func @batch(%a: tensor<5x2x3xf32>, %b: tensor<5x3x4xf32>, %c: tensor<2x5x3xf32>) -> (tensor<5x2x4xf32>, tensor<5x2x4xf32>) {
  %r = msir.einsum "bij,bjk->bik" %a, %b : tensor<5x2x3xf32>, tensor<5x3x4xf32> to tensor<5x2x4xf32>
  %s = msir.einsum "ibj,bjk->bik" %c, %b : tensor<2x5x3xf32>, tensor<5x3x4xf32> to tensor<5x2x4xf32>
  func.return %r, %s : tensor<5x2x4xf32>, tensor<5x2x4xf32>
}

// CHECK-LABEL: func.func @batch(
// CHECK-NEXT:    %r = msir.matmul %a, %b : tensor<5x2x3xf32>, tensor<5x3x4xf32> to tensor<5x2x4xf32>
// CHECK-NEXT:    %0 = msir.transpose %c, array<i64: 1, 0, 2> : tensor<2x5x3xf32> to tensor<5x2x3xf32>
// CHECK-NEXT:    %s = msir.matmul %0, %b : tensor<5x2x3xf32>, tensor<5x3x4xf32> to tensor<5x2x4xf32>
// CHECK-NEXT:    func.return %r, %s : tensor<5x2x4xf32>, tensor<5x2x4xf32>

// Two contracted subscripts are flattened into one.
func.func @two_contracted(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) -> tensor<2x5xf32> {
  %r = msir.einsum "ijk,jkl->il" %a, %b : tensor<2x3x4xf32>, tensor<3x4x5xf32> to tensor<2x5xf32>
  func.return %r : tensor<2x5xf32>
}

// CHECK-LABEL: func.func @two_contracted(
// CHECK-NEXT:    %0 = msir.reshape %a : tensor<2x3x4xf32> to tensor<2x12xf32>
// CHECK-NEXT:    %1 = msir.reshape %b : tensor<3x4x5xf32> to tensor<12x5xf32>
// CHECK-NEXT:    %r = msir.matmul %0, %1 : tensor<2x12xf32>, tensor<12x5xf32> to tensor<2x5xf32>
// CHECK-NEXT:    func.return %r : tensor<2x5xf32>

// A subscript of one operand only, absent from the output, is summed first; the
// other operand's free axis makes a vector-matrix product.
func.func @summed_from_one(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<4xf32> {
  %r = msir.einsum "ij,jk->k" %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @summed_from_one(
// CHECK-NEXT:    %0 = msir.reduce_sum %a axes array<i64: 0> : tensor<2x3xf32> to tensor<3xf32>
// CHECK-NEXT:    %r = msir.matmul %0, %b : tensor<3xf32>, tensor<3x4xf32> to tensor<4xf32>
// CHECK-NEXT:    func.return %r : tensor<4xf32>

// Without a contracted subscript (outer products) or without a free one (dots)
// there is no matrix: broadcasts, a multiply and a sum, which msir-fuse fuses.
func.func @outer(%a: tensor<3xf64>, %b: tensor<4xf64>) -> tensor<3x4xf64> {
  %r = msir.einsum "i,j->ij" %a, %b : tensor<3xf64>, tensor<4xf64> to tensor<3x4xf64>
  func.return %r : tensor<3x4xf64>
}

// CHECK-LABEL: func.func @outer(
// CHECK-NEXT:    %0 = msir.reshape %a : tensor<3xf64> to tensor<3x1xf64>
// CHECK-NEXT:    %1 = msir.broadcast_to %0 : tensor<3x1xf64> to tensor<3x4xf64>
// CHECK-NEXT:    %2 = msir.broadcast_to %b : tensor<4xf64> to tensor<3x4xf64>
// CHECK-NEXT:    %r = msir.mul %1, %2 : tensor<3x4xf64>
// CHECK-NEXT:    func.return %r : tensor<3x4xf64>

func.func @dots(%a: tensor<5xf64>, %b: tensor<5xf64>, %c: tensor<2x5xf64>) -> (tensor<f64>, tensor<2xf64>) {
  %r = msir.einsum "i,i->" %a, %b : tensor<5xf64>, tensor<5xf64> to tensor<f64>
  %s = msir.einsum "bi,bi->b" %c, %c : tensor<2x5xf64>, tensor<2x5xf64> to tensor<2xf64>
  func.return %r, %s : tensor<f64>, tensor<2xf64>
}

// CHECK-LABEL: func.func @dots(
// CHECK-NEXT:    %0 = msir.mul %a, %b : tensor<5xf64>
// CHECK-NEXT:    %r = msir.reduce_sum %0 axes array<i64: 0> : tensor<5xf64> to tensor<f64>
// CHECK-NEXT:    %1 = msir.mul %c, %c : tensor<2x5xf64>
// CHECK-NEXT:    %s = msir.reduce_sum %1 axes array<i64: 1> : tensor<2x5xf64> to tensor<2xf64>
// CHECK-NEXT:    func.return %r, %s : tensor<f64>, tensor<2xf64>

// One operand: a diagonal is a strided slice of the repeated subscript's axes,
// grouped and flattened (step n + 1), a trace its sum, a permutation a transpose.
func.func @one_operand(%a: tensor<3x3xf32>, %b: tensor<2x3x2xf32>) -> (tensor<3xf32>, tensor<f32>, tensor<3x3xf32>, tensor<3xf32>) {
  %d = msir.einsum "ii->i" %a : tensor<3x3xf32> to tensor<3xf32>
  %t = msir.einsum "ii->" %a : tensor<3x3xf32> to tensor<f32>
  %p = msir.einsum "ij->ji" %a : tensor<3x3xf32> to tensor<3x3xf32>
  %q = msir.einsum "iji->j" %b : tensor<2x3x2xf32> to tensor<3xf32>
  func.return %d, %t, %p, %q : tensor<3xf32>, tensor<f32>, tensor<3x3xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @one_operand(
// CHECK-NEXT:    %0 = msir.reshape %a : tensor<3x3xf32> to tensor<9xf32>
// CHECK-NEXT:    %d = msir.slice %0 starts array<i64: 0> steps array<i64: 4> : tensor<9xf32> to tensor<3xf32>
// CHECK-NEXT:    %1 = msir.reshape %a : tensor<3x3xf32> to tensor<9xf32>
// CHECK-NEXT:    %2 = msir.slice %1 starts array<i64: 0> steps array<i64: 4> : tensor<9xf32> to tensor<3xf32>
// CHECK-NEXT:    %t = msir.reduce_sum %2 axes array<i64: 0> : tensor<3xf32> to tensor<f32>
// CHECK-NEXT:    %p = msir.transpose %a, array<i64: 1, 0> : tensor<3x3xf32> to tensor<3x3xf32>
// CHECK-NEXT:    %3 = msir.transpose %b, array<i64: 0, 2, 1> : tensor<2x3x2xf32> to tensor<2x2x3xf32>
// CHECK-NEXT:    %4 = msir.reshape %3 : tensor<2x2x3xf32> to tensor<4x3xf32>
// CHECK-NEXT:    %5 = msir.slice %4 starts array<i64: 0, 0> steps array<i64: 3, 1> : tensor<4x3xf32> to tensor<2x3xf32>
// CHECK-NEXT:    %q = msir.reduce_sum %5 axes array<i64: 0> : tensor<2x3xf32> to tensor<3xf32>
// CHECK-NEXT:    func.return %d, %t, %p, %q

// Through convert-msir-to-loops, a product large enough for the BLAS is one gemm
// call that reads the transposed operand in place (transpose flag 1, no copy).
func.func @blas(%a: tensor<64x32xf32>, %b: tensor<64x48xf32>) -> tensor<32x48xf32> {
  %r = msir.einsum "ji,jk->ik" %a, %b : tensor<64x32xf32>, tensor<64x48xf32> to tensor<32x48xf32>
  func.return %r : tensor<32x48xf32>
}

// LOOPS-LABEL: func.func @blas(
// LOOPS-SAME:    %[[A:[0-9]+]]: memref<64x32xf32>, %[[B:[0-9]+]]: memref<64x48xf32>, %[[OUT:[0-9]+]]: memref<32x48xf32>)
// LOOPS-NOT:     memref.alloc
// LOOPS-DAG:     %[[TA:.*]] = arith.constant 1 : i64
// LOOPS-DAG:     %[[TB:.*]] = arith.constant 0 : i64
// LOOPS-DAG:     %[[PA:.*]] = "memref.cast"(%[[A]]) : (memref<64x32xf32>) -> memref<f32>
// LOOPS-DAG:     %[[PB:.*]] = "memref.cast"(%[[B]]) : (memref<64x48xf32>) -> memref<f32>
// LOOPS:         func.call @__msir_gemm_f32(%[[TA]], %[[TB]], %{{.*}}, %{{.*}}, %{{.*}}, %[[PA]], %{{.*}}, %{{.*}}, %[[PB]],
// LOOPS-NOT:     scf.for
// LOOPS:         func.return
