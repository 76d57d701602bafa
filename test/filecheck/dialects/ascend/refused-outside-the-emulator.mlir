// msir's passes and the CPU target refuse ascend ops at their location (the
// pipeline's check, msir.pipeline.refuse_target_ops), instead of skipping them;
// xDSL's generic passes still run on them.

// RUN: not msir-opt %s -p msir-fuse 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not msir-opt %s -p cse,convert-msir-to-loops 2>&1 | filecheck %s --check-prefix=LOOPS
// RUN: not msir-run %s --entry k 2>&1 | filecheck %s --check-prefix=CPU
// RUN: msir-opt %s -p cse | filecheck %s --check-prefix=CSE

// PASS: refused-outside-the-emulator.mlir:[[# @LINE + 6]]:1: error: msir-fuse cannot run on ascend.kernel, an op of the ascend target dialect; ascend kernels run on the emulator: msir-run --target ascend
// PASS-NEXT: ascend.kernel @k
// PASS-NEXT: {{^    \^$}}
// LOOPS: refused-outside-the-emulator.mlir:[[# @LINE + 3]]:1: error: convert-msir-to-loops cannot run on ascend.kernel
// CPU: refused-outside-the-emulator.mlir:[[# @LINE + 2]]:1: error: msir-grad-jvp cannot run on ascend.kernel, an op of the ascend target dialect
// CSE: ascend.kernel @k
ascend.kernel @k #ascend.target<"910A"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
}
