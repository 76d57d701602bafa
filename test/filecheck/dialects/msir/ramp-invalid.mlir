// RUN: msir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier message of msir.ramp.

func.func @f(%a: tensor<f64>, %n: tensor<i32>) {
  %0 = msir.ramp %a, %a, %n : tensor<f64>, tensor<i32> to tensor<?xf64>
  func.return
}
// CHECK: {{^}}'msir.ramp' count has type tensor<i32>, expected tensor<i64>{{$}}

// -----

func.func @f(%a: tensor<f64>, %n: tensor<i64>) {
  %0 = msir.ramp %a, %a, %n : tensor<f64>, tensor<i64> to tensor<5xf64>
  func.return
}
// CHECK: {{^}}'msir.ramp' result has type tensor<5xf64>, but the operands imply tensor<?xf64> (start: tensor<f64>, step: tensor<f64>, count: tensor<i64>){{$}}

// -----

func.func @f(%a: tensor<i1>, %n: tensor<i64>) {
  %0 = msir.ramp %a, %a, %n : tensor<i1>, tensor<i64> to tensor<?xi1>
  func.return
}
// CHECK: {{^}}'msir.ramp' start has type tensor<i1>, expected element type in {int32, int64, float16, bfloat16, float32, float64}{{$}}
