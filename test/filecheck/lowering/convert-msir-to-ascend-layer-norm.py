# RUN: msir-opt %s --entry layer_norm --args 'tensor<4x100xf16>,tensor<100xf16>,tensor<100xf16>' -p 'convert-msir-to-ascend{chip="910A" max_block_dim=2 row_buffers=1}' > %t.mlir
# RUN: filecheck %s < %t.mlir
# RUN: %python -c "import numpy as np; x = np.tile(np.arange(100.0), (4, 1)); x[1] = 7; x[2] -= 1000; np.save('%t.x.npy', x.astype(np.float16)); np.save('%t.g.npy', np.full(100, 2, np.float16)); np.save('%t.b.npy', np.full(100, 0.5, np.float16))"
# RUN: msir-run %t.mlir --target ascend --entry layer_norm --input @%t.x.npy --input @%t.g.npy --input @%t.b.npy | filecheck %s --check-prefix=OUT

# ops.layer_norm of 4 rows of 100 f16 with gamma and beta, one kernel on 2
# cores, 2 rows a tile (single-buffered: row_buffers=1), in f32. gamma and beta go to UB once, before the
# tile loop, converted to f32. The input's padding (to 128) is zero, once.
# Per tile: the rows' sums (vcadd levels) times 1/100 (vmuls) are the means,
# vbrcb makes each a block that vsub reads with strides 0; the padding of
# the centred rows is zeroed again (vdup through a bit mask of lanes 36-63
# of repeat 1, down the rows: rep_stride 16 blocks; after vsub on the
# same pipe, a write after a write needs no barrier); the squares' sums
# times 1/100, + eps, vsqrt, vrec, vbrcb, vmul; gamma and beta are read
# with repeat stride 0 (one instruction per column of repeats); back to f16.

from msir import ops


def layer_norm(x, gamma, beta):
    return ops.layer_norm(x, (100,), gamma, beta, 1e-5)

# CHECK: ascend.kernel @layer_norm #ascend.target<"910A"> block_dim 2 ins(%x: !ascend.buf<gm, 4x100xf16>, %gamma: !ascend.buf<gm, 100xf16>, %beta: !ascend.buf<gm, 100xf16>) outs(%result: !ascend.buf<gm, 4x100xf16>)
# CHECK: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 2x128xf16>
# CHECK-NEXT: %centred_ub = ascend.alloc at 512 : !ascend.buf<ub, 2x128xf32>
# CHECK-NEXT: %out_ub = ascend.alloc at 1536 : !ascend.buf<ub, 2x128xf16>
# CHECK-NEXT: %squares_ub = ascend.alloc at 2048 : !ascend.buf<ub, 2x128xf32>
# CHECK: %gamma_ub = ascend.alloc
# CHECK: %gamma_f16_ub = ascend.alloc
# CHECK: ascend.copy mte2 %gamma[{{.*}}] to %gamma_f16_ub[{{.*}}] sizes [100]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vconv %gamma_ub[{{.*}}], %gamma_f16_ub[{{.*}}] repeat 2 rep_stride [8, 4] :
# CHECK: ascend.copy mte2 %beta[{{.*}}] to %beta_f16_ub[{{.*}}] sizes [100]
# CHECK: ascend.vconv %beta_ub[{{.*}}], %beta_f16_ub[{{.*}}] repeat 2 rep_stride [8, 4] :
# CHECK: ascend.vdup %x_ub[{{.*}}], %{{.*}} repeat 2 :
# CHECK-NEXT: scf.for
# CHECK: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [2, 100]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vconv %centred_ub[{{.*}}], %x_ub[{{.*}}] repeat 4 rep_stride [8, 4] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %partial0_ub[{{.*}}], %centred_ub[{{.*}}] repeat 2 :
# CHECK-NEXT: ascend.vcadd %partial0_ub[{{.*}}], %centred_ub[{{.*}}] repeat 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 2 repeat 2 rep_stride [8, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmuls %acc_ub[{{.*}}], %acc_ub[{{.*}}], %[[INVN:.*]] mask 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vbrcb %row_blocks_ub[{{.*}}], %acc_ub[{{.*}}] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vsub %centred_ub[{{.*}}], %centred_ub[{{.*}}], %row_blocks_ub[{{.*}}] repeat 2 blk_stride [1, 1, 0] rep_stride [16, 16, 1] :
# CHECK-NEXT: ascend.vsub %centred_ub[{{.*}}], %centred_ub[{{.*}}], %row_blocks_ub[{{.*}}] repeat 2 blk_stride [1, 1, 0] rep_stride [16, 16, 1] :
# CHECK-NEXT: ascend.vdup %centred_ub[{{.*}}], %{{.*}} mask_bits [0, -68719476736] repeat 2 rep_stride [16] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %squares_ub[{{.*}}], %centred_ub[{{.*}}], %centred_ub[{{.*}}] repeat 4 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %partial0_ub[{{.*}}], %squares_ub[{{.*}}] repeat 2 :
# CHECK-NEXT: ascend.vcadd %partial0_ub[{{.*}}], %squares_ub[{{.*}}] repeat 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 2 repeat 2 rep_stride [8, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmuls %acc_ub[{{.*}}], %acc_ub[{{.*}}], %[[INVN]] mask 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadds %acc_ub[{{.*}}], %acc_ub[{{.*}}], %{{.*}} mask 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vsqrt %acc_ub[{{.*}}], %acc_ub[{{.*}}] mask 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vrec %acc_ub[{{.*}}], %acc_ub[{{.*}}] mask 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vbrcb %row_blocks_ub[{{.*}}], %acc_ub[{{.*}}] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %centred_ub[{{.*}}], %centred_ub[{{.*}}], %row_blocks_ub[{{.*}}] repeat 2 blk_stride [1, 1, 0] rep_stride [16, 16, 1] :
# CHECK-NEXT: ascend.vmul %centred_ub[{{.*}}], %centred_ub[{{.*}}], %row_blocks_ub[{{.*}}] repeat 2 blk_stride [1, 1, 0] rep_stride [16, 16, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %centred_ub[{{.*}}], %centred_ub[{{.*}}], %gamma_ub[{{.*}}] repeat 2 blk_stride [1, 1, 1] rep_stride [16, 16, 0] :
# CHECK-NEXT: ascend.vmul %centred_ub[{{.*}}], %centred_ub[{{.*}}], %gamma_ub[{{.*}}] repeat 2 blk_stride [1, 1, 1] rep_stride [16, 16, 0] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadd %centred_ub[{{.*}}], %centred_ub[{{.*}}], %beta_ub[{{.*}}] repeat 2 blk_stride [1, 1, 1] rep_stride [16, 16, 0] :
# CHECK-NEXT: ascend.vadd %centred_ub[{{.*}}], %centred_ub[{{.*}}], %beta_ub[{{.*}}] repeat 2 blk_stride [1, 1, 1] rep_stride [16, 16, 0] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vconv %out_ub[{{.*}}], %centred_ub[{{.*}}] repeat 4 rep_stride [4, 8] :
# CHECK-NEXT: ascend.set_flag v to mte3 event 0
# CHECK-NEXT: ascend.wait_flag v to mte3 event 0
# CHECK-NEXT: ascend.copy mte3 %out_ub[{{.*}}] to %result[{{.*}}] sizes [2, 100]
# CHECK-NEXT: }

# row 0: 0..99 centred, over its std 28.866: -1.7148 * 2 + 0.5 = -2.93 (f16);
# row 1 constant: 0 * 2 + 0.5; row 2 (0..99 - 1000) as row 0: the centring
# happens in f32 before the squares
# OUT: result 0: tensor<4x100xf16> = {{\[\[}}-2.93 {{ *}}, -2.86 {{ *}}, -2.791 {{ *}},
# OUT-SAME: 3.86 {{ *}}, 3.93 {{ *}}],
# OUT-NEXT: {{\[}} 0.5 {{ *}}, 0.5 {{ *}},
# OUT-NEXT: [-2.93 {{ *}}, -2.86 {{ *}}, -2.791 {{ *}},
# OUT: cycles: {{[0-9]+}} (910A, block_dim 2,
