func.func @f(%a: tensor<4xi64>) {
  %0 = msir.arctan2 %a, %a : tensor<4xi64>
  func.return
}
