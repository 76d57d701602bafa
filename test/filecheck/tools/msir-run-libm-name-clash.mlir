// RUN: msir-run %s --entry expf --input '[0.0, -200.0]:f32' | filecheck %s --check-prefix=EXPF
// RUN: msir-run %s --entry tanh --input '[0.0]:f64' | filecheck %s --check-prefix=TANH

// Regression test (fixed): function symbols are emitted unmangled, so a function whose name is a
// C math library symbol clashes with it: math.exp on f32 is declared as libm's
// `expf`, math.tanh on f64 as `tanh`, next to the user's @expf / @tanh, and
// llvmlite raises DuplicatedNameError (a Python traceback, not an msir error).
// The same from Python: `@msir.jit def log(x): return np.log(x)`. Before the
// libmvec lowering (971db0b) the declaration was implicit and @expf called
// itself from the JIT: a segmentation fault.

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
