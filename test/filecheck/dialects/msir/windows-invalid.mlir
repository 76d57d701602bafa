// RUN: msir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier message of the window ops (conv2d, max_pool2d,
// avg_pool2d); each CHECK pins the whole message line.

// conv2d: result shape
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> to tensor<1x4x8x8xf32>
// CHECK: {{^}}'msir.conv2d' result has type tensor<1x4x8x8xf32>, but the operands imply tensor<1x4x6x6xf32> (input: tensor<1x3x8x8xf32>, weight: tensor<4x3x3x3xf32>){{$}}

// -----

// conv2d: channels per group
%x = "test.op"() : () -> tensor<1x4x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 2 : tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32> to tensor<1x4x6x6xf32>
// CHECK: {{^}}'msir.conv2d' the weight (4, 3, 3, 3) expects 6 input channels (3 per group, 2 groups), the input (1, 4, 8, 8) has 4 (input: tensor<1x4x8x8xf32>, weight: tensor<4x3x3x3xf32>, result: tensor<1x4x6x6xf32>){{$}}

// -----

// conv2d: groups must divide the channels
%x = "test.op"() : () -> tensor<1x4x8x8xf32>
%w = "test.op"() : () -> tensor<4x4x3x3xf32>
%y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 3 : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32> to tensor<1x4x6x6xf32>
// CHECK: {{^}}'msir.conv2d' groups 3 must divide both the input's 4 channels and the weight's 4 output channels (input: tensor<1x4x8x8xf32>, weight: tensor<4x4x3x3xf32>, result: tensor<1x4x6x6xf32>){{$}}

// -----

// conv2d: a window larger than the padded input
%x = "test.op"() : () -> tensor<1x1x2x2xf32>
%w = "test.op"() : () -> tensor<1x1x3x3xf32>
%y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 1 : tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32> to tensor<1x1x1x1xf32>
// CHECK: {{^}}'msir.conv2d' the window (3, 3) (kernel (3, 3), dilation (1, 1)) is larger than the padded input (input (1, 1, 2, 2), padding (0, 0, 0, 0)) (input: tensor<1x1x2x2xf32>, weight: tensor<1x1x3x3xf32>, result: tensor<1x1x1x1xf32>){{$}}

// -----

// conv2d: 3-D input
%x = "test.op"() : () -> tensor<3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 1 : tensor<3x8x8xf32>, tensor<4x3x3x3xf32> to tensor<1x4x6x6xf32>
// CHECK: {{^}}'msir.conv2d' the input must be 4-D (N, C, H, W), got shape (3, 8, 8) (input: tensor<3x8x8xf32>, weight: tensor<4x3x3x3xf32>, result: tensor<1x4x6x6xf32>){{$}}

// -----

// conv2d: integer operands
%x = "test.op"() : () -> tensor<1x3x8x8xi32>
%w = "test.op"() : () -> tensor<4x3x3x3xi32>
%y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 1 : tensor<1x3x8x8xi32>, tensor<4x3x3x3xi32> to tensor<1x4x6x6xi32>
// CHECK: {{^}}'msir.conv2d' input has type tensor<1x3x8x8xi32>, expected element type in {float16, bfloat16, float32, float64}{{$}}

// -----

// conv2d: element types differ
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf64>
%y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf64> to tensor<1x4x6x6xf32>
// CHECK: {{^}}'msir.conv2d' operands differ in element type (input: tensor<1x3x8x8xf32>, weight: tensor<4x3x3x3xf64>){{$}}

// -----

// conv2d: a zero stride
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%y = msir.conv2d %x, %w stride array<i64: 0, 1> padding array<i64: 0, 0, 0, 0> dilation array<i64: 1, 1> groups 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> to tensor<1x4x6x6xf32>
// CHECK: {{^}}'msir.conv2d' stride must hold two positive values, got [0, 1]{{$}}

// -----

// conv2d: padding of three values
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 1, 1, 1> dilation array<i64: 1, 1> groups 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> to tensor<1x4x6x6xf32>
// CHECK: {{^}}'msir.conv2d' padding must hold four non-negative values, got [1, 1, 1]{{$}}

// -----

// max_pool2d: result shape
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%y = msir.max_pool2d %x kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 0, 0, 0, 0> : tensor<1x3x8x8xf32> to tensor<1x3x8x8xf32>
// CHECK: {{^}}'msir.max_pool2d' result has type tensor<1x3x8x8xf32>, but the operands imply tensor<1x3x4x4xf32> (input: tensor<1x3x8x8xf32>){{$}}

// -----

// max_pool2d: padding as large as the kernel
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%y = msir.max_pool2d %x kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 2, 0, 0, 0> : tensor<1x3x8x8xf32> to tensor<1x3x5x4xf32>
// CHECK: {{^}}'msir.max_pool2d' padding (2, 0, 0, 0) must be smaller than the kernel (2, 2) (input: tensor<1x3x8x8xf32>, result: tensor<1x3x5x4xf32>){{$}}

// -----

// avg_pool2d: count_include_pad is 0 or 1
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%y = msir.avg_pool2d %x kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 0, 0, 0, 0> count_include_pad 2 : tensor<1x3x8x8xf32> to tensor<1x3x4x4xf32>
// CHECK: {{^}}'msir.avg_pool2d' count_include_pad must be 0 or 1, got 2{{$}}
