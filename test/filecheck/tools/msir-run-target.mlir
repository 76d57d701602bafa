// RUN: msir-run %s --entry f --input '[1, 2, 3]:f32' | filecheck %s
// RUN: msir-run %s --entry f --input '[1, 2, 3]:f32' --target cpu | filecheck %s
// RUN: msir-run %s --entry f --input '[1, 2, 3]:f32' --target CPU | filecheck %s
// RUN: not msir-run %s --entry f --input '[1, 2, 3]:f32' --target gpu 2>&1 | filecheck %s --check-prefix=UNKNOWN

// `--target` chooses the compile target by its registered name, in any case
// (msir.targets); the default is cpu. An unknown one is an error listing the
// known targets, without a traceback.

func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = msir.add %x, %x : tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// CHECK: result 0: tensor<3xf32> = [2., 4., 6.]

// UNKNOWN-NOT: Traceback
// UNKNOWN:     error: unknown compile target 'gpu'; the known targets are 'cpu' (device_target 'CPU')
