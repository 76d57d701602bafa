// RUN: msir-opt %s | msir-opt | filecheck %s
// RUN: msir-opt %s --print-op-generic | msir-opt | filecheck %s

// Every msir op in its custom syntax, over the dtypes f32, f64, i1, i32 and i64 and
// rank 0 where the op allows it. Each function's printed form is checked line by line.

// CHECK: builtin.module {

func.func @constants() {
  %0 = msir.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %1 = msir.constant dense<0.5> : tensor<f64>
  %2 = msir.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf64>
  %3 = msir.constant dense<[true, false, true]> : tensor<3xi1>
  %4 = msir.constant dense<true> : tensor<2x2xi1>
  %5 = msir.constant dense<[1, -2, 3]> : tensor<3xi32>
  %6 = msir.constant dense<7> : tensor<i32>
  %7 = msir.constant dense<[[9223372036854775807], [-1]]> : tensor<2x1xi64>
  %8 = msir.constant dense<0> : tensor<4x3xi64>
  %9 = msir.constant dense<false> : tensor<i1>
  %10 = msir.constant dense<2.0> : tensor<3x4xf32>
  func.return
}

// CHECK-LABEL: func.func @constants() {
// CHECK-NEXT:   %0 = msir.constant dense<[1.500000e+00, -2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:   %1 = msir.constant dense<5.000000e-01> : tensor<f64>
// CHECK-NEXT:   %2 = msir.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf64>
// CHECK-NEXT:   %3 = msir.constant dense<[true, false, true]> : tensor<3xi1>
// CHECK-NEXT:   %4 = msir.constant dense<true> : tensor<2x2xi1>
// CHECK-NEXT:   %5 = msir.constant dense<[1, -2, 3]> : tensor<3xi32>
// CHECK-NEXT:   %6 = msir.constant dense<7> : tensor<i32>
// CHECK-NEXT:   %7 = msir.constant dense<{{\[\[}}9223372036854775807], [-1]]> : tensor<2x1xi64>
// CHECK-NEXT:   %8 = msir.constant dense<0> : tensor<4x3xi64>
// CHECK-NEXT:   %9 = msir.constant dense<false> : tensor<i1>
// CHECK-NEXT:   %10 = msir.constant dense<2.000000e+00> : tensor<3x4xf32>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @iota() {
  %0 = msir.iota 0 : tensor<5xi64>
  %1 = msir.iota 1 : tensor<2x3xi32>
  %2 = msir.iota 0 : tensor<4xf32>
  %3 = msir.iota 2 : tensor<2x3x4xf64>
  func.return
}

// CHECK-LABEL: func.func @iota() {
// CHECK-NEXT:   %0 = msir.iota 0 : tensor<5xi64>
// CHECK-NEXT:   %1 = msir.iota 1 : tensor<2x3xi32>
// CHECK-NEXT:   %2 = msir.iota 0 : tensor<4xf32>
// CHECK-NEXT:   %3 = msir.iota 2 : tensor<2x3x4xf64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @binary_float(%a: tensor<4xf32>, %b: tensor<f64>) {
  %0 = msir.add %a, %a : tensor<4xf32>
  %1 = msir.sub %a, %a : tensor<4xf32>
  %2 = msir.mul %a, %a : tensor<4xf32>
  %3 = msir.div %a, %a : tensor<4xf32>
  %4 = msir.floordiv %a, %a : tensor<4xf32>
  %5 = msir.rem %a, %a : tensor<4xf32>
  %6 = msir.pow %a, %a : tensor<4xf32>
  %7 = msir.maximum %a, %a : tensor<4xf32>
  %8 = msir.minimum %a, %a : tensor<4xf32>
  %9 = msir.add %b, %b : tensor<f64>
  %10 = msir.sub %b, %b : tensor<f64>
  %11 = msir.mul %b, %b : tensor<f64>
  %12 = msir.div %b, %b : tensor<f64>
  %13 = msir.floordiv %b, %b : tensor<f64>
  %14 = msir.rem %b, %b : tensor<f64>
  %15 = msir.pow %b, %b : tensor<f64>
  %16 = msir.maximum %b, %b : tensor<f64>
  %17 = msir.minimum %b, %b : tensor<f64>
  func.return
}

// CHECK-LABEL: func.func @binary_float(%a: tensor<4xf32>, %b: tensor<f64>) {
// CHECK-NEXT:   %0 = msir.add %a, %a : tensor<4xf32>
// CHECK-NEXT:   %1 = msir.sub %a, %a : tensor<4xf32>
// CHECK-NEXT:   %2 = msir.mul %a, %a : tensor<4xf32>
// CHECK-NEXT:   %3 = msir.div %a, %a : tensor<4xf32>
// CHECK-NEXT:   %4 = msir.floordiv %a, %a : tensor<4xf32>
// CHECK-NEXT:   %5 = msir.rem %a, %a : tensor<4xf32>
// CHECK-NEXT:   %6 = msir.pow %a, %a : tensor<4xf32>
// CHECK-NEXT:   %7 = msir.maximum %a, %a : tensor<4xf32>
// CHECK-NEXT:   %8 = msir.minimum %a, %a : tensor<4xf32>
// CHECK-NEXT:   %9 = msir.add %b, %b : tensor<f64>
// CHECK-NEXT:   %10 = msir.sub %b, %b : tensor<f64>
// CHECK-NEXT:   %11 = msir.mul %b, %b : tensor<f64>
// CHECK-NEXT:   %12 = msir.div %b, %b : tensor<f64>
// CHECK-NEXT:   %13 = msir.floordiv %b, %b : tensor<f64>
// CHECK-NEXT:   %14 = msir.rem %b, %b : tensor<f64>
// CHECK-NEXT:   %15 = msir.pow %b, %b : tensor<f64>
// CHECK-NEXT:   %16 = msir.maximum %b, %b : tensor<f64>
// CHECK-NEXT:   %17 = msir.minimum %b, %b : tensor<f64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @binary_int(%a: tensor<2x3xi32>, %b: tensor<i64>) {
  %0 = msir.add %a, %a : tensor<2x3xi32>
  %1 = msir.sub %a, %a : tensor<2x3xi32>
  %2 = msir.mul %a, %a : tensor<2x3xi32>
  %3 = msir.floordiv %a, %a : tensor<2x3xi32>
  %4 = msir.rem %a, %a : tensor<2x3xi32>
  %5 = msir.pow %a, %a : tensor<2x3xi32>
  %6 = msir.maximum %a, %a : tensor<2x3xi32>
  %7 = msir.minimum %a, %a : tensor<2x3xi32>
  %8 = msir.and %a, %a : tensor<2x3xi32>
  %9 = msir.or %a, %a : tensor<2x3xi32>
  %10 = msir.xor %a, %a : tensor<2x3xi32>
  %11 = msir.add %b, %b : tensor<i64>
  %12 = msir.sub %b, %b : tensor<i64>
  %13 = msir.mul %b, %b : tensor<i64>
  %14 = msir.floordiv %b, %b : tensor<i64>
  %15 = msir.rem %b, %b : tensor<i64>
  %16 = msir.pow %b, %b : tensor<i64>
  %17 = msir.maximum %b, %b : tensor<i64>
  %18 = msir.minimum %b, %b : tensor<i64>
  %19 = msir.and %b, %b : tensor<i64>
  %20 = msir.or %b, %b : tensor<i64>
  %21 = msir.xor %b, %b : tensor<i64>
  func.return
}

// CHECK-LABEL: func.func @binary_int(%a: tensor<2x3xi32>, %b: tensor<i64>) {
// CHECK-NEXT:   %0 = msir.add %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %1 = msir.sub %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %2 = msir.mul %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %3 = msir.floordiv %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %4 = msir.rem %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %5 = msir.pow %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %6 = msir.maximum %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %7 = msir.minimum %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %8 = msir.and %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %9 = msir.or %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %10 = msir.xor %a, %a : tensor<2x3xi32>
// CHECK-NEXT:   %11 = msir.add %b, %b : tensor<i64>
// CHECK-NEXT:   %12 = msir.sub %b, %b : tensor<i64>
// CHECK-NEXT:   %13 = msir.mul %b, %b : tensor<i64>
// CHECK-NEXT:   %14 = msir.floordiv %b, %b : tensor<i64>
// CHECK-NEXT:   %15 = msir.rem %b, %b : tensor<i64>
// CHECK-NEXT:   %16 = msir.pow %b, %b : tensor<i64>
// CHECK-NEXT:   %17 = msir.maximum %b, %b : tensor<i64>
// CHECK-NEXT:   %18 = msir.minimum %b, %b : tensor<i64>
// CHECK-NEXT:   %19 = msir.and %b, %b : tensor<i64>
// CHECK-NEXT:   %20 = msir.or %b, %b : tensor<i64>
// CHECK-NEXT:   %21 = msir.xor %b, %b : tensor<i64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @logical(%a: tensor<4xi1>, %b: tensor<i1>) {
  %0 = msir.and %a, %a : tensor<4xi1>
  %1 = msir.or %a, %a : tensor<4xi1>
  %2 = msir.xor %a, %a : tensor<4xi1>
  %3 = msir.not %a : tensor<4xi1>
  %4 = msir.not %b : tensor<i1>
  func.return
}

// CHECK-LABEL: func.func @logical(%a: tensor<4xi1>, %b: tensor<i1>) {
// CHECK-NEXT:   %0 = msir.and %a, %a : tensor<4xi1>
// CHECK-NEXT:   %1 = msir.or %a, %a : tensor<4xi1>
// CHECK-NEXT:   %2 = msir.xor %a, %a : tensor<4xi1>
// CHECK-NEXT:   %3 = msir.not %a : tensor<4xi1>
// CHECK-NEXT:   %4 = msir.not %b : tensor<i1>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @unary_float(%a: tensor<4xf32>, %b: tensor<f64>) {
  %0 = msir.neg %a : tensor<4xf32>
  %1 = msir.abs %a : tensor<4xf32>
  %2 = msir.sign %a : tensor<4xf32>
  %3 = msir.exp %a : tensor<4xf32>
  %4 = msir.log %a : tensor<4xf32>
  %5 = msir.log1p %a : tensor<4xf32>
  %6 = msir.expm1 %a : tensor<4xf32>
  %7 = msir.sin %a : tensor<4xf32>
  %8 = msir.cos %a : tensor<4xf32>
  %9 = msir.tanh %a : tensor<4xf32>
  %10 = msir.sqrt %a : tensor<4xf32>
  %11 = msir.floor %a : tensor<4xf32>
  %12 = msir.ceil %a : tensor<4xf32>
  %13 = msir.neg %b : tensor<f64>
  %14 = msir.abs %b : tensor<f64>
  %15 = msir.sign %b : tensor<f64>
  %16 = msir.exp %b : tensor<f64>
  %17 = msir.log %b : tensor<f64>
  %18 = msir.log1p %b : tensor<f64>
  %19 = msir.expm1 %b : tensor<f64>
  %20 = msir.sin %b : tensor<f64>
  %21 = msir.cos %b : tensor<f64>
  %22 = msir.tanh %b : tensor<f64>
  %23 = msir.sqrt %b : tensor<f64>
  %24 = msir.floor %b : tensor<f64>
  %25 = msir.ceil %b : tensor<f64>
  func.return
}

// CHECK-LABEL: func.func @unary_float(%a: tensor<4xf32>, %b: tensor<f64>) {
// CHECK-NEXT:   %0 = msir.neg %a : tensor<4xf32>
// CHECK-NEXT:   %1 = msir.abs %a : tensor<4xf32>
// CHECK-NEXT:   %2 = msir.sign %a : tensor<4xf32>
// CHECK-NEXT:   %3 = msir.exp %a : tensor<4xf32>
// CHECK-NEXT:   %4 = msir.log %a : tensor<4xf32>
// CHECK-NEXT:   %5 = msir.log1p %a : tensor<4xf32>
// CHECK-NEXT:   %6 = msir.expm1 %a : tensor<4xf32>
// CHECK-NEXT:   %7 = msir.sin %a : tensor<4xf32>
// CHECK-NEXT:   %8 = msir.cos %a : tensor<4xf32>
// CHECK-NEXT:   %9 = msir.tanh %a : tensor<4xf32>
// CHECK-NEXT:   %10 = msir.sqrt %a : tensor<4xf32>
// CHECK-NEXT:   %11 = msir.floor %a : tensor<4xf32>
// CHECK-NEXT:   %12 = msir.ceil %a : tensor<4xf32>
// CHECK-NEXT:   %13 = msir.neg %b : tensor<f64>
// CHECK-NEXT:   %14 = msir.abs %b : tensor<f64>
// CHECK-NEXT:   %15 = msir.sign %b : tensor<f64>
// CHECK-NEXT:   %16 = msir.exp %b : tensor<f64>
// CHECK-NEXT:   %17 = msir.log %b : tensor<f64>
// CHECK-NEXT:   %18 = msir.log1p %b : tensor<f64>
// CHECK-NEXT:   %19 = msir.expm1 %b : tensor<f64>
// CHECK-NEXT:   %20 = msir.sin %b : tensor<f64>
// CHECK-NEXT:   %21 = msir.cos %b : tensor<f64>
// CHECK-NEXT:   %22 = msir.tanh %b : tensor<f64>
// CHECK-NEXT:   %23 = msir.sqrt %b : tensor<f64>
// CHECK-NEXT:   %24 = msir.floor %b : tensor<f64>
// CHECK-NEXT:   %25 = msir.ceil %b : tensor<f64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @unary_int(%a: tensor<3xi32>, %b: tensor<i64>) {
  %0 = msir.neg %a : tensor<3xi32>
  %1 = msir.abs %a : tensor<3xi32>
  %2 = msir.sign %a : tensor<3xi32>
  %3 = msir.neg %b : tensor<i64>
  %4 = msir.abs %b : tensor<i64>
  %5 = msir.sign %b : tensor<i64>
  func.return
}

// CHECK-LABEL: func.func @unary_int(%a: tensor<3xi32>, %b: tensor<i64>) {
// CHECK-NEXT:   %0 = msir.neg %a : tensor<3xi32>
// CHECK-NEXT:   %1 = msir.abs %a : tensor<3xi32>
// CHECK-NEXT:   %2 = msir.sign %a : tensor<3xi32>
// CHECK-NEXT:   %3 = msir.neg %b : tensor<i64>
// CHECK-NEXT:   %4 = msir.abs %b : tensor<i64>
// CHECK-NEXT:   %5 = msir.sign %b : tensor<i64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @compare(%a: tensor<4xf32>, %b: tensor<f64>, %c: tensor<2x2xi64>, %d: tensor<3xi1>, %e: tensor<i32>) {
  %0 = msir.compare lt, %a, %a : tensor<4xf32>
  %1 = msir.compare le, %a, %a : tensor<4xf32>
  %2 = msir.compare gt, %a, %a : tensor<4xf32>
  %3 = msir.compare ge, %a, %a : tensor<4xf32>
  %4 = msir.compare eq, %a, %a : tensor<4xf32>
  %5 = msir.compare ne, %a, %a : tensor<4xf32>
  %6 = msir.compare lt, %b, %b : tensor<f64>
  %7 = msir.compare ge, %c, %c : tensor<2x2xi64>
  %8 = msir.compare eq, %d, %d : tensor<3xi1>
  %9 = msir.compare ne, %e, %e : tensor<i32>
  func.return
}

// CHECK-LABEL: func.func @compare(%a: tensor<4xf32>, %b: tensor<f64>, %c: tensor<2x2xi64>, %d: tensor<3xi1>, %e: tensor<i32>) {
// CHECK-NEXT:   %0 = msir.compare lt, %a, %a : tensor<4xf32>
// CHECK-NEXT:   %1 = msir.compare le, %a, %a : tensor<4xf32>
// CHECK-NEXT:   %2 = msir.compare gt, %a, %a : tensor<4xf32>
// CHECK-NEXT:   %3 = msir.compare ge, %a, %a : tensor<4xf32>
// CHECK-NEXT:   %4 = msir.compare eq, %a, %a : tensor<4xf32>
// CHECK-NEXT:   %5 = msir.compare ne, %a, %a : tensor<4xf32>
// CHECK-NEXT:   %6 = msir.compare lt, %b, %b : tensor<f64>
// CHECK-NEXT:   %7 = msir.compare ge, %c, %c : tensor<2x2xi64>
// CHECK-NEXT:   %8 = msir.compare eq, %d, %d : tensor<3xi1>
// CHECK-NEXT:   %9 = msir.compare ne, %e, %e : tensor<i32>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @select(%c: tensor<4xi1>, %a: tensor<4xf32>, %s: tensor<i1>, %b: tensor<i64>, %d: tensor<4xi1>) {
  %0 = msir.select %c, %a, %a : tensor<4xi1>, tensor<4xf32>
  %1 = msir.select %s, %b, %b : tensor<i1>, tensor<i64>
  %2 = msir.select %c, %d, %d : tensor<4xi1>, tensor<4xi1>
  func.return
}

// CHECK-LABEL: func.func @select(%c: tensor<4xi1>, %a: tensor<4xf32>, %s: tensor<i1>, %b: tensor<i64>, %d: tensor<4xi1>) {
// CHECK-NEXT:   %0 = msir.select %c, %a, %a : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:   %1 = msir.select %s, %b, %b : tensor<i1>, tensor<i64>
// CHECK-NEXT:   %2 = msir.select %c, %d, %d : tensor<4xi1>, tensor<4xi1>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @cast(%a: tensor<4xf32>, %b: tensor<i1>, %c: tensor<2x3xi64>) {
  %0 = msir.cast %a : tensor<4xf32> to tensor<4xi64>
  %1 = msir.cast %a : tensor<4xf32> to tensor<4xf64>
  %2 = msir.cast %a : tensor<4xf32> to tensor<4xi1>
  %3 = msir.cast %b : tensor<i1> to tensor<i32>
  %4 = msir.cast %c : tensor<2x3xi64> to tensor<2x3xf32>
  %5 = msir.cast %c : tensor<2x3xi64> to tensor<2x3xi64>
  func.return
}

// CHECK-LABEL: func.func @cast(%a: tensor<4xf32>, %b: tensor<i1>, %c: tensor<2x3xi64>) {
// CHECK-NEXT:   %0 = msir.cast %a : tensor<4xf32> to tensor<4xi64>
// CHECK-NEXT:   %1 = msir.cast %a : tensor<4xf32> to tensor<4xf64>
// CHECK-NEXT:   %2 = msir.cast %a : tensor<4xf32> to tensor<4xi1>
// CHECK-NEXT:   %3 = msir.cast %b : tensor<i1> to tensor<i32>
// CHECK-NEXT:   %4 = msir.cast %c : tensor<2x3xi64> to tensor<2x3xf32>
// CHECK-NEXT:   %5 = msir.cast %c : tensor<2x3xi64> to tensor<2x3xi64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @shape_ops(%a: tensor<4xf32>, %s: tensor<f64>, %m: tensor<2x3xi32>, %t: tensor<2x3x4xi1>) {
  %0 = msir.broadcast_to %a : tensor<4xf32> to tensor<3x4xf32>
  %1 = msir.broadcast_to %s : tensor<f64> to tensor<2x2xf64>
  %2 = msir.broadcast_to %a : tensor<4xf32> to tensor<4xf32>
  %3 = msir.reshape %m : tensor<2x3xi32> to tensor<6xi32>
  %4 = msir.reshape %s : tensor<f64> to tensor<1x1xf64>
  %5 = msir.reshape %a : tensor<4xf32> to tensor<2x1x2xf32>
  %6 = msir.transpose %m, array<i64: 1, 0> : tensor<2x3xi32> to tensor<3x2xi32>
  %7 = msir.transpose %t, array<i64: 2, 0, 1> : tensor<2x3x4xi1> to tensor<4x2x3xi1>
  %8 = msir.transpose %s, array<i64> : tensor<f64> to tensor<f64>
  func.return
}

// CHECK-LABEL: func.func @shape_ops(%a: tensor<4xf32>, %s: tensor<f64>, %m: tensor<2x3xi32>, %t: tensor<2x3x4xi1>) {
// CHECK-NEXT:   %0 = msir.broadcast_to %a : tensor<4xf32> to tensor<3x4xf32>
// CHECK-NEXT:   %1 = msir.broadcast_to %s : tensor<f64> to tensor<2x2xf64>
// CHECK-NEXT:   %2 = msir.broadcast_to %a : tensor<4xf32> to tensor<4xf32>
// CHECK-NEXT:   %3 = msir.reshape %m : tensor<2x3xi32> to tensor<6xi32>
// CHECK-NEXT:   %4 = msir.reshape %s : tensor<f64> to tensor<1x1xf64>
// CHECK-NEXT:   %5 = msir.reshape %a : tensor<4xf32> to tensor<2x1x2xf32>
// CHECK-NEXT:   %6 = msir.transpose %m, array<i64: 1, 0> : tensor<2x3xi32> to tensor<3x2xi32>
// CHECK-NEXT:   %7 = msir.transpose %t, array<i64: 2, 0, 1> : tensor<2x3x4xi1> to tensor<4x2x3xi1>
// CHECK-NEXT:   %8 = msir.transpose %s, array<i64> : tensor<f64> to tensor<f64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @slice(%a: tensor<5x4xf32>, %v: tensor<6xi64>, %s: tensor<i1>) {
  %0 = msir.slice %a starts array<i64: 1, 0> steps array<i64: 2, 1> : tensor<5x4xf32> to tensor<2x4xf32>
  %1 = msir.slice %a starts array<i64: 4, 3> steps array<i64: -1, -2> : tensor<5x4xf32> to tensor<5x2xf32>
  %2 = msir.slice %v starts array<i64: 5> steps array<i64: -1> : tensor<6xi64> to tensor<6xi64>
  %3 = msir.slice %v starts array<i64: 0> steps array<i64: 1> : tensor<6xi64> to tensor<0xi64>
  %4 = msir.slice %s starts array<i64> steps array<i64> : tensor<i1> to tensor<i1>
  func.return
}

// CHECK-LABEL: func.func @slice(%a: tensor<5x4xf32>, %v: tensor<6xi64>, %s: tensor<i1>) {
// CHECK-NEXT:   %0 = msir.slice %a starts array<i64: 1, 0> steps array<i64: 2, 1> : tensor<5x4xf32> to tensor<2x4xf32>
// CHECK-NEXT:   %1 = msir.slice %a starts array<i64: 4, 3> steps array<i64: -1, -2> : tensor<5x4xf32> to tensor<5x2xf32>
// CHECK-NEXT:   %2 = msir.slice %v starts array<i64: 5> steps array<i64: -1> : tensor<6xi64> to tensor<6xi64>
// CHECK-NEXT:   %3 = msir.slice %v starts array<i64: 0> steps array<i64: 1> : tensor<6xi64> to tensor<0xi64>
// CHECK-NEXT:   %4 = msir.slice %s starts array<i64> steps array<i64> : tensor<i1> to tensor<i1>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @take(%a: tensor<5x4xf32>, %i: tensor<3xi64>, %j: tensor<i32>, %k: tensor<2x2xi32>) {
  %0 = msir.take %a[%i] axis 0 : tensor<5x4xf32>, tensor<3xi64> to tensor<3x4xf32>
  %1 = msir.take %a[%j] axis 1 : tensor<5x4xf32>, tensor<i32> to tensor<5xf32>
  %2 = msir.take %a[%k] axis 1 : tensor<5x4xf32>, tensor<2x2xi32> to tensor<5x2x2xf32>
  func.return
}

// CHECK-LABEL: func.func @take(%a: tensor<5x4xf32>, %i: tensor<3xi64>, %j: tensor<i32>, %k: tensor<2x2xi32>) {
// CHECK-NEXT:   %0 = msir.take %a[%i] axis 0 : tensor<5x4xf32>, tensor<3xi64> to tensor<3x4xf32>
// CHECK-NEXT:   %1 = msir.take %a[%j] axis 1 : tensor<5x4xf32>, tensor<i32> to tensor<5xf32>
// CHECK-NEXT:   %2 = msir.take %a[%k] axis 1 : tensor<5x4xf32>, tensor<2x2xi32> to tensor<5x2x2xf32>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @concatenate_stack(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>, %v: tensor<4xi64>, %s: tensor<f64>) {
  %0 = msir.concatenate %a, %b axis 0 : tensor<2x4xf32>, tensor<3x4xf32> to tensor<5x4xf32>
  %1 = msir.concatenate %a, %a, %a axis 1 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32> to tensor<2x12xf32>
  %2 = msir.concatenate %v axis 0 : tensor<4xi64> to tensor<4xi64>
  %3 = msir.stack %v, %v axis 0 : tensor<4xi64>, tensor<4xi64> to tensor<2x4xi64>
  %4 = msir.stack %v, %v, %v axis 1 : tensor<4xi64>, tensor<4xi64>, tensor<4xi64> to tensor<4x3xi64>
  %5 = msir.stack %s, %s axis 0 : tensor<f64>, tensor<f64> to tensor<2xf64>
  func.return
}

// CHECK-LABEL: func.func @concatenate_stack(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>, %v: tensor<4xi64>, %s: tensor<f64>) {
// CHECK-NEXT:   %0 = msir.concatenate %a, %b axis 0 : tensor<2x4xf32>, tensor<3x4xf32> to tensor<5x4xf32>
// CHECK-NEXT:   %1 = msir.concatenate %a, %a, %a axis 1 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32> to tensor<2x12xf32>
// CHECK-NEXT:   %2 = msir.concatenate %v axis 0 : tensor<4xi64> to tensor<4xi64>
// CHECK-NEXT:   %3 = msir.stack %v, %v axis 0 : tensor<4xi64>, tensor<4xi64> to tensor<2x4xi64>
// CHECK-NEXT:   %4 = msir.stack %v, %v, %v axis 1 : tensor<4xi64>, tensor<4xi64>, tensor<4xi64> to tensor<4x3xi64>
// CHECK-NEXT:   %5 = msir.stack %s, %s axis 0 : tensor<f64>, tensor<f64> to tensor<2xf64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @reduce(%a: tensor<4x5xf32>, %b: tensor<3xi32>, %c: tensor<2x3xi1>, %d: tensor<f64>, %e: tensor<2x3x4xi64>) {
  %0 = msir.reduce_sum %a axes array<i64: 1> : tensor<4x5xf32> to tensor<4xf32>
  %1 = msir.reduce_sum %a axes array<i64: 1> : tensor<4x5xf32> to tensor<4x1xf32>
  %2 = msir.reduce_sum %a axes array<i64: 0, 1> : tensor<4x5xf32> to tensor<f32>
  %3 = msir.reduce_prod %b axes array<i64: 0> : tensor<3xi32> to tensor<i32>
  %4 = msir.reduce_prod %b axes array<i64: 0> : tensor<3xi32> to tensor<1xi32>
  %5 = msir.reduce_max %c axes array<i64: 0> : tensor<2x3xi1> to tensor<3xi1>
  %6 = msir.reduce_max %c axes array<i64: 0, 1> : tensor<2x3xi1> to tensor<1x1xi1>
  %7 = msir.reduce_min %e axes array<i64: 2, 0> : tensor<2x3x4xi64> to tensor<3xi64>
  %8 = msir.reduce_min %e axes array<i64: 1> : tensor<2x3x4xi64> to tensor<2x1x4xi64>
  %9 = msir.reduce_mean %a axes array<i64: 0> : tensor<4x5xf32> to tensor<5xf32>
  %10 = msir.reduce_mean %a axes array<i64: 0> : tensor<4x5xf32> to tensor<1x5xf32>
  %11 = msir.reduce_sum %d axes array<i64> : tensor<f64> to tensor<f64>
  %12 = msir.reduce_mean %d axes array<i64> : tensor<f64> to tensor<f64>
  func.return
}

// CHECK-LABEL: func.func @reduce(%a: tensor<4x5xf32>, %b: tensor<3xi32>, %c: tensor<2x3xi1>, %d: tensor<f64>, %e: tensor<2x3x4xi64>) {
// CHECK-NEXT:   %0 = msir.reduce_sum %a axes array<i64: 1> : tensor<4x5xf32> to tensor<4xf32>
// CHECK-NEXT:   %1 = msir.reduce_sum %a axes array<i64: 1> : tensor<4x5xf32> to tensor<4x1xf32>
// CHECK-NEXT:   %2 = msir.reduce_sum %a axes array<i64: 0, 1> : tensor<4x5xf32> to tensor<f32>
// CHECK-NEXT:   %3 = msir.reduce_prod %b axes array<i64: 0> : tensor<3xi32> to tensor<i32>
// CHECK-NEXT:   %4 = msir.reduce_prod %b axes array<i64: 0> : tensor<3xi32> to tensor<1xi32>
// CHECK-NEXT:   %5 = msir.reduce_max %c axes array<i64: 0> : tensor<2x3xi1> to tensor<3xi1>
// CHECK-NEXT:   %6 = msir.reduce_max %c axes array<i64: 0, 1> : tensor<2x3xi1> to tensor<1x1xi1>
// CHECK-NEXT:   %7 = msir.reduce_min %e axes array<i64: 2, 0> : tensor<2x3x4xi64> to tensor<3xi64>
// CHECK-NEXT:   %8 = msir.reduce_min %e axes array<i64: 1> : tensor<2x3x4xi64> to tensor<2x1x4xi64>
// CHECK-NEXT:   %9 = msir.reduce_mean %a axes array<i64: 0> : tensor<4x5xf32> to tensor<5xf32>
// CHECK-NEXT:   %10 = msir.reduce_mean %a axes array<i64: 0> : tensor<4x5xf32> to tensor<1x5xf32>
// CHECK-NEXT:   %11 = msir.reduce_sum %d axes array<i64> : tensor<f64> to tensor<f64>
// CHECK-NEXT:   %12 = msir.reduce_mean %d axes array<i64> : tensor<f64> to tensor<f64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @argreduce(%a: tensor<4x5xf32>, %b: tensor<3xi32>, %c: tensor<f64>, %d: tensor<2x2xi1>) {
  %0 = msir.argmax %a axis 1 : tensor<4x5xf32> to tensor<4xi64>
  %1 = msir.argmax %a axis 0 : tensor<4x5xf32> to tensor<1x5xi64>
  %2 = msir.argmax %a : tensor<4x5xf32> to tensor<i64>
  %3 = msir.argmax %a : tensor<4x5xf32> to tensor<1x1xi64>
  %4 = msir.argmin %b axis 0 : tensor<3xi32> to tensor<i64>
  %5 = msir.argmin %b : tensor<3xi32> to tensor<i64>
  %6 = msir.argmin %c : tensor<f64> to tensor<i64>
  %7 = msir.argmin %d axis 1 : tensor<2x2xi1> to tensor<2x1xi64>
  func.return
}

// CHECK-LABEL: func.func @argreduce(%a: tensor<4x5xf32>, %b: tensor<3xi32>, %c: tensor<f64>, %d: tensor<2x2xi1>) {
// CHECK-NEXT:   %0 = msir.argmax %a axis 1 : tensor<4x5xf32> to tensor<4xi64>
// CHECK-NEXT:   %1 = msir.argmax %a axis 0 : tensor<4x5xf32> to tensor<1x5xi64>
// CHECK-NEXT:   %2 = msir.argmax %a : tensor<4x5xf32> to tensor<i64>
// CHECK-NEXT:   %3 = msir.argmax %a : tensor<4x5xf32> to tensor<1x1xi64>
// CHECK-NEXT:   %4 = msir.argmin %b axis 0 : tensor<3xi32> to tensor<i64>
// CHECK-NEXT:   %5 = msir.argmin %b : tensor<3xi32> to tensor<i64>
// CHECK-NEXT:   %6 = msir.argmin %c : tensor<f64> to tensor<i64>
// CHECK-NEXT:   %7 = msir.argmin %d axis 1 : tensor<2x2xi1> to tensor<2x1xi64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @matmul(%v: tensor<3xf32>, %m: tensor<2x3xf32>, %n: tensor<3x4xf32>, %bm: tensor<5x2x3xf32>, %bn: tensor<5x3x4xf32>, %x: tensor<3x4xi64>, %y: tensor<4xi64>, %z: tensor<7x1x2x3xf64>, %w: tensor<6x3x2xf64>) {
  %0 = msir.matmul %v, %v : tensor<3xf32>, tensor<3xf32> to tensor<f32>
  %1 = msir.matmul %v, %n : tensor<3xf32>, tensor<3x4xf32> to tensor<4xf32>
  %2 = msir.matmul %m, %v : tensor<2x3xf32>, tensor<3xf32> to tensor<2xf32>
  %3 = msir.matmul %m, %n : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
  %4 = msir.matmul %bm, %n : tensor<5x2x3xf32>, tensor<3x4xf32> to tensor<5x2x4xf32>
  %5 = msir.matmul %bm, %bn : tensor<5x2x3xf32>, tensor<5x3x4xf32> to tensor<5x2x4xf32>
  %6 = msir.matmul %v, %bn : tensor<3xf32>, tensor<5x3x4xf32> to tensor<5x4xf32>
  %7 = msir.matmul %x, %y : tensor<3x4xi64>, tensor<4xi64> to tensor<3xi64>
  %8 = msir.matmul %z, %w : tensor<7x1x2x3xf64>, tensor<6x3x2xf64> to tensor<7x6x2x2xf64>
  func.return
}

// CHECK-LABEL: func.func @matmul(%v: tensor<3xf32>, %m: tensor<2x3xf32>, %n: tensor<3x4xf32>, %bm: tensor<5x2x3xf32>, %bn: tensor<5x3x4xf32>, %x: tensor<3x4xi64>, %y: tensor<4xi64>, %z: tensor<7x1x2x3xf64>, %w: tensor<6x3x2xf64>) {
// CHECK-NEXT:   %0 = msir.matmul %v, %v : tensor<3xf32>, tensor<3xf32> to tensor<f32>
// CHECK-NEXT:   %1 = msir.matmul %v, %n : tensor<3xf32>, tensor<3x4xf32> to tensor<4xf32>
// CHECK-NEXT:   %2 = msir.matmul %m, %v : tensor<2x3xf32>, tensor<3xf32> to tensor<2xf32>
// CHECK-NEXT:   %3 = msir.matmul %m, %n : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
// CHECK-NEXT:   %4 = msir.matmul %bm, %n : tensor<5x2x3xf32>, tensor<3x4xf32> to tensor<5x2x4xf32>
// CHECK-NEXT:   %5 = msir.matmul %bm, %bn : tensor<5x2x3xf32>, tensor<5x3x4xf32> to tensor<5x2x4xf32>
// CHECK-NEXT:   %6 = msir.matmul %v, %bn : tensor<3xf32>, tensor<5x3x4xf32> to tensor<5x4xf32>
// CHECK-NEXT:   %7 = msir.matmul %x, %y : tensor<3x4xi64>, tensor<4xi64> to tensor<3xi64>
// CHECK-NEXT:   %8 = msir.matmul %z, %w : tensor<7x1x2x3xf64>, tensor<6x3x2xf64> to tensor<7x6x2x2xf64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @einsum(%v: tensor<3xf32>, %m: tensor<2x3xf32>, %n: tensor<3x4xf32>, %bm: tensor<5x2x3xf32>, %bn: tensor<5x3x4xf32>, %sq: tensor<3x3xf64>, %d: tensor<3x3x4xi64>, %x: tensor<4x2xi64>, %u: tensor<2x3xi32>, %w: tensor<3x2xi32>, %s: tensor<f64>, %sv: tensor<4xf64>) {
  %0 = msir.einsum "ij,jk->ik" %m, %n : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
  %1 = msir.einsum "bij,bjk->bik" %bm, %bn : tensor<5x2x3xf32>, tensor<5x3x4xf32> to tensor<5x2x4xf32>
  %2 = msir.einsum "ij,kj->ki" %m, %m : tensor<2x3xf32>, tensor<2x3xf32> to tensor<2x2xf32>
  %3 = msir.einsum "i,j->ij" %v, %v : tensor<3xf32>, tensor<3xf32> to tensor<3x3xf32>
  %4 = msir.einsum "i,i->" %v, %v : tensor<3xf32>, tensor<3xf32> to tensor<f32>
  %5 = msir.einsum "ij->ji" %m : tensor<2x3xf32> to tensor<3x2xf32>
  %6 = msir.einsum "ii->i" %sq : tensor<3x3xf64> to tensor<3xf64>
  %7 = msir.einsum "iij,jk->" %d, %x : tensor<3x3x4xi64>, tensor<4x2xi64> to tensor<i64>
  %8 = msir.einsum "Ab,bA->bA" %u, %w : tensor<2x3xi32>, tensor<3x2xi32> to tensor<3x2xi32>
  %9 = msir.einsum "->" %s : tensor<f64> to tensor<f64>
  %10 = msir.einsum ",i->i" %s, %sv : tensor<f64>, tensor<4xf64> to tensor<4xf64>
  func.return
}

// CHECK-LABEL: func.func @einsum(%v: tensor<3xf32>, %m: tensor<2x3xf32>, %n: tensor<3x4xf32>, %bm: tensor<5x2x3xf32>, %bn: tensor<5x3x4xf32>, %sq: tensor<3x3xf64>, %d: tensor<3x3x4xi64>, %x: tensor<4x2xi64>, %u: tensor<2x3xi32>, %w: tensor<3x2xi32>, %s: tensor<f64>, %sv: tensor<4xf64>) {
// CHECK-NEXT:   %0 = msir.einsum "ij,jk->ik" %m, %n : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
// CHECK-NEXT:   %1 = msir.einsum "bij,bjk->bik" %bm, %bn : tensor<5x2x3xf32>, tensor<5x3x4xf32> to tensor<5x2x4xf32>
// CHECK-NEXT:   %2 = msir.einsum "ij,kj->ki" %m, %m : tensor<2x3xf32>, tensor<2x3xf32> to tensor<2x2xf32>
// CHECK-NEXT:   %3 = msir.einsum "i,j->ij" %v, %v : tensor<3xf32>, tensor<3xf32> to tensor<3x3xf32>
// CHECK-NEXT:   %4 = msir.einsum "i,i->" %v, %v : tensor<3xf32>, tensor<3xf32> to tensor<f32>
// CHECK-NEXT:   %5 = msir.einsum "ij->ji" %m : tensor<2x3xf32> to tensor<3x2xf32>
// CHECK-NEXT:   %6 = msir.einsum "ii->i" %sq : tensor<3x3xf64> to tensor<3xf64>
// CHECK-NEXT:   %7 = msir.einsum "iij,jk->" %d, %x : tensor<3x3x4xi64>, tensor<4x2xi64> to tensor<i64>
// CHECK-NEXT:   %8 = msir.einsum "Ab,bA->bA" %u, %w : tensor<2x3xi32>, tensor<3x2xi32> to tensor<3x2xi32>
// CHECK-NEXT:   %9 = msir.einsum "->" %s : tensor<f64> to tensor<f64>
// CHECK-NEXT:   %10 = msir.einsum ",i->i" %s, %sv : tensor<f64>, tensor<4xf64> to tensor<4xf64>
// CHECK-NEXT:   func.return
// CHECK-NEXT: }

func.func @tuples(%a: tensor<f32>, %b: tensor<4xi64>) -> tuple<> {
  %0 = msir.make_tuple : ()
  %1 = msir.make_tuple %a : tensor<f32>
  %2 = msir.make_tuple %a, %b : tensor<f32>, tensor<4xi64>
  %3 = msir.make_tuple %2, %0 : tuple<tensor<f32>, tensor<4xi64>>, tuple<>
  %4 = msir.get_tuple %2[0] : tuple<tensor<f32>, tensor<4xi64>> to tensor<f32>
  %5 = msir.get_tuple %2[1] : tuple<tensor<f32>, tensor<4xi64>> to tensor<4xi64>
  %6 = msir.get_tuple %3[0] : tuple<tuple<tensor<f32>, tensor<4xi64>>, tuple<>> to tuple<tensor<f32>, tensor<4xi64>>
  func.return %0 : tuple<>
}

// CHECK-LABEL: func.func @tuples(%a: tensor<f32>, %b: tensor<4xi64>) -> tuple<> {
// CHECK-NEXT:   %0 = msir.make_tuple : ()
// CHECK-NEXT:   %1 = msir.make_tuple %a : tensor<f32>
// CHECK-NEXT:   %2 = msir.make_tuple %a, %b : tensor<f32>, tensor<4xi64>
// CHECK-NEXT:   %3 = msir.make_tuple %2, %0 : tuple<tensor<f32>, tensor<4xi64>>, tuple<>
// CHECK-NEXT:   %4 = msir.get_tuple %2[0] : tuple<tensor<f32>, tensor<4xi64>> to tensor<f32>
// CHECK-NEXT:   %5 = msir.get_tuple %2[1] : tuple<tensor<f32>, tensor<4xi64>> to tensor<4xi64>
// CHECK-NEXT:   %6 = msir.get_tuple %3[0] : tuple<tuple<tensor<f32>, tensor<4xi64>>, tuple<>> to tuple<tensor<f32>, tensor<4xi64>>
// CHECK-NEXT:   func.return %0 : tuple<>
// CHECK-NEXT: }

func.func @tapes(%n: tensor<i64>, %k: tensor<i64>, %v: tensor<4xf32>, %s: tensor<f64>) -> tensor<4xf32> {
  %t = msir.tape_alloc %n : tensor<i64> to tensor<?x4xf32>
  %t1 = msir.tape_set %t[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<4xf32>
  %t2 = msir.tape_push %t1, %v : tensor<?x4xf32>, tensor<4xf32>
  %r = msir.tape_get %t2[%k] : tensor<?x4xf32>, tensor<i64> to tensor<4xf32>
  %u = msir.tape_alloc %k : tensor<i64> to tensor<?xf64>
  %u1 = msir.tape_push %u, %s : tensor<?xf64>, tensor<f64>
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @tapes(%n: tensor<i64>, %k: tensor<i64>, %v: tensor<4xf32>, %s: tensor<f64>) -> tensor<4xf32> {
// CHECK-NEXT:   %t = msir.tape_alloc %n : tensor<i64> to tensor<?x4xf32>
// CHECK-NEXT:   %t1 = msir.tape_set %t[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<4xf32>
// CHECK-NEXT:   %t2 = msir.tape_push %t1, %v : tensor<?x4xf32>, tensor<4xf32>
// CHECK-NEXT:   %r = msir.tape_get %t2[%k] : tensor<?x4xf32>, tensor<i64> to tensor<4xf32>
// CHECK-NEXT:   %u = msir.tape_alloc %k : tensor<i64> to tensor<?xf64>
// CHECK-NEXT:   %u1 = msir.tape_push %u, %s : tensor<?xf64>, tensor<f64>
// CHECK-NEXT:   func.return %r : tensor<4xf32>
// CHECK-NEXT: }

func.func @tape_cotangents(%n: tensor<i64>, %k: tensor<i64>, %v: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.tape_alloc %n : tensor<i64> to tensor<?x4xf32>
  %1 = msir.tape_set %0[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<4xf32>
  %2 = msir.tape_add %1[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<4xf32>
  %3 = msir.tape_zeros %2 : tensor<?x4xf32>
  %4 = msir.tape_get %3[%k] : tensor<?x4xf32>, tensor<i64> to tensor<4xf32>
  func.return %4 : tensor<4xf32>
}

// CHECK-LABEL: func.func @tape_cotangents(%n: tensor<i64>, %k: tensor<i64>, %v: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:   %0 = msir.tape_alloc %n : tensor<i64> to tensor<?x4xf32>
// CHECK-NEXT:   %1 = msir.tape_set %0[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<4xf32>
// CHECK-NEXT:   %2 = msir.tape_add %1[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<4xf32>
// CHECK-NEXT:   %3 = msir.tape_zeros %2 : tensor<?x4xf32>
// CHECK-NEXT:   %4 = msir.tape_get %3[%k] : tensor<?x4xf32>, tensor<i64> to tensor<4xf32>
// CHECK-NEXT:   func.return %4 : tensor<4xf32>
// CHECK-NEXT: }

// CHECK-NEXT: }
