# RUN: msir-opt %s --entry dense --args 'tensor<300x64xf32>,tensor<64x40xf32>' -p 'convert-msir-to-ascend{chip="910B" matmul_buffers=1}' > %t.b.mlir
# RUN: filecheck %s --check-prefix=B < %t.b.mlir
# RUN: msir-opt %s --entry dense --args 'tensor<300x64xf32>,tensor<64x40xf32>' -p 'convert-msir-to-ascend{chip="910A" matmul_buffers=1}' > %t.a.mlir
# RUN: filecheck %s --check-prefix=A < %t.a.mlir
# RUN: %python -c "import numpy as np; r = np.random.default_rng(0); np.save('%t.x.npy', r.uniform(-1, 1, (300, 64)).astype(np.float32)); np.save('%t.w.npy', r.uniform(-1, 1, (64, 40)).astype(np.float32))"
# RUN: msir-run %t.b.mlir --target ascend --entry dense --input @%t.x.npy --input @%t.w.npy | filecheck %s --check-prefix=RUN-B
# RUN: msir-run %t.a.mlir --target ascend --entry dense --input @%t.x.npy --input @%t.w.npy | filecheck %s --check-prefix=RUN-A

# A single-buffered (matmul_buffers=1) matmul of f32 operands: the kernel
# takes them as f16 (allow_fp32_to_fp16)
# and returns the f32 accumulator. The tiler spreads 16-row tiles over 18
# cores; 300 rows leave a 12-row edge tile, whose loop runs after the full
# tiles' on core 0 (every loop over tiles starts there). Data moves GM -> L1 (nd2nz) on MTE2, L1 -> L0A / L0B on
# MTE1, the cube multiplies, and the result leaves L0C on FixPipe (910B) or
# through UB (V, then MTE3, 910A). Each hand-over between pipes is one flag
# pair; the edge tile's loop also waits for the full tiles to be done with
# the buffers it reuses (write-after-read: L1 by MTE1, L0 by the cube, L0C by
# FixPipe or V, UB by MTE3).

def dense(x, w):
    return x @ w

# B: ascend.kernel @dense #ascend.target<"910B"> block_dim 18 ins(%x: !ascend.buf<gm, 300x64xf16>, %w: !ascend.buf<gm, 64x40xf16>) outs(%result: !ascend.buf<gm, 300x40xf32>) attributes {msir.host_casts = ["f32", "f32"], msir.result_shapes = {{\[\[}}#builtin.int<300>, #builtin.int<40>]]}
# B: %a_l1 = ascend.alloc at 0 : !ascend.buf<l1, 16x64xf16, zN>
# B: %b_l1 = ascend.alloc at 2048 : !ascend.buf<l1, 64x48xf16, zN>
# B: %a_l0 = ascend.alloc at 0 : !ascend.buf<l0a, 16x64xf16, zZ>
# B: %b_l0 = ascend.alloc at 0 : !ascend.buf<l0b, 64x48xf16, nZ>
# B: %acc = ascend.alloc at 0 : !ascend.buf<l0c, 16x48xf32, zN>
# B-NOT: flag
# B: scf.for
# B-NOT: flag
# B: ascend.copy mte2 %x[{{.*}}] to %a_l1[{{.*}}] sizes [16, 64]
# B-NEXT: ascend.copy mte2 %w[{{.*}}] to %b_l1[{{.*}}] sizes [64, 40]
# B-NEXT: ascend.set_flag mte2 to mte1 event 0
# B-NEXT: ascend.wait_flag mte2 to mte1 event 0
# B-NEXT: ascend.copy mte1 %a_l1[{{.*}}] to %a_l0[{{.*}}] sizes [16, 64]
# B-NEXT: ascend.copy mte1 %b_l1[{{.*}}] to %b_l0[{{.*}}] sizes [64, 48]
# B-NEXT: ascend.set_flag mte1 to m event 0
# B-NEXT: ascend.wait_flag mte1 to m event 0
# B-NEXT: ascend.mmad %acc, %a_l0, %b_l0 m 16 n 40 k 64 init
# B-NEXT: ascend.set_flag m to fix event 0
# B-NEXT: ascend.wait_flag m to fix event 0
# B-NEXT: ascend.copy fix %acc[{{.*}}] to %result[{{.*}}] sizes [16, 40]
# B-NEXT: }
# B: scf.for
# B-NOT: ascend.copy
# B: ascend.set_flag mte1 to mte2 event 0
# B-NEXT: ascend.wait_flag mte1 to mte2 event 0
# B-NEXT: ascend.copy mte2 %x[{{.*}}] to %a_l1[{{.*}}] sizes [12, 64]
# B-NEXT: ascend.copy mte2 %w[{{.*}}] to %b_l1[{{.*}}] sizes [64, 40]
# B-NEXT: ascend.set_flag m to mte1 event 0
# B-NEXT: ascend.wait_flag m to mte1 event 0
# B-NEXT: ascend.set_flag mte2 to mte1 event 0
# B-NEXT: ascend.wait_flag mte2 to mte1 event 0
# B-NEXT: ascend.copy mte1 %a_l1[{{.*}}] to %a_l0[{{.*}}] sizes [16, 64]
# B-NEXT: ascend.copy mte1 %b_l1[{{.*}}] to %b_l0[{{.*}}] sizes [64, 48]
# B-NEXT: ascend.set_flag mte1 to m event 0
# B-NEXT: ascend.wait_flag mte1 to m event 0
# B-NEXT: ascend.set_flag fix to m event 0
# B-NEXT: ascend.wait_flag fix to m event 0
# B-NEXT: ascend.mmad %acc, %a_l0, %b_l0 m 12 n 40 k 64 init
# B-NEXT: ascend.set_flag m to fix event 0
# B-NEXT: ascend.wait_flag m to fix event 0
# B-NEXT: ascend.copy fix %acc[{{.*}}] to %result[{{.*}}] sizes [12, 40]
# B-NEXT: }

# A: ascend.kernel @dense #ascend.target<"910A"> block_dim 18
# A: %c_ub = ascend.alloc at 0 : !ascend.buf<ub, 16x48xf32, zN>
# A-NOT: fix
# A: ascend.mmad %acc, %a_l0, %b_l0 m 16 n 40 k 64 init
# A-NEXT: ascend.set_flag m to v event 0
# A-NEXT: ascend.wait_flag m to v event 0
# A-NEXT: ascend.copy v %acc[{{.*}}] to %c_ub[{{.*}}] sizes [16, 48]
# A-NEXT: ascend.set_flag v to mte3 event 0
# A-NEXT: ascend.wait_flag v to mte3 event 0
# A-NEXT: ascend.copy mte3 %c_ub[{{.*}}] to %result[{{.*}}] sizes [16, 40]
# A: ascend.set_flag v to m event 0
# A-NEXT: ascend.wait_flag v to m event 0
# A-NEXT: ascend.set_flag mte1 to m event 0
# A-NEXT: ascend.wait_flag mte1 to m event 0
# A-NEXT: ascend.mmad %acc, %a_l0, %b_l0 m 12 n 40 k 64 init
# A-NEXT: ascend.set_flag m to v event 0
# A-NEXT: ascend.wait_flag m to v event 0
# A-NEXT: ascend.set_flag mte3 to v event 0
# A-NEXT: ascend.wait_flag mte3 to v event 0
# A-NEXT: ascend.copy v %acc[{{.*}}] to %c_ub[{{.*}}] sizes [16, 48]

# RUN-B: result 0: tensor<300x40xf32> = {{\[\[}}
# RUN-B: cycles: {{[0-9]+}} (910B, block_dim 18,
# RUN-B: pipe fix
# RUN-A: result 0: tensor<300x40xf32> = {{\[\[}}
# RUN-A: cycles: {{[0-9]+}} (910A, block_dim 18,
# RUN-A-NOT: pipe fix
