// RUN: msir-opt %s -p msir-grad,msir-inline,dce | filecheck %s

// msir-grad on a per-device function (one msir-shard made): the collectives'
// transposes (../shared/parallel.md §1) and the gradient synchronisation of a
// replicated weight read by a batch-split matmul.

msir_shard.mesh @mesh(shape = 2)

// x arrives split by rows and is gathered (all_gather: its adjoint is a
// reduce_scatter), sliced by columns (all_slice: an all_gather) and moved
// back to rows (all_to_all: the inverse all_to_all); w is replicated and every device reads all of it (its
// gradient is the all_reduce of the devices' parts); the loss is the
// all_reduce of partial sums (its adjoint: the identity).
func.func @loss(%x: tensor<2x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[0],[]]>}, %w: tensor<4x3xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[],[]]>}) -> (tensor<f32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[]>}) attributes {msir_shard.mesh = @mesh} {
  %g = msir_shard.all_gather %x on @mesh axis 0 dim 0 : tensor<2x4xf32> to tensor<4x4xf32>
  %s = msir_shard.all_slice %g on @mesh axis 0 dim 1 : tensor<4x4xf32> to tensor<4x2xf32>
  %t = msir_shard.all_to_all %s on @mesh axis 0 dims 1 to 0 : tensor<4x2xf32> to tensor<2x4xf32>
  %y = msir.matmul %t, %w : tensor<2x4xf32>, tensor<4x3xf32> to tensor<2x3xf32>
  %p = msir.reduce_sum %y axes array<i64: 0, 1> : tensor<2x3xf32> to tensor<f32>
  %l = msir_shard.all_reduce %p on @mesh axis 0 kind "sum" : tensor<f32>
  func.return %l : tensor<f32>
}

func.func @step(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>) -> (tensor<f32>, tensor<2x4xf32>, tensor<4x3xf32>) {
  %f = msir.closure @loss() : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<f32>
  %vg = msir.value_and_grad %f argnums array<i64: 0, 1> : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<f32> to (tensor<2x4xf32>, tensor<4x3xf32>) -> (tensor<f32>, tensor<2x4xf32>, tensor<4x3xf32>)
  %r:3 = msir.apply %vg(%x, %w) : (tensor<2x4xf32>, tensor<4x3xf32>) -> (tensor<f32>, tensor<2x4xf32>, tensor<4x3xf32>)
  func.return %r#0, %r#1, %r#2 : tensor<f32>, tensor<2x4xf32>, tensor<4x3xf32>
}

// CHECK-LABEL: func.func @step
// CHECK:      %[[L:.*]] = msir_shard.all_reduce %{{.*}} on @mesh axis 0 kind "sum" : tensor<f32>
// the seed reaches the partial sum unchanged; the matmul's adjoint gives w's part
// CHECK:      %[[DW:.*]] = msir.matmul %{{.*}} : tensor<4x2xf32>, tensor<2x3xf32> to tensor<4x3xf32>
// the inverse all_to_all; the all_gather of the slice, shared by the devices'
// equal copies of the gathered x (1/2 each); the reduce_scatter of the gather
// CHECK:      %[[A2A:.*]] = msir_shard.all_to_all %{{.*}} on @mesh axis 0 dims 0 to 1 : tensor<2x4xf32> to tensor<4x2xf32>
// CHECK-NEXT: %[[AG:.*]] = msir_shard.all_gather %[[A2A]] on @mesh axis 0 dim 1 : tensor<4x2xf32> to tensor<4x4xf32>
// CHECK-NEXT: %[[HALF:.*]] = msir.constant dense<5.000000e-01> : tensor<4x4xf32>
// CHECK-NEXT: %[[SHARE:.*]] = msir.mul %[[AG]], %[[HALF]] : tensor<4x4xf32>
// CHECK-NEXT: %[[RS:.*]] = msir_shard.reduce_scatter %[[SHARE]] on @mesh axis 0 dim 0 : tensor<4x4xf32> to tensor<2x4xf32>
// w's parts summed over the devices, where its gradient is returned
// CHECK-NEXT: %[[DWS:.*]] = msir_shard.all_reduce %[[DW]] on @mesh axis 0 kind "sum" : tensor<4x3xf32>
// CHECK-NEXT: func.return %[[L]], %[[RS]], %[[DWS]] : tensor<f32>, tensor<2x4xf32>, tensor<4x3xf32>
