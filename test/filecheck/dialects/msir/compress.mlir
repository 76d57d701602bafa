// RUN: msir-opt %s | msir-opt | filecheck %s
// RUN: msir-opt %s --print-op-generic | msir-opt | filecheck %s

// msir.compress (`x[mask]`, a result of runtime length) and msir.expand (its
// inverse and adjoint), with masks of the whole shape and of leading dims.

func.func @compress(%x: tensor<5x4xf32>, %m: tensor<5xi1>, %w: tensor<5x4xi1>, %y: tensor<?xi64>, %n: tensor<?xi1>) -> (tensor<?x4xf32>, tensor<?xf32>, tensor<?xi64>) {
  %0 = msir.compress %x[%m] : tensor<5x4xf32>, tensor<5xi1> to tensor<?x4xf32>
  %1 = msir.compress %x[%w] : tensor<5x4xf32>, tensor<5x4xi1> to tensor<?xf32>
  %2 = msir.compress %y[%n] : tensor<?xi64>, tensor<?xi1> to tensor<?xi64>
  func.return %0, %1, %2 : tensor<?x4xf32>, tensor<?xf32>, tensor<?xi64>
}
// CHECK-LABEL: func.func @compress
// CHECK-NEXT: %0 = msir.compress %x[%m] : tensor<5x4xf32>, tensor<5xi1> to tensor<?x4xf32>
// CHECK-NEXT: %1 = msir.compress %x[%w] : tensor<5x4xf32>, tensor<5x4xi1> to tensor<?xf32>
// CHECK-NEXT: %2 = msir.compress %y[%n] : tensor<?xi64>, tensor<?xi1> to tensor<?xi64>

func.func @expand(%u: tensor<?x4xf64>, %m: tensor<5xi1>, %v: tensor<?xf64>, %w: tensor<5x4xi1>, %s: tensor<3x4xf64>) -> (tensor<5x4xf64>, tensor<5x4xf64>, tensor<5x4xf64>) {
  %0 = msir.expand %u[%m] : tensor<?x4xf64>, tensor<5xi1> to tensor<5x4xf64>
  %1 = msir.expand %v[%w] : tensor<?xf64>, tensor<5x4xi1> to tensor<5x4xf64>
  %2 = msir.expand %s[%m] : tensor<3x4xf64>, tensor<5xi1> to tensor<5x4xf64>
  func.return %0, %1, %2 : tensor<5x4xf64>, tensor<5x4xf64>, tensor<5x4xf64>
}
// CHECK-LABEL: func.func @expand
// CHECK-NEXT: %0 = msir.expand %u[%m] : tensor<?x4xf64>, tensor<5xi1> to tensor<5x4xf64>
// CHECK-NEXT: %1 = msir.expand %v[%w] : tensor<?xf64>, tensor<5x4xi1> to tensor<5x4xf64>
// CHECK-NEXT: %2 = msir.expand %s[%m] : tensor<3x4xf64>, tensor<5xi1> to tensor<5x4xf64>
