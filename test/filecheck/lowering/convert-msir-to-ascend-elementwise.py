# RUN: msir-opt %s --entry scale_shift --args 'tensor<10x100xf16>,tensor<10x100xf16>' -p 'convert-msir-to-ascend{chip="910B" tile_elements=256 max_block_dim=2 elementwise_buffers=1}' > %t.mlir
# RUN: filecheck %s < %t.mlir
# RUN: %python -c "import numpy as np; np.save('%t.x.npy', np.linspace(-2, 2, 1000).reshape(10, 100).astype(np.float16)); np.save('%t.y.npy', np.full((10, 100), 0.5, np.float16))"
# RUN: msir-run %t.mlir --target ascend --entry scale_shift --input @%t.x.npy --input @%t.y.npy | filecheck %s --check-prefix=OUT

# An elementwise chain on 1000 f16 elements in UB tiles of 256 on 2 cores,
# single-buffered (elementwise_buffers=1):
# core 0 runs tiles 0 and 2 and the 232-element tail, core 1 tile 1. The
# Python float 3.0 becomes a scalar operand (vadds); a tail of 232 is one
# full repeat of 128 and a masked one of 104. Within the vector pipe each
# step waits for the last with a barrier; the loop's back edge holds MTE2
# until V has read the inputs (v -> mte2) and V until MTE3 has read the
# result (mte3 -> v). The waits after the loop also order the tail's tile
# after the loop's: the tail needs no flag of its own for that.

import numpy as np


def scale_shift(x, y):
    return np.exp(x) * y + 3.0

# CHECK: ascend.kernel @scale_shift #ascend.target<"910B"> block_dim 2 ins(%x: !ascend.buf<gm, 1000xf16>, %y: !ascend.buf<gm, 1000xf16>) outs(%result: !ascend.buf<gm, 1000xf16>)
# CHECK: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
# CHECK: %y_ub = ascend.alloc at 512 : !ascend.buf<ub, 256xf16>
# CHECK: %t0_ub = ascend.alloc at 1024 : !ascend.buf<ub, 256xf16>
# CHECK: %t1_ub = ascend.alloc at 1536 : !ascend.buf<ub, 256xf16>
# CHECK: %t2_ub = ascend.alloc at 2048 : !ascend.buf<ub, 256xf16>
# CHECK: ascend.set_flag v to mte2 event 0
# CHECK-NEXT: ascend.set_flag mte3 to v event 0
# CHECK-NEXT: scf.for
# CHECK: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [256]
# CHECK-NEXT: ascend.copy mte2 %y[{{.*}}] to %y_ub[{{.*}}] sizes [256]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vexp %t0_ub[{{.*}}], %x_ub[{{.*}}] repeat 2
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %t1_ub[{{.*}}], %t0_ub[{{.*}}], %y_ub[{{.*}}] repeat 2
# CHECK-NEXT: ascend.wait_flag mte3 to v event 0
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadds %t2_ub[{{.*}}], %t1_ub[{{.*}}], %{{.*}} repeat 2
# CHECK-NEXT: ascend.set_flag v to mte3 event 0
# CHECK-NEXT: ascend.wait_flag v to mte3 event 0
# CHECK-NEXT: ascend.copy mte3 %t2_ub[{{.*}}] to %result[{{.*}}] sizes [256]
# CHECK-NEXT: ascend.set_flag v to mte2 event 0
# CHECK-NEXT: ascend.set_flag mte3 to v event 0
# CHECK-NEXT: }
# CHECK-NEXT: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.wait_flag mte3 to v event 0
# CHECK-NEXT: scf.for
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [232]
# CHECK-NEXT: ascend.copy mte2 %y[{{.*}}] to %y_ub[{{.*}}] sizes [232]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK: ascend.vexp %t0_ub[{{.*}}], %x_ub[{{.*}}] :
# CHECK-NEXT: ascend.vexp %t0_ub[{{.*}}], %x_ub[{{.*}}] mask 104 :
# CHECK: ascend.vadds %t2_ub[{{.*}}], %t1_ub[{{.*}}], %{{.*}} mask 104 :
# CHECK: ascend.copy mte3 %t2_ub[{{.*}}] to %result[{{.*}}] sizes [232]

# exp(-2) * 0.5 + 3 = 3.068, exp(2) * 0.5 + 3 = 6.695 (the last element)
# OUT: result 0: tensor<10x100xf16> = {{\[\[}}3.068, 3.068,
# OUT: 6.695]]
# OUT: cycles: {{[0-9]+}} (910B, block_dim 2,
