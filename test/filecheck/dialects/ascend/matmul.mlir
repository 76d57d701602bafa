// A hand-written matmul, c = a @ b: f16 in, f32 accumulation in L0C; each of
// the 2 cores computes 64 rows, looping over K in 64-deep tiles through one
// L1 and one L0 buffer per operand, so that the loop's back edge needs the
// write-after-read flags mte1 -> mte2 (L1 free again) and m -> mte1 (L0 free
// again), set once before the loop and drained after it. 910B drains L0C to
// GM on FixPipe; 910A has no FixPipe: L0C goes to UB on the vector pipe and
// out on MTE3. test/unit/test_ascend_emulator.py checks the values against
// NumPy.

// RUN: %python -c "import numpy as np; r = np.random.default_rng(0); np.save('%t.a.npy', r.uniform(-1, 1, (128, 128)).astype(np.float16)); np.save('%t.b.npy', r.uniform(-1, 1, (128, 64)).astype(np.float16))"
// RUN: msir-run %s --target ascend --entry matmul_910b --input @%t.a.npy --input @%t.b.npy | filecheck %s --check-prefix=B
// RUN: msir-run %s --target ascend --entry matmul_910a --input @%t.a.npy --input @%t.b.npy | filecheck %s --check-prefix=A

// B: result 0: tensor<128x64xf32> = {{\[\[}}
// B: cycles: {{[0-9]+}} (910B, block_dim 2, {{[0-9]+}} instructions per core at most)
// B: pipe fix
// B: critical pipe: mte2

// A: result 0: tensor<128x64xf32> = {{\[\[}}
// A: cycles: {{[0-9]+}} (910A, block_dim 2,
// A-NOT: pipe fix
// A: pipe v
// A: critical pipe: mte2

ascend.kernel @matmul_910b #ascend.target<"910B"> block_dim 2 ins(%a : !ascend.buf<gm, 128x128xf16>, %b : !ascend.buf<gm, 128x64xf16>) outs(%c : !ascend.buf<gm, 128x64xf32>) {
  %blk = ascend.block_idx : index
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %row = arith.muli %blk, %c64 : index
  %a_l1 = ascend.alloc at 0 : !ascend.buf<l1, 64x64xf16, zN>
  %b_l1 = ascend.alloc at 8192 : !ascend.buf<l1, 64x64xf16, zN>
  %a_l0 = ascend.alloc at 0 : !ascend.buf<l0a, 64x64xf16, zZ>
  %b_l0 = ascend.alloc at 0 : !ascend.buf<l0b, 64x64xf16, nZ>
  %acc = ascend.alloc at 0 : !ascend.buf<l0c, 64x64xf32, zN>
  ascend.set_flag mte1 to mte2 event 0
  ascend.set_flag m to mte1 event 0
  scf.for %k = %c0 to %c128 step %c64 {
    ascend.wait_flag mte1 to mte2 event 0
    ascend.copy mte2 %a[%row, %k] to %a_l1[%c0, %c0] sizes [64, 64] : !ascend.buf<gm, 128x128xf16> to !ascend.buf<l1, 64x64xf16, zN>
    ascend.copy mte2 %b[%k, %c0] to %b_l1[%c0, %c0] sizes [64, 64] : !ascend.buf<gm, 128x64xf16> to !ascend.buf<l1, 64x64xf16, zN>
    ascend.set_flag mte2 to mte1 event 0
    ascend.wait_flag mte2 to mte1 event 0
    ascend.wait_flag m to mte1 event 0
    ascend.copy mte1 %a_l1[%c0, %c0] to %a_l0[%c0, %c0] sizes [64, 64] : !ascend.buf<l1, 64x64xf16, zN> to !ascend.buf<l0a, 64x64xf16, zZ>
    ascend.copy mte1 %b_l1[%c0, %c0] to %b_l0[%c0, %c0] sizes [64, 64] : !ascend.buf<l1, 64x64xf16, zN> to !ascend.buf<l0b, 64x64xf16, nZ>
    ascend.set_flag mte1 to mte2 event 0
    ascend.set_flag mte1 to m event 0
    ascend.wait_flag mte1 to m event 0
    %first = arith.cmpi eq, %k, %c0 : index
    scf.if %first {
      ascend.mmad %acc, %a_l0, %b_l0 m 64 n 64 k 64 init : !ascend.buf<l0c, 64x64xf32, zN>, !ascend.buf<l0a, 64x64xf16, zZ>, !ascend.buf<l0b, 64x64xf16, nZ>
    } else {
      ascend.mmad %acc, %a_l0, %b_l0 m 64 n 64 k 64 : !ascend.buf<l0c, 64x64xf32, zN>, !ascend.buf<l0a, 64x64xf16, zZ>, !ascend.buf<l0b, 64x64xf16, nZ>
    }
    ascend.set_flag m to mte1 event 0
  }
  ascend.wait_flag mte1 to mte2 event 0
  ascend.wait_flag m to mte1 event 0
  ascend.set_flag m to fix event 0
  ascend.wait_flag m to fix event 0
  ascend.copy fix %acc[%c0, %c0] to %c[%row, %c0] sizes [64, 64] : !ascend.buf<l0c, 64x64xf32, zN> to !ascend.buf<gm, 128x64xf32>
}

ascend.kernel @matmul_910a #ascend.target<"910A"> block_dim 2 ins(%a : !ascend.buf<gm, 128x128xf16>, %b : !ascend.buf<gm, 128x64xf16>) outs(%c : !ascend.buf<gm, 128x64xf32>) {
  %blk = ascend.block_idx : index
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %row = arith.muli %blk, %c64 : index
  %a_l1 = ascend.alloc at 0 : !ascend.buf<l1, 64x64xf16, zN>
  %b_l1 = ascend.alloc at 8192 : !ascend.buf<l1, 64x64xf16, zN>
  %a_l0 = ascend.alloc at 0 : !ascend.buf<l0a, 64x64xf16, zZ>
  %b_l0 = ascend.alloc at 0 : !ascend.buf<l0b, 64x64xf16, nZ>
  %acc = ascend.alloc at 0 : !ascend.buf<l0c, 64x64xf32, zN>
  ascend.set_flag mte1 to mte2 event 0
  ascend.set_flag m to mte1 event 0
  scf.for %k = %c0 to %c128 step %c64 {
    ascend.wait_flag mte1 to mte2 event 0
    ascend.copy mte2 %a[%row, %k] to %a_l1[%c0, %c0] sizes [64, 64] : !ascend.buf<gm, 128x128xf16> to !ascend.buf<l1, 64x64xf16, zN>
    ascend.copy mte2 %b[%k, %c0] to %b_l1[%c0, %c0] sizes [64, 64] : !ascend.buf<gm, 128x64xf16> to !ascend.buf<l1, 64x64xf16, zN>
    ascend.set_flag mte2 to mte1 event 0
    ascend.wait_flag mte2 to mte1 event 0
    ascend.wait_flag m to mte1 event 0
    ascend.copy mte1 %a_l1[%c0, %c0] to %a_l0[%c0, %c0] sizes [64, 64] : !ascend.buf<l1, 64x64xf16, zN> to !ascend.buf<l0a, 64x64xf16, zZ>
    ascend.copy mte1 %b_l1[%c0, %c0] to %b_l0[%c0, %c0] sizes [64, 64] : !ascend.buf<l1, 64x64xf16, zN> to !ascend.buf<l0b, 64x64xf16, nZ>
    ascend.set_flag mte1 to mte2 event 0
    ascend.set_flag mte1 to m event 0
    ascend.wait_flag mte1 to m event 0
    %first = arith.cmpi eq, %k, %c0 : index
    scf.if %first {
      ascend.mmad %acc, %a_l0, %b_l0 m 64 n 64 k 64 init : !ascend.buf<l0c, 64x64xf32, zN>, !ascend.buf<l0a, 64x64xf16, zZ>, !ascend.buf<l0b, 64x64xf16, nZ>
    } else {
      ascend.mmad %acc, %a_l0, %b_l0 m 64 n 64 k 64 : !ascend.buf<l0c, 64x64xf32, zN>, !ascend.buf<l0a, 64x64xf16, zZ>, !ascend.buf<l0b, 64x64xf16, nZ>
    }
    ascend.set_flag m to mte1 event 0
  }
  ascend.wait_flag mte1 to mte2 event 0
  ascend.wait_flag m to mte1 event 0
  %c_ub = ascend.alloc at 0 : !ascend.buf<ub, 64x64xf32, zN>
  ascend.set_flag m to v event 0
  ascend.wait_flag m to v event 0
  ascend.copy v %acc[%c0, %c0] to %c_ub[%c0, %c0] sizes [64, 64] : !ascend.buf<l0c, 64x64xf32, zN> to !ascend.buf<ub, 64x64xf32, zN>
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %c_ub[%c0, %c0] to %c[%row, %c0] sizes [64, 64] : !ascend.buf<ub, 64x64xf32, zN> to !ascend.buf<gm, 128x64xf32>
}
