// RUN: msir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier message of the msir_shard dialect; each CHECK pins the
// whole message line that --verify-diagnostics prints first for its split.

// mesh: an axis of size 0
msir_shard.mesh @mesh(shape = 2x0)
// CHECK: {{^}}'msir_shard.mesh' @mesh needs one or more axes of size >= 1, got shape 2x0{{$}}

// -----

// collective: the mesh is not defined
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = msir_shard.all_reduce %x on @nowhere axis 0 kind "sum" : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: {{^}}'msir_shard.all_reduce' names mesh @nowhere, which is not defined{{$}}

// -----

// collective: the symbol is not a mesh
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = msir_shard.all_reduce %x on @f axis 0 kind "sum" : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: {{^}}'msir_shard.all_reduce' names mesh @f, which is a func.func, not a msir_shard.mesh{{$}}

// -----

// collective: no such mesh axis
msir_shard.mesh @mesh(shape = 2x4)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = msir_shard.all_reduce %x on @mesh axis 2 kind "sum" : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: {{^}}'msir_shard.all_reduce' on axis 2 of mesh @mesh, which has 2 axes (shape 2x4){{$}}

// -----

// all_reduce: unknown reduction
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = msir_shard.all_reduce %x on @mesh axis 0 kind "prod" : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: {{^}}'msir_shard.all_reduce': unknown reduction kind "prod" (known: sum, max){{$}}

// -----

// along a dimension: dim out of range
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4xf32>) -> tensor<8xf32> {
  %y = msir_shard.all_gather %x on @mesh axis 0 dim 1 : tensor<4xf32> to tensor<8xf32>
  func.return %y : tensor<8xf32>
}
// CHECK: {{^}}'msir_shard.all_gather': dim 1 is out of range for an operand of rank 1{{$}}

// -----

// along a dimension: another element type
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4xf32>) -> tensor<8xf64> {
  %y = msir_shard.all_gather %x on @mesh axis 0 dim 0 : tensor<4xf32> to tensor<8xf64>
  func.return %y : tensor<8xf64>
}
// CHECK: {{^}}'msir_shard.all_gather': the result tensor<8xf64> has another element type than the operand tensor<4xf32>{{$}}

// -----

// along a dimension: wrong result shape
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = msir_shard.all_gather %x on @mesh axis 0 dim 1 : tensor<4x6xf32> to tensor<4x6xf32>
  func.return %y : tensor<4x6xf32>
}
// CHECK: {{^}}'msir_shard.all_gather' on axis 0 of mesh @mesh: the result of operand tensor<4x6xf32> is tensor<4x12xf32>, not tensor<4x6xf32>{{$}}

// -----

// slicing: the devices do not divide the dimension
msir_shard.mesh @mesh(shape = 4)
func.func @f(%x: tensor<6xf32>) -> tensor<1xf32> {
  %y = msir_shard.all_slice %x on @mesh axis 0 dim 0 : tensor<6xf32> to tensor<1xf32>
  func.return %y : tensor<1xf32>
}
// CHECK: {{^}}'msir_shard.all_slice': dimension 0 of operand tensor<6xf32> (size 6) is not divisible by the 4 devices of axis 0 of mesh @mesh{{$}}

// -----

// reduce_scatter: wrong result shape
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = msir_shard.reduce_scatter %x on @mesh axis 0 dim 0 : tensor<4x6xf32> to tensor<4x6xf32>
  func.return %y : tensor<4x6xf32>
}
// CHECK: {{^}}'msir_shard.reduce_scatter' on axis 0 of mesh @mesh: the result of operand tensor<4x6xf32> is tensor<2x6xf32>, not tensor<4x6xf32>{{$}}

// -----

// all_to_all: the split does not move
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = msir_shard.all_to_all %x on @mesh axis 0 dims 1 to 1 : tensor<4x6xf32> to tensor<4x6xf32>
  func.return %y : tensor<4x6xf32>
}
// CHECK: {{^}}'msir_shard.all_to_all': dim and to_dim are both 1; the split must move{{$}}

// -----

// all_to_all: to_dim out of range
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = msir_shard.all_to_all %x on @mesh axis 0 dims 0 to 2 : tensor<4x6xf32> to tensor<4x6xf32>
  func.return %y : tensor<4x6xf32>
}
// CHECK: {{^}}'msir_shard.all_to_all': to_dim 2 is out of range for an operand of rank 2{{$}}

// -----

// all_to_all: wrong result shape
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = msir_shard.all_to_all %x on @mesh axis 0 dims 0 to 1 : tensor<4x6xf32> to tensor<4x6xf32>
  func.return %y : tensor<4x6xf32>
}
// CHECK: {{^}}'msir_shard.all_to_all' on axis 0 of mesh @mesh: the result of operand tensor<4x6xf32> is tensor<8x3xf32>, not tensor<4x6xf32>{{$}}

// -----

// process_index: no such axis
msir_shard.mesh @mesh(shape = 2)
func.func @f() -> index {
  %i = msir_shard.process_index on @mesh axis 1 : index
  func.return %i : index
}
// CHECK: {{^}}'msir_shard.process_index' on axis 1 of mesh @mesh, which has 1 axes (shape 2){{$}}

// -----

// layout: a mesh axis used twice
func.func @f(%x: tensor<4x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[0],[]], partial=[0]>}) {
  func.return
}
// CHECK: {{^}}layout #msir_shard.layout<@mesh, dims=[[0],[]], partial=[0]> uses mesh axis 0 twice{{$}}

// -----

// layout: a negative mesh axis
func.func @f(%x: tensor<4x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[-1],[]]>}) {
  func.return
}
// CHECK: {{^}}layout #msir_shard.layout<@mesh, dims=[[-1],[]]> names a negative mesh axis{{$}}

// -----

// layout: partial axes out of order
func.func @f(%x: tensor<4x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[],[]], partial=[1,0]>}) {
  func.return
}
// CHECK: {{^}}layout #msir_shard.layout<@mesh, dims=[[],[]], partial=[1,0]>: partial axes must be listed in ascending order{{$}}

// -----

// strategy: an entry that is no loop letter
func.func @f(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %y = msir.neg %x {msir_shard.strategy = #msir_shard.strategy<@mesh, "m,mn">} : tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}
// CHECK: {{^}}strategy #msir_shard.strategy<@mesh, "m,mn">: entry 'mn' is neither '-' nor one loop letter{{$}}
