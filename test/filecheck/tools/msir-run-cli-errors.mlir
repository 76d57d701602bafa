// RUN: not msir-run %s --entry f --input '[1, 2, 3, 4]:f32' 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not msir-run %S/Inputs/loss.py --entry loss --input '[1, 2, 3, 4]:f32' 2>&1 | filecheck %s --check-prefix=PY
// RUN: msir-run %s --entry f --input '[1, 2, 3, 4]:f32' --input '[1, 1, 1, 1]:f32' | filecheck %s --check-prefix=OK

func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.add %x, %y : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// MISSING-NOT: Traceback
// MISSING:     {{^}}msir-run: error: @f takes 2 arguments but 1 --input given: missing argument 1 (%y: tensor<4xf32>){{$}}
// MISSING-NOT: Traceback

// PY-NOT: Traceback
// PY:     {{^}}msir-run: error: {{.*}}loss.py is a Python file; msir-run runs an msir module: write one with msir-opt {{.*}}loss.py --entry loss --args <argument types>{{$}}
// PY-NOT: Traceback

// OK: result 0: tensor<4xf32> = [2., 3., 4., 5.]
