// RUN: msir-opt %s | filecheck %s
// RUN: msir-opt %s | msir-opt | filecheck %s

// Every op and attribute of the msir_shard dialect prints as it parses.

// CHECK: msir_shard.mesh @mesh(shape = 2x4)
msir_shard.mesh @mesh(shape = 2x4)
// CHECK: msir_shard.mesh @line(shape = 8)
msir_shard.mesh @line(shape = 8)

// CHECK-LABEL: func.func @collectives
// CHECK-SAME: (%x: tensor<4x8xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[0\],\[\]\],\ partial=\[1\]}}>})
// CHECK-SAME: -> (tensor<4x8xf32> {msir_shard.layout = #msir_shard.layout<@mesh, {{dims=\[\[\],\[\]\]}}>})
func.func @collectives(%x: tensor<4x8xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[0],[]], partial=[1]>})
    -> (tensor<4x8xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[],[]], partial=[]>})
    attributes {msir_shard.mesh = @mesh} {
  // CHECK: %s = msir_shard.all_reduce %x on @mesh axis 1 kind "sum" : tensor<4x8xf32>
  %s = msir_shard.all_reduce %x on @mesh axis 1 kind "sum" : tensor<4x8xf32>
  // CHECK: %m = msir_shard.all_reduce %s on @mesh axis 0 kind "max" : tensor<4x8xf32>
  %m = msir_shard.all_reduce %s on @mesh axis 0 kind "max" : tensor<4x8xf32>
  // CHECK: %rs = msir_shard.reduce_scatter %x on @mesh axis 1 dim 1 : tensor<4x8xf32> to tensor<4x2xf32>
  %rs = msir_shard.reduce_scatter %x on @mesh axis 1 dim 1 : tensor<4x8xf32> to tensor<4x2xf32>
  // CHECK: %g = msir_shard.all_gather %rs on @mesh axis 1 dim 1 : tensor<4x2xf32> to tensor<4x8xf32>
  %g = msir_shard.all_gather %rs on @mesh axis 1 dim 1 : tensor<4x2xf32> to tensor<4x8xf32>
  // CHECK: %t = msir_shard.all_to_all %g on @mesh axis 0 dims 0 to 1 : tensor<4x8xf32> to tensor<8x4xf32>
  %t = msir_shard.all_to_all %g on @mesh axis 0 dims 0 to 1 : tensor<4x8xf32> to tensor<8x4xf32>
  // CHECK: %sl = msir_shard.all_slice %t on @mesh axis 1 dim 0 : tensor<8x4xf32> to tensor<2x4xf32>
  %sl = msir_shard.all_slice %t on @mesh axis 1 dim 0 : tensor<8x4xf32> to tensor<2x4xf32>
  // CHECK: %i = msir_shard.process_index on @line axis 0 : index
  %i = msir_shard.process_index on @line axis 0 : index
  // CHECK: msir.matmul %x, %t {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,-">}
  %p = msir.matmul %x, %t {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,-">} : tensor<4x8xf32>, tensor<8x4xf32> to tensor<4x4xf32>
  func.return %m : tensor<4x8xf32>
}
