// RUN: msir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier message of the msir dialect; each CHECK pins the whole
// message line that --verify-diagnostics prints first for its split.

// constant: value type and result type differ (caught by the IRDL constraint tying them)
%0 = "msir.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
// CHECK: {{^}}attribute tensor<3xf32> expected from variable 'T', but got tensor<2xf32>{{$}}

// -----

// constant: unsupported element type
%0 = msir.constant dense<1> : tensor<2xi16>
// CHECK: {{^}}'msir.constant' result has type tensor<2xi16>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// iota: dim out of range
%0 = msir.iota 1 : tensor<5xi64>
// CHECK: {{^}}'msir.iota' dim 1 is out of range for result type tensor<5xi64>{{$}}

// -----

// iota: rank 0 has no dim
%0 = msir.iota 0 : tensor<i64>
// CHECK: {{^}}'msir.iota' dim 0 is out of range for result type tensor<i64>{{$}}

// -----

// iota: bool result
%0 = msir.iota 0 : tensor<5xi1>
// CHECK: {{^}}'msir.iota' result has type tensor<5xi1>, expected element type in {int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// div: integers
func.func @f(%a: tensor<4xi32>) {
  %0 = msir.div %a, %a : tensor<4xi32>
  func.return
}
// CHECK: {{^}}'msir.div' operand has type tensor<4xi32>, expected element type in {float16, bfloat16, float32, float64}{{$}}

// -----

// add: bools
func.func @f(%a: tensor<4xi1>) {
  %0 = msir.add %a, %a : tensor<4xi1>
  func.return
}
// CHECK: {{^}}'msir.add' operand has type tensor<4xi1>, expected element type in {int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// and: floats
func.func @f(%a: tensor<f32>) {
  %0 = msir.and %a, %a : tensor<f32>
  func.return
}
// CHECK: {{^}}'msir.and' operand has type tensor<f32>, expected element type in {bool, int32, int64}{{$}}

// -----

// mul: unsupported element type
func.func @f(%a: tensor<4xf80>) {
  %0 = msir.mul %a, %a : tensor<4xf80>
  func.return
}
// CHECK: {{^}}'msir.mul' operand has type tensor<4xf80>, expected element type in {int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// sub: operands of different types (caught by the IRDL constraint)
func.func @f(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  %0 = "msir.sub"(%a, %b) : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: {{^}}operand 'rhs' at position 1 does not verify:{{$}}
// CHECK-NEXT: {{^}}attribute tensor<4xf32> expected from variable 'T', but got tensor<3xf32>{{$}}

// -----

// exp: integers
func.func @f(%a: tensor<4xi32>) {
  %0 = msir.exp %a : tensor<4xi32>
  func.return
}
// CHECK: {{^}}'msir.exp' operand has type tensor<4xi32>, expected element type in {float16, bfloat16, float32, float64}{{$}}

// -----

// neg: bools
func.func @f(%a: tensor<4xi1>) {
  %0 = msir.neg %a : tensor<4xi1>
  func.return
}
// CHECK: {{^}}'msir.neg' operand has type tensor<4xi1>, expected element type in {int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// not: floats
func.func @f(%a: tensor<4xf32>) {
  %0 = msir.not %a : tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.not' operand has type tensor<4xf32>, expected element type in {bool}{{$}}

// -----

// compare: unknown predicate
func.func @f(%a: tensor<4xf32>) {
  %0 = msir.compare lesser, %a, %a : tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.compare' unknown predicate 'lesser', expected one of lt, le, gt, ge, eq, ne{{$}}

// -----

// compare: predicate not a string
func.func @f(%a: tensor<4xf32>) {
  %0 = "msir.compare"(%a, %a) <{predicate = 3 : i64}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return
}
// CHECK: {{^}}'msir.compare' predicate must be a string attribute, got 3 : i64{{$}}

// -----

// compare: unsupported element type
func.func @f(%a: tensor<4xf80>) {
  %0 = msir.compare eq, %a, %a : tensor<4xf80>
  func.return
}
// CHECK: {{^}}'msir.compare' operand has type tensor<4xf80>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// compare: result not bool
func.func @f(%a: tensor<4xf32>) {
  %0 = "msir.compare"(%a, %a) <{predicate = "lt"}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.compare' result has type tensor<4xf32>, but the operands imply tensor<4xi1> (lhs: tensor<4xf32>, rhs: tensor<4xf32>){{$}}

// -----

// select: condition not bool
func.func @f(%c: tensor<4xi32>, %a: tensor<4xf32>) {
  %0 = msir.select %c, %a, %a : tensor<4xi32>, tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.select' condition has type tensor<4xi32>, expected element type in {bool}{{$}}

// -----

// select: condition and values of different shapes
func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %0 = msir.select %c, %a, %a : tensor<i1>, tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.select' condition type tensor<i1> and value type tensor<4xf32> differ in shape{{$}}

// -----

// select: unsupported element type
func.func @f(%c: tensor<4xi1>, %a: tensor<4xi8>) {
  %0 = msir.select %c, %a, %a : tensor<4xi1>, tensor<4xi8>
  func.return
}
// CHECK: {{^}}'msir.select' value has type tensor<4xi8>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// cast: shape changes
func.func @f(%a: tensor<4xf32>) {
  %0 = msir.cast %a : tensor<4xf32> to tensor<2x2xi64>
  func.return
}
// CHECK: {{^}}'msir.cast' input type tensor<4xf32> and result type tensor<2x2xi64> differ in shape{{$}}

// -----

// cast: unsupported input element type
func.func @f(%a: tensor<4xf80>) {
  %0 = msir.cast %a : tensor<4xf80> to tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.cast' input has type tensor<4xf80>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// cast: unsupported result element type
func.func @f(%a: tensor<4xf32>) {
  %0 = msir.cast %a : tensor<4xf32> to tensor<4xui8>
  func.return
}
// CHECK: {{^}}'msir.cast' result has type tensor<4xui8>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// broadcast_to: incompatible dims
func.func @f(%a: tensor<3xf32>) {
  %0 = msir.broadcast_to %a : tensor<3xf32> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.broadcast_to' shape (3,) cannot be broadcast to (2, 4) (input: tensor<3xf32>, result: tensor<2x4xf32>){{$}}

// -----

// broadcast_to: rank decreases
func.func @f(%a: tensor<2x4xf32>) {
  %0 = msir.broadcast_to %a : tensor<2x4xf32> to tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.broadcast_to' shape (2, 4) cannot be broadcast to (4,) (input: tensor<2x4xf32>, result: tensor<4xf32>){{$}}

// -----

// broadcast_to: element type changes
func.func @f(%a: tensor<4xf32>) {
  %0 = msir.broadcast_to %a : tensor<4xf32> to tensor<3x4xf64>
  func.return
}
// CHECK: {{^}}'msir.broadcast_to' input type tensor<4xf32> and result type tensor<3x4xf64> differ in element type{{$}}

// -----

// broadcast_to: unsupported element type (every shape op shares this check)
func.func @f(%a: tensor<4xi16>) {
  %0 = msir.broadcast_to %a : tensor<4xi16> to tensor<3x4xi16>
  func.return
}
// CHECK: {{^}}'msir.broadcast_to' input has type tensor<4xi16>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// reshape: size changes
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.reshape %a : tensor<2x3xf32> to tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.reshape' cannot reshape array of size 6 into shape (4,) (input: tensor<2x3xf32>, result: tensor<4xf32>){{$}}

// -----

// reshape: element type changes
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.reshape %a : tensor<2x3xf32> to tensor<6xi32>
  func.return
}
// CHECK: {{^}}'msir.reshape' input type tensor<2x3xf32> and result type tensor<6xi32> differ in element type{{$}}

// -----

// transpose: not a permutation
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.transpose %a, array<i64: 0, 0> : tensor<2x3xf32> to tensor<2x2xf32>
  func.return
}
// CHECK: {{^}}'msir.transpose' permutation [0, 0] is not a permutation of the 2 axes of (2, 3) (input: tensor<2x3xf32>, result: tensor<2x2xf32>){{$}}

// -----

// transpose: result does not match the permutation
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.transpose %a, array<i64: 1, 0> : tensor<2x3xf32> to tensor<2x3xf32>
  func.return
}
// CHECK: {{^}}'msir.transpose' result type tensor<2x3xf32> does not match the permuted input (3, 2) (input: tensor<2x3xf32>, result: tensor<2x3xf32>){{$}}

// -----

// transpose: permutation not an i64 array
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.transpose %a, array<i32: 1, 0> : tensor<2x3xf32> to tensor<3x2xf32>
  func.return
}
// CHECK: {{^}}'msir.transpose' permutation must be an array<i64: ...> attribute, got array<i32: 1, 0>{{$}}

// -----

// slice: positive step leaves the axis
func.func @f(%a: tensor<5x4xf32>) {
  %0 = msir.slice %a starts array<i64: 1, 0> steps array<i64: 2, 1> : tensor<5x4xf32> to tensor<3x4xf32>
  func.return
}
// CHECK: {{^}}'msir.slice' slice of axis 0 (size 5) from 1 by 2 for 3 elements leaves the axis (input: tensor<5x4xf32>, result: tensor<3x4xf32>){{$}}

// -----

// slice: negative step leaves the axis
func.func @f(%a: tensor<5xf32>) {
  %0 = msir.slice %a starts array<i64: 2> steps array<i64: -1> : tensor<5xf32> to tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.slice' slice of axis 0 (size 5) from 2 by -1 for 4 elements leaves the axis (input: tensor<5xf32>, result: tensor<4xf32>){{$}}

// -----

// slice: zero step
func.func @f(%a: tensor<5xf32>) {
  %0 = msir.slice %a starts array<i64: 0> steps array<i64: 0> : tensor<5xf32> to tensor<2xf32>
  func.return
}
// CHECK: {{^}}'msir.slice' slice step cannot be zero (input: tensor<5xf32>, result: tensor<2xf32>){{$}}

// -----

// slice: starts/steps of the wrong rank
func.func @f(%a: tensor<5x4xf32>) {
  %0 = msir.slice %a starts array<i64: 0> steps array<i64: 1> : tensor<5x4xf32> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.slice' slice of a rank-2 array needs 2 starts, sizes and steps (input: tensor<5x4xf32>, result: tensor<2x4xf32>){{$}}

// -----

// slice: starts not an i64 array
func.func @f(%a: tensor<5xf32>) {
  %0 = msir.slice %a starts 0 : i64 steps array<i64: 1> : tensor<5xf32> to tensor<2xf32>
  func.return
}
// CHECK: {{^}}'msir.slice' starts must be an array<i64: ...> attribute, got 0 : i64{{$}}

// -----

// slice: steps not an i64 array
func.func @f(%a: tensor<5xf32>) {
  %0 = msir.slice %a starts array<i64: 0> steps array<i32: 1> : tensor<5xf32> to tensor<2xf32>
  func.return
}
// CHECK: {{^}}'msir.slice' steps must be an array<i64: ...> attribute, got array<i32: 1>{{$}}

// -----

// take: axis out of range
func.func @f(%a: tensor<5x4xf32>, %i: tensor<3xi64>) {
  %0 = msir.take %a[%i] axis 2 : tensor<5x4xf32>, tensor<3xi64> to tensor<5x4xf32>
  func.return
}
// CHECK: {{^}}'msir.take' axis 2 is out of bounds for array of dimension 2 (input: tensor<5x4xf32>, indices: tensor<3xi64>, result: tensor<5x4xf32>){{$}}

// -----

// take: float indices
func.func @f(%a: tensor<5x4xf32>, %i: tensor<3xf32>) {
  %0 = msir.take %a[%i] axis 0 : tensor<5x4xf32>, tensor<3xf32> to tensor<3x4xf32>
  func.return
}
// CHECK: {{^}}'msir.take' indices has type tensor<3xf32>, expected element type in {int32, int64}{{$}}

// -----

// take: wrong result
func.func @f(%a: tensor<5x4xf32>, %i: tensor<3xi64>) {
  %0 = msir.take %a[%i] axis 1 : tensor<5x4xf32>, tensor<3xi64> to tensor<3x4xf32>
  func.return
}
// CHECK: {{^}}'msir.take' result has type tensor<3x4xf32>, but the operands imply tensor<5x3xf32> (input: tensor<5x4xf32>, indices: tensor<3xi64>){{$}}

// -----

// take: unsupported element type
func.func @f(%a: tensor<5x4xf80>, %i: tensor<3xi64>) {
  %0 = msir.take %a[%i] axis 0 : tensor<5x4xf80>, tensor<3xi64> to tensor<3x4xf80>
  func.return
}
// CHECK: {{^}}'msir.take' input has type tensor<5x4xf80>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// concatenate: other dims differ
func.func @f(%a: tensor<2x4xf32>, %b: tensor<2x3xf32>) {
  %0 = msir.concatenate %a, %b axis 0 : tensor<2x4xf32>, tensor<2x3xf32> to tensor<4x4xf32>
  func.return
}
// CHECK: {{^}}'msir.concatenate' all the input array dimensions except for the concatenation axis must match exactly: (2, 4) and (2, 3) along axis 0 (inputs: tensor<2x4xf32>, tensor<2x3xf32>, result: tensor<4x4xf32>){{$}}

// -----

// concatenate: axis out of range
func.func @f(%a: tensor<2x4xf32>) {
  %0 = msir.concatenate %a, %a axis 2 : tensor<2x4xf32>, tensor<2x4xf32> to tensor<2x8xf32>
  func.return
}
// CHECK: {{^}}'msir.concatenate' axis 2 is out of bounds for array of dimension 2 (inputs: tensor<2x4xf32>, tensor<2x4xf32>, result: tensor<2x8xf32>){{$}}

// -----

// concatenate: rank 0
func.func @f(%a: tensor<f32>) {
  %0 = msir.concatenate %a, %a axis 0 : tensor<f32>, tensor<f32> to tensor<2xf32>
  func.return
}
// CHECK: {{^}}'msir.concatenate' zero-dimensional arrays cannot be concatenated (inputs: tensor<f32>, tensor<f32>, result: tensor<2xf32>){{$}}

// -----

// concatenate: element types differ
func.func @f(%a: tensor<2x4xf32>, %b: tensor<2x4xf64>) {
  %0 = msir.concatenate %a, %b axis 0 : tensor<2x4xf32>, tensor<2x4xf64> to tensor<4x4xf32>
  func.return
}
// CHECK: {{^}}'msir.concatenate' operand #1 has type tensor<2x4xf64>, expected element type f32 (inputs: tensor<2x4xf32>, tensor<2x4xf64>, result: tensor<4x4xf32>){{$}}

// -----

// concatenate: unsupported element type
func.func @f(%a: tensor<2x4xf80>) {
  %0 = msir.concatenate %a, %a axis 0 : tensor<2x4xf80>, tensor<2x4xf80> to tensor<4x4xf80>
  func.return
}
// CHECK: {{^}}'msir.concatenate' operand #0 has type tensor<2x4xf80>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// concatenate: wrong result
func.func @f(%a: tensor<2x4xf32>) {
  %0 = msir.concatenate %a, %a axis 1 : tensor<2x4xf32>, tensor<2x4xf32> to tensor<4x4xf32>
  func.return
}
// CHECK: {{^}}'msir.concatenate' result has type tensor<4x4xf32>, but the operands imply tensor<2x8xf32> (inputs: tensor<2x4xf32>, tensor<2x4xf32>){{$}}

// -----

// concatenate: no operands
%0 = "msir.concatenate"() <{axis = 0 : i64}> : () -> tensor<0xf32>
// CHECK: {{^}}'msir.concatenate' need at least one array to concatenate (inputs: (), result: tensor<0xf32>){{$}}

// -----

// stack: shapes differ
func.func @f(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  %0 = msir.stack %a, %b axis 0 : tensor<4xf32>, tensor<3xf32> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.stack' all input arrays must have the same shape: (4,) and (3,) (inputs: tensor<4xf32>, tensor<3xf32>, result: tensor<2x4xf32>){{$}}

// -----

// stack: axis out of range
func.func @f(%a: tensor<4xf32>) {
  %0 = msir.stack %a, %a axis 2 : tensor<4xf32>, tensor<4xf32> to tensor<4x2xf32>
  func.return
}
// CHECK: {{^}}'msir.stack' axis 2 is out of bounds for array of dimension 2 (inputs: tensor<4xf32>, tensor<4xf32>, result: tensor<4x2xf32>){{$}}

// -----

// stack: element types differ
func.func @f(%a: tensor<4xf32>, %b: tensor<4xi32>) {
  %0 = msir.stack %a, %b axis 0 : tensor<4xf32>, tensor<4xi32> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.stack' operand #1 has type tensor<4xi32>, expected tensor<4xf32> (inputs: tensor<4xf32>, tensor<4xi32>, result: tensor<2x4xf32>){{$}}

// -----

// stack: unsupported element type
func.func @f(%a: tensor<4xi8>) {
  %0 = msir.stack %a, %a axis 0 : tensor<4xi8>, tensor<4xi8> to tensor<2x4xi8>
  func.return
}
// CHECK: {{^}}'msir.stack' operand #0 has type tensor<4xi8>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// stack: wrong result
func.func @f(%a: tensor<4xf32>) {
  %0 = msir.stack %a, %a axis 1 : tensor<4xf32>, tensor<4xf32> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.stack' result has type tensor<2x4xf32>, but the operands imply tensor<4x2xf32> (inputs: tensor<4xf32>, tensor<4xf32>){{$}}

// -----

// stack: no operands
%0 = "msir.stack"() <{axis = 0 : i64}> : () -> tensor<0xf32>
// CHECK: {{^}}'msir.stack' need at least one array to stack (inputs: (), result: tensor<0xf32>){{$}}

// -----

// reduce_sum: result shape wrong
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.reduce_sum %a axes array<i64: 1> : tensor<4x5xf32> to tensor<5xf32>
  func.return
}
// CHECK: {{^}}'msir.reduce_sum' result has type tensor<5xf32>, but the operands imply tensor<4xf32> (input: tensor<4x5xf32>){{$}}

// -----

// reduce_max: result element type wrong
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.reduce_max %a axes array<i64: 1> : tensor<4x5xf32> to tensor<4xf64>
  func.return
}
// CHECK: {{^}}'msir.reduce_max' result has type tensor<4xf64>, but the operands imply tensor<4xf32> (input: tensor<4x5xf32>){{$}}

// -----

// reduce_prod: axis out of range
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.reduce_prod %a axes array<i64: 2> : tensor<4x5xf32> to tensor<4x5xf32>
  func.return
}
// CHECK: {{^}}'msir.reduce_prod' axis 2 is out of bounds for array of dimension 2 (input: tensor<4x5xf32>, result: tensor<4x5xf32>){{$}}

// -----

// reduce_min: negative (unnormalised) axis
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.reduce_min %a axes array<i64: -1> : tensor<4x5xf32> to tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.reduce_min' axis -1 is out of bounds for array of dimension 2 (input: tensor<4x5xf32>, result: tensor<4xf32>){{$}}

// -----

// reduce_sum: duplicate axes
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.reduce_sum %a axes array<i64: 1, 1> : tensor<4x5xf32> to tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.reduce_sum' duplicate value in axes [1, 1] (input: tensor<4x5xf32>, result: tensor<4xf32>){{$}}

// -----

// reduce_mean: integers
func.func @f(%a: tensor<4x5xi32>) {
  %0 = msir.reduce_mean %a axes array<i64: 1> : tensor<4x5xi32> to tensor<4xi32>
  func.return
}
// CHECK: {{^}}'msir.reduce_mean' input has type tensor<4x5xi32>, expected element type in {float16, bfloat16, float32, float64}{{$}}

// -----

// reduce_sum: bools
func.func @f(%a: tensor<4x5xi1>) {
  %0 = msir.reduce_sum %a axes array<i64: 1> : tensor<4x5xi1> to tensor<4xi1>
  func.return
}
// CHECK: {{^}}'msir.reduce_sum' input has type tensor<4x5xi1>, expected element type in {int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// reduce_sum: axes not an i64 array
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.reduce_sum %a axes dense<1> : tensor<1xi64> : tensor<4x5xf32> to tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.reduce_sum' axes must be an array<i64: ...> attribute, got dense<1> : tensor<1xi64>{{$}}

// -----

// argmax: result shape wrong
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.argmax %a axis 1 : tensor<4x5xf32> to tensor<5xi64>
  func.return
}
// CHECK: {{^}}'msir.argmax' result has type tensor<5xi64>, but the operands imply tensor<4xi64> (input: tensor<4x5xf32>){{$}}

// -----

// argmin: result not i64
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.argmin %a : tensor<4x5xf32> to tensor<i32>
  func.return
}
// CHECK: {{^}}'msir.argmin' result has type tensor<i32>, but the operands imply tensor<i64> (input: tensor<4x5xf32>){{$}}

// -----

// argmax: axis out of range
func.func @f(%a: tensor<4x5xf32>) {
  %0 = msir.argmax %a axis 2 : tensor<4x5xf32> to tensor<4xi64>
  func.return
}
// CHECK: {{^}}'msir.argmax' axis 2 is out of bounds for array of dimension 2 (input: tensor<4x5xf32>, result: tensor<4xi64>){{$}}

// -----

// argmin: empty input
func.func @f(%a: tensor<0xf32>) {
  %0 = msir.argmin %a : tensor<0xf32> to tensor<i64>
  func.return
}
// CHECK: {{^}}'msir.argmin' attempt to get argmax/argmin of an empty sequence (input: tensor<0xf32>, result: tensor<i64>){{$}}

// -----

// argmax: unsupported element type
func.func @f(%a: tensor<4xf80>) {
  %0 = msir.argmax %a : tensor<4xf80> to tensor<i64>
  func.return
}
// CHECK: {{^}}'msir.argmax' input has type tensor<4xf80>, expected element type in {bool, int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// matmul: matrices misaligned
func.func @f(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  %0 = msir.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> to tensor<2x5xf32>
  func.return
}
// CHECK: {{^}}'msir.matmul' matmul: shapes (2, 3) and (4, 5) not aligned: 3 (dim 1) != 4 (dim 0) (lhs: tensor<2x3xf32>, rhs: tensor<4x5xf32>, result: tensor<2x5xf32>){{$}}

// -----

// matmul: vectors misaligned
func.func @f(%a: tensor<3xf32>, %b: tensor<4xf32>) {
  %0 = msir.matmul %a, %b : tensor<3xf32>, tensor<4xf32> to tensor<f32>
  func.return
}
// CHECK: {{^}}'msir.matmul' matmul: shapes (3,) and (4,) not aligned: 3 (dim 0) != 4 (dim 0) (lhs: tensor<3xf32>, rhs: tensor<4xf32>, result: tensor<f32>){{$}}

// -----

// matmul: wrong result (matrix)
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  %0 = msir.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x3xf32>
  func.return
}
// CHECK: {{^}}'msir.matmul' result has type tensor<2x3xf32>, but the operands imply tensor<2x4xf32> (lhs: tensor<2x3xf32>, rhs: tensor<3x4xf32>){{$}}

// -----

// matmul: wrong result (vector dot product is rank 0)
func.func @f(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  %0 = msir.matmul %a, %b : tensor<3xf32>, tensor<3xf32> to tensor<1xf32>
  func.return
}
// CHECK: {{^}}'msir.matmul' result has type tensor<1xf32>, but the operands imply tensor<f32> (lhs: tensor<3xf32>, rhs: tensor<3xf32>){{$}}

// -----

// matmul: scalar operand
func.func @f(%a: tensor<f32>, %b: tensor<3xf32>) {
  %0 = msir.matmul %a, %b : tensor<f32>, tensor<3xf32> to tensor<3xf32>
  func.return
}
// CHECK: {{^}}'msir.matmul' matmul: input operand does not have enough dimensions (scalar given) (lhs: tensor<f32>, rhs: tensor<3xf32>, result: tensor<3xf32>){{$}}

// -----

// matmul: batch dims do not broadcast
func.func @f(%a: tensor<2x2x3xf32>, %b: tensor<3x3x4xf32>) {
  %0 = msir.matmul %a, %b : tensor<2x2x3xf32>, tensor<3x3x4xf32> to tensor<2x2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.matmul' shapes (2,) and (3,) cannot be broadcast together (lhs: tensor<2x2x3xf32>, rhs: tensor<3x3x4xf32>, result: tensor<2x2x4xf32>){{$}}

// -----

// matmul: element types differ
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf64>) {
  %0 = msir.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf64> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.matmul' lhs type tensor<2x3xf32> and rhs type tensor<3x4xf64> differ in element type{{$}}

// -----

// matmul: bools
func.func @f(%a: tensor<2x3xi1>, %b: tensor<3x4xi1>) {
  %0 = msir.matmul %a, %b : tensor<2x3xi1>, tensor<3x4xi1> to tensor<2x4xi1>
  func.return
}
// CHECK: {{^}}'msir.matmul' lhs has type tensor<2x3xi1>, expected element type in {int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// einsum: three operands (contracted pairwise by the frontend)
func.func @f(%a: tensor<2xf32>) {
  %0 = msir.einsum "i,i,i->i" %a, %a, %a : tensor<2xf32>, tensor<2xf32>, tensor<2xf32> to tensor<2xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum takes one or two operands, got 3 (contract more operands pairwise) (inputs: tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, result: tensor<2xf32>){{$}}

// -----

// einsum: implicit output
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  %0 = msir.einsum "ij,jk" %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum spec 'ij,jk' needs an explicit output ('->') (inputs: tensor<2x3xf32>, tensor<3x4xf32>, result: tensor<2x4xf32>){{$}}

// -----

// einsum: ellipsis (the frontend expands it)
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.einsum "...j->..." %a : tensor<2x3xf32> to tensor<2xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum spec '...j->...' has invalid subscript '.' (letters a-z, A-Z only) (inputs: tensor<2x3xf32>, result: tensor<2xf32>){{$}}

// -----

// einsum: terms and operands differ in number
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.einsum "ij,jk->ik" %a : tensor<2x3xf32> to tensor<2x3xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum spec 'ij,jk->ik' has 2 operand terms for 1 operands (inputs: tensor<2x3xf32>, result: tensor<2x3xf32>){{$}}

// -----

// einsum: output repeats a subscript
func.func @f(%a: tensor<3x3xf32>) {
  %0 = msir.einsum "ij->ii" %a : tensor<3x3xf32> to tensor<3x3xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum output 'ii' repeats subscript 'i' (inputs: tensor<3x3xf32>, result: tensor<3x3xf32>){{$}}

// -----

// einsum: output subscript in no operand
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.einsum "ij->ik" %a : tensor<2x3xf32> to tensor<2x3xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum output subscript 'k' appears in no operand of 'ij->ik' (inputs: tensor<2x3xf32>, result: tensor<2x3xf32>){{$}}

// -----

// einsum: subscripts and rank differ
func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<3x4xf32>) {
  %0 = msir.einsum "ij,jk->ik" %a, %b : tensor<2x3x4xf32>, tensor<3x4xf32> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum operand #0 of shape (2, 3, 4) has rank 3, but its subscripts 'ij' name 2 axes (inputs: tensor<2x3x4xf32>, tensor<3x4xf32>, result: tensor<2x4xf32>){{$}}

// -----

// einsum: contracted sizes differ
func.func @f(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  %0 = msir.einsum "ij,jk->ik" %a, %b : tensor<2x3xf32>, tensor<4x5xf32> to tensor<2x5xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum subscript 'j' has size 3 at operand #0 axis 1 but 4 at operand #1 axis 0 (inputs: tensor<2x3xf32>, tensor<4x5xf32>, result: tensor<2x5xf32>){{$}}

// -----

// einsum: a diagonal of a non-square operand
func.func @f(%a: tensor<2x3xf32>) {
  %0 = msir.einsum "ii->i" %a : tensor<2x3xf32> to tensor<2xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum subscript 'i' has size 2 at operand #0 axis 0 but 3 at operand #0 axis 1 (inputs: tensor<2x3xf32>, result: tensor<2xf32>){{$}}

// -----

// einsum: dynamic shape
func.func @f(%a: tensor<?x3xf32>) {
  %0 = msir.einsum "ij->j" %a : tensor<?x3xf32> to tensor<3xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' einsum needs static shapes, operand #0 has shape (?, 3) (inputs: tensor<?x3xf32>, result: tensor<3xf32>){{$}}

// -----

// einsum: wrong result
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  %0 = msir.einsum "ij,jk->ki" %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' result has type tensor<2x4xf32>, but the operands imply tensor<4x2xf32> (inputs: tensor<2x3xf32>, tensor<3x4xf32>){{$}}

// -----

// einsum: wrong result element type
func.func @f(%a: tensor<3xf32>) {
  %0 = msir.einsum "i->" %a : tensor<3xf32> to tensor<f64>
  func.return
}
// CHECK: {{^}}'msir.einsum' result has type tensor<f64>, but the operands imply tensor<f32> (inputs: tensor<3xf32>){{$}}

// -----

// einsum: element types differ
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf64>) {
  %0 = msir.einsum "ij,jk->ik" %a, %b : tensor<2x3xf32>, tensor<3x4xf64> to tensor<2x4xf32>
  func.return
}
// CHECK: {{^}}'msir.einsum' operand #0 type tensor<2x3xf32> and operand #1 type tensor<3x4xf64> differ in element type{{$}}

// -----

// einsum: bools
func.func @f(%a: tensor<2x3xi1>, %b: tensor<3x4xi1>) {
  %0 = msir.einsum "ij,jk->ik" %a, %b : tensor<2x3xi1>, tensor<3x4xi1> to tensor<2x4xi1>
  func.return
}
// CHECK: {{^}}'msir.einsum' operand #0 has type tensor<2x3xi1>, expected element type in {int32, int64, float16, bfloat16, float32, float64}{{$}}

// -----

// make_tuple: wrong result
func.func @f(%a: tensor<f32>) {
  %0 = "msir.make_tuple"(%a) : (tensor<f32>) -> tuple<tensor<f64>>
  func.return
}
// CHECK: {{^}}'msir.make_tuple' result has type tuple<tensor<f64>>, but the operands imply tuple<tensor<f32>> (elements: tensor<f32>){{$}}

// -----

// get_tuple: index out of range
func.func @f(%t: tuple<tensor<f32>, tensor<4xi64>>) {
  %0 = msir.get_tuple %t[2] : tuple<tensor<f32>, tensor<4xi64>> to tensor<f32>
  func.return
}
// CHECK: {{^}}'msir.get_tuple' index 2 is out of range for tuple<tensor<f32>, tensor<4xi64>> (2 elements){{$}}

// -----

// get_tuple: negative index
func.func @f(%t: tuple<tensor<f32>, tensor<4xi64>>) {
  %0 = msir.get_tuple %t[-1] : tuple<tensor<f32>, tensor<4xi64>> to tensor<4xi64>
  func.return
}
// CHECK: {{^}}'msir.get_tuple' index -1 is out of range for tuple<tensor<f32>, tensor<4xi64>> (2 elements){{$}}

// -----

// get_tuple: wrong result
func.func @f(%t: tuple<tensor<f32>, tensor<4xi64>>) {
  %0 = msir.get_tuple %t[1] : tuple<tensor<f32>, tensor<4xi64>> to tensor<f32>
  func.return
}
// CHECK: {{^}}'msir.get_tuple' result has type tensor<f32>, but the operands imply tensor<4xi64> (tuple: tuple<tensor<f32>, tensor<4xi64>>){{$}}

// -----

// tape_push: the row does not match the tape's rows
%t = "test.op"() : () -> tensor<?x4xf32>
%v = "test.op"() : () -> tensor<3xf32>
%0 = msir.tape_push %t, %v : tensor<?x4xf32>, tensor<3xf32>
// CHECK: {{^}}'msir.tape_push' row type tensor<3xf32> does not match the tape type tensor<?x4xf32>{{$}}

// -----

// tape_push: the result type differs from the tape's (caught by the IRDL constraint tying them)
%t = "test.op"() : () -> tensor<?x4xf32>
%v = "test.op"() : () -> tensor<4xf32>
%0 = "msir.tape_push"(%t, %v) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf64>
// CHECK: {{^}}attribute tensor<?x4xf32> expected from variable 'T', but got tensor<?x4xf64>{{$}}

// -----

// tape_push: a tape needs a dynamic first dimension
%t = "test.op"() : () -> tensor<2x4xf32>
%v = "test.op"() : () -> tensor<4xf32>
%0 = msir.tape_push %t, %v : tensor<2x4xf32>, tensor<4xf32>
// CHECK: {{^}}'msir.tape_push' row type tensor<4xf32> does not match the tape type tensor<2x4xf32>{{$}}

// -----

// tape_add: the row does not match the tape
func.func @f(%t: tensor<?x4xf32>, %k: tensor<i64>, %v: tensor<3xf32>) {
  %0 = msir.tape_add %t[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<3xf32>
  func.return
}
// CHECK: {{^}}'msir.tape_add' row type tensor<3xf32> does not match the tape type tensor<?x4xf32>{{$}}

// -----

// tape_add: the index is not an i64 scalar
func.func @f(%t: tensor<?x4xf32>, %k: tensor<i32>, %v: tensor<4xf32>) {
  %0 = msir.tape_add %t[%k], %v : tensor<?x4xf32>, tensor<i32>, tensor<4xf32>
  func.return
}
// CHECK: {{^}}'msir.tape_add' index has type tensor<i32>, expected tensor<i64>{{$}}

// -----

// tape_zeros: no rows
func.func @f(%t: tensor<f32>) {
  %0 = msir.tape_zeros %t : tensor<f32>
  func.return
}
// CHECK: {{^}}'msir.tape_zeros' type tensor<f32> has no rows (rank 0){{$}}
