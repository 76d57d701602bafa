// RUN: msir-opt %s -p dce,msir-fuse,convert-msir-to-loops,msir-lower-to-llvm -t llvm | filecheck %s --check-prefix=LLVM
// RUN: msir-opt %s -p dce,msir-fuse,convert-msir-to-loops,msir-lower-to-llvm --print-between-passes | filecheck %s --check-prefix=STAGES

// The whole compile pipeline from the command line: dead code goes, the chain
// fuses into one loop, buffers become pointers addressed with getelementptr,
// and each function gets an `__entry` wrapper that unpacks an array of
// pointers, clears the error status, calls the function and returns the status.

func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %dead = msir.sub %x, %x : tensor<4xf32>
  %0 = msir.add %x, %y : tensor<4xf32>
  %1 = msir.mul %0, %y : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// LLVM:      @"__msir_status" = {{.*}}global i32 0
// LLVM:      define void @"f"(ptr noalias %[[X:[a-z0-9]+]], ptr noalias %[[Y:[a-z0-9]+]], ptr noalias %[[OUT:[a-z0-9]+]])
// LLVM:        %[[I:[a-z0-9]+]] = phi i64 [ 0, %{{[a-z0-9]+}} ], [ %[[NEXT:[a-z0-9]+]], %{{[a-z0-9]+}} ]
// LLVM-NEXT:   %[[C:[a-z0-9]+]] = icmp slt i64 %[[I]], 4
// LLVM:        %[[PX:[a-z0-9]+]] = getelementptr inbounds float, ptr %[[X]], i64 %[[I]]
// LLVM-NEXT:   %[[VX:[a-z0-9]+]] = load float, ptr %[[PX]]
// LLVM-NEXT:   %[[PY:[a-z0-9]+]] = getelementptr inbounds float, ptr %[[Y]], i64 %[[I]]
// LLVM-NEXT:   %[[VY:[a-z0-9]+]] = load float, ptr %[[PY]]
// LLVM-NEXT:   %[[S:[a-z0-9]+]] = fadd float %[[VX]], %[[VY]]
// LLVM-NOT:    fsub
// LLVM-NEXT:   %[[P:[a-z0-9]+]] = fmul float %[[S]], %[[VY]]
// LLVM-NEXT:   %[[PO:[a-z0-9]+]] = getelementptr inbounds float, ptr %[[OUT]], i64 %[[I]]
// LLVM-NEXT:   store float %[[P]], ptr %[[PO]]
// LLVM-NEXT:   %[[NEXT]] = add i64 %[[I]], 1
// LLVM:        ret void
// LLVM:      define i32 @"f__entry"(ptr %[[ARGS:[a-z0-9]+]], ptr %{{[a-z0-9]+}}, ptr %{{[a-z0-9]+}})
// LLVM:        %[[A0:[a-z0-9]+]] = load ptr, ptr %[[ARGS]]
// LLVM:        store i32 0, {{.*}} @"__msir_status"
// LLVM-NEXT:   call void @"f"(ptr %[[A0]], ptr %{{[a-z0-9]+}}, ptr %{{[a-z0-9]+}})
// LLVM-NEXT:   %[[ST:[a-z0-9]+]] = load i32, {{.*}} @"__msir_status"
// LLVM-NEXT:   ret i32 %[[ST]]

// STAGES:      IR after dce:
// STAGES-NOT:  msir.sub
// STAGES:        msir.add
// STAGES:      IR after msir-fuse:
// STAGES:        msir.fusion (%x, %y)
// STAGES:      IR after convert-msir-to-loops:
// STAGES:        func.func @f(%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>) attributes {msir.num_outputs = 1 : i64}
// STAGES:        scf.for
// STAGES-NOT:  IR after
// STAGES:        llvm.func @f(
// STAGES:        llvm.getelementptr
// STAGES:        llvm.func @f__entry(
