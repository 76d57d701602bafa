# RUN: msir-opt %s --entry row_sum --args 'tensor<5x200xf16>' -p 'convert-msir-to-ascend{chip="910B" max_block_dim=1 tile_elements=256}' > %t.mlir
# RUN: filecheck %s < %t.mlir
# RUN: %python -c "import numpy as np; np.save('%t.x.npy', (np.arange(1000) %% 7).reshape(5, 200).astype(np.float16))"
# RUN: msir-run %t.mlir --target ascend --entry row_sum --input @%t.x.npy | filecheck %s --check-prefix=OUT

# np.sum over the rows of 5 x 200 f16 on one core, tiles of one row
# (tile_elements): double-buffered. Tile i loads into %x_ub / %x_ub_pong
# (i % 2) and writes its result to %out_ub / %out_ub_pong; the f32 copy,
# the partials and the f32 accumulator are V's only and shared. Both input
# sets are padded with 0 (56 columns) once, before the loop. Tile i + 1's
# load is issued before tile i's vector work, each load with its own
# mte2 -> v pair (early sets); a set is loaded again once V has converted
# it (v -> mte2, set right after the vconv), a result written again once
# MTE3 has stored it (mte3 -> v). Tiles 0-3 are two pairs in an scf.for
# (tile 0's load before it), tile 4 after it.

import numpy as np


def row_sum(x):
    return np.sum(x, axis=1)

# CHECK: ascend.kernel @row_sum #ascend.target<"910B"> block_dim 1
# CHECK: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 1x256xf16>
# CHECK-NEXT: %x_f32_ub = ascend.alloc at 512 : !ascend.buf<ub, 256xf32>
# CHECK-NEXT: %partial0_ub = ascend.alloc at 1536 : !ascend.buf<ub, 8xf32>
# CHECK-NEXT: %acc_ub = ascend.alloc at 1568 : !ascend.buf<ub, 16xf32>
# CHECK-NEXT: %out_ub = ascend.alloc at 1632 : !ascend.buf<ub, 16xf16>
# CHECK-NEXT: %x_ub_pong = ascend.alloc at 1664 : !ascend.buf<ub, 1x256xf16>
# CHECK-NEXT: %out_ub_pong = ascend.alloc at 2176 : !ascend.buf<ub, 16xf16>
# CHECK: ascend.vdup %x_ub[{{.*}}], %{{.*}} repeat 2 :
# CHECK: ascend.vdup %x_ub_pong[{{.*}}], %{{.*}} repeat 2 :
# CHECK: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 200]
# CHECK: scf.for
# the next tile's load into the pong set, then this tile's vector work
# CHECK: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub_pong[{{.*}}] sizes [1, 200]
# CHECK-NEXT: ascend.set_flag mte2 to v event 1
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vconv %x_f32_ub[{{.*}}], %x_ub[{{.*}}] repeat 4 rep_stride [8, 4] :
# CHECK-NEXT: ascend.set_flag v to mte2 event 1
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %partial0_ub[{{.*}}], %x_f32_ub[{{.*}}] repeat 4 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 4 rep_stride [8, 1] :
# CHECK-NEXT: ascend.wait_flag mte3 to v event 0
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vconv %out_ub[{{.*}}], %acc_ub[{{.*}}] mask 1 :
# CHECK-NEXT: ascend.set_flag v to mte3 event 0
# CHECK-NEXT: ascend.wait_flag v to mte3 event 0
# CHECK-NEXT: ascend.copy mte3 %out_ub[{{.*}}] to %result[{{.*}}] sizes [1]
# and the pong tile, the ping set loading meanwhile
# CHECK: ascend.wait_flag v to mte2 event 1
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 200]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK: ascend.wait_flag mte2 to v event 1
# CHECK-NEXT: ascend.vconv %x_f32_ub[{{.*}}], %x_ub_pong[{{.*}}] repeat 4 rep_stride [8, 4] :
# CHECK: ascend.vconv %out_ub_pong[{{.*}}], %acc_ub[{{.*}}] mask 1 :
# CHECK-NEXT: ascend.set_flag v to mte3 event 1
# CHECK-NEXT: ascend.wait_flag v to mte3 event 1
# CHECK-NEXT: ascend.copy mte3 %out_ub_pong[{{.*}}] to %result[{{.*}}] sizes [1]
# CHECK-NEXT: ascend.set_flag mte3 to v event 0
# CHECK-NEXT: }
# CHECK-NEXT: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte3 to v event 0
# tile 4, on the ping set, loaded in the loop's last iteration
# CHECK: ascend.vconv %x_f32_ub[{{.*}}], %x_ub[{{.*}}] repeat 4 rep_stride [8, 4] :
# CHECK: ascend.copy mte3 %out_ub[{{.*}}] to %result[{{.*}}] sizes [1]
# CHECK-NEXT: }

# row r holds (200 r + j) % 7, j < 200: sums 594, 603, 598, 600, 602 (exact in f16)
# OUT: result 0: tensor<5xf16> = {{\[}}594., 603., 598., 600., 602.]
# OUT: cycles: {{[0-9]+}} (910B, block_dim 1,
