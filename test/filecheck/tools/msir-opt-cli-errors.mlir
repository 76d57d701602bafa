// RUN: not msir-opt %s -p msir-fusee 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not msir-opt %s -t llvm 2>&1 | filecheck %s --check-prefix=LLVM
// RUN: not msir-opt %S/Inputs/loss.py 2>&1 | filecheck %s --check-prefix=ENTRY
// RUN: not msir-opt %S/Inputs/loss.py --entry loss 2>&1 | filecheck %s --check-prefix=ARGS

// Everyday command-line mistakes are one error line and exit status 1.

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.neg %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// PASS-NOT: Traceback
// PASS:     {{^}}msir-opt: error: unknown pass 'msir-fusee'; did you mean 'msir-fuse'?{{$}}
// PASS-NOT: Traceback

// LLVM-NOT: Traceback
// LLVM:     {{^}}msir-opt: error: -t llvm needs a module in the llvm dialect, but it holds func.func; lower it first with -p convert-msir-to-loops,msir-lower-to-llvm{{$}}
// LLVM-NOT: Traceback

// ENTRY-NOT: Traceback
// ENTRY:     {{^}}msir-opt: error: a Python input needs --entry <function> (one of: loss) and --args <its argument types>{{$}}
// ENTRY-NOT: Traceback

// ARGS-NOT: Traceback
// ARGS:     {{^}}msir-opt: error: loss() takes arguments x: give their types with --args, e.g. {{.*}}
// ARGS-NOT: Traceback
