// RUN: msir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier message of the ascend dialect; each CHECK pins the whole
// message line that --verify-diagnostics prints first for its split.
// target: unknown chip
ascend.kernel @k #ascend.target<"910C"> block_dim 1 ins() outs() {
}
// CHECK: {{^}}unknown Ascend target "910C" (known: 910A, 910B){{$}}

// -----

// buffer type: unknown space
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l2, 16xf16>
}
// CHECK: {{^}}unknown memory space 'l2' of !ascend.buf<l2, 16xf16> (known: gm, l1, l0a, l0b, l0c, ub){{$}}

// -----

// buffer type: unknown layout
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l1, 16x16xf16, zz>
}
// CHECK: {{^}}unknown layout 'zz' of !ascend.buf<l1, 16x16xf16, zz> (known: nd, zN, zZ, nZ, nc1hwc0){{$}}

// -----

// buffer type: a layout its space does not hold
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 16x16xf16, zN>
}
// CHECK: {{^}}!ascend.buf<l0a, 16x16xf16, zN>: l0a holds layout zZ, not zN{{$}}

// -----

// buffer type: element type
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<ub, 16xf64>
}
// CHECK: {{^}}!ascend.buf<ub, 16xf64>: element type f64 is not one of f16, bf16, f32, i8, i32{{$}}

// -----

// buffer type: dynamic shape
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<ub, ?xf16>
}
// CHECK: {{^}}!ascend.buf<ub, ?xf16>: a buffer needs a static, non-empty shape{{$}}

// -----

// buffer type: fractal layout of rank 1
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l1, 256xf16, zN>
}
// CHECK: {{^}}!ascend.buf<l1, 256xf16, zN>: layout zN needs a 2-D shape{{$}}

// -----

// buffer type: partial fractals
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l1, 16x24xf16, zN>
}
// CHECK: {{^}}!ascend.buf<l1, 16x24xf16, zN>: layout zN stores whole 16x16 fractals, but the shape is 16x24{{$}}

// -----

// buffer type: nc1hwc0 with C not whole C0 groups
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<ub, 1x8x4x4xf16, nc1hwc0>
}
// CHECK: {{^}}!ascend.buf<ub, 1x8x4x4xf16, nc1hwc0>: layout nc1hwc0 needs an NCHW shape with C a multiple of C0 = 16{{$}}

// -----

// an ascend op outside a kernel
func.func @f() {
  ascend.pipe_barrier v
  func.return
}
// CHECK: {{^}}'ascend.pipe_barrier' must be inside an ascend.kernel{{$}}

// -----

// kernel: an argument not in gm
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins(%x : !ascend.buf<ub, 16xf16>) outs() {
}
// CHECK: {{^}}'ascend.kernel' arguments must be gm buffers, got !ascend.buf<ub, 16xf16>{{$}}

// -----

// kernel: cube and vector buffers on a separated chip
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  %b = ascend.alloc at 0 : !ascend.buf<l1, 16x16xf16, zN>
}
// CHECK: {{^}}'ascend.kernel' 910B separates cube and vector cores: a kernel uses L1/L0 buffers or UB buffers, not both (they exchange data through gm){{$}}

// -----

// kernel: block_dim beyond the cores of its kind
ascend.kernel @k #ascend.target<"910B"> block_dim 25 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l1, 16x16xf16, zN>
}
// CHECK: {{^}}'ascend.kernel' block_dim 25 is outside [1, 24], the cube cores of 910B{{$}}

// -----

// kernel: overlapping buffers
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  %b = ascend.alloc at 256 : !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.alloc' ub buffer %b at [256, 768) overlaps ub buffer %a at [0, 512){{$}}

// -----

// alloc: gm
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<gm, 16xf16>
}
// CHECK: {{^}}'ascend.alloc' gm buffers are kernel arguments, not allocations{{$}}

// -----

// alloc: misaligned
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 16 : !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.alloc' ub offset 16 of %a is not a multiple of 32 bytes, the ub alignment of 910B{{$}}

// -----

// alloc: capacity
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 256x256xf16, zZ>
}
// CHECK: {{^}}'ascend.alloc' l0a overflow: %a (!ascend.buf<l0a, 256x256xf16, zZ>) requires 131072 bytes at offset 0, 65536 available on 910B{{$}}

// -----

// copy: not a data path
ascend.kernel @k #ascend.target<"910A"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 16x16xf16, zZ>
  %u = ascend.alloc at 0 : !ascend.buf<ub, 16x16xf16>
  ascend.copy mte1 %u[%c0, %c0] to %a[%c0, %c0] sizes [16, 16] : !ascend.buf<ub, 16x16xf16> to !ascend.buf<l0a, 16x16xf16, zZ>
}
// CHECK: {{^}}'ascend.copy' ub -> l0a (%u to %a) is not a data path of 910A{{$}}

// -----

// copy: the wrong pipe
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.copy mte3 %y[%c0] to %u[%c0] sizes [256] : !ascend.buf<gm, 256xf16> to !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.copy' gm -> ub runs on pipe mte2 on 910B, not mte3{{$}}

// -----

// copy: a layout conversion no path makes
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 16x16xf16, zN>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 1x16x1x16xf16, nc1hwc0>
  ascend.copy mte3 %u[%c0, %c0, %c0, %c0] to %y[%c0, %c0] sizes [1, 16, 1, 16] : !ascend.buf<ub, 1x16x1x16xf16, nc1hwc0> to !ascend.buf<gm, 16x16xf16, zN>
}
// CHECK: {{^}}'ascend.copy' cannot convert layout nc1hwc0 to zN{{$}}

// -----

// copy: L0A loaded from nd (the cube's formats come from zN fractals)
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %l1 = ascend.alloc at 0 : !ascend.buf<l1, 16x16xf16>
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 16x16xf16, zZ>
  ascend.copy mte1 %l1[%c0, %c0] to %a[%c0, %c0] sizes [16, 16] : !ascend.buf<l1, 16x16xf16> to !ascend.buf<l0a, 16x16xf16, zZ>
}
// CHECK: {{^}}'ascend.copy' cannot convert layout nd to zZ{{$}}

// -----

// copy: element type change outside l0c
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf32>
  ascend.copy mte2 %y[%c0] to %u[%c0] sizes [256] : !ascend.buf<gm, 256xf16> to !ascend.buf<ub, 256xf32>
}
// CHECK: {{^}}'ascend.copy' copies f16 to f32: only the way out of l0c converts (f32 -> f16/bf16, i32 -> i8){{$}}

// -----

// copy: sizes of the wrong rank
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.copy mte2 %y[%c0] to %u[%c0] sizes [16, 16] : !ascend.buf<gm, 256xf16> to !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.copy' needs 1 sizes and source offsets for !ascend.buf<gm, 256xf16>{{$}}

// -----

// copy: destination of another rank
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 16x16xf16>
  ascend.copy mte2 %y[%c0] to %u[%c0, %c0] sizes [256] : !ascend.buf<gm, 256xf16> to !ascend.buf<ub, 16x16xf16>
}
// CHECK: {{^}}'ascend.copy' needs 2 destination offsets and a tile of rank 2 for !ascend.buf<ub, 16x16xf16>{{$}}

// -----

// copy: transpose outside l0b
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 16x16xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 16x16xf16>
  ascend.copy mte2 %y[%c0, %c0] to %u[%c0, %c0] sizes [16, 16] transpose : !ascend.buf<gm, 16x16xf16> to !ascend.buf<ub, 16x16xf16>
}
// CHECK: {{^}}'ascend.copy' transposes only on the way into l0b{{$}}

// -----

// copy: a tile larger than its buffer
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 512xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.copy mte2 %y[%c0] to %u[%c0] sizes [512] : !ascend.buf<gm, 512xf16> to !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.copy' tile [512] does not fit !ascend.buf<ub, 256xf16>{{$}}

// -----

// mmad: an operand in the wrong space
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l1, 32x32xf16, zN>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 32x32xf16, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 32x32xf32, zN>
  ascend.mmad %c, %a, %b m 32 n 32 k 32 init : !ascend.buf<l0c, 32x32xf32, zN>, !ascend.buf<l1, 32x32xf16, zN>, !ascend.buf<l0b, 32x32xf16, nZ>
}
// CHECK: {{^}}'ascend.mmad' operand !ascend.buf<l1, 32x32xf16, zN> must be in l0a (zZ){{$}}

// -----

// mmad: operand dtypes
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 32x32xf32, zZ>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 32x32xf16, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 32x32xf32, zN>
  ascend.mmad %c, %a, %b m 32 n 32 k 32 init : !ascend.buf<l0c, 32x32xf32, zN>, !ascend.buf<l0a, 32x32xf32, zZ>, !ascend.buf<l0b, 32x32xf16, nZ>
}
// CHECK: {{^}}'ascend.mmad' takes (f16, f16) -> f32, (bf16, bf16) -> f32, (i8, i8) -> i32 on 910B, not (f32, f16) -> f32{{$}}

// -----

// mmad: accumulator dtype
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 32x32xf16, zZ>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 32x32xf16, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 32x32xf16, zN>
  ascend.mmad %c, %a, %b m 32 n 32 k 32 init : !ascend.buf<l0c, 32x32xf16, zN>, !ascend.buf<l0a, 32x32xf16, zZ>, !ascend.buf<l0b, 32x32xf16, nZ>
}
// CHECK: {{^}}'ascend.mmad' takes (f16, f16) -> f32, (bf16, bf16) -> f32, (i8, i8) -> i32 on 910B, not (f16, f16) -> f16{{$}}

// -----

// mmad: bf16 on 910A
ascend.kernel @k #ascend.target<"910A"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 32x32xbf16, zZ>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 32x32xbf16, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 32x32xf32, zN>
  ascend.mmad %c, %a, %b m 32 n 32 k 32 init : !ascend.buf<l0c, 32x32xf32, zN>, !ascend.buf<l0a, 32x32xbf16, zZ>, !ascend.buf<l0b, 32x32xbf16, nZ>
}
// CHECK: {{^}}'ascend.mmad' takes (f16, f16) -> f32, (i8, i8) -> i32 on 910A, not (bf16, bf16) -> f32{{$}}

// -----

// mmad: m beyond 4095
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 32x32xf16, zZ>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 32x32xf16, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 32x32xf32, zN>
  ascend.mmad %c, %a, %b m 4096 n 32 k 32 init : !ascend.buf<l0c, 32x32xf32, zN>, !ascend.buf<l0a, 32x32xf16, zZ>, !ascend.buf<l0b, 32x32xf16, nZ>
}
// CHECK: {{^}}'ascend.mmad' m = 4096 is outside [1, 4095]{{$}}

// -----

// mmad: k not a multiple of the fractal depth
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 32x32xf16, zZ>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 32x32xf16, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 32x32xf32, zN>
  ascend.mmad %c, %a, %b m 32 n 32 k 17 init : !ascend.buf<l0c, 32x32xf32, zN>, !ascend.buf<l0a, 32x32xf16, zZ>, !ascend.buf<l0b, 32x32xf16, nZ>
}
// CHECK: {{^}}'ascend.mmad' k = 17 is not a multiple of the fractal depth 16: pad K with zeros to 32{{$}}

// -----

// mmad: shapes that do not fit the buffers
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 32x32xf16, zZ>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 32x32xf16, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 32x32xf32, zN>
  ascend.mmad %c, %a, %b m 32 n 48 k 32 init : !ascend.buf<l0c, 32x32xf32, zN>, !ascend.buf<l0a, 32x32xf16, zZ>, !ascend.buf<l0b, 32x32xf16, nZ>
}
// CHECK: {{^}}'ascend.mmad' m = 32, n = 48, k = 32 (fractals 32x48x32) do not fit a 32x32, b 32x32, c 32x32{{$}}

// -----

// vector: an operand outside ub
ascend.kernel @k #ascend.target<"910A"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %l = ascend.alloc at 0 : !ascend.buf<l1, 256xf16>
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vabs %u[%c0], %l[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<l1, 256xf16>
}
// CHECK: {{^}}'ascend.vabs' operand src must be in ub, got !ascend.buf<l1, 256xf16>{{$}}

// -----

// vector: mask and mask_bits
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %s = arith.constant 1.0 : f16
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vabs %u[%c0], %u[%c0] mask 8 mask_bits [0, 1] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.vabs' takes mask or mask_bits, not both{{$}}

// -----

// vector: mask beyond the lanes of a repeat
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %s = arith.constant 1.0 : f16
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vabs %u[%c0], %u[%c0] mask 129 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.vabs' mask 129 is outside [1, 128] for 128 elements per repeat{{$}}

// -----

// vector: mask_bits with hi set for a 32-bit type
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %w = ascend.alloc at 0 : !ascend.buf<ub, 64xf32>
  ascend.vabs %w[%c0], %w[%c0] mask_bits [1, 0] : !ascend.buf<ub, 64xf32>, !ascend.buf<ub, 64xf32>
}
// CHECK: {{^}}'ascend.vabs' mask_bits must be [hi, lo], not all zero, with hi = 0 for 64 elements per repeat; got [1, 0]{{$}}

// -----

// vector: repeat 0
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %s = arith.constant 1.0 : f16
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vabs %u[%c0], %u[%c0] repeat 0 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.vabs' repeat 0 is outside [1, 255]{{$}}

// -----

// vector: repeat beyond 255
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %s = arith.constant 1.0 : f16
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vabs %u[%c0], %u[%c0] repeat 256 : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.vabs' repeat 256 is outside [1, 255]{{$}}

// -----

// vector: a stride per operand
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %s = arith.constant 1.0 : f16
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vadd %u[%c0], %u[%c0], %u[%c0] rep_stride [8, 8] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.vadd' rep_stride needs 3 values in [0, 255] (dst, lhs, rhs), got [8, 8]{{$}}

// -----

// vector: operands of different element types
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  %w = ascend.alloc at 512 : !ascend.buf<ub, 128xf32>
  ascend.vadd %u[%c0], %u[%c0], %w[%c0] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 128xf32>
}
// CHECK: {{^}}'ascend.vadd' operands must have one element type, got ['f16', 'f32']{{$}}

// -----

// vector: an element type the op does not take
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %i = ascend.alloc at 0 : !ascend.buf<ub, 64xi32>
  ascend.vexp %i[%c0], %i[%c0] : !ascend.buf<ub, 64xi32>, !ascend.buf<ub, 64xi32>
}
// CHECK: {{^}}'ascend.vexp' takes f16, f32, not i32{{$}}

// -----

// vector: a scalar of another type
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %s = arith.constant 1.0 : f32
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vadds %u[%c0], %u[%c0], %s : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>, f32
}
// CHECK: {{^}}'ascend.vadds' scalar has type f32, expected f16{{$}}

// -----

// vdup: a scalar of another type
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %s = arith.constant 1.0 : f32
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vdup %u[%c0], %s : !ascend.buf<ub, 256xf16>, f32
}
// CHECK: {{^}}'ascend.vdup' scalar has type f32, expected f16{{$}}

// -----

// vconv: a conversion the vector unit does not make
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  %i = ascend.alloc at 512 : !ascend.buf<ub, 64xi32>
  ascend.vconv %i[%c0], %u[%c0] : !ascend.buf<ub, 64xi32>, !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.vconv' does not convert f16 to i32{{$}}

// -----

// vcadd: a destination strided like a source (it takes one element per repeat)
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.vcadd %u[%c0], %u[%c0] repeat 2 rep_stride [2, 8] : !ascend.buf<ub, 256xf16>, !ascend.buf<ub, 256xf16>
}
// CHECK: {{^}}'ascend.vcadd' writes one element per repeat: the strides of dst are blk_stride 1 and rep_stride 8, got 1 and 2{{$}}

// -----

// vbrcb: a mask (it fills whole repeats)
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  %c0 = arith.constant 0 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 128xf32>
  ascend.vbrcb %u[%c0], %u[%c0] mask 8 : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 128xf32>
}
// CHECK: {{^}}'ascend.vbrcb' fills whole repeats: it takes no mask{{$}}

// -----

// set_flag: a pipe that takes no flags
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  ascend.set_flag s to v event 0
}
// CHECK: {{^}}'ascend.set_flag' pipe s cannot take part in a flag (one of v, m, mte1, mte2, mte3, fix){{$}}

// -----

// set_flag: one pipe
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  ascend.set_flag v to v event 0
}
// CHECK: {{^}}'ascend.set_flag' flags order two different pipes: use ascend.pipe_barrier v within one pipe{{$}}

// -----

// wait_flag: event id beyond 910A's
ascend.kernel @k #ascend.target<"910A"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  ascend.wait_flag mte2 to v event 4
}
// CHECK: {{^}}'ascend.wait_flag' event 4 is outside [0, 3], the event ids of 910A{{$}}

// -----

// set_flag: event id beyond 910B's
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  ascend.set_flag mte2 to v event 8
}
// CHECK: {{^}}'ascend.set_flag' event 8 is outside [0, 7], the event ids of 910B{{$}}

// -----

// pipe_barrier: the scalar pipe
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs(%y : !ascend.buf<gm, 256xf16>) {
  ascend.pipe_barrier s
}
// CHECK: {{^}}'ascend.pipe_barrier' pipe_barrier s is a hardware error: the scalar unit keeps its own order{{$}}

// -----

// init_const: outside L1 / L0A / L0B
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs() {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f16
  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  ascend.init_const %u[%c0] sizes [16], %zero : !ascend.buf<ub, 256xf16>, f16
}
// CHECK: {{^}}'ascend.init_const' init_const fills l1, l0a, l0b (Ascend C's InitConstValue), not ub{{$}}

// -----

// init_const: a value of another type
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs() {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %a = ascend.alloc at 0 : !ascend.buf<l1, 32x32xf16, zN>
  ascend.init_const %a[%c0, %c0] sizes [16, 16], %zero : !ascend.buf<l1, 32x32xf16, zN>, f32
}
// CHECK: {{^}}'ascend.init_const' value has type f32, expected f16{{$}}

// -----

// init_const: sizes and offsets of another rank
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs() {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f16
  %a = ascend.alloc at 0 : !ascend.buf<l1, 32x32xf16, zN>
  ascend.init_const %a[%c0] sizes [16], %zero : !ascend.buf<l1, 32x32xf16, zN>, f16
}
// CHECK: {{^}}'ascend.init_const' needs 2 sizes and offsets for !ascend.buf<l1, 32x32xf16, zN>{{$}}

// -----

// init_const: a tile larger than its buffer
ascend.kernel @k #ascend.target<"910B"> block_dim 1 ins() outs() {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f16
  %a = ascend.alloc at 0 : !ascend.buf<l1, 32x32xf16, zN>
  ascend.init_const %a[%c0, %c0] sizes [16, 48], %zero : !ascend.buf<l1, 32x32xf16, zN>, f16
}
// CHECK: {{^}}'ascend.init_const' tile [16, 48] does not fit !ascend.buf<l1, 32x32xf16, zN>{{$}}
