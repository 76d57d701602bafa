// RUN: msir-opt %s -p msir-lower-windows | filecheck %s
// RUN: msir-opt %s -p msir-lower-windows | msir-opt | filecheck %s
// RUN: msir-opt %s -p msir-lower-windows | filecheck %s --check-prefix=GONE
// RUN: msir-opt %s -p msir-lower-windows,dce,msir-fuse,convert-msir-to-loops | filecheck %s --check-prefix=LOOPS

// msir-lower-windows (passes/lower_windows.py, passes/window_algebra.py):
// every window op gathers its columns with one msir.take along the flattened
// spatial axis, through an index table (KH*KW, OH*OW) computed from iotas:
// row oh*stride + kh*dilation - top, clamped into the input (a mask zeroes
// the taps in the padding). A convolution is then one matmul (the BLAS), a
// max pooling a reduce_max over the taps, an average a reduce_sum over the
// divisor.

// GONE-NOT: msir.conv2d
// GONE-NOT: msir.max_pool2d
// GONE-NOT: msir.avg_pool2d

// A padded 3x3 convolution: row index oh + kh - 1, clamped to [0, 15], masked
// where it leaves [0, 16); the columns (2, 8, 9, 256) against the weight (16, 72).
func.func @conv(%x: tensor<2x8x16x16xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<2x16x16x16xf32> {
  %y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 1, 1, 1, 1> dilation array<i64: 1, 1> groups 1 {msir.name = "conv1"} : tensor<2x8x16x16xf32>, tensor<16x8x3x3xf32> to tensor<2x16x16x16xf32>
  func.return %y : tensor<2x16x16x16xf32>
}

// CHECK-LABEL: func.func @conv
// CHECK-NEXT:    %[[OH:.*]] = msir.iota 2 {msir.name = "conv1"} : tensor<3x3x16x16xi64>
// CHECK-NEXT:    %[[KH:.*]] = msir.iota 0 {msir.name = "conv1"} : tensor<3x3x16x16xi64>
// CHECK-NEXT:    %[[SUM:.*]] = msir.add %[[OH]], %[[KH]] {msir.name = "conv1"} : tensor<3x3x16x16xi64>
// CHECK-NEXT:    %[[ONE:.*]] = msir.constant dense<1> : tensor<3x3x16x16xi64> {msir.name = "conv1"}
// CHECK-NEXT:    %[[ROW:.*]] = msir.sub %[[SUM]], %[[ONE]] {msir.name = "conv1"} : tensor<3x3x16x16xi64>
// CHECK:         msir.compare ge, %[[ROW]]
// CHECK:         msir.compare lt, %[[ROW]]
// CHECK:         msir.maximum %[[ROW]]
// CHECK:         %[[MASK:.*]] = msir.reshape %{{.*}} {msir.name = "conv1"} : tensor<3x3x16x16xf32> to tensor<9x256xf32>
// CHECK-NEXT:    %[[TABLE:.*]] = msir.reshape %{{.*}} {msir.name = "conv1"} : tensor<3x3x16x16xi64> to tensor<9x256xi64>
// CHECK-NEXT:    %[[FLAT:.*]] = msir.reshape %x {msir.name = "conv1"} : tensor<2x8x16x16xf32> to tensor<2x8x256xf32>
// CHECK-NEXT:    %[[COLS:.*]] = msir.take %[[FLAT]][%[[TABLE]]] axis 2 {msir.name = "conv1"} : tensor<2x8x256xf32>, tensor<9x256xi64> to tensor<2x8x9x256xf32>
// CHECK-NEXT:    %[[M:.*]] = msir.broadcast_to %[[MASK]] {msir.name = "conv1"} : tensor<9x256xf32> to tensor<2x8x9x256xf32>
// CHECK-NEXT:    %[[MASKED:.*]] = msir.mul %[[COLS]], %[[M]] {msir.name = "conv1"} : tensor<2x8x9x256xf32>
// CHECK-NEXT:    %[[W:.*]] = msir.reshape %w {msir.name = "conv1"} : tensor<16x8x3x3xf32> to tensor<16x72xf32>
// CHECK-NEXT:    %[[C:.*]] = msir.reshape %[[MASKED]] {msir.name = "conv1"} : tensor<2x8x9x256xf32> to tensor<2x72x256xf32>
// CHECK-NEXT:    %[[P:.*]] = msir.matmul %[[W]], %[[C]] {msir.name = "conv1"} : tensor<16x72xf32>, tensor<2x72x256xf32> to tensor<2x16x256xf32>
// CHECK-NEXT:    %y = msir.reshape %[[P]] {msir.name = "conv1"} : tensor<2x16x256xf32> to tensor<2x16x16x16xf32>
// CHECK-NEXT:    func.return %y

// LOOPS-LABEL: func.func @conv
// LOOPS:         func.call @__msir_gemm_f32

// Groups, stride 2, no padding (no clamp, no mask): the weight (groups,
// O/groups, C/groups*KH*KW) against the columns (N, groups, C/groups*KH*KW, OH*OW).
func.func @grouped(%x: tensor<1x4x6x6xf32>, %w: tensor<6x2x2x2xf32>) -> tensor<1x6x3x3xf32> {
  %y = msir.conv2d %x, %w stride array<i64: 2, 2> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 2 : tensor<1x4x6x6xf32>, tensor<6x2x2x2xf32> to tensor<1x6x3x3xf32>
  func.return %y : tensor<1x6x3x3xf32>
}

// CHECK-LABEL: func.func @grouped
// CHECK-NOT:     msir.minimum
// CHECK:         %[[COLS:.*]] = msir.take %{{.*}}[%{{.*}}] axis 2 : tensor<1x4x36xf32>, tensor<4x9xi64> to tensor<1x4x4x9xf32>
// CHECK-NEXT:    %[[W:.*]] = msir.reshape %w : tensor<6x2x2x2xf32> to tensor<2x3x8xf32>
// CHECK-NEXT:    %[[C:.*]] = msir.reshape %[[COLS]] : tensor<1x4x4x9xf32> to tensor<1x2x8x9xf32>
// CHECK-NEXT:    %[[P:.*]] = msir.matmul %[[W]], %[[C]] : tensor<2x3x8xf32>, tensor<1x2x8x9xf32> to tensor<1x2x3x9xf32>
// CHECK-NEXT:    %y = msir.reshape %[[P]] : tensor<1x2x3x9xf32> to tensor<1x6x3x3xf32>

// Max pooling with 'same' padding: the clamped columns repeat an element of
// their own window, so the maximum needs no mask (and no -inf).
func.func @max_pool(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32> {
  %y = msir.max_pool2d %x kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 0, 1, 0, 1> : tensor<1x2x5x5xf32> to tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}

// CHECK-LABEL: func.func @max_pool
// CHECK-NOT:     msir.compare
// CHECK:         %[[HI:.*]] = msir.constant dense<4> : tensor<2x2x3x3xi64>
// CHECK-NEXT:    %{{.*}} = msir.minimum %{{.*}}, %[[HI]] : tensor<2x2x3x3xi64>
// CHECK:         %[[COLS:.*]] = msir.take %{{.*}}[%{{.*}}] axis 2 : tensor<1x2x25xf32>, tensor<4x9xi64> to tensor<1x2x4x9xf32>
// CHECK-NEXT:    %[[MAX:.*]] = msir.reduce_max %[[COLS]] axes array<i64: 2> : tensor<1x2x4x9xf32> to tensor<1x2x9xf32>
// CHECK-NEXT:    %y = msir.reshape %[[MAX]] : tensor<1x2x9xf32> to tensor<1x2x3x3xf32>

// Average pooling without count_include_pad divides by the input elements
// each window covers: the mask summed over the taps.
func.func @avg_pool(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32> {
  %y = msir.avg_pool2d %x kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 0, 1, 0, 1> count_include_pad 0 : tensor<1x2x5x5xf32> to tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}

// CHECK-LABEL: func.func @avg_pool
// CHECK:         %[[MASK:.*]] = msir.reshape %{{.*}} : tensor<2x2x3x3xf32> to tensor<4x9xf32>
// CHECK:         %[[COLS:.*]] = msir.take %{{.*}}[%{{.*}}] axis 2 : tensor<1x2x25xf32>, tensor<4x9xi64> to tensor<1x2x4x9xf32>
// CHECK:         %[[TOTAL:.*]] = msir.reduce_sum %{{.*}} axes array<i64: 2> : tensor<1x2x4x9xf32> to tensor<1x2x9xf32>
// CHECK-NEXT:    %[[COUNT:.*]] = msir.reduce_sum %[[MASK]] axes array<i64: 0> : tensor<4x9xf32> to tensor<9xf32>
// CHECK-NEXT:    %[[D:.*]] = msir.broadcast_to %[[COUNT]] : tensor<9xf32> to tensor<1x2x9xf32>
// CHECK-NEXT:    %[[MEAN:.*]] = msir.div %[[TOTAL]], %[[D]] : tensor<1x2x9xf32>
// CHECK-NEXT:    %y = msir.reshape %[[MEAN]] : tensor<1x2x9xf32> to tensor<1x2x3x3xf32>
