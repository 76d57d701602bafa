# RUN: msir-opt %s --entry dense --args 'tensor<4x70xf32>,tensor<70x8xf32>' -p 'convert-msir-to-ascend{matmul_buffers=1}' > %t.a.mlir
# RUN: filecheck %s < %t.a.mlir
# RUN: msir-opt %s --entry dense --args 'tensor<4x70xf32>,tensor<70x8xf32>' -p 'convert-msir-to-ascend{chip="910B" matmul_buffers=1}' | filecheck %s --check-prefix=B
# RUN: %python -c "import numpy as np; np.save('%t.x.npy', np.ones((4, 70), np.float32)); np.save('%t.w.npy', np.full((70, 8), 0.5, np.float32))"
# RUN: msir-run %t.a.mlir --target ascend --entry dense --input @%t.x.npy --input @%t.w.npy | filecheck %s --check-prefix=OUT

# K = 70 is not a multiple of the cube's fractal depth 16 (single-buffered,
# matmul_buffers=1, so one step of K): the L1 tiles'
# last fractal of K (columns 64..79 of A, rows 64..79 of B) is set to zero on
# MTE2 (init_const, Ascend C's InitConstValue) before the load writes the 70
# valid columns / rows over part of it, in MTE2's order, so one flag orders
# both before the L1 -> L0 copies of 80; the cube multiplies k = 80.

def dense(x, w):
    return x @ w

# CHECK: %[[ZERO:[0-9]+]] = arith.constant 0.000000e+00 : f16
# CHECK: scf.for
# CHECK-NEXT: arith.divui
# CHECK: ascend.init_const %a_l1[%{{[0-9]+}}, %[[C64:[0-9]+]]] sizes [16, 16], %[[ZERO]] : !ascend.buf<l1, 16x80xf16, zN>, f16
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %a_l1[{{.*}}] sizes [4, 70]
# CHECK-NEXT: ascend.init_const %b_l1[%[[C64]], %{{[0-9]+}}] sizes [16, 16], %[[ZERO]] : !ascend.buf<l1, 80x16xf16, zN>, f16
# CHECK-NEXT: ascend.copy mte2 %w[{{.*}}] to %b_l1[{{.*}}] sizes [70, 8]
# CHECK-NEXT: ascend.set_flag mte2 to mte1 event 0
# CHECK-NEXT: ascend.wait_flag mte2 to mte1 event 0
# CHECK-NEXT: ascend.copy mte1 %a_l1[{{.*}}] to %a_l0[{{.*}}] sizes [16, 80]
# CHECK-NEXT: ascend.copy mte1 %b_l1[{{.*}}] to %b_l0[{{.*}}] sizes [80, 16]
# CHECK-NEXT: ascend.set_flag mte1 to m event 0
# CHECK-NEXT: ascend.wait_flag mte1 to m event 0
# CHECK-NEXT: ascend.mmad %acc, %a_l0, %b_l0 m 4 n 8 k 80 init

# B: ascend.init_const %a_l1
# B: ascend.mmad %acc, %a_l0, %b_l0 m 4 n 8 k 80 init
# B-NEXT: ascend.set_flag m to fix event 0

# 70 x 0.5 = 35: the padding adds nothing
# OUT: result 0: tensor<4x8xf32> = {{\[\[}}35., 35., 35., 35., 35., 35., 35., 35.],
# OUT: cycles: {{[0-9]+}} (910A, block_dim 1,
