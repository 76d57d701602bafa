// RUN: not msir-run %s --entry take --input '[1, 2, 3, 4, 5]:f32' --input '5:i64' 2>&1 | filecheck %s --check-prefix=TAKE
// RUN: not msir-run %s --entry take --input '[1, 2, 3, 4, 5]:f32' --input=-6:i64 2>&1 | filecheck %s --check-prefix=TAKE
// RUN: not msir-run %s --entry take_list --input '[1, 2, 3, 4, 5]:f32' --input '[0, 7, 1]:i64' 2>&1 | filecheck %s --check-prefix=LIST
// RUN: not msir-run %s --entry div --input '[1, 2, 3]:i64' --input '[1, 0, 1]:i64' 2>&1 | filecheck %s --check-prefix=DIV
// RUN: not msir-run %s --entry rem --input '[1, 2, 3]:i32' --input '[1, 1, 0]:i32' 2>&1 | filecheck %s --check-prefix=REM
// RUN: msir-run %s --entry take --input '[1, 2, 3, 4, 5]:f32' --input=-5:i64 | filecheck %s --check-prefix=INRANGE

// Errors found by native code name the source location of the op that failed
// (its loc), like a Python exception pointing at the user's line; no result
// is printed and there is no traceback.

func.func @take(%x: tensor<5xf32>, %i: tensor<i64>) -> tensor<f32> {
  %0 = msir.take %x[%i] axis 0 : tensor<5xf32>, tensor<i64> to tensor<f32> loc("model.py":3:5)
  func.return %0 : tensor<f32>
}

// TAKE-NOT:  result
// TAKE-NOT:  Traceback
// TAKE:      {{^}}model.py:3:5: error: index out of range{{$}}
// TAKE-NOT:  result
// TAKE-NOT:  Traceback

// INRANGE: result 0: tensor<f32> = 1.

func.func @take_list(%x: tensor<5xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  %0 = msir.take %x[%i] axis 0 : tensor<5xf32>, tensor<3xi64> to tensor<3xf32> loc("model.py":9:16)
  %1 = msir.neg %0 : tensor<3xf32> loc("model.py":10:12)
  func.return %1 : tensor<3xf32>
}

// LIST-NOT:  result
// LIST:      {{^}}model.py:9:16: error: index out of range{{$}}
// LIST-NOT:  Traceback

func.func @div(%a: tensor<3xi64>, %b: tensor<3xi64>) -> tensor<3xi64> {
  %0 = msir.floordiv %a, %b : tensor<3xi64> loc("model.py":7:12)
  func.return %0 : tensor<3xi64>
}

// DIV-NOT:  result
// DIV:      {{^}}model.py:7:12: error: integer division or modulo by zero{{$}}
// DIV-NOT:  Traceback

func.func @rem(%a: tensor<3xi32>, %b: tensor<3xi32>) -> tensor<3xi32> {
  %0 = msir.rem %a, %b : tensor<3xi32> loc("model.py":8:12)
  func.return %0 : tensor<3xi32>
}

// REM-NOT:  result
// REM:      {{^}}model.py:8:12: error: integer division or modulo by zero{{$}}
// REM-NOT:  Traceback
