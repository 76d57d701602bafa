// RUN: not msir-run %s --entry f --input '[1, 2, 3]:i64' --input '[1, 0, 1]:i64' 2>&1 | filecheck %s

// BUG: once msir-fuse (run by msir-run and msir.jit) puts the floordiv in an
// msir.fusion, convert-msir-to-loops lowers the whole body under the fusion's
// location, which is that of its last op. A division by zero is then reported
// at the neg on line 5 instead of the floordiv on line 4. The body ops keep
// their own locations (see `msir-opt -p msir-fuse --print-debuginfo`); the
// lowering should use them. From Python, `q = a // b` followed by `return -q`
// points the error at the return line.

func.func @f(%a: tensor<3xi64>, %b: tensor<3xi64>) -> tensor<3xi64> {
  %0 = msir.floordiv %a, %b : tensor<3xi64> loc("model.py":4:9)
  %1 = msir.neg %0 : tensor<3xi64> loc("model.py":5:12)
  func.return %1 : tensor<3xi64>
}

// CHECK: {{^}}model.py:4:9: error: integer division or modulo by zero{{$}}
