// msir-run --target ascend reports an emulator error as one line naming the
// op's location, the rule, the buffer and the byte range, and exits 1.
// test/unit/test_ascend_emulator.py has a kernel for every error class.

// RUN: %python -c "import numpy as np; np.save('%t.x.npy', np.ones(256, np.float16))"
// RUN: not msir-run %s --target ascend --entry missing_flag --input @%t.x.npy 2>&1 | filecheck %s --check-prefix=RACE
// RUN: not msir-run %s --target ascend --entry deadlock --input @%t.x.npy 2>&1 | filecheck %s --check-prefix=DEADLOCK
// RUN: not msir-run %s --target ascend --entry nope 2>&1 | filecheck %s --check-prefix=ENTRY
// RUN: not msir-run %s --target ascend --entry deadlock 2>&1 | filecheck %s --check-prefix=INPUTS

// RACE: msir-run: error: {{.*}}emulator-errors.mlir:[[# @LINE + 9]]:3: RAW race: ascend.vabs (pipe v) reads bytes [0, 512) of ub buffer %u (ub[0, 512)), written by ascend.copy at {{.*}}emulator-errors.mlir:[[# @LINE + 8]]:3 (pipe mte2) with no ascend.set_flag/wait_flag mte2 to v between them{{$}}
// RACE-NOT: {{.}}
// DEADLOCK: msir-run: error: {{.*}}emulator-errors.mlir:[[# @LINE + 14]]:3: deadlock: ascend.wait_flag mte2 to v event 0 can never fire
// ENTRY: msir-run: error: no ascend.kernel @nope in the module (kernels: @missing_flag, @deadlock)
// INPUTS: msir-run: error: {{.*}}: @deadlock takes 1 inputs, 0 given
ascend.kernel @missing_flag #ascend.target<"910B"> block_dim 1 ins(%x : !ascend.buf<gm, 256xf16>) outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.copy mte2 %x[%c0] to %u[%c0] sizes [256] : !ascend.buf<gm, 256xf16> to !ascend.buf<ub, 256xf16>
  ascend.vabs %u[%c0], %u[%c0] repeat 2 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %u[%c0] to %y[%c0] sizes [256] : !ascend.buf<ub, 256xf16> to !ascend.buf<gm, 256xf16>
}

ascend.kernel @deadlock #ascend.target<"910A"> block_dim 1 ins(%x : !ascend.buf<gm, 256xf16>) outs(%y : !ascend.buf<gm, 256xf16>) {
  ascend.wait_flag mte2 to v event 0
}
