// A hand-written elementwise kernel, z = exp(x) + y on 1000 f16 elements:
// 7 full repeats of 128 lanes, then a masked tail of 104 lanes; a barrier
// orders vexp before vadd on the vector pipe. test/unit/test_ascend_emulator.py
// checks the values against NumPy.

// RUN: %python -c "import numpy as np; np.save('%t.x.npy', np.linspace(-2, 2, 1000).astype(np.float16)); np.save('%t.y.npy', np.full(1000, 0.5, np.float16))"
// RUN: msir-run %s --target ascend --entry exp_add_910a --input @%t.x.npy --input @%t.y.npy | filecheck %s
// RUN: msir-run %s --target ascend --entry exp_add_910b --input @%t.x.npy --input @%t.y.npy | filecheck %s

// exp(-2) + 0.5 = 0.6353, exp(2) + 0.5 = 7.889 (7.89 in f16)
// CHECK: result 0: tensor<1000xf16> = [0.6353, 0.6357, {{.*}}, 7.89 {{ *}}]
// CHECK: cycles: {{[0-9]+}}
// CHECK: critical pipe: mte2

ascend.kernel @exp_add_910a #ascend.target<"910A"> block_dim 1 ins(%x : !ascend.buf<gm, 1000xf16>, %y : !ascend.buf<gm, 1000xf16>) outs(%z : !ascend.buf<gm, 1000xf16>) {
  %c0 = arith.constant 0 : index
  %c896 = arith.constant 896 : index
  %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 1024xf16>
  %y_ub = ascend.alloc at 2048 : !ascend.buf<ub, 1024xf16>
  %z_ub = ascend.alloc at 4096 : !ascend.buf<ub, 1024xf16>
  ascend.copy mte2 %x[%c0] to %x_ub[%c0] sizes [1000] : !ascend.buf<gm, 1000xf16> to !ascend.buf<ub, 1024xf16>
  ascend.copy mte2 %y[%c0] to %y_ub[%c0] sizes [1000] : !ascend.buf<gm, 1000xf16> to !ascend.buf<ub, 1024xf16>
  ascend.set_flag mte2 to v event 0
  ascend.wait_flag mte2 to v event 0
  ascend.vexp %z_ub[%c0], %x_ub[%c0] repeat 7 : !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>
  ascend.vexp %z_ub[%c896], %x_ub[%c896] mask 104 : !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>
  ascend.pipe_barrier v
  ascend.vadd %z_ub[%c0], %z_ub[%c0], %y_ub[%c0] repeat 7 : !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>
  ascend.vadd %z_ub[%c896], %z_ub[%c896], %y_ub[%c896] mask 104 : !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %z_ub[%c0] to %z[%c0] sizes [1000] : !ascend.buf<ub, 1024xf16> to !ascend.buf<gm, 1000xf16>
}

ascend.kernel @exp_add_910b #ascend.target<"910B"> block_dim 1 ins(%x : !ascend.buf<gm, 1000xf16>, %y : !ascend.buf<gm, 1000xf16>) outs(%z : !ascend.buf<gm, 1000xf16>) {
  %c0 = arith.constant 0 : index
  %c896 = arith.constant 896 : index
  %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 1024xf16>
  %y_ub = ascend.alloc at 2048 : !ascend.buf<ub, 1024xf16>
  %z_ub = ascend.alloc at 4096 : !ascend.buf<ub, 1024xf16>
  ascend.copy mte2 %x[%c0] to %x_ub[%c0] sizes [1000] : !ascend.buf<gm, 1000xf16> to !ascend.buf<ub, 1024xf16>
  ascend.copy mte2 %y[%c0] to %y_ub[%c0] sizes [1000] : !ascend.buf<gm, 1000xf16> to !ascend.buf<ub, 1024xf16>
  ascend.set_flag mte2 to v event 0
  ascend.wait_flag mte2 to v event 0
  ascend.vexp %z_ub[%c0], %x_ub[%c0] repeat 7 : !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>
  ascend.vexp %z_ub[%c896], %x_ub[%c896] mask 104 : !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>
  ascend.pipe_barrier v
  ascend.vadd %z_ub[%c0], %z_ub[%c0], %y_ub[%c0] repeat 7 : !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>
  ascend.vadd %z_ub[%c896], %z_ub[%c896], %y_ub[%c896] mask 104 : !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>, !ascend.buf<ub, 1024xf16>
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %z_ub[%c0] to %z[%c0] sizes [1000] : !ascend.buf<ub, 1024xf16> to !ascend.buf<gm, 1000xf16>
}
