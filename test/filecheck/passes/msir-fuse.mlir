// RUN: msir-opt %s -p msir-fuse | filecheck %s
// The printed fusions parse back to the same IR, and fusing again changes nothing:
// RUN: msir-opt %s -p msir-fuse | msir-opt | filecheck %s
// RUN: msir-opt %s -p msir-fuse | msir-opt -p msir-fuse | filecheck %s

// A producer->consumer chain of elementwise ops becomes one msir.fusion; the
// function's values are its inputs, in order of first use.

func.func @chain(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.add %a, %b : tensor<4xf32>
  %1 = msir.exp %0 : tensor<4xf32>
  %2 = msir.mul %1, %a : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

// CHECK-LABEL: func.func @chain(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    %[[F:.*]] = msir.fusion (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>):
// CHECK-NEXT:      %[[S:.*]] = msir.add %[[A]], %[[B]] : tensor<4xf32>
// CHECK-NEXT:      %[[E:.*]] = msir.exp %[[S]] : tensor<4xf32>
// CHECK-NEXT:      %[[M:.*]] = msir.mul %[[E]], %[[A]] : tensor<4xf32>
// CHECK-NEXT:      msir.yield %[[M]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]] : tensor<4xf32>
// CHECK-NEXT:  }

// A value of the group that is also used outside it stays materialised as an
// extra result; values used only inside get no result.

func.func @escape(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = msir.exp %a : tensor<4xf32>
  %1 = msir.neg %0 : tensor<4xf32>
  %2 = msir.mul %1, %a : tensor<4xf32>
  func.return %2, %0 : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @escape(
// CHECK-NEXT:    %[[EXP:.*]], %[[MUL:.*]] = msir.fusion (%a) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: tensor<4xf32>):
// CHECK-NEXT:      %[[E:.*]] = msir.exp %[[A]] : tensor<4xf32>
// CHECK-NEXT:      %[[N:.*]] = msir.neg %[[E]] : tensor<4xf32>
// CHECK-NEXT:      %[[M:.*]] = msir.mul %[[N]], %[[A]] : tensor<4xf32>
// CHECK-NEXT:      msir.yield %[[E]], %[[M]] : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[MUL]], %[[EXP]] : tensor<4xf32>, tensor<4xf32>

// broadcast_to of a function value goes inside, with the small tensor as the
// input; a rank-0 constant and its broadcast are copied in and the original
// constant, now unused, is erased.

func.func @bcast(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %c = msir.constant dense<2.0> : tensor<f32>
  %cb = msir.broadcast_to %c : tensor<f32> to tensor<4x8xf32>
  %0 = msir.broadcast_to %b : tensor<8xf32> to tensor<4x8xf32>
  %1 = msir.add %x, %0 : tensor<4x8xf32>
  %2 = msir.mul %1, %cb : tensor<4x8xf32>
  %3 = msir.tanh %2 : tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @bcast(
// CHECK-NOT:     msir.constant
// CHECK:         %[[F:.*]] = msir.fusion (%b, %x) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[B:.*]]: tensor<8xf32>, %[[X:.*]]: tensor<4x8xf32>):
// CHECK-NEXT:      %[[BB:.*]] = msir.broadcast_to %[[B]] : tensor<8xf32> to tensor<4x8xf32>
// CHECK-NEXT:      %[[S:.*]] = msir.add %[[X]], %[[BB]] : tensor<4x8xf32>
// CHECK-NEXT:      %[[C:.*]] = msir.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[CB:.*]] = msir.broadcast_to %[[C]] : tensor<f32> to tensor<4x8xf32>
// CHECK-NEXT:      %[[M:.*]] = msir.mul %[[S]], %[[CB]] : tensor<4x8xf32>
// CHECK-NEXT:      %[[T:.*]] = msir.tanh %[[M]] : tensor<4x8xf32>
// CHECK-NEXT:      msir.yield %[[T]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]] : tensor<4x8xf32>

// A broadcast constant read by two fusions (CSE merged the zeros of two ReLUs)
// is copied into both: it is never a result that would be materialised.

func.func @shared_zeros(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = msir.constant dense<0.0> : tensor<f32>
  %z = msir.broadcast_to %c : tensor<f32> to tensor<4x8xf32>
  %0 = msir.add %x, %y : tensor<4x8xf32>
  %1 = msir.maximum %0, %z : tensor<4x8xf32>
  %2 = msir.matmul %1, %w : tensor<4x8xf32>, tensor<8x8xf32> to tensor<4x8xf32>
  %3 = msir.exp %2 : tensor<4x8xf32>
  %4 = msir.maximum %3, %z : tensor<4x8xf32>
  func.return %1, %4 : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @shared_zeros(
// CHECK-NOT:     msir.broadcast_to
// CHECK:         %[[F1:.*]] = msir.fusion (%x, %y) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK:           msir.broadcast_to %{{.*}} : tensor<f32> to tensor<4x8xf32>
// CHECK:           msir.yield %{{[^,]*}} : tensor<4x8xf32>{{$}}
// CHECK:         msir.matmul
// CHECK:         %[[F2:.*]] = msir.fusion (%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK:           msir.broadcast_to %{{.*}} : tensor<f32> to tensor<4x8xf32>
// CHECK:           msir.yield %{{[^,]*}} : tensor<4x8xf32>{{$}}
// CHECK:         func.return %[[F1]], %[[F2]]

// Splat constants of the iteration shape are copied in, not passed; a splat
// still used outside stays there too. Non-splat constants are inputs.

func.func @splat(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %c = msir.constant dense<1.0> : tensor<3xf32>
  %0 = msir.mul %x, %c : tensor<3xf32>
  %1 = msir.add %0, %c : tensor<3xf32>
  func.return %1, %c : tensor<3xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @splat(
// CHECK-NEXT:    %[[C:.*]] = msir.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK-NEXT:    %[[F:.*]] = msir.fusion (%x) : (tensor<3xf32>) -> tensor<3xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<3xf32>):
// CHECK-NEXT:      %[[CI:.*]] = msir.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK-NEXT:      %[[M:.*]] = msir.mul %[[X]], %[[CI]] : tensor<3xf32>
// CHECK-NEXT:      msir.add %[[M]], %[[CI]] : tensor<3xf32>
// CHECK:         func.return %[[F]], %[[C]] : tensor<3xf32>, tensor<3xf32>

func.func @nonsplat(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = msir.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %0 = msir.mul %x, %c : tensor<3xf32>
  %1 = msir.add %0, %c : tensor<3xf32>
  func.return %1 : tensor<3xf32>
}

// CHECK-LABEL: func.func @nonsplat(
// CHECK-NEXT:    %[[C:.*]] = msir.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:    msir.fusion (%x, %[[C]]) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<3xf32>, %[[CI:.*]]: tensor<3xf32>):
// CHECK-NOT:       msir.constant
// CHECK:           msir.yield

// A reduction is not fused: the chains before and after it become two fusions,
// the first one's result feeding the reduction.

func.func @reduce_split(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = msir.exp %x : tensor<4x8xf32>
  %1 = msir.neg %0 : tensor<4x8xf32>
  %2 = msir.reduce_sum %1 axes array<i64: 1> : tensor<4x8xf32> to tensor<4x1xf32>
  %3 = msir.sqrt %2 : tensor<4x1xf32>
  %4 = msir.abs %3 : tensor<4x1xf32>
  func.return %4 : tensor<4x1xf32>
}

// CHECK-LABEL: func.func @reduce_split(
// CHECK-NEXT:    %[[F1:.*]] = msir.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK:           msir.exp
// CHECK-NEXT:      msir.neg
// CHECK-NEXT:      msir.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[R:.*]] = msir.reduce_sum %[[F1]] axes array<i64: 1> : tensor<4x8xf32> to tensor<4x1xf32>
// CHECK-NEXT:    %[[F2:.*]] = msir.fusion (%[[R]]) : (tensor<4x1xf32>) -> tensor<4x1xf32> {
// CHECK:           msir.sqrt
// CHECK-NEXT:      msir.abs
// CHECK-NEXT:      msir.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F2]] : tensor<4x1xf32>

// No cycle: the reduction uses %0 and feeds %1, so %1 cannot join %0's group
// (the fusion would have to sit both before and after the reduction). exp
// stays alone and unfused; the broadcast of the sum fuses with the division.

func.func @nocycle(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.exp %x : tensor<4xf32>
  %s = msir.reduce_sum %0 axes array<i64: 0> : tensor<4xf32> to tensor<f32>
  %sb = msir.broadcast_to %s : tensor<f32> to tensor<4xf32>
  %1 = msir.div %0, %sb : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @nocycle(
// CHECK-NEXT:    %[[E:.*]] = msir.exp %x : tensor<4xf32>
// CHECK-NEXT:    %[[S:.*]] = msir.reduce_sum %[[E]] axes array<i64: 0> : tensor<4xf32> to tensor<f32>
// CHECK-NEXT:    %[[F:.*]] = msir.fusion (%[[S]], %[[E]]) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[SA:.*]]: tensor<f32>, %[[EA:.*]]: tensor<4xf32>):
// CHECK-NEXT:      %[[SB:.*]] = msir.broadcast_to %[[SA]] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT:      %[[D:.*]] = msir.div %[[EA]], %[[SB]] : tensor<4xf32>
// CHECK-NEXT:      msir.yield %[[D]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]] : tensor<4xf32>

// The same rule when the outside op only reads the group: %1 would have to be
// computed before the reduction that reads %0, so it does not join, and the
// group {%0} of one op is left alone.

func.func @outside_reader(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %0 = msir.exp %x : tensor<4xf32>
  %s = msir.reduce_sum %0 axes array<i64: 0> : tensor<4xf32> to tensor<f32>
  %1 = msir.neg %0 : tensor<4xf32>
  func.return %1, %s : tensor<4xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @outside_reader(
// CHECK-NOT:     msir.fusion
// CHECK:         func.return

// A single elementwise op is left alone, and ops of different shapes do not
// fuse with each other.

func.func @single(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = msir.exp %x : tensor<4xf32>
  %m = msir.matmul %0, %x : tensor<4xf32>, tensor<4xf32> to tensor<f32>
  func.return %m : tensor<f32>
}

// CHECK-LABEL: func.func @single(
// CHECK-NEXT:    %[[E:.*]] = msir.exp %x : tensor<4xf32>
// CHECK-NEXT:    msir.matmul %[[E]], %x

// ... unless it reads a splat constant of its shape (here a broadcast one):
// unfused, `x * 2.0` would first fill an array of 2.0s and read it back.

func.func @scale(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = msir.constant dense<2.000000e+00> : tensor<f32>
  %b = msir.broadcast_to %c : tensor<f32> to tensor<64x64xf32>
  %0 = msir.mul %x, %b : tensor<64x64xf32>
  func.return %0 : tensor<64x64xf32>
}

// CHECK-LABEL: func.func @scale(
// CHECK-NEXT:    %[[F:.*]] = msir.fusion (%x) : (tensor<64x64xf32>) -> tensor<64x64xf32> {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: tensor<64x64xf32>):
// CHECK-NEXT:      %[[C:.*]] = msir.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[B:.*]] = msir.broadcast_to %[[C]] : tensor<f32> to tensor<64x64xf32>
// CHECK-NEXT:      %[[M:.*]] = msir.mul %[[A]], %[[B]] : tensor<64x64xf32>
// CHECK-NEXT:      msir.yield %[[M]] : tensor<64x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]] : tensor<64x64xf32>

func.func @shapes(%x: tensor<4xf32>) -> tensor<2x2xf32> {
  %0 = msir.exp %x : tensor<4xf32>
  %1 = msir.reshape %0 : tensor<4xf32> to tensor<2x2xf32>
  %2 = msir.neg %1 : tensor<2x2xf32>
  func.return %2 : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @shapes(
// CHECK-NEXT:    msir.exp %x : tensor<4xf32>
// CHECK-NEXT:    msir.reshape
// CHECK-NEXT:    msir.neg %{{.*}} : tensor<2x2xf32>
// CHECK-NEXT:    func.return

// A broadcast_to of a group value to a larger shape starts a new group of that
// shape: the 4-wide chain and the 3x4 chain are two fusions, the first one's
// result an input of the second.

func.func @two_shapes(%x: tensor<4xf32>, %y: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = msir.exp %x : tensor<4xf32>
  %1 = msir.neg %0 : tensor<4xf32>
  %2 = msir.broadcast_to %1 : tensor<4xf32> to tensor<3x4xf32>
  %3 = msir.add %2, %y : tensor<3x4xf32>
  func.return %3 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @two_shapes(
// CHECK-NEXT:    %[[F1:.*]] = msir.fusion (%x) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK:         }
// CHECK-NEXT:    %[[F2:.*]] = msir.fusion (%[[F1]], %y) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<3x4xf32>):
// CHECK-NEXT:      %[[B:.*]] = msir.broadcast_to %[[A]] : tensor<4xf32> to tensor<3x4xf32>
// CHECK-NEXT:      msir.add %[[B]], %[[Y]] : tensor<3x4xf32>

// compare, select and cast fuse; a fusion may yield a different dtype than
// its inputs. Rank-0 chains and chains of constants only fuse as well.

func.func @cmpsel(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xi32> {
  %m = msir.compare lt, %x, %y : tensor<3xf32>
  %s = msir.select %m, %x, %y : tensor<3xi1>, tensor<3xf32>
  %c = msir.cast %s : tensor<3xf32> to tensor<3xi32>
  func.return %c : tensor<3xi32>
}

// CHECK-LABEL: func.func @cmpsel(
// CHECK-NEXT:    msir.fusion (%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<3xf32>, %[[Y:.*]]: tensor<3xf32>):
// CHECK-NEXT:      %[[M:.*]] = msir.compare lt, %[[X]], %[[Y]] : tensor<3xf32>
// CHECK-NEXT:      %[[S:.*]] = msir.select %[[M]], %[[X]], %[[Y]] : tensor<3xi1>, tensor<3xf32>
// CHECK-NEXT:      %[[C:.*]] = msir.cast %[[S]] : tensor<3xf32> to tensor<3xi32>
// CHECK-NEXT:      msir.yield %[[C]] : tensor<3xi32>

func.func @scalar(%s: tensor<f32>) -> tensor<f32> {
  %0 = msir.exp %s : tensor<f32>
  %1 = msir.neg %0 : tensor<f32>
  func.return %1 : tensor<f32>
}

// CHECK-LABEL: func.func @scalar(
// CHECK-NEXT:    msir.fusion (%s) : (tensor<f32>) -> tensor<f32> {

func.func @noinputs() -> tensor<4xf32> {
  %c = msir.constant dense<2.0> : tensor<4xf32>
  %0 = msir.exp %c : tensor<4xf32>
  %1 = msir.neg %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @noinputs(
// CHECK-NEXT:    %[[F:.*]] = msir.fusion () : () -> tensor<4xf32> {
// CHECK-NEXT:      %[[C:.*]] = msir.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:      %[[E:.*]] = msir.exp %[[C]] : tensor<4xf32>
// CHECK-NEXT:      %[[N:.*]] = msir.neg %[[E]] : tensor<4xf32>
// CHECK-NEXT:      msir.yield %[[N]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]] : tensor<4xf32>
