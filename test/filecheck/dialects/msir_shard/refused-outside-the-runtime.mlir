// msir's passes and the CPU target refuse msir_shard ops at their location (the
// pipeline's check, msir.pipeline.refuse_target_ops): a sharded function runs
// on a mesh of devices (msir.parallel), never as one serial function.

// RUN: not msir-opt %s -p msir-fuse 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not msir-opt %s -p cse,convert-msir-to-loops 2>&1 | filecheck %s --check-prefix=LOOPS
// RUN: not msir-run %s --entry f --input 'tensor<4xf32> = [1, 2, 3, 4]' 2>&1 | filecheck %s --check-prefix=CPU
// RUN: msir-opt %s -p cse | filecheck %s --check-prefix=CSE

// PASS: refused-outside-the-runtime.mlir:[[# @LINE + 6]]:1: error: msir-fuse cannot run on msir_shard.mesh, an op of the msir_shard target dialect; a sharded function runs on a mesh of devices: msir.parallel's Plan.run
// PASS-NEXT: msir_shard.mesh @mesh(shape = 2)
// PASS-NEXT: {{^    \^$}}
// LOOPS: refused-outside-the-runtime.mlir:[[# @LINE + 3]]:1: error: convert-msir-to-loops cannot run on msir_shard.mesh
// CPU: refused-outside-the-runtime.mlir:[[# @LINE + 2]]:1: error: {{.*}} cannot run on msir_shard.mesh, an op of the msir_shard target dialect
// CSE: msir_shard.all_reduce %x on @mesh axis 0 kind "sum" : tensor<4xf32>
msir_shard.mesh @mesh(shape = 2)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = msir_shard.all_reduce %x on @mesh axis 0 kind "sum" : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
