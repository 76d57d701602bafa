// RUN: msir-opt %s -p dce,msir-fuse,convert-msir-to-loops --time-passes -o %t.mlir 2>&1 | filecheck %s
// RUN: msir-opt %s -p dce,msir-fuse,convert-msir-to-loops --time-passes 2>/dev/null | filecheck %s --check-prefix=IR
// RUN: msir-opt %s -p 'convert-msir-to-loops,msir-lower-to-llvm{math_impl="libm" parallel=false}' --time-passes -o %t.mlir 2>&1 | filecheck %s --check-prefix=OPTIONS

// --time-passes prints one row per pass, in order, and the total on stderr;
// stdout holds the IR only.

func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.add %x, %y : tensor<4xf32>
  %1 = msir.mul %0, %y : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// CHECK:      ... Pass execution timing report ...
// CHECK:      Total Execution Time: {{[0-9.]+}} seconds
// CHECK:      ----Wall Time----  ----Name----
// CHECK-NEXT: {{^ +[0-9.]+ \( *[0-9.]+%\)  dce$}}
// CHECK-NEXT: {{^ +[0-9.]+ \( *[0-9.]+%\)  msir-fuse$}}
// CHECK-NEXT: {{^ +[0-9.]+ \( *[0-9.]+%\)  convert-msir-to-loops$}}
// CHECK-NEXT: {{^ +[0-9.]+ \(100.0%\)  Total$}}

// IR-NOT:    Execution Time
// IR:        builtin.module
// IR:        scf.for
// IR-NOT:    Execution Time

// A row names the pass with the options it was given.
// OPTIONS:   {{^ +[0-9.]+ \( *[0-9.]+%\)  msir-lower-to-llvm\{math_impl="libm" parallel=false\}$}}
