# RUN: msir-opt %s --entry scale_shift --args 'tensor<8x96xf16>,tensor<8x96xf16>' -p 'convert-msir-to-ascend{chip="910A" tile_elements=128 max_block_dim=1}' > %t.mlir
# RUN: filecheck %s < %t.mlir
# RUN: msir-opt %s --entry scale_shift --args 'tensor<8x96xf16>,tensor<8x96xf16>' -p 'convert-msir-to-ascend{chip="910A" tile_elements=128 max_block_dim=1 elementwise_buffers=1}' | filecheck %s --check-prefix=SINGLE
# RUN: %python -c "import numpy as np; np.save('%t.x.npy', np.linspace(-2, 2, 768).reshape(8, 96).astype(np.float16)); np.save('%t.y.npy', np.full((8, 96), 0.5, np.float16))"
# RUN: msir-run %t.mlir --target ascend --entry scale_shift --input @%t.x.npy --input @%t.y.npy | filecheck %s --check-prefix=OUT

# A double-buffered elementwise chain: 768 f16 elements in 6 tiles of 128 on
# one core, tile j on UB buffer set j % 2 (ping: %x_ub ..., pong: %x_ub_pong
# ...). Group g is the load of tile g, the compute of tile g - 1 and the
# store of tile g - 2: groups 0 and 1 are peeled, a loop runs groups 2..5
# two per trip, groups 6 and 7 (the last compute and the last two stores)
# follow. Each set_flag comes directly after its producer (early sets) and
# each consumer has its own pair: a compute waits only for its own tile's
# loads, a load only for the compute that last read its set's inputs
# (v -> mte2 after the vmul, the last reader of %y_ub), a compute's last
# step only for the store that last read its set's result (mte3 -> v).
# Across the loop's back edge one flag per pair of pipes, set before the
# loop and waited after it.

import numpy as np


def scale_shift(x, y):
    return np.exp(x) * y + 3.0

# CHECK: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 128xf16>
# CHECK: %t2_ub = ascend.alloc at 1024 : !ascend.buf<ub, 128xf16>
# CHECK-NEXT: %x_ub_pong = ascend.alloc at 1280 : !ascend.buf<ub, 128xf16>
# CHECK: %t2_ub_pong = ascend.alloc at 2304 : !ascend.buf<ub, 128xf16>

# group 0: tile 0's loads; group 1: tile 1's loads, then tile 0's compute
# CHECK: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.copy mte2 %y[{{.*}}] to %y_ub[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.set_flag mte2 to v event 1
# CHECK: ascend.copy mte2 %x[{{.*}}] to %x_ub_pong[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.copy mte2 %y[{{.*}}] to %y_ub_pong[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vexp %t0_ub[{{.*}}], %x_ub[{{.*}}] :
# CHECK-NEXT: ascend.wait_flag mte2 to v event 1
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %t1_ub[{{.*}}], %t0_ub[{{.*}}], %y_ub[{{.*}}] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadds %t2_ub[{{.*}}], %t1_ub[{{.*}}], %{{.*}} :
# CHECK-NEXT: ascend.set_flag v to mte2 event 0
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.set_flag v to mte3 event 0
# CHECK-NEXT: ascend.set_flag mte3 to v event 0
# CHECK-NEXT: scf.for

# group 2 (ping loads, pong compute, ping store)
# CHECK: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.set_flag mte2 to v event 1
# CHECK-NEXT: ascend.copy mte2 %y[{{.*}}] to %y_ub[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.set_flag mte2 to v event 2
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vexp %t0_ub_pong[{{.*}}], %x_ub_pong[{{.*}}] :
# CHECK-NEXT: ascend.set_flag v to mte2 event 1
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %t1_ub_pong[{{.*}}], %t0_ub_pong[{{.*}}], %y_ub_pong[{{.*}}] :
# CHECK-NEXT: ascend.set_flag v to mte2 event 2
# CHECK-NEXT: ascend.wait_flag mte3 to v event 0
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadds %t2_ub_pong[{{.*}}], %t1_ub_pong[{{.*}}], %{{.*}} :
# CHECK-NEXT: ascend.set_flag v to mte3 event 1
# CHECK-NEXT: ascend.wait_flag v to mte3 event 0
# CHECK-NEXT: ascend.copy mte3 %t2_ub[{{.*}}] to %result[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.set_flag mte3 to v event 1

# group 3 (pong loads, ping compute, pong store)
# CHECK: ascend.wait_flag v to mte2 event 1
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub_pong[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.wait_flag v to mte2 event 2
# CHECK-NEXT: ascend.copy mte2 %y[{{.*}}] to %y_ub_pong[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 1
# CHECK-NEXT: ascend.vexp %t0_ub[{{.*}}], %x_ub[{{.*}}] :
# CHECK-NEXT: ascend.wait_flag mte2 to v event 2
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %t1_ub[{{.*}}], %t0_ub[{{.*}}], %y_ub[{{.*}}] :
# CHECK-NEXT: ascend.set_flag v to mte2 event 0
# CHECK-NEXT: ascend.wait_flag mte3 to v event 1
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vadds %t2_ub[{{.*}}], %t1_ub[{{.*}}], %{{.*}} :
# CHECK-NEXT: ascend.set_flag v to mte3 event 0
# CHECK: ascend.wait_flag v to mte3 event 1
# CHECK-NEXT: ascend.copy mte3 %t2_ub_pong[{{.*}}] to %result[{{.*}}] sizes [128]
# CHECK-NEXT: ascend.set_flag mte3 to v event 0
# CHECK-NEXT: }
# CHECK-NEXT: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag v to mte3 event 0
# CHECK-NEXT: ascend.wait_flag mte3 to v event 0

# groups 6 and 7: tile 5's compute, the stores of tiles 4 and 5; the pair
# after the loop does not take event 0, the id of the loop's v -> mte3
# back-edge flag (V may set it again before MTE3's post-loop wait took it)
# CHECK-NEXT: ascend.vexp %t0_ub_pong[{{.*}}], %x_ub_pong[{{.*}}] :
# CHECK: ascend.vadds %t2_ub_pong[{{.*}}], %t1_ub_pong[{{.*}}], %{{.*}} :
# CHECK-NEXT: ascend.set_flag v to mte3 event 1
# CHECK: ascend.copy mte3 %t2_ub[{{.*}}] to %result[{{.*}}] sizes [128]
# CHECK: ascend.wait_flag v to mte3 event 1
# CHECK-NEXT: ascend.copy mte3 %t2_ub_pong[{{.*}}] to %result[{{.*}}] sizes [128]
# CHECK-NEXT: }

# elementwise_buffers=1: one buffer set, the tiles round-robin
# SINGLE-NOT: _pong
# SINGLE: scf.for
# SINGLE-NOT: _pong

# exp(-2) * 0.5 + 3 = 3.068, exp(2) * 0.5 + 3 = 6.695 (the last element)
# OUT: result 0: tensor<8x96xf16> = {{\[\[}}3.068, 3.068,
# OUT: 6.695]]
# OUT: cycles: {{[0-9]+}} (910A, block_dim 1,
