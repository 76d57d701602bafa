// RUN: msir-run %s --entry expf --input '[0.0, -200.0]:f32' | filecheck %s --check-prefix=EXPF
// RUN: msir-run %s --entry tanh --input '[0.0]:f64' | filecheck %s --check-prefix=TANH
// XFAIL: *

// BUG: function symbols are emitted unmangled, so a function whose name is a
// C math library symbol clashes with it. math.exp on f32 becomes a call to
// libm's `expf`, which then resolves to the user's @expf: the process
// recurses into itself and dies with a segmentation fault. For @tanh, the
// lowering declares libm's `tanh` next to the user's @tanh and llvmlite raises
// DuplicatedNameError (a Python traceback). The same happens from Python:
// `@msir.jit def log(x): return np.log(x)` called on a float64 array segfaults.

func.func @expf(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = msir.exp %a : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}

// EXPF: result 0: tensor<2xf32> = [1., 0.]

func.func @tanh(%a: tensor<1xf64>) -> tensor<1xf64> {
  %0 = msir.tanh %a : tensor<1xf64>
  func.return %0 : tensor<1xf64>
}

// TANH: result 0: tensor<1xf64> = [0.]
