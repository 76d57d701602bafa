// RUN: msir-opt %s | filecheck %s
// RUN: msir-opt %s | msir-opt | filecheck %s

// Every op of the ascend dialect, printed back as written.

// CHECK:      ascend.kernel @cube #ascend.target<"910B"> block_dim 4 ins(%a: !ascend.buf<gm, 64x64xf16>, %b: !ascend.buf<gm, 64x64xf16>) outs(%c: !ascend.buf<gm, 64x64xf32>) {
// CHECK-NEXT:   %i = ascend.block_idx : index
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   %a_l1 = ascend.alloc at 0 : !ascend.buf<l1, 64x64xf16, zN>
// CHECK-NEXT:   %b_l1 = ascend.alloc at 8192 : !ascend.buf<l1, 64x64xf16, zN>
// CHECK-NEXT:   %a_l0 = ascend.alloc at 0 : !ascend.buf<l0a, 64x64xf16, zZ>
// CHECK-NEXT:   %b_l0 = ascend.alloc at 0 : !ascend.buf<l0b, 64x64xf16, nZ>
// CHECK-NEXT:   %c_l0 = ascend.alloc at 0 : !ascend.buf<l0c, 64x64xf32, zN>
// CHECK-NEXT:   ascend.copy mte2 %a[%c0, %c0] to %a_l1[%c0, %c0] sizes [64, 64] : !ascend.buf<gm, 64x64xf16> to !ascend.buf<l1, 64x64xf16, zN>
// CHECK-NEXT:   ascend.copy mte2 %b[%c0, %c0] to %b_l1[%c0, %c0] sizes [64, 64] : !ascend.buf<gm, 64x64xf16> to !ascend.buf<l1, 64x64xf16, zN>
// CHECK-NEXT:   ascend.set_flag mte2 to mte1 event 0
// CHECK-NEXT:   ascend.wait_flag mte2 to mte1 event 0
// CHECK-NEXT:   ascend.copy mte1 %a_l1[%c0, %c0] to %a_l0[%c0, %c0] sizes [64, 64] : !ascend.buf<l1, 64x64xf16, zN> to !ascend.buf<l0a, 64x64xf16, zZ>
// CHECK-NEXT:   ascend.copy mte1 %b_l1[%c0, %c0] to %b_l0[%c0, %c0] sizes [64, 64] transpose : !ascend.buf<l1, 64x64xf16, zN> to !ascend.buf<l0b, 64x64xf16, nZ>
// CHECK-NEXT:   ascend.set_flag mte1 to m event 0
// CHECK-NEXT:   ascend.wait_flag mte1 to m event 0
// CHECK-NEXT:   ascend.mmad %c_l0, %a_l0, %b_l0 m 64 n 64 k 64 init : !ascend.buf<l0c, 64x64xf32, zN>, !ascend.buf<l0a, 64x64xf16, zZ>, !ascend.buf<l0b, 64x64xf16, nZ>
// CHECK-NEXT:   ascend.mmad %c_l0, %a_l0, %b_l0 m 50 n 33 k 32 : !ascend.buf<l0c, 64x64xf32, zN>, !ascend.buf<l0a, 64x64xf16, zZ>, !ascend.buf<l0b, 64x64xf16, nZ>
// CHECK-NEXT:   ascend.set_flag m to fix event 0
// CHECK-NEXT:   ascend.wait_flag m to fix event 0
// CHECK-NEXT:   ascend.copy fix %c_l0[%c0, %c0] to %c[%c0, %c0] sizes [64, 64] : !ascend.buf<l0c, 64x64xf32, zN> to !ascend.buf<gm, 64x64xf32>
// CHECK-NEXT:   ascend.pipe_barrier all
// CHECK-NEXT: }
ascend.kernel @cube #ascend.target<"910B"> block_dim 4 ins(%a: !ascend.buf<gm, 64x64xf16>, %b: !ascend.buf<gm, 64x64xf16>) outs(%c: !ascend.buf<gm, 64x64xf32>) {
  %i = ascend.block_idx : index
  %c0 = arith.constant 0 : index
  %a_l1 = ascend.alloc at 0 : !ascend.buf<l1, 64x64xf16, zN>
  %b_l1 = ascend.alloc at 8192 : !ascend.buf<l1, 64x64xf16, zN>
  %a_l0 = ascend.alloc at 0 : !ascend.buf<l0a, 64x64xf16, zZ>
  %b_l0 = ascend.alloc at 0 : !ascend.buf<l0b, 64x64xf16, nZ>
  %c_l0 = ascend.alloc at 0 : !ascend.buf<l0c, 64x64xf32, zN>
  ascend.copy mte2 %a[%c0, %c0] to %a_l1[%c0, %c0] sizes [64, 64] : !ascend.buf<gm, 64x64xf16> to !ascend.buf<l1, 64x64xf16, zN>
  ascend.copy mte2 %b[%c0, %c0] to %b_l1[%c0, %c0] sizes [64, 64] : !ascend.buf<gm, 64x64xf16> to !ascend.buf<l1, 64x64xf16, zN>
  ascend.set_flag mte2 to mte1 event 0
  ascend.wait_flag mte2 to mte1 event 0
  ascend.copy mte1 %a_l1[%c0, %c0] to %a_l0[%c0, %c0] sizes [64, 64] : !ascend.buf<l1, 64x64xf16, zN> to !ascend.buf<l0a, 64x64xf16, zZ>
  ascend.copy mte1 %b_l1[%c0, %c0] to %b_l0[%c0, %c0] sizes [64, 64] transpose : !ascend.buf<l1, 64x64xf16, zN> to !ascend.buf<l0b, 64x64xf16, nZ>
  ascend.set_flag mte1 to m event 0
  ascend.wait_flag mte1 to m event 0
  ascend.mmad %c_l0, %a_l0, %b_l0 m 64 n 64 k 64 init : !ascend.buf<l0c, 64x64xf32, zN>, !ascend.buf<l0a, 64x64xf16, zZ>, !ascend.buf<l0b, 64x64xf16, nZ>
  ascend.mmad %c_l0, %a_l0, %b_l0 m 50 n 33 k 32 : !ascend.buf<l0c, 64x64xf32, zN>, !ascend.buf<l0a, 64x64xf16, zZ>, !ascend.buf<l0b, 64x64xf16, nZ>
  ascend.set_flag m to fix event 0
  ascend.wait_flag m to fix event 0
  ascend.copy fix %c_l0[%c0, %c0] to %c[%c0, %c0] sizes [64, 64] : !ascend.buf<l0c, 64x64xf32, zN> to !ascend.buf<gm, 64x64xf32>
  ascend.pipe_barrier all
}

// CHECK:      ascend.kernel @vector #ascend.target<"910A"> block_dim 1 ins(%x: !ascend.buf<gm, 1x16x4x4xf16>) outs(%y: !ascend.buf<gm, 1x16x4x4xf16>) {
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   %c64 = arith.constant 64 : index
// CHECK-NEXT:   %s = arith.constant 1.500000e+00 : f16
// CHECK-NEXT:   %u = ascend.alloc at 0 : !ascend.buf<ub, 1x16x4x4xf16, nc1hwc0>
// CHECK-NEXT:   %v = ascend.alloc at 512 : !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   %w = ascend.alloc at 1024 : !ascend.buf<ub, 128xf32>
// CHECK-NEXT:   ascend.copy mte2 %x[%c0, %c0, %c0, %c0] to %u[%c0, %c0, %c0, %c0] sizes [1, 16, 4, 4] : !ascend.buf<gm, 1x16x4x4xf16> to !ascend.buf<ub, 1x16x4x4xf16, nc1hwc0>
// CHECK-NEXT:   scf.for %j = %c0 to %c64 step %c64 {
// CHECK-NEXT:     ascend.vadd %v[%c0], %v[%c0], %v[%c0] mask 64 repeat 2 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   }
// CHECK-NEXT:   ascend.vsub %v[%c0], %v[%c0], %v[%c0] mask_bits [0, 8] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vmul %v[%c0], %v[%c0], %v[%c0] repeat 2 blk_stride [1, 1, 1] rep_stride [8, 9, 8] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vdiv %v[%c0], %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vmax %v[%c0], %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vmin %v[%c0], %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vexp %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vln %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vabs %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vrelu %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vrec %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vsqrt %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vadds %v[%c0], %v[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16
// CHECK-NEXT:   ascend.vmuls %v[%c0], %v[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16
// CHECK-NEXT:   ascend.vmaxs %v[%c0], %v[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16
// CHECK-NEXT:   ascend.vmins %v[%c0], %v[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16
// CHECK-NEXT:   ascend.vdup %v[%c0], %s mask 16 : !ascend.buf<ub, 256xf16>, f16
// CHECK-NEXT:   ascend.vconv %w[%c0], %v[%c0] repeat 2 : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vcadd %w[%c0], %w[%c0] mask 16 repeat 4 rep_stride [8, 2] : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 128xf32>
// CHECK-NEXT:   ascend.vcmax %v[%c0], %v[%c0] repeat 2 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
// CHECK-NEXT:   ascend.vbrcb %w[%c0], %w[%c0] : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 128xf32>
// CHECK-NEXT:   ascend.set_flag v to mte3 event 3
// CHECK-NEXT:   ascend.wait_flag v to mte3 event 3
// CHECK-NEXT:   ascend.copy mte3 %u[%c0, %c0, %c0, %c0] to %y[%c0, %c0, %c0, %c0] sizes [1, 16, 4, 4] : !ascend.buf<ub, 1x16x4x4xf16, nc1hwc0> to !ascend.buf<gm, 1x16x4x4xf16>
// CHECK-NEXT:   ascend.pipe_barrier v
// CHECK-NEXT: }
ascend.kernel @vector #ascend.target<"910A"> block_dim 1 ins(%x: !ascend.buf<gm, 1x16x4x4xf16>) outs(%y: !ascend.buf<gm, 1x16x4x4xf16>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %s = arith.constant 1.5 : f16
  %u = ascend.alloc at 0 : !ascend.buf<ub, 1x16x4x4xf16, nc1hwc0>
  %v = ascend.alloc at 512 : !ascend.buf<ub, 256xf16>
  %w = ascend.alloc at 1024 : !ascend.buf<ub, 128xf32>
  ascend.copy mte2 %x[%c0, %c0, %c0, %c0] to %u[%c0, %c0, %c0, %c0] sizes [1, 16, 4, 4] : !ascend.buf<gm, 1x16x4x4xf16> to !ascend.buf<ub, 1x16x4x4xf16, nc1hwc0>
  scf.for %j = %c0 to %c64 step %c64 {
    ascend.vadd %v[%c0], %v[%c0], %v[%c0] mask 64 repeat 2 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  }
  ascend.vsub %v[%c0], %v[%c0], %v[%c0] mask_bits [0, 8] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vmul %v[%c0], %v[%c0], %v[%c0] repeat 2 blk_stride [1, 1, 1] rep_stride [8, 9, 8] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vdiv %v[%c0], %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vmax %v[%c0], %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vmin %v[%c0], %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vexp %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vln %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vabs %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vrelu %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vrec %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vsqrt %v[%c0], %v[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vadds %v[%c0], %v[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16
  ascend.vmuls %v[%c0], %v[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16
  ascend.vmaxs %v[%c0], %v[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16
  ascend.vmins %v[%c0], %v[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f16
  ascend.vdup %v[%c0], %s mask 16 : !ascend.buf<ub, 256xf16>, f16
  ascend.vconv %w[%c0], %v[%c0] repeat 2 : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 256xf16>
  ascend.vcadd %w[%c0], %w[%c0] mask 16 repeat 4 rep_stride [8, 2] : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 128xf32>
  ascend.vcmax %v[%c0], %v[%c0] repeat 2 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
  ascend.vbrcb %w[%c0], %w[%c0] : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 128xf32>
  ascend.set_flag v to mte3 event 3
  ascend.wait_flag v to mte3 event 3
  ascend.copy mte3 %u[%c0, %c0, %c0, %c0] to %y[%c0, %c0, %c0, %c0] sizes [1, 16, 4, 4] : !ascend.buf<ub, 1x16x4x4xf16, nc1hwc0> to !ascend.buf<gm, 1x16x4x4xf16>
  ascend.pipe_barrier v
}

// CHECK:      ascend.kernel @empty #ascend.target<"910A"> block_dim 32 ins() outs() attributes {note = "no buffers"} {
// CHECK-NEXT: }
ascend.kernel @empty #ascend.target<"910A"> block_dim 32 ins() outs() attributes {note = "no buffers"} {
}

// CHECK:      ascend.kernel @zero_fill #ascend.target<"910A"> block_dim 1 ins() outs() {
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   %c48 = arith.constant 48 : index
// CHECK-NEXT:   %zero = arith.constant 0.000000e+00 : f16
// CHECK-NEXT:   %a_l1 = ascend.alloc at 0 : !ascend.buf<l1, 64x64xf16, zN>
// CHECK-NEXT:   %b_l0 = ascend.alloc at 0 : !ascend.buf<l0b, 64x32xf16, nZ>
// CHECK-NEXT:   ascend.init_const %a_l1[%c0, %c48] sizes [64, 16], %zero : !ascend.buf<l1, 64x64xf16, zN>, f16
// CHECK-NEXT:   ascend.init_const %b_l0[%c48, %c0] sizes [16, 32], %zero : !ascend.buf<l0b, 64x32xf16, nZ>, f16
// CHECK-NEXT: }
ascend.kernel @zero_fill #ascend.target<"910A"> block_dim 1 ins() outs() {
  %c0 = arith.constant 0 : index
  %c48 = arith.constant 48 : index
  %zero = arith.constant 0.0 : f16
  %a_l1 = ascend.alloc at 0 : !ascend.buf<l1, 64x64xf16, zN>
  %b_l0 = ascend.alloc at 0 : !ascend.buf<l0b, 64x32xf16, nZ>
  ascend.init_const %a_l1[%c0, %c48] sizes [64, 16], %zero : !ascend.buf<l1, 64x64xf16, zN>, f16
  ascend.init_const %b_l0[%c48, %c0] sizes [16, 32], %zero : !ascend.buf<l0b, 64x32xf16, nZ>, f16
}
