// RUN: not msir-opt %s -p msir-shard 2>&1 | filecheck %s

// msir-shard refuses a strategy it cannot apply at the op's location (here the
// location the frontend would attach; test/unit/test_shard_pass.py pins every
// message).

msir_shard.mesh @mesh(shape = 4)
func.func @divides(%x: tensor<6x4xf32>, %w: tensor<4x6xf32>) -> tensor<6x6xf32> {
  %y = msir.matmul %x, %w {msir_shard.strategy = #msir_shard.strategy<@mesh, "m">} : tensor<6x4xf32>, tensor<4x6xf32> to tensor<6x6xf32> loc("model.py":12:9)
  func.return %y : tensor<6x6xf32>
}
// CHECK-NOT: Traceback
// CHECK: {{^}}model.py:12:9: error: msir-shard: strategy #msir_shard.strategy<@mesh, "m"> of 'msir.matmul' splits loop 'm' (size 6) 4 ways, which does not divide it{{$}}
