// RUN: msir-run %s --entry idiv --input '[-7, 7, -7, 7, 0, -1]:i64' --input '[2, -2, -2, 2, -3, 3]:i64' | filecheck %s --check-prefix=I64
// RUN: msir-run %s --entry idiv32 --input '[-7, 7, -2147483648, 5]:i32' --input '[2, -2, -1, -5]:i32' | filecheck %s --check-prefix=I32
// RUN: msir-run %s --entry fdiv --input '[-7.0, 7.0, -7.5, 1.0]:f64' --input '[2.0, -2.0, 2.0, 0.0]:f64' | filecheck %s --check-prefix=F64

// Floor division and remainder follow NumPy, not C: the quotient rounds toward
// -inf and the remainder takes the sign of the divisor (-7 // 2 = -4,
// -7 % 2 = 1). INT_MIN // -1 wraps to INT_MIN, as in NumPy.

func.func @idiv(%a: tensor<6xi64>, %b: tensor<6xi64>) -> (tensor<6xi64>, tensor<6xi64>) {
  %0 = msir.floordiv %a, %b : tensor<6xi64>
  %1 = msir.rem %a, %b : tensor<6xi64>
  func.return %0, %1 : tensor<6xi64>, tensor<6xi64>
}

// I64:      result 0: tensor<6xi64> = [-4, -4,  3,  3,  0, -1]
// I64-NEXT: result 1: tensor<6xi64> = [ 1, -1, -1,  1,  0,  2]

func.func @idiv32(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  %0 = msir.floordiv %a, %b : tensor<4xi32>
  %1 = msir.rem %a, %b : tensor<4xi32>
  func.return %0, %1 : tensor<4xi32>, tensor<4xi32>
}

// I32:      result 0: tensor<4xi32> = [         -4,          -4, -2147483648,          -1]
// I32-NEXT: result 1: tensor<4xi32> = [ 1, -1,  0,  0]

// Floats: the same rounding; division by zero is not an error (inf, nan).

func.func @fdiv(%a: tensor<4xf64>, %b: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>) {
  %0 = msir.floordiv %a, %b : tensor<4xf64>
  %1 = msir.rem %a, %b : tensor<4xf64>
  func.return %0, %1 : tensor<4xf64>, tensor<4xf64>
}

// F64:      result 0: tensor<4xf64> = [-4., -4., -4., inf]
// F64-NEXT: result 1: tensor<4xf64> = [ 1. , -1. ,  0.5,  nan]
