// RUN: msir-opt %s -p 'msir-shard{propagate=true}' | filecheck %s

// A data-parallel training step after msir-grad and msir-inline, as
// msir.parallel plans it: the forward ops carry the plan's strategies (rows,
// m), the backward ops ("<name>/grad") and the update carry none. With
// propagate=true they take the strategy their operands' layouts imply: the
// weight's gradient x^T @ dy splits its contracted loop (the batch), so it is
// partial, and the update reads it after the all_reduce that is data-parallel
// gradient synchronisation (../shared/parallel.md §4).

msir_shard.mesh @mesh(shape = 2)
func.func @step(%w: tensor<4x3xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[],[]]>}, %x: tensor<8x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[0],[]]>}) -> (tensor<f32>, tensor<4x3xf32>) {
  %0 = msir.matmul %x, %w {msir.name = "fc", msir_shard.strategy = #msir_shard.strategy<@mesh, "m">} : tensor<8x4xf32>, tensor<4x3xf32> to tensor<8x3xf32>
  %1 = msir.mul %0, %0 {msir.name = "sq", msir_shard.strategy = #msir_shard.strategy<@mesh, "m">} : tensor<8x3xf32>
  %2 = msir.reduce_mean %1 axes array<i64: 0, 1> {msir.name = "mean", msir_shard.strategy = #msir_shard.strategy<@mesh, "m">} : tensor<8x3xf32> to tensor<f32>
  %3 = msir.constant dense<1.000000e+00> : tensor<f32>
  %4 = msir.constant dense<2.400000e+01> : tensor<f32> {msir.name = "mean/grad"}
  %5 = msir.div %3, %4 {msir.name = "mean/grad"} : tensor<f32>
  %6 = msir.broadcast_to %5 {msir.name = "mean/grad"} : tensor<f32> to tensor<8x3xf32>
  %7 = msir.mul %6, %0 {msir.name = "sq/grad"} : tensor<8x3xf32>
  %8 = msir.add %7, %7 {msir.name = "sq/grad"} : tensor<8x3xf32>
  %9 = msir.transpose %x, array<i64: 1, 0> {msir.name = "fc/grad"} : tensor<8x4xf32> to tensor<4x8xf32>
  %10 = msir.matmul %9, %8 {msir.name = "fc/grad"} : tensor<4x8xf32>, tensor<8x3xf32> to tensor<4x3xf32>
  %11 = msir.constant dense<5.000000e-01> : tensor<f32>
  %12 = msir.broadcast_to %11 : tensor<f32> to tensor<4x3xf32>
  %13 = msir.mul %12, %10 : tensor<4x3xf32>
  %14 = msir.sub %w, %13 : tensor<4x3xf32>
  func.return %2, %14 : tensor<f32>, tensor<4x3xf32>
}

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%w: tensor<4x3xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[\]\]}}>}, %x: tensor<4x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\],\[\]\]}}>})
// CHECK:      %[[Y:.*]] = msir.matmul %x, %w {msir.name = "fc"} : tensor<4x4xf32>, tensor<4x3xf32> to tensor<4x3xf32>
// the forward's local mean, scaled to a partial sum of the global mean
// CHECK:      %[[M:.*]] = msir.reduce_mean %{{.*}} {msir.name = "mean"} : tensor<4x3xf32> to tensor<f32>
// CHECK-NEXT: %[[HALF:.*]] = msir.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[P:.*]] = msir.mul %[[M]], %[[HALF]] : tensor<f32>
// the backward on the local rows
// CHECK:      %[[DY:.*]] = msir.add %{{.*}} {msir.name = "sq/grad"} : tensor<4x3xf32>
// CHECK-NEXT: %[[XT:.*]] = msir.transpose %x, array<i64: 1, 0> {msir.name = "fc/grad"} : tensor<4x4xf32> to tensor<4x4xf32>
// CHECK-NEXT: %[[DW:.*]] = msir.matmul %[[XT]], %[[DY]] {msir.name = "fc/grad"} : tensor<4x4xf32>, tensor<4x3xf32> to tensor<4x3xf32>
// the gradient synchronisation, then the update of the replicated weight
// CHECK:      %[[SYNC:.*]] = msir_shard.all_reduce %[[DW]] on @mesh axis 0 kind "sum" : tensor<4x3xf32>
// CHECK-NEXT: %[[STEP:.*]] = msir.mul %{{.*}}, %[[SYNC]] : tensor<4x3xf32>
// CHECK-NEXT: %[[NEW:.*]] = msir.sub %w, %[[STEP]] : tensor<4x3xf32>
// CHECK-NEXT: %[[LOSS:.*]] = msir_shard.all_reduce %[[P]] on @mesh axis 0 kind "sum" : tensor<f32>
// CHECK-NEXT: func.return %[[LOSS]], %[[NEW]] : tensor<f32>, tensor<4x3xf32>
