func.func @atan2_sum(%a: tensor<3xf64>, %b: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.arctan2 %a, %b : tensor<3xf64>
  %1 = msir.reduce_sum %0 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %1 : tensor<f64>
}

func.func @grad_atan2(%a: tensor<3xf64>, %b: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
  %0 = msir.closure @atan2_sum() : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0, 1> : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  %2, %3 = msir.apply %1(%a, %b) : (tensor<3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  func.return %2, %3 : tensor<3xf64>, tensor<3xf64>
}
