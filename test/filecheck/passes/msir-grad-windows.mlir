// RUN: msir-opt %s -p msir-grad | filecheck %s
// RUN: msir-opt %s -p msir-grad | msir-opt | filecheck %s
// RUN: msir-opt %s -p msir-grad,msir-lower-windows | filecheck %s --check-prefix=GONE
// GONE-NOT: msir.conv2d
// GONE-NOT: msir.max_pool2d

// Reverse mode of the window ops (passes/grad_rules.py, passes/window_algebra.py).
// A convolution's input cotangent is the transposed convolution as GEMM +
// col2im: the weight's transpose (per group) times the cotangent, the
// columns' cotangents scatter_added back through the forward's index table.
// The weight's is the cotangent times the forward's columns transposed (one
// batched GEMM per group, the transpose a BLAS flag), summed over the batch;
// the columns gather through the same index table (one table for both
// gradients, merged by cse). A max pooling's cotangent goes to the first maximum of each
// window (the smallest tap holding the maximum), scatter_added back through
// the gather's index table.

func.func @loss(%x: tensor<2x4x7x6xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<f32> {
  %y = msir.conv2d %x, %w stride array<i64: 2, 2> padding array<i64: 1, 1, 0, 1> dilation array<i64: 1, 1> groups 2 {msir.name = "conv"} : tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32> to tensor<2x6x4x3xf32>
  %m = msir.max_pool2d %y kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 0, 0, 0, 1> {msir.name = "pool"} : tensor<2x6x4x3xf32> to tensor<2x6x2x2xf32>
  %s = msir.reduce_sum %m axes array<i64: 0, 1, 2, 3> : tensor<2x6x2x2xf32> to tensor<f32>
  func.return %s : tensor<f32>
}
func.func @grad_loss(%x: tensor<2x4x7x6xf32>, %w: tensor<6x2x3x3xf32>) -> (tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>) {
  %0 = msir.closure @loss() : (tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>) -> tensor<f32>
  %1 = msir.grad %0 argnums array<i64: 0, 1> : (tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>) -> tensor<f32> to (tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>) -> (tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>)
  %2, %3 = msir.apply %1(%x, %w) : (tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>) -> (tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>)
  func.return %2, %3 : tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>
}

// CHECK-LABEL: func.func private @loss__bwd(
// CHECK:         %[[FIRST:.*]] = msir.reduce_min %{{.*}} axes array<i64: 2> {msir.name = "pool/grad"} : tensor<2x6x4x4xi64> to tensor<2x6x1x4xi64>
// CHECK:         %[[ROUTED:.*]] = msir.select %{{.*}}, %{{.*}}, %{{.*}} {msir.name = "pool/grad"} : tensor<2x6x4x4xi1>, tensor<2x6x4x4xf32>
// CHECK-NEXT:    %[[BACK:.*]] = msir.scatter_add %[[ROUTED]][%{{.*}}] axis 2 {msir.name = "pool/grad"} : tensor<2x6x4x4xf32>, tensor<4x4xi64> to tensor<2x6x12xf32>
// CHECK-NEXT:    %[[CT:.*]] = msir.reshape %[[BACK]] {msir.name = "pool/grad"} : tensor<2x6x12xf32> to tensor<2x6x4x3xf32>
// CHECK:         %[[WT:.*]] = msir.transpose %{{.*}}, array<i64: 0, 2, 1> {msir.name = "conv/grad"} : tensor<2x3x18xf32> to tensor<2x18x3xf32>
// CHECK-NEXT:    %[[CTG:.*]] = msir.reshape %[[CT]] {msir.name = "conv/grad"} : tensor<2x6x4x3xf32> to tensor<2x2x3x12xf32>
// CHECK-NEXT:    %[[DCOLS:.*]] = msir.matmul %[[WT]], %[[CTG]] {msir.name = "conv/grad"} : tensor<2x18x3xf32>, tensor<2x2x3x12xf32> to tensor<2x2x18x12xf32>
// CHECK:         %[[SPREAD:.*]] = msir.scatter_add %{{.*}}[%[[TABLE:.*]]] axis 2 {msir.name = "conv/grad"} : tensor<2x4x9x12xf32>, tensor<9x12xi64> to tensor<2x4x42xf32>
// CHECK-NEXT:    %[[DX:.*]] = msir.reshape %[[SPREAD]] {msir.name = "conv/grad"} : tensor<2x4x42xf32> to tensor<2x4x7x6xf32>
// CHECK:         %[[XF:.*]] = msir.reshape %{{.*}} {msir.name = "conv/grad"} : tensor<2x4x7x6xf32> to tensor<2x4x42xf32>
// CHECK-NEXT:    %[[COLS:.*]] = msir.take %[[XF]][%[[TABLE]]] axis 2 {msir.name = "conv/grad"} : tensor<2x4x42xf32>, tensor<9x12xi64> to tensor<2x4x9x12xf32>
// CHECK-NEXT:    %[[MASKED:.*]] = msir.mul %[[COLS]], %{{.*}} {msir.name = "conv/grad"} : tensor<2x4x9x12xf32>
// CHECK-NEXT:    %[[GROUPED:.*]] = msir.reshape %[[MASKED]] {msir.name = "conv/grad"} : tensor<2x4x9x12xf32> to tensor<2x2x18x12xf32>
// CHECK-NEXT:    %[[COLST:.*]] = msir.transpose %[[GROUPED]], array<i64: 0, 1, 3, 2> {msir.name = "conv/grad"} : tensor<2x2x18x12xf32> to tensor<2x2x12x18xf32>
// CHECK-NEXT:    %[[PER:.*]] = msir.matmul %[[CTG]], %[[COLST]] {msir.name = "conv/grad"} : tensor<2x2x3x12xf32>, tensor<2x2x12x18xf32> to tensor<2x2x3x18xf32>
// CHECK-NEXT:    %[[SUM:.*]] = msir.reduce_sum %[[PER]] axes array<i64: 0> {msir.name = "conv/grad"} : tensor<2x2x3x18xf32> to tensor<2x3x18xf32>
// CHECK-NEXT:    %[[DW:.*]] = msir.reshape %[[SUM]] {msir.name = "conv/grad"} : tensor<2x3x18xf32> to tensor<6x2x3x3xf32>
// CHECK-NEXT:    func.return %[[DX]], %[[DW]] : tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>
