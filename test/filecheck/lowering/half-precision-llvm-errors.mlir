// RUN: not msir-opt %s -p msir-lower-to-llvm 2>&1 | filecheck %s

// msir-lower-to-llvm takes f16 and bf16 values only to load, store, select and
// convert them: arithmetic on them is refused, at the op's location, rather
// than handed to LLVM (where bf16 is an i16 and an f16 libm call does not exist).

func.func @add(%a: memref<4xf16>, %b: memref<4xf16>) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<4xf16>
  %y = arith.addf %x, %x : f16 loc("model.py":3:12)
  memref.store %y, %b[%c0] : memref<4xf16>
  func.return
}

// CHECK-NOT: Traceback
// CHECK:     model.py:3:12: error: msir-lower-to-llvm: 'arith.addf' on f16 is not supported: half precision computes in f32 (arith.extf, the op, arith.truncf), as convert-msir-to-loops emits it
