# RUN: msir-opt %s --entry softmax --args 'tensor<8x256xf32>' -p 'convert-msir-to-ascend{chip="910B" max_block_dim=2 tile_elements=256}' > %t.mlir
# RUN: filecheck %s < %t.mlir
# RUN: %python -c "import numpy as np; x = np.zeros((8, 256)); x[5] = np.log(np.arange(1, 257)); np.save('%t.x.npy', x.astype(np.float32))"
# RUN: msir-run %t.mlir --target ascend --entry softmax --input @%t.x.npy | filecheck %s --check-prefix=OUT

# ops.softmax of 8 rows on 2 cores, tiles of one row (tile_elements):
# double-buffered. Core c takes rows 4c .. 4c + 3, tile i in buffer set
# i % 2 (%x_ub / %x_ub_pong); tile i + 1's load is issued before tile i's
# vector work, each load sets its own mte2 -> v flag right after it (early
# sets, event ids in turn), so V starts on tile 0 while MTE2 loads tile 1.
# A buffer is loaded again once V has read it (v -> mte2, set after the
# vsub, its last read of x) and written again once MTE3 has stored it
# (mte3 -> v). Four tiles: no loop (fewer than two pairs), all unrolled.

from msir import ops


def softmax(x):
    return ops.softmax(x)

# CHECK: ascend.kernel @softmax #ascend.target<"910B"> block_dim 2
# CHECK: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 1x256xf32>
# CHECK-NEXT: %e_ub = ascend.alloc at 1024 : !ascend.buf<ub, 1x256xf32>
# CHECK-NEXT: %x_ub_pong = ascend.alloc at 2048 : !ascend.buf<ub, 1x256xf32>
# CHECK-NEXT: %e_ub_pong = ascend.alloc at 3072 : !ascend.buf<ub, 1x256xf32>
# CHECK-NOT: scf.for
# CHECK: %[[BASE:.*]] = arith.muli %0, %{{.*}} : index
# CHECK-NEXT: ascend.copy mte2 %x[%[[BASE]], %{{.*}}] to %x_ub[{{.*}}] sizes [1, 256]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: %[[ROW1:.*]] = arith.addi %[[BASE]], %{{.*}} : index
# CHECK-NEXT: ascend.copy mte2 %x[%[[ROW1]], %{{.*}}] to %x_ub_pong[{{.*}}] sizes [1, 256]
# CHECK-NEXT: ascend.set_flag mte2 to v event 1
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %x_ub[{{.*}}] repeat 4 :
# CHECK: ascend.vsub %e_ub[{{.*}}], %x_ub[{{.*}}], %row_blocks_ub[{{.*}}]
# CHECK-NEXT: ascend.set_flag v to mte2 event 0
# CHECK: ascend.copy mte3 %e_ub[{{.*}}] to %result[%[[BASE]], %{{.*}}] sizes [1, 256]
# CHECK-NEXT: ascend.set_flag mte3 to v event 0
# tile 2's load into the ping set once V is done reading tile 0's x
# CHECK: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 256]
# CHECK-NEXT: ascend.set_flag mte2 to v event 2
# tile 1 on the pong set
# CHECK: ascend.wait_flag mte2 to v event 1
# CHECK-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %x_ub_pong[{{.*}}] repeat 4 :
# CHECK: ascend.copy mte3 %e_ub_pong[{{.*}}] to %result[{{.*}}] sizes [1, 256]
# CHECK: ascend.copy mte2 %x[{{.*}}] to %x_ub_pong[{{.*}}] sizes [1, 256]
# CHECK-NEXT: ascend.set_flag mte2 to v event 3
# tile 2 waits for its load, and only before its first write of %e_ub
# (after its maxima) for MTE3's store of tile 0 out of it
# CHECK: ascend.wait_flag mte2 to v event 2
# CHECK-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %x_ub[{{.*}}] repeat 4 :
# CHECK: ascend.wait_flag mte3 to v event 0
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vsub %e_ub[{{.*}}], %x_ub[{{.*}}], %row_blocks_ub[{{.*}}]
# CHECK: ascend.wait_flag mte2 to v event 3
# CHECK: ascend.wait_flag mte3 to v event 1
# CHECK: ascend.copy mte3 %e_ub_pong[{{.*}}] to %result[{{.*}}] sizes [1, 256]
# CHECK-NEXT: }

# rows 0-4, 6, 7 uniform: 1 / 256; row 5: i / (256 * 257 / 2)
# OUT: result 0: tensor<8x256xf32> = {{\[\[}}3.9062500e-03, 3.9062500e-03,
# OUT: [3.0398833e-05, 6.0797665e-05,
# OUT-SAME: 7.7821012e-03],
# OUT: cycles: {{[0-9]+}} (910B, block_dim 2,
