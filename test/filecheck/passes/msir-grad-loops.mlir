// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=WHILE
// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=FOR
// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=IF
// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=NEST
// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=RR
// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=RRW
// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=TAKE
// The output parses back, verifies, and is a fixed point of the pass:
// RUN: msir-opt %s -p msir-grad | msir-opt -p msir-grad | filecheck %s --check-prefix=WHILE
// After the pass no differentiation op and no function value is left:
// RUN: msir-opt %s -p msir-grad | filecheck %s --check-prefix=GONE
// GONE-NOT: msir.grad
// GONE-NOT: msir.closure
// GONE-NOT: msir.apply

// Reverse mode through msir.while, msir.for and msir.if (passes/grad_control.py).
// Each region is outlined into a function (@f__while_region0 is the condition,
// @f__while_region1 the body) that gets the ordinary __fwd/__bwd pair.

// A while loop: x = sin(x) * x * 0.5 while x > 1. The trip count depends on x.
func.func @halve(%x0: tensor<f64>) -> tensor<f64> {
  %one = msir.constant dense<1.000000e+00> : tensor<f64>
  %r = msir.while (%x0) : (tensor<f64>) {
  ^bb0(%x: tensor<f64>):
    %c = msir.compare gt, %x, %one : tensor<f64>
    msir.condition %c : tensor<i1>
  } do {
  ^bb0(%x: tensor<f64>):
    %half = msir.constant dense<5.000000e-01> : tensor<f64>
    %s = msir.sin %x : tensor<f64>
    %h = msir.mul %s, %x : tensor<f64>
    %h2 = msir.mul %h, %half : tensor<f64>
    msir.yield %h2 : tensor<f64>
  }
  func.return %r : tensor<f64>
}

func.func @grad_halve(%x: tensor<f64>) -> tensor<f64> {
  %0 = msir.closure @halve() : (tensor<f64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<f64>) -> tensor<f64> to (tensor<f64>) -> tensor<f64>
  %2 = msir.apply %1(%x) : (tensor<f64>) -> tensor<f64>
  func.return %2 : tensor<f64>
}

// The body's pair: the forward returns the next value and the residuals
// (x and sin x), the adjoint maps a cotangent and the residuals to a cotangent.
// WHILE-LABEL: func.func @grad_halve(
// WHILE-NEXT:    func.call @halve__grad(%x)
// WHILE-LABEL: func.func private @halve__while_region1__fwd(%{{.*}}: tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>)
// WHILE:         msir.sin
// WHILE-LABEL: func.func private @halve__while_region1__bwd(%{{.*}}: tensor<f64>, %{{.*}}: tensor<f64>, %{{.*}}: tensor<f64>) -> tensor<f64>
// WHILE:         msir.cos

// 1. One while, as written, carrying an iteration count N (from 0) and one tape
//    per residual (x and sin x), started empty; each iteration calls the body's
//    augmented forward once and appends its residuals with msir.tape_push.
// WHILE-LABEL: func.func private @halve__fwd(
// WHILE-SAME:    %[[X0:.*]]: tensor<f64>) -> (tensor<f64>, tensor<i64>, tensor<?xf64>, tensor<?xf64>)
// WHILE-NOT:     msir.for
// WHILE:         %[[ZERO:.*]] = msir.constant dense<0> : tensor<i64>
// WHILE-NEXT:    %[[TA:.*]] = msir.tape_alloc %[[ZERO]] : tensor<i64> to tensor<?xf64>
// WHILE-NEXT:    %[[TB:.*]] = msir.tape_alloc %[[ZERO]] : tensor<i64> to tensor<?xf64>
// WHILE-NEXT:    %[[R:.*]], %[[N:.*]], %[[TA2:.*]], %[[TB2:.*]] = msir.while (%[[X0]], %[[ZERO]], %[[TA]], %[[TB]]) : (tensor<f64>, tensor<i64>, tensor<?xf64>, tensor<?xf64>) {
// WHILE-NEXT:    ^bb0(%[[CX:.*]]: tensor<f64>, %{{.*}}: tensor<i64>, %{{.*}}: tensor<?xf64>, %{{.*}}: tensor<?xf64>):
// WHILE-NEXT:      %[[C:.*]] = func.call @halve__while_region0(%[[CX]], %{{.*}})
// WHILE-NEXT:      msir.condition %[[C]] : tensor<i1>
// WHILE-NEXT:    } do {
// WHILE-NEXT:    ^bb0(%[[XK:.*]]: tensor<f64>, %[[COUNT:.*]]: tensor<i64>, %[[A:.*]]: tensor<?xf64>, %[[B:.*]]: tensor<?xf64>):
// WHILE-NEXT:      %[[Y:.*]], %[[R0:.*]], %[[R1:.*]] = func.call @halve__while_region1__fwd(%[[XK]])
// WHILE-NEXT:      %[[A1:.*]] = msir.tape_push %[[A]], %[[R0]] : tensor<?xf64>, tensor<f64>
// WHILE-NEXT:      %[[B1:.*]] = msir.tape_push %[[B]], %[[R1]] : tensor<?xf64>, tensor<f64>
// WHILE-NEXT:      %[[INC:.*]] = msir.constant dense<1> : tensor<i64>
// WHILE-NEXT:      %[[COUNT2:.*]] = msir.add %[[COUNT]], %[[INC]] : tensor<i64>
// WHILE-NEXT:      msir.yield %[[Y]], %[[COUNT2]], %[[A1]], %[[B1]] : tensor<f64>, tensor<i64>, tensor<?xf64>, tensor<?xf64>
// WHILE-NEXT:    }
// WHILE-NOT:     func.call @halve__while_region1
// WHILE:         func.return %[[R]], %[[N]], %[[TA2]], %[[TB2]]

// 3. The adjoint runs k = N-1 down to 0 (step -1), reading row k of each tape.
// WHILE-LABEL: func.func private @halve__bwd(
// WHILE-SAME:    %[[CT:.*]]: tensor<f64>, %[[NB:.*]]: tensor<i64>, %[[TA:.*]]: tensor<?xf64>, %[[TB:.*]]: tensor<?xf64>) -> tensor<f64>
// WHILE-NOT:     msir.while
// WHILE:         %[[ONE:.*]] = msir.constant dense<1> : tensor<i64>
// WHILE-NEXT:    %[[LAST:.*]] = msir.sub %[[NB]], %[[ONE]] : tensor<i64>
// WHILE-NEXT:    %[[M1:.*]] = msir.constant dense<-1> : tensor<i64>
// WHILE-NEXT:    %[[G:.*]] = msir.for %[[LAST]] to %[[M1]] step %[[M1]] (%[[CT]]) : (tensor<f64>) {
// WHILE-NEXT:    ^bb0(%[[K:.*]]: tensor<i64>, %[[C:.*]]: tensor<f64>):
// WHILE-NEXT:      %[[RA:.*]] = msir.tape_get %[[TA]][%[[K]]] : tensor<?xf64>, tensor<i64> to tensor<f64>
// WHILE-NEXT:      %[[RB:.*]] = msir.tape_get %[[TB]][%[[K]]] : tensor<?xf64>, tensor<i64> to tensor<f64>
// WHILE-NEXT:      %{{.*}} = func.call @halve__while_region1__bwd(%[[C]], %[[RA]], %[[RB]])
// WHILE:           msir.yield
// WHILE-NEXT:    }
// WHILE-NEXT:    func.return %[[G]] : tensor<f64>
// WHILE-LABEL: func.func private @halve__grad(
// WHILE:         func.call @halve__fwd(
// WHILE:         func.call @halve__bwd(

// A for loop with a runtime trip count: x = tanh(x * w), n times; the gradient
// w.r.t. the initial carried value x0 and w, which the body reads from outside.
func.func @loop(%x0: tensor<3xf64>, %w: tensor<3xf64>, %n: tensor<i64>) -> tensor<f64> {
  %zero = msir.constant dense<0> : tensor<i64>
  %step = msir.constant dense<1> : tensor<i64>
  %r = msir.for %zero to %n step %step (%x0) : (tensor<3xf64>) {
  ^bb0(%i: tensor<i64>, %x: tensor<3xf64>):
    %a = msir.mul %x, %w : tensor<3xf64>
    %t = msir.tanh %a : tensor<3xf64>
    msir.yield %t : tensor<3xf64>
  }
  %s = msir.reduce_sum %r axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %s : tensor<f64>
}

func.func @grad_loop(%x: tensor<3xf64>, %w: tensor<3xf64>, %n: tensor<i64>) -> (tensor<3xf64>, tensor<3xf64>) {
  %0 = msir.closure @loop() : (tensor<3xf64>, tensor<3xf64>, tensor<i64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0, 1> : (tensor<3xf64>, tensor<3xf64>, tensor<i64>) -> tensor<f64> to (tensor<3xf64>, tensor<3xf64>, tensor<i64>) -> (tensor<3xf64>, tensor<3xf64>)
  %2, %3 = msir.apply %1(%x, %w, %n) : (tensor<3xf64>, tensor<3xf64>, tensor<i64>) -> (tensor<3xf64>, tensor<3xf64>)
  func.return %2, %3 : tensor<3xf64>, tensor<3xf64>
}

// The forward computes the trip count max(0, ceil((n - 0) / 1)), allocates the
// tapes with it and stores iteration i's residuals in row (i - lb) floordiv step.
// ({{^ *}} anchors a CHECK-NEXT whose captures are followed by more values: the
// filecheck in use matches the text skipped before a NEXT pattern greedily.)
// FOR-LABEL: func.func private @loop__fwd(
// FOR-SAME:    %[[X0:.*]]: tensor<3xf64>, %[[W:.*]]: tensor<3xf64>, %[[N:.*]]: tensor<i64>)
// FOR-NOT:     msir.while
// FOR:         %[[TRIP:.*]] = msir.maximum %{{.*}}, %{{.*}} : tensor<i64>
// FOR-NEXT:    %[[T0:.*]] = msir.tape_alloc %[[TRIP]] : tensor<i64> to tensor<?x3xf64>
// FOR:         msir.for %{{.*}} to %[[N]] step %{{.*}} (%[[X0]], %[[T0]]
// FOR-NEXT:    ^bb0(%[[I:.*]]: tensor<i64>, %[[X:.*]]: tensor<3xf64>, %[[A:[^:]*]]: tensor<?x3xf64>
// FOR-NEXT:      %[[OFF:.*]] = msir.sub %[[I]], %{{.*}} : tensor<i64>
// FOR-NEXT:      %[[ROW:.*]] = msir.floordiv %[[OFF]], %{{.*}} : tensor<i64>
// Only x is taped: tanh's output, the body's other residual, is the next
// iteration's x (read back from row k + 1 in the adjoint).
// FOR-NEXT:      {{^ *}}%[[Y:[0-9]+]], {{.*}}, %[[R:[0-9]+]] = func.call @loop__for_region0__fwd(%[[I]], %[[X]], %[[W]])
// FOR-NEXT:      msir.tape_set %[[A]][%[[ROW]]], %[[R]] : tensor<?x3xf64>, tensor<i64>, tensor<3xf64>
// FOR-NOT:       msir.tape_set
// FOR:           msir.yield %[[Y]],
// FOR:         func.return %{{.*}}, %[[TRIP]],

// The adjoint carries the cotangent of x and accumulates w's over the iterations.
// FOR-LABEL: func.func private @loop__bwd(
// FOR-SAME:    %[[CT:.*]]: tensor<f64>, %[[TRIP:.*]]: tensor<i64>, %[[TAPE:[^:]*]]: tensor<?x3xf64>, %[[FINAL:[^:]*]]: tensor<3xf64>,
// FOR:         %[[CTX:.*]] = msir.broadcast_to %[[CT]] : tensor<f64> to tensor<3xf64>
// FOR-NEXT:    %[[ACC0:.*]] = msir.constant dense<0.000000e+00> : tensor<3xf64>
// FOR-NEXT:    %[[ONE:.*]] = msir.constant dense<1> : tensor<i64>
// FOR-NEXT:    %[[LAST:.*]] = msir.sub %[[TRIP]], %[[ONE]] : tensor<i64>
// FOR-NEXT:    %[[M1:.*]] = msir.constant dense<-1> : tensor<i64>
// FOR-NEXT:    %[[GX:.*]], %[[GW:.*]] = msir.for %[[LAST]] to %[[M1]] step %[[M1]] (%[[CTX]], %[[ACC0]]) : (tensor<3xf64>, tensor<3xf64>) {
// FOR-NEXT:    ^bb0(%[[K:.*]]: tensor<i64>, %[[C:.*]]: tensor<3xf64>, %[[ACC:.*]]: tensor<3xf64>):
// FOR-NEXT:      %[[K1:.*]] = msir.add %[[K]], %{{.*}} : tensor<i64>
// FOR-NEXT:      %[[NEXT:.*]] = msir.minimum %[[K1]], %[[LAST]] : tensor<i64>
// FOR-NEXT:      %[[NROW:.*]] = msir.tape_get %[[TAPE]][%[[NEXT]]] : tensor<?x3xf64>, tensor<i64> to tensor<3xf64>
// FOR-NEXT:      %[[IN:.*]] = msir.compare lt, %[[K1]], %[[TRIP]] : tensor<i64>
// FOR-NEXT:      %[[INB:.*]] = msir.broadcast_to %[[IN]] : tensor<i1> to tensor<3xi1>
// FOR-NEXT:      %[[T:.*]] = msir.select %[[INB]], %[[NROW]], %[[FINAL]] : tensor<3xi1>, tensor<3xf64>
// FOR-NEXT:      %[[ROW:.*]] = msir.tape_get %[[TAPE]][%[[K]]] : tensor<?x3xf64>, tensor<i64> to tensor<3xf64>
// FOR:           %{{.*}}, %[[DW:.*]] = func.call @loop__for_region0__bwd(%[[C]], %[[T]], %{{.*}}, %[[ROW]])
// FOR:           %[[ACC1:.*]] = msir.add %[[ACC]], %[[DW]] : tensor<3xf64>
// FOR-NEXT:      msir.yield %{{.*}}, %[[ACC1]] : tensor<3xf64>, tensor<3xf64>
// FOR-NEXT:    }
// FOR-NEXT:    func.return %[[GX]], %[[GW]] : tensor<3xf64>, tensor<3xf64>

// An if: the forward yields the taken branch's residuals (a placeholder in the
// other branch's slots) and returns the predicate; the adjoint branches on it.
func.func @branch(%x: tensor<f64>) -> tensor<f64> {
  %zero = msir.constant dense<0.000000e+00> : tensor<f64>
  %c = msir.compare gt, %x, %zero : tensor<f64>
  %r = msir.if %c -> (tensor<f64>) {
    %s = msir.sin %x : tensor<f64>
    msir.yield %s : tensor<f64>
  } else {
    %e = msir.exp %x : tensor<f64>
    msir.yield %e : tensor<f64>
  }
  func.return %r : tensor<f64>
}

func.func @grad_branch(%x: tensor<f64>) -> tensor<f64> {
  %0 = msir.closure @branch() : (tensor<f64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<f64>) -> tensor<f64> to (tensor<f64>) -> tensor<f64>
  %2 = msir.apply %1(%x) : (tensor<f64>) -> tensor<f64>
  func.return %2 : tensor<f64>
}

// IF-LABEL: func.func private @branch__fwd(
// IF-SAME:    %[[X:.*]]: tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<i1>)
// IF:         %[[C:.*]] = msir.compare gt, %[[X]], %{{.*}} : tensor<f64>
// IF-NEXT:    %[[Y:.*]], %[[RS:.*]], %[[RE:.*]] = msir.if %[[C]] -> (tensor<f64>, tensor<f64>, tensor<f64>) {
// IF-NEXT:      %[[A:.*]], %[[B:.*]] = func.call @branch__if_region0__fwd(%[[X]])
// The other branch's residual slots hold a zero placeholder (CSE shares one).
// IF-NEXT:      msir.yield %[[A]], %[[B]], %{{.*}} : tensor<f64>, tensor<f64>, tensor<f64>
// IF-NEXT:    } else {
// IF-NEXT:      %[[D:.*]], %[[E:.*]] = func.call @branch__if_region1__fwd(%[[X]])
// IF-NEXT:      msir.yield %[[D]], %{{.*}}, %[[E]] : tensor<f64>, tensor<f64>, tensor<f64>
// IF-NEXT:    }
// IF-NEXT:    func.return %[[Y]], %[[RS]], %[[RE]], %[[C]]
// IF-LABEL: func.func private @branch__bwd(
// IF-SAME:    %[[CT:.*]]: tensor<f64>, %[[RS:.*]]: tensor<f64>, %[[RE:.*]]: tensor<f64>, %[[PRED:.*]]: tensor<i1>) -> tensor<f64>
// IF-NEXT:    %[[G:.*]] = msir.if %[[PRED]] -> (tensor<f64>) {
// IF-NEXT:      %[[GT:.*]] = func.call @branch__if_region0__bwd(%[[CT]], %[[RS]])
// IF-NEXT:      msir.yield %[[GT]] : tensor<f64>
// IF-NEXT:    } else {
// IF-NEXT:      %[[GE:.*]] = func.call @branch__if_region1__bwd(%[[CT]], %[[RE]])
// IF-NEXT:      msir.yield %[[GE]] : tensor<f64>
// IF-NEXT:    }
// IF-NEXT:    func.return %[[G]] : tensor<f64>

// A for nested in a for, the inner trip count j + 1 growing with the outer
// index j. The inner loop's residuals are tapes (a ragged tape of tapes would
// be needed), so the outer body is checkpointed: its forward runs the plain
// body and returns its inputs, which the outer loop tapes; its adjoint
// recomputes the body's augmented forward (inner tapes included) from them,
// then runs the body's adjoint.
func.func @nest(%x0: tensor<f64>, %n: tensor<i64>) -> tensor<f64> {
  %zero = msir.constant dense<0> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %r = msir.for %zero to %n step %one (%x0) : (tensor<f64>) {
  ^bb0(%j: tensor<i64>, %x: tensor<f64>):
    %m = msir.add %j, %one : tensor<i64>
    %y = msir.for %zero to %m step %one (%x) : (tensor<f64>) {
    ^bb1(%i: tensor<i64>, %z: tensor<f64>):
      %s = msir.sin %z : tensor<f64>
      msir.yield %s : tensor<f64>
    }
    msir.yield %y : tensor<f64>
  }
  func.return %r : tensor<f64>
}

func.func @grad_nest(%x: tensor<f64>, %n: tensor<i64>) -> tensor<f64> {
  %0 = msir.closure @nest() : (tensor<f64>, tensor<i64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<f64>, tensor<i64>) -> tensor<f64> to (tensor<f64>, tensor<i64>) -> tensor<f64>
  %2 = msir.apply %1(%x, %n) : (tensor<f64>, tensor<i64>) -> tensor<f64>
  func.return %2 : tensor<f64>
}

// The body's own pair keeps the inner tape (tensor<?xf64>) as a residual.
// NEST-LABEL: func.func private @nest__for_region0__fwd(
// NEST-SAME:    -> (tensor<f64>, tensor<i64>, tensor<?xf64>)
// The checkpointed pair: the forward calls the plain body, its residuals are
// the body's inputs (counter, carried x, the loop-invariant bounds).
// NEST-LABEL: func.func private @nest__for_region0__fwd_ckpt(
// NEST-SAME:    %[[J:.*]]: tensor<i64>, %[[X:.*]]: tensor<f64>, %[[A:.*]]: tensor<i64>, %[[B:.*]]: tensor<i64>)
// NEST-NEXT:    %[[Y:.*]] = func.call @nest__for_region0(%[[J]], %[[X]], %[[A]], %[[B]])
// NEST-NEXT:    func.return %[[Y]], %[[J]], %[[X]], %[[A]], %[[B]]
// NEST-LABEL: func.func private @nest__for_region0__bwd_ckpt(
// NEST-SAME:    %[[CT:.*]]: tensor<f64>, %[[J:.*]]: tensor<i64>, %[[X:.*]]: tensor<f64>, %[[A:.*]]: tensor<i64>, %[[B:.*]]: tensor<i64>)
// NEST-NEXT:    %{{.*}}, %[[N:.*]], %[[T:.*]] = func.call @nest__for_region0__fwd(%[[J]], %[[X]], %[[A]], %[[B]])
// NEST-NEXT:    %[[G:.*]] = func.call @nest__for_region0__bwd(%[[CT]], %[[N]], %[[T]])
// NEST-NEXT:    func.return %[[G]]
// The outer forward tapes only the carried x (not the counter, not the
// loop-invariant values).
// NEST-LABEL: func.func private @nest__fwd(
// NEST-SAME:    -> (tensor<f64>, tensor<i64>, tensor<?xf64>)
// NEST:         msir.tape_alloc %{{.*}} : tensor<i64> to tensor<?xf64>
// NEST-NOT:     msir.tape_alloc
// NEST:         %{{.*}}, %{{.*}}, %[[XIN:[0-9]+]], %{{.*}}, %{{.*}} = func.call @nest__for_region0__fwd_ckpt(
// NEST-NEXT:    msir.tape_set %{{.*}}[%{{.*}}], %[[XIN]] : tensor<?xf64>, tensor<i64>, tensor<f64>
// The outer adjoint recomputes the counter lb + k * step, reads row k and
// calls the checkpointed adjoint.
// NEST-LABEL: func.func private @nest__bwd(
// NEST:         msir.for %{{.*}} to %{{.*}} step %{{.*}} (%{{.*}}) : (tensor<f64>) {
// NEST-NEXT:    ^bb0(%[[K:.*]]: tensor<i64>, %[[C:.*]]: tensor<f64>):
// NEST-NEXT:      %[[KS:.*]] = msir.mul %[[K]], %{{.*}} : tensor<i64>
// NEST-NEXT:      %[[J:.*]] = msir.add %{{.*}}, %[[KS]] : tensor<i64>
// NEST-NEXT:      %[[XK:.*]] = msir.tape_get %{{.*}}[%[[K]]] : tensor<?xf64>, tensor<i64> to tensor<f64>
// NEST-NEXT:      func.call @nest__for_region0__bwd_ckpt(%[[C]], %[[J]], %[[XK]],

// Reverse over reverse: the second derivative of x = sin(x), 3 times. The
// tape ops of the first derivative stay in the blocks of its loops (outlining
// moves only the body call out), so the second level differentiates them in
// place.
func.func @sines(%x0: tensor<f64>) -> tensor<f64> {
  %zero = msir.constant dense<0> : tensor<i64>
  %n = msir.constant dense<3> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %r = msir.for %zero to %n step %one (%x0) : (tensor<f64>) {
  ^bb0(%i: tensor<i64>, %x: tensor<f64>):
    %s = msir.sin %x : tensor<f64>
    msir.yield %s : tensor<f64>
  }
  func.return %r : tensor<f64>
}
func.func @d_sines(%x: tensor<f64>) -> tensor<f64> {
  %0 = msir.closure @sines() : (tensor<f64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<f64>) -> tensor<f64> to (tensor<f64>) -> tensor<f64>
  %2 = msir.apply %1(%x) : (tensor<f64>) -> tensor<f64>
  func.return %2 : tensor<f64>
}
func.func @dd_sines(%x: tensor<f64>) -> tensor<f64> {
  %0 = msir.closure @d_sines() : (tensor<f64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<f64>) -> tensor<f64> to (tensor<f64>) -> tensor<f64>
  %2 = msir.apply %1(%x) : (tensor<f64>) -> tensor<f64>
  func.return %2 : tensor<f64>
}

// The first-order forward, after outlining: index arithmetic, the body call,
// and the tape_set, in the loop block.
// RR-LABEL: func.func private @sines__fwd(
// RR:         msir.for
// RR-NEXT:    ^bb0(%[[I:.*]]: tensor<i64>, %[[X:.*]]: tensor<f64>, %[[T:.*]]: tensor<?xf64>):
// RR-NEXT:      %[[OFF:.*]] = msir.sub %[[I]], %{{.*}} : tensor<i64>
// RR-NEXT:      %[[K:.*]] = msir.floordiv %[[OFF]], %{{.*}} : tensor<i64>
// RR-NEXT:      %[[Y:.*]], %[[R:.*]] = func.call @sines__for_region0__fwd(%[[I]], %[[X]])
// RR-NEXT:      %[[T2:.*]] = msir.tape_set %[[T]][%[[K]]], %[[R]]
// RR-NEXT:      msir.yield %[[Y]], %[[T2]] : tensor<f64>, tensor<?xf64>

// The adjoint of that forward: the cotangent %[[CTT]] of the tape it returns
// is loop-invariant (tape_set passes it on); each iteration reads the row it
// wrote (the adjoint of tape_set). No tape is carried. The forward's primal
// result, which the gradient does not read, takes no cotangent parameter (a
// symbolic zero): the tape's cotangent comes first.
// RR-LABEL: func.func private @sines__fwd__bwd(
// RR-SAME:    %[[CTT:[^:]*]]: tensor<?xf64>,
// RR:         msir.for %{{.*}} to %{{.*}} step %{{.*}} (%{{.*}}) : (tensor<f64>) {
// RR:           msir.tape_get %[[CTT]][%{{.*}}] : tensor<?xf64>, tensor<i64> to tensor<f64>
// RR:           msir.yield %{{.*}} : tensor<f64>
// RR-NEXT:    }

// The adjoint of the first-order adjoint: the tape it reads gets a cotangent
// tape of zeros (tape_zeros), carried by the loop, and each iteration adds its
// row's cotangent in place (tape_add); the read row itself is recomputed by a
// tape_get of the first-order tape, not taped again. No whole-tape addition.
// RR-LABEL: func.func private @sines__bwd__bwd(
// RR-SAME:    %[[TAPE:[^:]*]]: tensor<?xf64>
// RR-NOT:     msir.add {{.*}} : tensor<?xf64>
// RR:         %[[Z:.*]] = msir.tape_zeros %[[TAPE]] : tensor<?xf64>
// RR:         %{{.*}}, %[[G:.*]] = msir.for %{{.*}} to %{{.*}} step %{{.*}} (%{{.*}}, %[[Z]]) : (tensor<f64>, tensor<?xf64>) {
// RR-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %{{.*}}: tensor<f64>, %[[ACC:.*]]: tensor<?xf64>):
// RR-NOT:     msir.add {{.*}} : tensor<?xf64>
// RR:           %[[ROW:.*]] = msir.tape_get %[[TAPE]][%[[IDX:.*]]] : tensor<?xf64>, tensor<i64> to tensor<f64>
// RR-NEXT:      %{{.*}}, %[[CTROW:.*]] = func.call @sines__for_region0__bwd__bwd({{.*}}%[[ROW]])
// RR-NEXT:      %[[ACC2:.*]] = msir.tape_add %[[ACC]][%[[IDX]]], %[[CTROW]] : tensor<?xf64>, tensor<i64>, tensor<f64>
// RR-NEXT:      msir.yield %{{.*}}, %[[ACC2]] : tensor<f64>, tensor<?xf64>
// RR-NEXT:    }
// RR-NEXT:    func.return %[[G]] : tensor<?xf64>

// A residual computed from the counter and loop-invariant values only (here
// xs[i], all the adjoint w.r.t. x needs) is not taped: the adjoint recomputes
// it from the row index. This loop needs no tape at all.
func.func @scan(%x0: tensor<3xf64>, %xs: tensor<5x3xf64>) -> tensor<f64> {
  %zero = msir.constant dense<0> : tensor<i64>
  %n = msir.constant dense<5> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %r = msir.for %zero to %n step %one (%x0) : (tensor<3xf64>) {
  ^bb0(%i: tensor<i64>, %x: tensor<3xf64>):
    %row = msir.take %xs[%i] axis 0 : tensor<5x3xf64>, tensor<i64> to tensor<3xf64>
    %y = msir.mul %x, %row : tensor<3xf64>
    msir.yield %y : tensor<3xf64>
  }
  %s = msir.reduce_sum %r axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %s : tensor<f64>
}
func.func @vjp_scan(%x: tensor<3xf64>, %xs: tensor<5x3xf64>) -> tensor<3xf64> {
  %0 = msir.closure @scan() : (tensor<3xf64>, tensor<5x3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<3xf64>, tensor<5x3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<5x3xf64>) -> tensor<3xf64>
  %2 = msir.apply %1(%x, %xs) : (tensor<3xf64>, tensor<5x3xf64>) -> tensor<3xf64>
  func.return %2 : tensor<3xf64>
}
// TAKE-LABEL: func.func private @scan__fwd(
// TAKE-SAME:    -> (tensor<f64>, tensor<i64>, tensor<5x3xf64>)
// TAKE-NOT:     msir.tape_alloc
// TAKE-LABEL: func.func private @scan__bwd(
// TAKE-SAME:    %{{.*}}: tensor<f64>, %[[N:.*]]: tensor<i64>, %[[XS:.*]]: tensor<5x3xf64>)
// TAKE:         msir.for
// TAKE-NEXT:    ^bb0(%[[K:.*]]: tensor<i64>, %[[C:.*]]: tensor<3xf64>):
// TAKE-NEXT:      %[[KS:.*]] = msir.mul %[[K]], %{{.*}} : tensor<i64>
// TAKE-NEXT:      %[[I:.*]] = msir.add %{{.*}}, %[[KS]] : tensor<i64>
// TAKE-NEXT:      %[[ROW:.*]] = msir.take %[[XS]][%[[I]]] axis 0 : tensor<5x3xf64>, tensor<i64> to tensor<3xf64>
// TAKE-NEXT:      func.call @scan__for_region0__bwd(%[[C]], %[[ROW]])

// With respect to xs: the row xs[i] is kept in the loop's block (its index
// comes from the counter), so the adjoint adds each row's cotangent into one
// carried cotangent of xs in place (msir.tape_add on the static 5x3 type),
// instead of the body's adjoint returning a 5x3 array per iteration.
func.func @vjp_scan_xs(%x: tensor<3xf64>, %xs: tensor<5x3xf64>) -> tensor<5x3xf64> {
  %0 = msir.closure @scan() : (tensor<3xf64>, tensor<5x3xf64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 1> : (tensor<3xf64>, tensor<5x3xf64>) -> tensor<f64> to (tensor<3xf64>, tensor<5x3xf64>) -> tensor<5x3xf64>
  %2 = msir.apply %1(%x, %xs) : (tensor<3xf64>, tensor<5x3xf64>) -> tensor<5x3xf64>
  func.return %2 : tensor<5x3xf64>
}
// TAKE-LABEL: func.func private @scan__bwd_1(
// TAKE:         %[[Z:.*]] = msir.constant dense<0.000000e+00> : tensor<5x3xf64>
// TAKE:         msir.for %{{.*}} to %{{.*}} step %{{.*}} (%{{.*}}, %[[Z]])
// TAKE-NEXT:    ^bb0(%[[K:.*]]: tensor<i64>, %[[C:.*]]: tensor<3xf64>, %[[ACC:.*]]: tensor<5x3xf64>):
// TAKE:           %[[ROW:.*]] = msir.take %{{.*}}[%[[I:.*]]] axis 0 : tensor<5x3xf64>, tensor<i64> to tensor<3xf64>
// TAKE:           %[[CX:.*]], %[[CROW:.*]] = func.call @scan__for_region0__bwd_1(%[[C]], %[[ROW]], %{{.*}})
// TAKE-NEXT:      %[[ACC2:.*]] = msir.tape_add %[[ACC]][%[[I]]], %[[CROW]] : tensor<5x3xf64>, tensor<i64>, tensor<3xf64>
// TAKE-NEXT:      msir.yield %[[CX]], %[[ACC2]] : tensor<3xf64>, tensor<5x3xf64>

// Reverse over reverse through a while (@shrink, the loop of @halve): the
// first-order forward (@shrink__fwd)
// appends its residuals with msir.tape_push, kept in the loop block after the
// body call, so the second level differentiates the pushes in place: the
// cotangent of each pushed tape is loop-invariant, and the adjoint of the push
// in iteration k reads its row, r + k * p (the tape started by tape_alloc of
// r = 0 rows, p = 1 push per iteration).
func.func @shrink(%x0: tensor<f64>) -> tensor<f64> {
  %one = msir.constant dense<1.000000e+00> : tensor<f64>
  %r = msir.while (%x0) : (tensor<f64>) {
  ^bb0(%x: tensor<f64>):
    %c = msir.compare gt, %x, %one : tensor<f64>
    msir.condition %c : tensor<i1>
  } do {
  ^bb0(%x: tensor<f64>):
    %half = msir.constant dense<5.000000e-01> : tensor<f64>
    %s = msir.sin %x : tensor<f64>
    %h = msir.mul %s, %x : tensor<f64>
    %h2 = msir.mul %h, %half : tensor<f64>
    msir.yield %h2 : tensor<f64>
  }
  func.return %r : tensor<f64>
}
func.func @d_shrink(%x: tensor<f64>) -> tensor<f64> {
  %0 = msir.closure @shrink() : (tensor<f64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<f64>) -> tensor<f64> to (tensor<f64>) -> tensor<f64>
  %2 = msir.apply %1(%x) : (tensor<f64>) -> tensor<f64>
  func.return %2 : tensor<f64>
}
func.func @dd_shrink(%x: tensor<f64>) -> tensor<f64> {
  %0 = msir.closure @d_shrink() : (tensor<f64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<f64>) -> tensor<f64> to (tensor<f64>) -> tensor<f64>
  %2 = msir.apply %1(%x) : (tensor<f64>) -> tensor<f64>
  func.return %2 : tensor<f64>
}

// The second-level forward: one msir.while again, the first level's pushes
// (primal) after the body call, then its own.
// RRW-LABEL: func.func private @shrink__fwd__fwd(
// RRW:         msir.while
// RRW:         } do {
// RRW-NEXT:    ^bb0(%{{.*}}: tensor<f64>, %{{.*}}: tensor<i64>, %[[T1:.*]]: tensor<?xf64>, %[[T2:.*]]: tensor<?xf64>, %[[N:.*]]: tensor<i64>, %[[U1:.*]]: tensor<?xf64>, %[[U2:.*]]: tensor<?xf64>):
// RRW-NEXT:      %{{.*}}, %{{.*}}, %[[R1:.*]], %[[R2:.*]], %[[S1:.*]], %[[S2:.*]] = func.call @shrink__fwd__while_region1__fwd(
// RRW-NEXT:      msir.tape_push %[[T1]], %[[R1]] : tensor<?xf64>, tensor<f64>
// RRW-NEXT:      msir.tape_push %[[T2]], %[[R2]] : tensor<?xf64>, tensor<f64>
// RRW-NEXT:      msir.tape_push %[[U1]], %[[S1]] : tensor<?xf64>, tensor<f64>
// RRW-NEXT:      msir.tape_push %[[U2]], %[[S2]] : tensor<?xf64>, tensor<f64>
// RRW-NOT:     msir.for

// (The primal result, which the gradient does not read, takes no cotangent
// parameter: a symbolic zero.)
// RRW-LABEL: func.func private @shrink__fwd__bwd(
// RRW-SAME:    %[[CT1:[^:]*]]: tensor<?xf64>, %[[CT2:[^:]*]]: tensor<?xf64>, %{{.*}}: tensor<i64>,
// RRW:         %[[R0:.*]] = msir.constant dense<0> : tensor<i64>
// RRW:         msir.for %{{.*}} to %{{.*}} step %{{.*}} (%{{.*}}) : (tensor<f64>) {
// RRW-NEXT:    ^bb0(%[[K:.*]]: tensor<i64>, %[[C:.*]]: tensor<f64>):
// RRW-NEXT:      %[[KP:.*]] = msir.mul %[[K]], %{{.*}} : tensor<i64>
// RRW-NEXT:      %[[ROW:.*]] = msir.add %[[R0]], %[[KP]] : tensor<i64>
// RRW-NEXT:      %[[G2:.*]] = msir.tape_get %[[CT2]][%[[ROW]]] : tensor<?xf64>, tensor<i64> to tensor<f64>
// RRW-NEXT:      %[[G1:.*]] = msir.tape_get %[[CT1]][%[[ROW]]] : tensor<?xf64>, tensor<i64> to tensor<f64>
// RRW-NEXT:      %[[A:.*]] = msir.tape_get %{{.*}}[%[[K]]]
// RRW-NEXT:      %[[B:.*]] = msir.tape_get %{{.*}}[%[[K]]]
// RRW-NEXT:      func.call @shrink__fwd__while_region1__bwd(%[[C]], %[[G1]], %[[G2]], %[[A]], %[[B]])
