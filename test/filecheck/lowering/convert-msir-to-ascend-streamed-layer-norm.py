# RUN: msir-opt %s --entry layer_norm --args 'tensor<2x2500xf32>,tensor<2500xf32>,tensor<2500xf32>' -p 'convert-msir-to-ascend{chip="910A" tile_elements=1024 max_block_dim=2}' > %t.mlir
# RUN: filecheck %s < %t.mlir
# RUN: %python -c "import numpy as np; x = np.tile(np.arange(2500.0), (2, 1)); x[1] += 1e4; np.save('%t.x.npy', x.astype(np.float32)); np.save('%t.g.npy', np.full(2500, 2, np.float32)); np.save('%t.b.npy', np.full(2500, 0.5, np.float32))"
# RUN: msir-run %t.mlir --target ascend --entry layer_norm --input @%t.x.npy --input @%t.g.npy --input @%t.b.npy | filecheck %s --check-prefix=OUT

# ops.layer_norm of rows longer than a tile (tile_elements 1024): one row
# per core, streamed twice in chunks of 1024, 1024, 452. Pass 1, per chunk:
# its mean (vcadd levels, times 1 / width) and its centred squares' sum
# (vbrcb, vsub, the last chunk's padding zeroed, vmul, vcadd levels); the
# first chunk's are copied into the state (slot 0 the mean, slot 8 M2),
# later ones combined (Chan et al.): d = mean_c - mean (slot 16), mean +=
# d * w / (n + w), M2 += M2_c + d^2 * n w / (n + w), with static weights.
# Then rstd = 1 / sqrt(M2 / N + eps) in slot 8, and pass 2 streams x with
# the chunks of gamma and beta: (x - mean) * rstd * gamma + beta.

from msir import ops


def layer_norm(x, gamma, beta):
    return ops.layer_norm(x, (2500,), gamma, beta, 1e-5)

# CHECK: ascend.kernel @layer_norm #ascend.target<"910A"> block_dim 2 ins(%x: !ascend.buf<gm, 2x2500xf32>, %gamma: !ascend.buf<gm, 2500xf32>, %beta: !ascend.buf<gm, 2500xf32>) outs(%result: !ascend.buf<gm, 2x2500xf32>)
# CHECK: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 1x1024xf32>
# CHECK: %state_ub = ascend.alloc
# CHECK: %gamma_ub = ascend.alloc {{.*}} : !ascend.buf<ub, 1024xf32>
# CHECK: %beta_ub = ascend.alloc {{.*}} : !ascend.buf<ub, 1024xf32>
# CHECK: %squares_acc_ub = ascend.alloc
# CHECK-DAG: %[[W:.*]] = arith.constant 5.000000e-01 : f32
# CHECK-DAG: %[[NW:.*]] = arith.constant 5.120000e+02 : f32
# CHECK: scf.for
# CHECK: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 1024]
# CHECK: ascend.vcadd %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 16 rep_stride [8, 2] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmuls %acc_ub[{{.*}}], %acc_ub[{{.*}}], %{{.*}} mask 1 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vbrcb %blocks0_ub[{{.*}}], %acc_ub[{{.*}}] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vsub %x_ub[{{.*}}], %x_ub[{{.*}}], %blocks0_ub[{{.*}}] repeat 16 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %x_ub[{{.*}}], %x_ub[{{.*}}], %x_ub[{{.*}}] repeat 16 :
# CHECK: ascend.vcadd %squares_acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 16 rep_stride [8, 2] :
# CHECK-NEXT: ascend.vadds %state_ub[%[[MEAN:.*]]], %acc_ub[{{.*}}], %{{.*}} mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadds %state_ub[%[[M2:.*]]], %squares_acc_ub[{{.*}}], %{{.*}} mask_bits [0, 1] :
# the second chunk: n = 1024, w = 1024
# CHECK: ascend.vcadd %squares_acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 16 rep_stride [8, 2] :
# CHECK-NEXT: ascend.vsub %state_ub[%[[D:.*]]], %acc_ub[{{.*}}], %state_ub[%[[MEAN]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmuls %state_ub[%[[T:.*]]], %state_ub[%[[D]]], %[[W]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadd %state_ub[%[[MEAN]]], %state_ub[%[[MEAN]]], %state_ub[%[[T]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.vadd %state_ub[%[[M2]]], %state_ub[%[[M2]]], %squares_acc_ub[{{.*}}] mask_bits [0, 1] :
# CHECK-NEXT: ascend.vmul %state_ub[%[[T]]], %state_ub[%[[D]]], %state_ub[%[[D]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmuls %state_ub[%[[T]]], %state_ub[%[[T]]], %[[NW]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadd %state_ub[%[[M2]]], %state_ub[%[[M2]]], %state_ub[%[[T]]] mask_bits [0, 1] :
# the last chunk: 452 columns, zero padding for the sum, then the centred padding zeroed
# CHECK-NEXT: ascend.vdup %x_ub[{{.*}}], %[[ZERO:.*]] repeat 9 :
# CHECK: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 452]
# CHECK: ascend.vsub %x_ub[{{.*}}], %x_ub[{{.*}}], %blocks0_ub[{{.*}}] repeat 16 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.vdup %x_ub[{{.*}}], %[[ZERO]] mask_bits [0, -16] :
# CHECK-NEXT: ascend.vdup %x_ub[{{.*}}], %[[ZERO]] repeat 8 :
# CHECK: ascend.vadd %state_ub[%[[M2]]], %state_ub[%[[M2]]], %state_ub[%[[T]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmuls %state_ub[%[[M2]]], %state_ub[%[[M2]]], %{{.*}} mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadds %state_ub[%[[M2]]], %state_ub[%[[M2]]], %{{.*}} mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vsqrt %state_ub[%[[M2]]], %state_ub[%[[M2]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vrec %state_ub[%[[M2]]], %state_ub[%[[M2]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.vbrcb %blocks0_ub[{{.*}}], %state_ub[%[[MEAN]]] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vbrcb %blocks1_ub[{{.*}}], %state_ub[%[[M2]]] :
# pass 2: the chunks of gamma and beta (free buffers: no wait), then x
# once V is done with x_ub; one flag for the three loads
# CHECK-NEXT: ascend.copy mte2 %gamma[{{.*}}] to %gamma_ub[{{.*}}] sizes [1024]
# CHECK-NEXT: ascend.copy mte2 %beta[{{.*}}] to %beta_ub[{{.*}}] sizes [1024]
# CHECK-NEXT: ascend.set_flag v to mte2 event 0
# CHECK-NEXT: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 1024]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vsub %x_ub[{{.*}}], %x_ub[{{.*}}], %blocks0_ub[{{.*}}] repeat 16 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %x_ub[{{.*}}], %x_ub[{{.*}}], %blocks1_ub[{{.*}}] repeat 16 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %x_ub[{{.*}}], %x_ub[{{.*}}], %gamma_ub[{{.*}}] repeat 16 blk_stride [1, 1, 1] rep_stride [8, 8, 8] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadd %x_ub[{{.*}}], %x_ub[{{.*}}], %beta_ub[{{.*}}] repeat 16 blk_stride [1, 1, 1] rep_stride [8, 8, 8] :
# CHECK-NEXT: ascend.set_flag v to mte3 event 0
# CHECK-NEXT: ascend.wait_flag v to mte3 event 0
# CHECK-NEXT: ascend.copy mte3 %x_ub[{{.*}}] to %result[{{.*}}] sizes [1, 1024]
# CHECK: ascend.copy mte3 %x_ub[{{.*}}] to %result[{{.*}}] sizes [1, 452]
# CHECK-NEXT: }

# both rows 0..2499 (row 1 plus 1e4: centred per chunk, the same result):
# std 721.69, (i - 1249.5) / 721.69 * 2 + 0.5
# OUT: result 0: tensor<2x2500xf32> = {{\[\[}}-2.962{{[0-9]*}}e+00, -2.959{{[0-9]*}}e+00,
# OUT-SAME: 3.962{{[0-9]*}}e+00],
# OUT-NEXT: [-2.962{{[0-9]*}}e+00, -2.959{{[0-9]*}}e+00,
# OUT-SAME: 3.962{{[0-9]*}}e+00]]
# OUT: cycles: {{[0-9]+}} (910A, block_dim 2,
