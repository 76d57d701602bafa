// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=none math_impl=libm}" -t llvm | filecheck %s
// RUN: msir-opt %s -p "msir-lower-to-llvm{vector_abi=none math_impl=libm parallel=false}" -t llvm | filecheck %s --check-prefix=SERIAL

// Parallel loops: a large loop with independent iterations is outlined into
// @f.par<k>(begin, end, captured...) and a task @f.par<k>.task(ctx, chunk,
// begin, end) that unpacks the captured values from 8-byte slots of ctx; the
// function calls __msir_parallel_for(task, ctx, lb, ub, min_iters) with
// min_iters = MIN_CHUNK_WORK (100000) / (work units per iteration: 12 for
// @scale, 11 for @total). Reductions start
// each chunk at the identity and are combined in chunk order afterwards; a
// row group's msir.row_local buffer becomes a per-chunk stack buffer. Small
// loops and loops with a cross-iteration dependence stay inline.

// SERIAL-NOT: __msir_parallel_for

builtin.module {
  func.func private @__msir_error(i32, i64)

  // CHECK-LABEL: define void @"scale"(ptr noalias %a0, ptr noalias %a1)
  // CHECK:         %[[CTX:.*]] = alloca i64, i64 2, align 8
  // CHECK:         %[[SLOTS:.*]] = bitcast ptr %[[CTX]] to ptr
  // CHECK-NEXT:    store ptr %a0, ptr %[[SLOTS]]
  // CHECK-NEXT:    %[[SLOT1:.*]] = getelementptr inbounds i64, ptr %[[SLOTS]], i64 1
  // CHECK-NEXT:    store ptr %a1, ptr %[[SLOT1]]
  // CHECK-NEXT:    call i64 @"__msir_parallel_for"(ptr @"scale.par0.task", ptr %[[SLOTS]], i64 0, i64 65536, i64 8334)
  // CHECK-NEXT:    ret void
  // CHECK-LABEL: define void @"scale.par0"(i64 %a0, i64 %a1, ptr noalias %a2, ptr noalias %a3)
  // CHECK:         phi i64 [ %a0, %{{.*}} ], [ %{{.*}}, %{{.*}} ]
  // CHECK:         icmp slt i64 %{{.*}}, %a1
  // CHECK:         call float @"llvm.exp.f32"
  // CHECK:         fmul float %{{.*}}, 0x4000000000000000
  // CHECK-LABEL: define void @"scale.par0.task"(ptr %a0, i64 %a1, i64 %a2, i64 %a3)
  // CHECK:         %[[A:.*]] = load ptr, ptr %a0
  // CHECK-NEXT:    %[[P1:.*]] = getelementptr inbounds i64, ptr %a0, i32 1
  // CHECK-NEXT:    %[[B:.*]] = load ptr, ptr %[[P1]]
  // CHECK-NEXT:    call void @"scale.par0"(i64 %a2, i64 %a3, ptr %[[A]], ptr %[[B]])

  func.func @scale(%a: memref<65536xf32>, %out: memref<65536xf32>) attributes {msir.num_outputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = arith.constant 65536 : index
    %k = arith.constant 2.0 : f32
    scf.for %i = %c0 to %n step %c1 {
      %x = memref.load %a[%i] : memref<65536xf32>
      %e = math.exp %x : f32
      %y = arith.mulf %e, %k : f32
      memref.store %y, %out[%i] : memref<65536xf32>
    }
    func.return
  }

  // CHECK-LABEL: define float @"total"(ptr noalias %a0)
  // CHECK:         %[[PARTIALS:.*]] = alloca float, i64 256, align 64
  // CHECK:         %[[N:.*]] = call i64 @"__msir_parallel_for"(ptr @"total.par0.task", ptr %{{.*}}, i64 0, i64 65536, i64 9091)
  // CHECK:         %[[K:.*]] = phi i64 [ 0, %{{.*}} ], [ %[[K1:.*]], %{{.*}} ]
  // CHECK-NEXT:    %[[ACC:.*]] = phi float [ 0x0000000000000000, %{{.*}} ], [ %[[ACC1:.*]], %{{.*}} ]
  // CHECK-NEXT:    icmp slt i64 %[[K]], %[[N]]
  // CHECK:         %[[PK:.*]] = getelementptr inbounds float, ptr %[[PARTIALS]], i64 %[[K]]
  // CHECK-NEXT:    %[[X:.*]] = load float, ptr %[[PK]]
  // CHECK-NEXT:    %[[ACC1]] = fadd reassoc float %[[ACC]], %[[X]]
  // CHECK-LABEL: define float @"total.par0"(i64 %a0, i64 %a1, ptr noalias %a2)
  // CHECK:         phi float [ 0x8000000000000000, %{{.*}} ], [ %{{.*}}, %{{.*}} ]
  // CHECK:         fadd reassoc float
  // CHECK-LABEL: define void @"total.par0.task"
  // CHECK:         %[[PART:.*]] = call float @"total.par0"(i64 %a2, i64 %a3, ptr %{{.*}})
  // CHECK-NEXT:    %[[SLOT:.*]] = getelementptr inbounds float, ptr %{{.*}}, i64 %a1
  // CHECK-NEXT:    store float %[[PART]], ptr %[[SLOT]]

  func.func @total(%a: memref<65536xf32>) -> f32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = arith.constant 65536 : index
    %zero = arith.constant 0.0 : f32
    %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %a[%i] : memref<65536xf32>
      %e = math.exp %x : f32
      %acc1 = arith.addf %acc, %e : f32
      scf.yield %acc1 : f32
    }
    func.return %s : f32
  }

  // CHECK-LABEL: define void @"rows"
  // CHECK:         call i64 @"__msir_parallel_for"(ptr @"rows.par0.task", ptr %{{.*}}, i64 0, i64 512, i64 7)
  // CHECK-LABEL: define void @"rows.par0"
  // CHECK:         %[[ROW:.*]] = alloca float, i64 1024, align 64
  // CHECK:         getelementptr inbounds float, ptr %[[ROW]]
  // CHECK-NOT:     aligned_alloc
  // CHECK:         define void @"rows.par0.task"

  func.func @rows(%a: memref<512x1024xf32>, %out: memref<512x1024xf32>) attributes {msir.num_outputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %r = arith.constant 512 : index
    %c = arith.constant 1024 : index
    %tmp = memref.alloc() {msir.row_local, msir.site = 0 : i64} : memref<1x1024xf32>
    scf.for %i = %c0 to %r step %c1 {
      scf.for %j = %c0 to %c step %c1 {
        %x = memref.load %a[%i, %j] : memref<512x1024xf32>
        %e = math.exp %x : f32
        memref.store %e, %tmp[%c0, %j] : memref<1x1024xf32>
      }
      scf.for %j = %c0 to %c step %c1 {
        %e = memref.load %tmp[%c0, %j] : memref<1x1024xf32>
        %y = arith.addf %e, %e : f32
        memref.store %y, %out[%i, %j] : memref<512x1024xf32>
      }
    }
    memref.dealloc %tmp : memref<1x1024xf32>
    func.return
  }

  // CHECK-LABEL: define void @"small"
  // CHECK-NOT:     __msir_parallel_for
  // CHECK:         define i32 @"small__entry"

  func.func @small(%a: memref<1000xf32>, %out: memref<1000xf32>) attributes {msir.num_outputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = arith.constant 1000 : index
    scf.for %i = %c0 to %n step %c1 {
      %x = memref.load %a[%i] : memref<1000xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %out[%i] : memref<1000xf32>
    }
    func.return
  }

  // A store to out[i+1] read at out[i] by the next iteration: serial.
  // CHECK-LABEL: define void @"shifted"
  // CHECK-NOT:     __msir_parallel_for
  // CHECK:         define i32 @"shifted__entry"

  func.func @shifted(%a: memref<65537xf32>, %out: memref<65537xf32>) attributes {msir.num_outputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = arith.constant 65536 : index
    scf.for %i = %c0 to %n step %c1 {
      %x = memref.load %out[%i] : memref<65537xf32>
      %e = math.exp %x : f32
      %j = arith.addi %i, %c1 : index
      memref.store %e, %out[%j] : memref<65537xf32>
    }
    func.return
  }
}

// CHECK: declare i64 @"__msir_parallel_for"(ptr, ptr, i64, i64, i64)
