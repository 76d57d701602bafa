# RUN: msir-opt %s --entry dense --args 'tensor<64x400xf16>,tensor<400x64xf16>' -p 'convert-msir-to-ascend{chip="910B" max_block_dim=1}' > %t.b.mlir
# RUN: filecheck %s < %t.b.mlir
# RUN: msir-opt %s --entry dense --args 'tensor<64x400xf16>,tensor<400x64xf16>' -p 'convert-msir-to-ascend{chip="910A" max_block_dim=1}' | filecheck %s --check-prefix=A
# RUN: msir-opt %s --entry dense --args 'tensor<64x400xf16>,tensor<400x64xf16>' -p 'convert-msir-to-ascend{chip="910B" max_block_dim=1 matmul_buffers=1}' | filecheck %s --check-prefix=SINGLE
# RUN: %python -c "import numpy as np; r = np.random.default_rng(0); np.save('%t.x.npy', r.uniform(-1, 1, (64, 400)).astype(np.float16)); np.save('%t.w.npy', r.uniform(-1, 1, (400, 64)).astype(np.float16))"
# RUN: msir-run %t.b.mlir --target ascend --entry dense --input @%t.x.npy --input @%t.w.npy | filecheck %s --check-prefix=OUT
# RUN: msir-run %t.b.mlir --target ascend --entry dense --input @%t.x.npy --input @%t.w.npy --timeline | filecheck %s --check-prefix=TIMELINE
# RUN: not msir-run %t.b.mlir --entry dense --input @%t.x.npy --input @%t.w.npy --timeline 2>&1 | filecheck %s --check-prefix=NO-TIMELINE

# A matmul whose K = 400 runs in 9 steps of 48 (the last 16 deep) on
# ping-pong buffers in L1 and L0: step s uses buffer s % 2, and the loads of
# step s + 1 are issued before the compute (L1 -> L0, mmad) of step s. The
# first two steps' loads and step 0's compute are peeled (step 0 initialises
# L0C), a loop runs the full steps two at a time (ping loads, pong compute,
# pong loads, ping compute), and the last loads and the last two computes
# follow. Each set_flag comes directly after the producer its consumer waits
# for (early sets), so a load waits only for the copies out of its own
# buffer and MTE2 streams. Across the loop's back edge: the ping loads wait
# for the last iteration's copies out of the ping buffers (mte1 to mte2),
# the pong copies for the last iteration's pong loads (mte2 to mte1) and for
# the cube's reads of L0 (m to mte1); each flag is set before the loop and
# waited after it.

def dense(x, w):
    return x @ w

# CHECK: %a_l1 = ascend.alloc at 0 : !ascend.buf<l1, 64x48xf16, zN>
# CHECK-NEXT: %a_l1_pong = ascend.alloc at 6144 : !ascend.buf<l1, 64x48xf16, zN>
# CHECK-NEXT: %b_l1 = ascend.alloc at 12288 : !ascend.buf<l1, 48x64xf16, zN>
# CHECK-NEXT: %b_l1_pong = ascend.alloc at 18432 : !ascend.buf<l1, 48x64xf16, zN>
# CHECK-NEXT: %a_l0 = ascend.alloc at 0 : !ascend.buf<l0a, 64x48xf16, zZ>
# CHECK-NEXT: %a_l0_pong = ascend.alloc at 6144 : !ascend.buf<l0a, 64x48xf16, zZ>
# CHECK-NEXT: %b_l0 = ascend.alloc at 0 : !ascend.buf<l0b, 48x64xf16, nZ>
# CHECK-NEXT: %b_l0_pong = ascend.alloc at 6144 : !ascend.buf<l0b, 48x64xf16, nZ>

# the peeled steps: loads of steps 0 and 1, then step 0's compute; each
# L1 -> L0 copy waits for its own load only (a pair of flags each)
# CHECK: ascend.copy mte2 %x[{{.*}}] to %a_l1[{{.*}}] sizes [64, 48]
# CHECK-NEXT: ascend.set_flag mte2 to mte1 event 0
# CHECK-NEXT: ascend.copy mte2 %w[{{.*}}] to %b_l1[{{.*}}] sizes [48, 64]
# CHECK-NEXT: ascend.set_flag mte2 to mte1 event 1
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %a_l1_pong[{{.*}}] sizes [64, 48]
# CHECK-NEXT: ascend.copy mte2 %w[{{.*}}] to %b_l1_pong[{{.*}}] sizes [48, 64]
# CHECK-NEXT: ascend.wait_flag mte2 to mte1 event 0
# CHECK-NEXT: ascend.copy mte1 %a_l1[{{.*}}] to %a_l0[{{.*}}] sizes [64, 48]
# CHECK-NEXT: ascend.wait_flag mte2 to mte1 event 1
# CHECK-NEXT: ascend.copy mte1 %b_l1[{{.*}}] to %b_l0[{{.*}}] sizes [48, 64]
# CHECK-NEXT: ascend.set_flag mte1 to m event 0
# CHECK-NEXT: ascend.wait_flag mte1 to m event 0
# CHECK-NEXT: ascend.mmad %acc, %a_l0, %b_l0 m 64 n 64 k 48 init
# CHECK-NEXT: ascend.set_flag mte1 to mte2 event 0
# CHECK-NEXT: ascend.set_flag mte2 to mte1 event 0
# CHECK-NEXT: ascend.set_flag m to mte1 event 0

# the loop: two steps per trip, three trips
# CHECK-NEXT: scf.for
# CHECK-NEXT: ascend.wait_flag mte1 to mte2 event 0
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %a_l1[{{.*}}] sizes [64, 48]
# CHECK-NEXT: ascend.set_flag mte2 to mte1 event 1
# CHECK-NEXT: ascend.copy mte2 %w[{{.*}}] to %b_l1[{{.*}}] sizes [48, 64]
# CHECK-NEXT: ascend.set_flag mte2 to mte1 event 2
# CHECK-NEXT: ascend.wait_flag mte2 to mte1 event 0
# CHECK-NEXT: ascend.wait_flag m to mte1 event 0
# CHECK-NEXT: ascend.copy mte1 %a_l1_pong[{{.*}}] to %a_l0_pong[{{.*}}] sizes [64, 48]
# CHECK-NEXT: ascend.set_flag mte1 to mte2 event 1
# CHECK-NEXT: ascend.copy mte1 %b_l1_pong[{{.*}}] to %b_l0_pong[{{.*}}] sizes [48, 64]
# CHECK-NEXT: ascend.set_flag mte1 to mte2 event 2
# CHECK-NEXT: ascend.set_flag mte1 to m event 0
# CHECK-NEXT: ascend.wait_flag mte1 to m event 0
# CHECK-NEXT: ascend.mmad %acc, %a_l0_pong, %b_l0_pong m 64 n 64 k 48 :
# CHECK: ascend.wait_flag mte1 to mte2 event 1
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %a_l1_pong[{{.*}}] sizes [64, 48]
# CHECK-NEXT: ascend.wait_flag mte1 to mte2 event 2
# CHECK-NEXT: ascend.copy mte2 %w[{{.*}}] to %b_l1_pong[{{.*}}] sizes [48, 64]
# CHECK-NEXT: ascend.set_flag mte2 to mte1 event 0
# CHECK-NEXT: ascend.wait_flag mte2 to mte1 event 1
# CHECK-NEXT: ascend.copy mte1 %a_l1[{{.*}}] to %a_l0[{{.*}}] sizes [64, 48]
# CHECK-NEXT: ascend.wait_flag mte2 to mte1 event 2
# CHECK-NEXT: ascend.copy mte1 %b_l1[{{.*}}] to %b_l0[{{.*}}] sizes [48, 64]
# CHECK-NEXT: ascend.set_flag mte1 to mte2 event 0
# CHECK-NEXT: ascend.set_flag mte1 to m event 1
# CHECK-NEXT: ascend.wait_flag mte1 to m event 1
# CHECK-NEXT: ascend.mmad %acc, %a_l0, %b_l0 m 64 n 64 k 48 :
# CHECK-NEXT: ascend.set_flag m to mte1 event 0
# CHECK-NEXT: }
# CHECK-NEXT: ascend.wait_flag mte1 to mte2 event 0
# CHECK-NEXT: ascend.wait_flag mte2 to mte1 event 0
# CHECK-NEXT: ascend.wait_flag m to mte1 event 0

# the last step's loads (16 deep), then the last two computes
# CHECK-NEXT: ascend.copy mte2 %x[{{.*}}] to %a_l1[{{.*}}] sizes [64, 16]
# CHECK-NEXT: ascend.set_flag mte2 to mte1
# CHECK-NEXT: ascend.copy mte2 %w[{{.*}}] to %b_l1[{{.*}}] sizes [16, 64]
# CHECK: ascend.mmad %acc, %a_l0_pong, %b_l0_pong m 64 n 64 k 48 :
# CHECK: ascend.mmad %acc, %a_l0, %b_l0 m 64 n 64 k 16 :
# CHECK-NEXT: ascend.set_flag m to fix event 0
# CHECK-NEXT: ascend.wait_flag m to fix event 0
# CHECK-NEXT: ascend.copy fix %acc[{{.*}}] to %result[{{.*}}] sizes [64, 64]

# on the 910A the same K loop, the result out through UB in four bands of
# 16 rows: MTE3 copies a band to GM while V copies the next out of L0C,
# each band's pair of flags on the next event id
# A: %a_l1_pong = ascend.alloc
# A: ascend.mmad %acc, %a_l0, %b_l0 m 64 n 64 k 16 :
# A-NEXT: ascend.set_flag m to v event 0
# A-NEXT: ascend.wait_flag m to v event 0
# A-NEXT: ascend.copy v %acc[{{.*}}] to %c_ub[{{.*}}] sizes [16, 64]
# A-NEXT: ascend.set_flag v to mte3 event 0
# A-NEXT: ascend.wait_flag v to mte3 event 0
# A-NEXT: ascend.copy mte3 %c_ub[{{.*}}] to %result[{{.*}}] sizes [16, 64]
# A-NEXT: ascend.copy v %acc[{{.*}}] to %c_ub[{{.*}}] sizes [16, 64]
# A-NEXT: ascend.set_flag v to mte3 event 1
# A: ascend.copy mte3 %c_ub[{{.*}}] to %result[{{.*}}] sizes [16, 64]
# A: ascend.copy mte3 %c_ub[{{.*}}] to %result[{{.*}}] sizes [16, 64]
# A: ascend.copy mte3 %c_ub[{{.*}}] to %result[{{.*}}] sizes [16, 64]
# A-NOT: ascend.copy

# matmul_buffers=1: single buffers, set_flag directly before its wait
# SINGLE-NOT: _pong
# SINGLE: ascend.copy mte2 %w[{{.*}}] to %b_l1[{{.*}}]
# SINGLE-NEXT: ascend.set_flag mte2 to mte1 event 0
# SINGLE-NEXT: ascend.wait_flag mte2 to mte1 event 0
# SINGLE-NOT: _pong

# OUT: result 0: tensor<64x64xf16> = {{\[\[}}
# OUT: cycles: {{[0-9]+}} (910B, block_dim 1,

# --timeline: MTE2 busy in one interval from its first load to its last
# (double buffering); the cube once per step (the last two steps' merge),
# MTE1 copying A as soon as its
# load is in (before B's); FixPipe at the end
# TIMELINE: critical pipe: mte2
# TIMELINE-NEXT: timeline of the slowest core: [[CYCLES:[0-9]+]] cycles, {{[0-9]+}} per column
# TIMELINE-NEXT: mte2 |{{[+#]}}{{#+}}{{[+#]}}{{\.*}}|
# TIMELINE: mte2  busy {{[0-9]+-[0-9]+$}}
# TIMELINE-NEXT: m     busy {{([0-9]+-[0-9]+, ){7}[0-9]+-[0-9]+$}}
# TIMELINE-NEXT: mte1  busy {{.*}} ({{[0-9]+}} intervals)
# TIMELINE-NEXT: fix   busy {{[0-9]+-[0-9]+$}}
# NO-TIMELINE: msir-run: error: --timeline shows the emulator's pipes: it needs --target ascend
