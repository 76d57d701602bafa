# RUN: msir-opt %s --entry softmax --args 'tensor<2x2500xf32>' -p 'convert-msir-to-ascend{chip="910B" tile_elements=1024 max_block_dim=2}' > %t.mlir
# RUN: filecheck %s < %t.mlir
# RUN: %python -c "import numpy as np; x = np.zeros((2, 2500)); x[1] = np.log(np.arange(1, 2501)); np.save('%t.x.npy', x.astype(np.float32))"
# RUN: msir-run %t.mlir --target ascend --entry softmax --input @%t.x.npy | filecheck %s --check-prefix=OUT

# ops.softmax of rows longer than a tile (tile_elements 1024): online
# softmax, one row per core, each row streamed twice in chunks of 1024
# (1024, 1024, 452). The running maximum m, the running sum s and a
# temporary are single f32 elements in 32-byte slots of %state_ub, each op
# on them one lane (mask_bits [0, 1]). Pass 1, per chunk: its maximum c
# (vcmax levels), m' = max(m, c) (m and m' alternate between slots 0 and
# 8), s *= exp(m - m'), s += sum(exp(x - m')) (vbrcb of m', vsub, vexp,
# vcadd levels); the last chunk's padding is -inf (vdup before its load).
# Then 1 / s, and pass 2: exp(x - m) * (1 / s) per chunk, stored.

from msir import ops


def softmax(x):
    return ops.softmax(x)

# CHECK: ascend.kernel @softmax #ascend.target<"910B"> block_dim 2 ins(%x: !ascend.buf<gm, 2x2500xf32>) outs(%result: !ascend.buf<gm, 2x2500xf32>)
# CHECK: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 1x1024xf32>
# CHECK: %state_ub = ascend.alloc at {{[0-9]+}} : !ascend.buf<ub, 64xf32>
# CHECK: scf.for
# CHECK-NEXT: %[[ROW:.*]] = arith.muli
# CHECK-NEXT: ascend.vdup %state_ub[%[[M0:.*]]], %[[NEGINF:.*]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.vdup %state_ub[%[[S:.*]]], %{{.*}} mask_bits [0, 1] :
# CHECK-NEXT: ascend.copy mte2 %x[%[[ROW]], %{{.*}}] to %x_ub[{{.*}}] sizes [1, 1024]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %x_ub[{{.*}}] repeat 16 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcmax %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 16 rep_stride [8, 2] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmax %state_ub[%[[M1:.*]]], %state_ub[%[[M0]]], %acc_ub[{{.*}}] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vsub %state_ub[%[[T:.*]]], %state_ub[%[[M0]]], %state_ub[%[[M1]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vexp %state_ub[%[[T]]], %state_ub[%[[T]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %state_ub[%[[S]]], %state_ub[%[[S]]], %state_ub[%[[T]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.vbrcb %blocks0_ub[{{.*}}], %state_ub[%[[M1]]] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vsub %x_ub[{{.*}}], %x_ub[{{.*}}], %blocks0_ub[{{.*}}] repeat 16 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vexp %x_ub[{{.*}}], %x_ub[{{.*}}] repeat 16 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %partial0_ub[{{.*}}], %x_ub[{{.*}}] repeat 16 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 16 rep_stride [8, 2] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadd %state_ub[%[[S]]], %state_ub[%[[S]]], %acc_ub[{{.*}}] mask_bits [0, 1] :
# CHECK-NEXT: ascend.set_flag v to mte2 event 0
# CHECK-NEXT: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[%[[ROW]], %{{.*}}] to %x_ub[{{.*}}] sizes [1, 1024]
# the second chunk: m' back in slot 0
# CHECK: ascend.vmax %state_ub[%[[M0]]], %state_ub[%[[M1]]], %acc_ub[{{.*}}] mask_bits [0, 1] :
# the last chunk's padding, from repeat 7 (448) on
# CHECK: ascend.vadd %state_ub[%[[S]]]
# CHECK-NEXT: ascend.vdup %x_ub[{{.*}}], %[[NEGINF]] repeat 9 :
# CHECK-NEXT: ascend.set_flag v to mte2 event 0
# CHECK-NEXT: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[%[[ROW]], %{{.*}}] to %x_ub[{{.*}}] sizes [1, 452]
# CHECK: ascend.vadd %state_ub[%[[S]]], %state_ub[%[[S]]], %acc_ub[{{.*}}] mask_bits [0, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vrec %state_ub[%[[S]]], %state_ub[%[[S]]] mask_bits [0, 1] :
# CHECK-NEXT: ascend.vbrcb %blocks0_ub[{{.*}}], %state_ub[%[[M1]]] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vbrcb %blocks1_ub[{{.*}}], %state_ub[%[[S]]] :
# pass 2, three times
# CHECK-COUNT-3: ascend.vmul %x_ub[{{.*}}], %x_ub[{{.*}}], %blocks1_ub[{{.*}}] repeat 16 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.set_flag v to mte3 event 0
# CHECK-NEXT: ascend.wait_flag v to mte3 event 0
# CHECK-NEXT: ascend.copy mte3 %x_ub[{{.*}}] to %result[%[[ROW]], %{{.*}}] sizes [1, 452]
# CHECK-NEXT: }

# row 0: 1 / 2500; row 1: softmax(log(i)) = i / (2500 * 2501 / 2)
# OUT: result 0: tensor<2x2500xf32> = {{\[\[}}3.99999990e-04, 3.99999990e-04,
# OUT: [3.19872044e-07, 6.39744087e-07, 9.59616159e-07,
# OUT-SAME: 7.99680187e-04]]
# OUT: cycles: {{[0-9]+}} (910B, block_dim 2,
