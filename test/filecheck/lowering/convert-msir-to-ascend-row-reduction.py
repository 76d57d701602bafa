# RUN: msir-opt %s --entry row_sum --args 'tensor<10x300xf16>' -p 'convert-msir-to-ascend{chip="910B" max_block_dim=2}' > %t.sum.mlir
# RUN: filecheck %s --check-prefix=SUM < %t.sum.mlir
# RUN: %python -c "import numpy as np; np.save('%t.x.npy', np.linspace(-1, 1, 3000).reshape(10, 300).astype(np.float16))"
# RUN: msir-run %t.sum.mlir --target ascend --entry row_sum --input @%t.x.npy | filecheck %s --check-prefix=SUM-OUT
# RUN: msir-opt %s --entry row_max --args 'tensor<3x2500xf32>' -p 'convert-msir-to-ascend{chip="910A" tile_elements=1024 max_block_dim=1}' > %t.max.mlir
# RUN: filecheck %s --check-prefix=MAX < %t.max.mlir
# RUN: %python -c "import numpy as np; y = (np.arange(7500) %% 97 / 97).reshape(3, 2500).astype(np.float32); y[0, 2499], y[1, 0], y[2, 2048] = 5, 6, 7; np.save('%t.y.npy', y)"
# RUN: msir-run %t.max.mlir --target ascend --entry row_max --input @%t.y.npy | filecheck %s --check-prefix=MAX-OUT

# Row reductions on the vector unit.
#
# row_sum: 10 rows of 300 f16 on 2 cores, 5 rows a tile. A row is padded to
# 384 (whole repeats of f16 and of f32) with zeros, once, before the loop;
# the tile is converted to f32 (the vector unit sums f16 in f32: 64
# elements a repeat, 4 blocks of f16), each row's 6 repeats summed to 6
# partials (vcadd, one element per repeat) in a row 8 long, then each row's
# 6 partials by one masked repeat with a row stride of 1 block, and the 5
# sums converted back to f16.
#
# row_max: 3 rows of 2500 f32 on one core, a row per tile in chunks of 1024:
# two full chunks, then a chunk of 452 whose padding (filled by the earlier
# chunks' loads) is refilled with -inf first. Each chunk's 16 maxima go
# 16 apart into one row of 48 partials, which one repeat reduces. The loop's
# back edges hold the next row's first load until V has read the last chunk
# (v -> mte2) and the last level until MTE3 has stored the last result.

import numpy as np


def row_sum(x):
    return np.sum(x, axis=1)


def row_max(x):
    return x.max(axis=-1, keepdims=True)

# SUM: ascend.kernel @row_sum #ascend.target<"910B"> block_dim 2 ins(%x: !ascend.buf<gm, 10x300xf16>) outs(%result: !ascend.buf<gm, 10xf16>)
# SUM: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 5x384xf16>
# SUM: %x_f32_ub = ascend.alloc at 3840 : !ascend.buf<ub, 1920xf32>
# SUM: %partial0_ub = ascend.alloc at 11520 : !ascend.buf<ub, 40xf32>
# SUM: %acc_ub = ascend.alloc at 11680 : !ascend.buf<ub, 16xf32>
# SUM: %out_ub = ascend.alloc at 11744 : !ascend.buf<ub, 16xf16>
# SUM: ascend.vdup %x_ub[%{{.*}}], %{{.*}} repeat 15 : !ascend.buf<ub, 5x384xf16>, f16
# SUM-NEXT: scf.for
# SUM: ascend.set_flag v to mte2 event 0
# SUM-NEXT: ascend.wait_flag v to mte2 event 0
# SUM-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [5, 300]
# SUM-NEXT: ascend.set_flag mte2 to v event 0
# SUM-NEXT: ascend.wait_flag mte2 to v event 0
# SUM-NEXT: ascend.vconv %x_f32_ub[{{.*}}], %x_ub[{{.*}}] repeat 30 rep_stride [8, 4]
# SUM-NEXT: ascend.pipe_barrier v
# SUM-COUNT-5: ascend.vcadd %partial0_ub[{{.*}}], %x_f32_ub[{{.*}}] repeat 6 :
# SUM-NEXT: ascend.pipe_barrier v
# SUM-NEXT: ascend.vcadd %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 6 repeat 5 rep_stride [8, 1]
# SUM-NEXT: ascend.pipe_barrier v
# SUM-NEXT: ascend.vconv %out_ub[{{.*}}], %acc_ub[{{.*}}] mask 5 :
# SUM-NEXT: ascend.set_flag v to mte3 event 0
# SUM-NEXT: ascend.wait_flag v to mte3 event 0
# SUM-NEXT: ascend.copy mte3 %out_ub[{{.*}}] to %result[{{.*}}] sizes [5]
# SUM-NEXT: }

# SUM-OUT: result 0: tensor<10xf16> = [-270.  , -210.1 , -150.  ,  -90.  ,  -30.02,   30.02,   90.  ,  150.  ,  210.1 ,  270.  ]
# SUM-OUT: cycles: {{[0-9]+}} (910B, block_dim 2,

# MAX: ascend.kernel @row_max #ascend.target<"910A"> block_dim 1 ins(%x: !ascend.buf<gm, 3x2500xf32>) outs(%result: !ascend.buf<gm, 3xf32>)
# MAX: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 1x1024xf32>
# MAX: %partial0_ub = ascend.alloc at 4096 : !ascend.buf<ub, 48xf32>
# MAX: %acc_ub = ascend.alloc at 4288 : !ascend.buf<ub, 16xf32>
# MAX: %[[NEGINF:.*]] = arith.constant 0xff800000 : f32
# MAX: ascend.set_flag v to mte2 event 0
# MAX-NEXT: ascend.set_flag mte3 to v event 0
# MAX-NEXT: scf.for
# MAX: ascend.wait_flag v to mte2 event 0
# MAX-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 1024]
# MAX-NEXT: ascend.set_flag mte2 to v event 0
# MAX-NEXT: ascend.wait_flag mte2 to v event 0
# MAX-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %x_ub[{{.*}}] repeat 16 :
# MAX-NEXT: ascend.set_flag v to mte2 event 1
# MAX-NEXT: ascend.wait_flag v to mte2 event 1
# MAX-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 1024]
# MAX-NEXT: ascend.set_flag mte2 to v event 0
# MAX-NEXT: ascend.wait_flag mte2 to v event 0
# MAX-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %x_ub[{{.*}}] repeat 16 :
# MAX-NEXT: ascend.vdup %x_ub[{{.*}}], %[[NEGINF]] repeat 16 :
# MAX-NEXT: ascend.set_flag v to mte2 event 1
# MAX-NEXT: ascend.wait_flag v to mte2 event 1
# MAX-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [1, 452]
# MAX-NEXT: ascend.set_flag mte2 to v event 0
# MAX-NEXT: ascend.wait_flag mte2 to v event 0
# MAX-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %x_ub[{{.*}}] repeat 16 :
# MAX-NEXT: ascend.wait_flag mte3 to v event 0
# MAX-NEXT: ascend.pipe_barrier v
# MAX-NEXT: ascend.vcmax %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 48 rep_stride [8, 6] :
# MAX-NEXT: ascend.set_flag v to mte3 event 0
# MAX-NEXT: ascend.wait_flag v to mte3 event 0
# MAX-NEXT: ascend.copy mte3 %acc_ub[{{.*}}] to %result[{{.*}}] sizes [1]
# MAX-NEXT: ascend.set_flag v to mte2 event 0
# MAX-NEXT: ascend.set_flag mte3 to v event 0
# MAX-NEXT: }
# MAX-NEXT: ascend.wait_flag v to mte2 event 0
# MAX-NEXT: ascend.wait_flag mte3 to v event 0

# MAX-OUT: result 0: tensor<3x1xf32> = {{\[\[}}5.],
# MAX-OUT-NEXT: [6.],
# MAX-OUT-NEXT: [7.]]
# MAX-OUT: cycles: {{[0-9]+}} (910A, block_dim 1,
