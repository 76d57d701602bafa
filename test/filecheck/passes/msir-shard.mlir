// RUN: msir-opt %s --split-input-file -p msir-shard | filecheck %s
// RUN: msir-opt %s --split-input-file -p msir-shard,msir-shard | filecheck %s

// msir-shard turns a function whose ops carry strategies into the per-device
// function: local shapes, layouts on the arguments and results, and the
// collectives of the reshard rules (../shared/parallel.md §3).

// Row split (m): every device holds a block of rows of x and all of w; no
// communication, the result stays split.
msir_shard.mesh @mesh(shape = 4)
func.func @rows(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>) -> tensor<8x6xf32> {
  %y = msir.matmul %x, %w {msir_shard.strategy = #msir_shard.strategy<@mesh, "m">} : tensor<8x4xf32>, tensor<4x6xf32> to tensor<8x6xf32>
  func.return %y : tensor<8x6xf32>
}
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%x: tensor<2x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\],\[\]\]}}>}, %w: tensor<4x6xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[\]\]}}>})
// CHECK-SAME: -> (tensor<2x6xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\],\[\]\]}}>})
// CHECK-SAME: attributes {msir_shard.mesh = @mesh}
// CHECK-NEXT: %y = msir.matmul %x, %w : tensor<2x4xf32>, tensor<4x6xf32> to tensor<2x6xf32>
// CHECK-NEXT: func.return %y : tensor<2x6xf32>

// -----

// Column split (n): w split by columns.
msir_shard.mesh @mesh(shape = 2)
func.func @columns(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>) -> tensor<8x6xf32> {
  %y = msir.matmul %x, %w {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x4xf32>, tensor<4x6xf32> to tensor<8x6xf32>
  func.return %y : tensor<8x6xf32>
}
// CHECK-LABEL: func.func @columns
// CHECK-SAME: (%x: tensor<8x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[\]\]}}>}, %w: tensor<4x3xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[0\]\]}}>})
// CHECK-SAME: -> (tensor<8x3xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[0\]\]}}>})
// CHECK-NEXT: %y = msir.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> to tensor<8x3xf32>
// CHECK-NEXT: func.return %y

// -----

// Contraction split (k): each device's product is a partial sum; the result is
// all-reduced before it is returned.
msir_shard.mesh @mesh(shape = 2)
func.func @contraction(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>) -> tensor<8x6xf32> {
  %y = msir.matmul %x, %w {msir_shard.strategy = #msir_shard.strategy<@mesh, "k">} : tensor<8x4xf32>, tensor<4x6xf32> to tensor<8x6xf32>
  func.return %y : tensor<8x6xf32>
}
// CHECK-LABEL: func.func @contraction
// CHECK-SAME: (%x: tensor<8x2xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[0\]\]}}>}, %w: tensor<2x6xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\],\[\]\]}}>})
// CHECK-SAME: -> (tensor<8x6xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[\]\]}}>})
// CHECK-NEXT: %y = msir.matmul %x, %w : tensor<8x2xf32>, tensor<2x6xf32> to tensor<8x6xf32>
// CHECK-NEXT: %0 = msir_shard.all_reduce %y on @mesh axis 0 kind "sum" : tensor<8x6xf32>
// CHECK-NEXT: func.return %0 : tensor<8x6xf32>

// -----

// Megatron MLP: fc1 split by columns (n), the bias add and relu follow it, fc2
// split by its contraction (k): one all_reduce, then fc2's bias is added once.
// relu's splat zero is built at the local shape (no all_slice of a full one).
msir_shard.mesh @mesh(shape = 4)
func.func @mlp(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %b1: tensor<32xf32>, %w2: tensor<32x16xf32>, %b2: tensor<16xf32>) -> tensor<8x16xf32> {
  %h = msir.matmul %x, %w1 {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x16xf32>, tensor<16x32xf32> to tensor<8x32xf32>
  %bb1 = msir.broadcast_to %b1 : tensor<32xf32> to tensor<8x32xf32>
  %hb = msir.add %h, %bb1 {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x32xf32>
  %z = msir.constant dense<0.0> : tensor<8x32xf32>
  %r = msir.maximum %hb, %z {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x32xf32>
  %o = msir.matmul %r, %w2 {msir_shard.strategy = #msir_shard.strategy<@mesh, "k">} : tensor<8x32xf32>, tensor<32x16xf32> to tensor<8x16xf32>
  %bb2 = msir.broadcast_to %b2 : tensor<16xf32> to tensor<8x16xf32>
  %ob = msir.add %o, %bb2 : tensor<8x16xf32>
  func.return %ob : tensor<8x16xf32>
}
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%x: tensor<8x16xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[\]\]}}>}, %w1: tensor<16x8xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[0\]\]}}>}, %b1: tensor<8xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\]\]}}>}, %w2: tensor<8x16xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\],\[\]\]}}>}, %b2: tensor<16xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\]\]}}>})
// CHECK-SAME: -> (tensor<8x16xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[\]\]}}>})
// CHECK-NEXT: %h = msir.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x8xf32> to tensor<8x8xf32>
// CHECK-NEXT: %{{.*}} = msir.broadcast_to %b1 : tensor<8xf32> to tensor<8x8xf32>
// CHECK-NEXT: %hb = msir.add %h, %{{.*}} : tensor<8x8xf32>
// CHECK-NEXT: %z = msir.constant dense<0.000000e+00> : tensor<8x8xf32>
// CHECK-NEXT: %r = msir.maximum %hb, %z : tensor<8x8xf32>
// CHECK-NEXT: %o = msir.matmul %r, %w2 : tensor<8x8xf32>, tensor<8x16xf32> to tensor<8x16xf32>
// CHECK-NEXT: %[[SUM:.*]] = msir_shard.all_reduce %o on @mesh axis 0 kind "sum" : tensor<8x16xf32>
// CHECK-NEXT: %[[B2:.*]] = msir.broadcast_to %b2 : tensor<16xf32> to tensor<8x16xf32>
// CHECK-NEXT: %ob = msir.add %[[SUM]], %[[B2]] : tensor<8x16xf32>
// CHECK-NEXT: func.return %ob : tensor<8x16xf32>
// CHECK-NOT: msir_shard.all_reduce

// -----

// 2-D mesh: data parallel on axis 0 (m), the contraction on axis 1 (k); the
// partial sum over axis 1 is reduce-scattered onto the columns the consumer
// wants, and one reshard of %y serves both of its readers.
msir_shard.mesh @mesh(shape = 2x2)
func.func @two_axes(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>) -> tensor<8x6xf32> {
  %y = msir.matmul %x, %w {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,k">} : tensor<8x4xf32>, tensor<4x6xf32> to tensor<8x6xf32>
  %t = msir.tanh %y {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,n">} : tensor<8x6xf32>
  %s = msir.mul %y, %t {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,n">} : tensor<8x6xf32>
  func.return %s : tensor<8x6xf32>
}
// CHECK-LABEL: func.func @two_axes
// CHECK-SAME: (%x: tensor<4x2xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\],\[1\]\]}}>}, %w: tensor<2x6xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[1\],\[\]\]}}>})
// CHECK-SAME: -> (tensor<4x3xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\],\[1\]\]}}>})
// CHECK-NEXT: %y = msir.matmul %x, %w : tensor<4x2xf32>, tensor<2x6xf32> to tensor<4x6xf32>
// CHECK-NEXT: %[[RS:.*]] = msir_shard.reduce_scatter %y on @mesh axis 1 dim 1 : tensor<4x6xf32> to tensor<4x3xf32>
// CHECK-NEXT: %t = msir.tanh %[[RS]] : tensor<4x3xf32>
// CHECK-NEXT: %s = msir.mul %[[RS]], %t : tensor<4x3xf32>
// CHECK-NEXT: func.return %s

// -----

// A reduction over a split loop: reduce_sum gives a partial sum, reduce_mean
// too (its local mean scaled by 1/n), reduce_max is all-reduced (max) at once;
// an argument's layout attribute is kept, and a consumer that wants it
// otherwise gets an all_gather.
msir_shard.mesh @mesh(shape = 2)
func.func @reductions(%x: tensor<4x6xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[],[0]]>}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4x6xf32>, tensor<4xf32>) {
  %s = msir.reduce_sum %x axes array<i64: 1> {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<4x6xf32> to tensor<4xf32>
  %m = msir.reduce_max %x axes array<i64: 1> {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<4x6xf32> to tensor<4xf32>
  %e = msir.exp %x : tensor<4x6xf32>
  %a = msir.reduce_mean %x axes array<i64: 1> {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<4x6xf32> to tensor<4xf32>
  func.return %s, %m, %e, %a : tensor<4xf32>, tensor<4xf32>, tensor<4x6xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%x: tensor<4x3xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[0\]\]}}>})
// CHECK-NEXT: %s = msir.reduce_sum %x axes array<i64: 1> : tensor<4x3xf32> to tensor<4xf32>
// CHECK-NEXT: %m = msir.reduce_max %x axes array<i64: 1> : tensor<4x3xf32> to tensor<4xf32>
// CHECK-NEXT: %[[M:.*]] = msir_shard.all_reduce %m on @mesh axis 0 kind "max" : tensor<4xf32>
// CHECK-NEXT: %[[X:.*]] = msir_shard.all_gather %x on @mesh axis 0 dim 1 : tensor<4x3xf32> to tensor<4x6xf32>
// CHECK-NEXT: %e = msir.exp %[[X]] : tensor<4x6xf32>
// CHECK-NEXT: %a = msir.reduce_mean %x axes array<i64: 1> : tensor<4x3xf32> to tensor<4xf32>
// CHECK-NEXT: %[[HALF:.*]] = msir.constant dense<5.000000e-01> : tensor<4xf32>
// CHECK-NEXT: %[[A:.*]] = msir.mul %a, %[[HALF]] : tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = msir_shard.all_reduce %s on @mesh axis 0 kind "sum" : tensor<4xf32>
// CHECK-NEXT: %[[AR:.*]] = msir_shard.all_reduce %[[A]] on @mesh axis 0 kind "sum" : tensor<4xf32>
// CHECK-NEXT: func.return %[[S]], %[[M]], %e, %[[AR]]

// -----

// Softmax over a split axis (n): the row max is all-reduced (max) and the row
// sum, a partial sum, is all-reduced before the division reads it.
msir_shard.mesh @mesh(shape = 4)
func.func @softmax(%l: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m = msir.reduce_max %l axes array<i64: 1> {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x8xf32> to tensor<8x1xf32>
  %mb = msir.broadcast_to %m : tensor<8x1xf32> to tensor<8x8xf32>
  %d = msir.sub %l, %mb {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x8xf32>
  %e = msir.exp %d {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x8xf32>
  %s = msir.reduce_sum %e axes array<i64: 1> {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x8xf32> to tensor<8x1xf32>
  %sb = msir.broadcast_to %s : tensor<8x1xf32> to tensor<8x8xf32>
  %p = msir.div %e, %sb {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : tensor<8x8xf32>
  func.return %p : tensor<8x8xf32>
}
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%l: tensor<8x2xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[0\]\]}}>})
// CHECK-SAME: -> (tensor<8x2xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[0\]\]}}>})
// CHECK-NEXT: %m = msir.reduce_max %l axes array<i64: 1> : tensor<8x2xf32> to tensor<8x1xf32>
// CHECK-NEXT: %[[M:.*]] = msir_shard.all_reduce %m on @mesh axis 0 kind "max" : tensor<8x1xf32>
// CHECK-NEXT: %[[MB:.*]] = msir.broadcast_to %[[M]] : tensor<8x1xf32> to tensor<8x2xf32>
// CHECK-NEXT: %d = msir.sub %l, %[[MB]] : tensor<8x2xf32>
// CHECK-NEXT: %e = msir.exp %d : tensor<8x2xf32>
// CHECK-NEXT: %s = msir.reduce_sum %e axes array<i64: 1> : tensor<8x2xf32> to tensor<8x1xf32>
// CHECK-NEXT: %[[S:.*]] = msir_shard.all_reduce %s on @mesh axis 0 kind "sum" : tensor<8x1xf32>
// CHECK-NEXT: %[[SB:.*]] = msir.broadcast_to %[[S]] : tensor<8x1xf32> to tensor<8x2xf32>
// CHECK-NEXT: %p = msir.div %e, %[[SB]] : tensor<8x2xf32>
// CHECK-NEXT: func.return %p : tensor<8x2xf32>

// -----

// Constants: a splat is built at each local shape its consumers want, once per
// layout, before the first of them, keeping its attributes; a constant of
// several values is replicated and sliced (all_slice).
msir_shard.mesh @mesh(shape = 2x2)
func.func @constants(%x: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x2xf32>) {
  %one = msir.constant dense<1.0> : tensor<4x6xf32> {msir.name = "one"}
  %c = msir.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %a = msir.add %x, %one {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,n">} : tensor<4x6xf32>
  %b = msir.mul %x, %one {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,n">} : tensor<4x6xf32>
  %d = msir.sub %x, %one {msir_shard.strategy = #msir_shard.strategy<@mesh, "n,-">} : tensor<4x6xf32>
  %e = msir.exp %c {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,-">} : tensor<4x2xf32>
  func.return %a, %b, %d, %e : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x2xf32>
}
// CHECK-LABEL: func.func @constants
// CHECK-NEXT: %c = msir.constant dense<{{.*}}> : tensor<4x2xf32>
// CHECK-NEXT: %[[ONE:.*]] = msir.constant dense<1.000000e+00> : tensor<2x3xf32> {msir.name = "one"}
// CHECK-NEXT: %a = msir.add %x, %[[ONE]] : tensor<2x3xf32>
// CHECK-NEXT: %b = msir.mul %x, %[[ONE]] : tensor<2x3xf32>
// CHECK:      %[[ONE6:.*]] = msir.constant dense<1.000000e+00> : tensor<4x3xf32> {msir.name = "one"}
// CHECK-NEXT: %d = msir.sub %{{.*}}, %[[ONE6]] : tensor<4x3xf32>
// CHECK-NEXT: %[[C:.*]] = msir_shard.all_slice %c on @mesh axis 0 dim 0 : tensor<4x2xf32> to tensor<2x2xf32>
// CHECK-NEXT: %e = msir.exp %[[C]] : tensor<2x2xf32>
