# RUN: msir-opt %s --entry softmax --args 'tensor<4x100xf16>' -p 'convert-msir-to-ascend{chip="910A" max_block_dim=2}' > %t.mlir
# RUN: filecheck %s < %t.mlir
# RUN: %python -c "import numpy as np; x = np.tile(np.log(np.arange(1, 101)), (4, 1)); x[1] = 0; x[2, 7] = 30; np.save('%t.x.npy', x.astype(np.float16))"
# RUN: msir-run %t.mlir --target ascend --entry softmax --input @%t.x.npy | filecheck %s --check-prefix=OUT

# ops.softmax of 4 rows of 100 f16 as one kernel on 2 cores, 2 rows a tile,
# in f32. Rows are padded with -inf to 128 (once, before the loop). The
# rows' maxima: vcmax to 2 partials a row (8 apart), then one masked repeat
# a row; vbrcb makes each maximum a block, which vsub reads with block and
# repeat strides 0; exp over the tile (the padding becomes 0); the sums as
# the maxima; vrec of the sums, vbrcb, vmul; back to f16. Every step reads
# the last one's result on V: a barrier between each.

from msir import ops


def softmax(x):
    return ops.softmax(x)

# CHECK: ascend.kernel @softmax #ascend.target<"910A"> block_dim 2 ins(%x: !ascend.buf<gm, 4x100xf16>) outs(%result: !ascend.buf<gm, 4x100xf16>)
# CHECK: %x_ub = ascend.alloc at 0 : !ascend.buf<ub, 2x128xf16>
# CHECK-NEXT: %e_ub = ascend.alloc at 512 : !ascend.buf<ub, 2x128xf32>
# CHECK-NEXT: %out_ub = ascend.alloc at 1536 : !ascend.buf<ub, 2x128xf16>
# CHECK-NEXT: %partial0_ub = ascend.alloc at 2048 : !ascend.buf<ub, 16xf32>
# CHECK-NEXT: %acc_ub = ascend.alloc at 2112 : !ascend.buf<ub, 16xf32>
# CHECK-NEXT: %row_blocks_ub = ascend.alloc at 2176 : !ascend.buf<ub, 128xf32>
# CHECK: %[[NEGINF:.*]] = arith.constant 0xfc00 : f16
# CHECK: ascend.vdup %x_ub[{{.*}}], %[[NEGINF]] repeat 2 :
# CHECK-NEXT: scf.for
# CHECK: ascend.set_flag v to mte2 event 0
# CHECK-NEXT: ascend.wait_flag v to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %x_ub[{{.*}}] sizes [2, 100]
# CHECK-NEXT: ascend.set_flag mte2 to v event 0
# CHECK-NEXT: ascend.wait_flag mte2 to v event 0
# CHECK-NEXT: ascend.vconv %e_ub[{{.*}}], %x_ub[{{.*}}] repeat 4 rep_stride [8, 4] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %e_ub[{{.*}}] repeat 2 :
# CHECK-NEXT: ascend.vcmax %partial0_ub[{{.*}}], %e_ub[{{.*}}] repeat 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcmax %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 2 repeat 2 rep_stride [8, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vbrcb %row_blocks_ub[{{.*}}], %acc_ub[{{.*}}] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vsub %e_ub[{{.*}}], %e_ub[{{.*}}], %row_blocks_ub[{{.*}}] repeat 2 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.vsub %e_ub[{{.*}}], %e_ub[{{.*}}], %row_blocks_ub[{{.*}}] repeat 2 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vexp %e_ub[{{.*}}], %e_ub[{{.*}}] repeat 4 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %partial0_ub[{{.*}}], %e_ub[{{.*}}] repeat 2 :
# CHECK-NEXT: ascend.vcadd %partial0_ub[{{.*}}], %e_ub[{{.*}}] repeat 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vcadd %acc_ub[{{.*}}], %partial0_ub[{{.*}}] mask 2 repeat 2 rep_stride [8, 1] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vrec %acc_ub[{{.*}}], %acc_ub[{{.*}}] mask 2 :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vbrcb %row_blocks_ub[{{.*}}], %acc_ub[{{.*}}] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vmul %e_ub[{{.*}}], %e_ub[{{.*}}], %row_blocks_ub[{{.*}}] repeat 2 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.vmul %e_ub[{{.*}}], %e_ub[{{.*}}], %row_blocks_ub[{{.*}}] repeat 2 blk_stride [1, 1, 0] rep_stride [8, 8, 0] :
# CHECK-NEXT: ascend.pipe_barrier v
# CHECK-NEXT: ascend.vconv %out_ub[{{.*}}], %e_ub[{{.*}}] repeat 4 rep_stride [4, 8] :
# CHECK-NEXT: ascend.set_flag v to mte3 event 0
# CHECK-NEXT: ascend.wait_flag v to mte3 event 0
# CHECK-NEXT: ascend.copy mte3 %out_ub[{{.*}}] to %result[{{.*}}] sizes [2, 100]
# CHECK-NEXT: }

# row 0: softmax(log(i)) = i / 5050; row 1 uniform: 0.01 in f16; row 2 one-hot
# OUT: result 0: tensor<4x100xf16> = {{\[\[}}1.9801e-04, 3.9625e-04, 5.9414e-04,
# OUT: 1.9806e-02],
# OUT-NEXT: [1.0002e-02, 1.0002e-02,
# OUT: [0.0000e+00, 0.0000e+00, 0.0000e+00, 0.0000e+00, 0.0000e+00, 0.0000e+00, 0.0000e+00, 1.0000e+00, 0.0000e+00,
# OUT: cycles: {{[0-9]+}} (910A, block_dim 2,
