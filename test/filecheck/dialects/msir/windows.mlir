// RUN: msir-opt %s | filecheck %s
// RUN: msir-opt %s | msir-opt | filecheck %s

// The window ops round-trip: conv2d (NCHW input, OIHW weight, explicit
// padding top/bottom/left/right), max_pool2d, avg_pool2d.

func.func @windows(%x: tensor<2x4x7x6xf32>, %w: tensor<6x2x3x3xf32>) -> (tensor<2x6x4x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x4x3xf32>) {
  %y = msir.conv2d %x, %w stride array<i64: 2, 2> padding array<i64: 1, 1, 0, 1> dilation array<i64: 1, 1> groups 2 : tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32> to tensor<2x6x4x3xf32>
  %m = msir.max_pool2d %x kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 0, 0, 0, 0> : tensor<2x4x7x6xf32> to tensor<2x4x3x3xf32>
  %a = msir.avg_pool2d %x kernel array<i64: 3, 3> stride array<i64: 2, 2> padding array<i64: 1, 1, 1, 1> count_include_pad 0 : tensor<2x4x7x6xf32> to tensor<2x4x4x3xf32>
  func.return %y, %m, %a : tensor<2x6x4x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x4x3xf32>
}

// CHECK-LABEL: func.func @windows
// CHECK-NEXT:    %y = msir.conv2d %x, %w stride array<i64: 2, 2> padding array<i64: 1, 1, 0, 1> dilation array<i64: 1, 1> groups 2 : tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32> to tensor<2x6x4x3xf32>
// CHECK-NEXT:    %m = msir.max_pool2d %x kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 0, 0, 0, 0> : tensor<2x4x7x6xf32> to tensor<2x4x3x3xf32>
// CHECK-NEXT:    %a = msir.avg_pool2d %x kernel array<i64: 3, 3> stride array<i64: 2, 2> padding array<i64: 1, 1, 1, 1> count_include_pad 0 : tensor<2x4x7x6xf32> to tensor<2x4x4x3xf32>

// A dilated convolution on f64.
func.func @dilated(%x: tensor<1x2x9x9xf64>, %w: tensor<3x2x3x3xf64>) -> tensor<1x3x5x5xf64> {
  %y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 2, 2> groups 1 : tensor<1x2x9x9xf64>, tensor<3x2x3x3xf64> to tensor<1x3x5x5xf64>
  func.return %y : tensor<1x3x5x5xf64>
}

// CHECK-LABEL: func.func @dilated
// CHECK-NEXT:    %y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 2, 2> groups 1 : tensor<1x2x9x9xf64>, tensor<3x2x3x3xf64> to tensor<1x3x5x5xf64>
