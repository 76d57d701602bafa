# RUN: msir-opt %s --entry checked --args 'tensor<3xf64>' | filecheck %s --check-prefix=CHECKED
# RUN: msir-opt %s --entry window --args 'tensor<6xf64>,tensor<i64>' | filecheck %s --check-prefix=WINDOW
# RUN: msir-opt %s --entry chosen --args 'tensor<3xf64>' | filecheck %s --check-prefix=CHOSEN

# Issue 17: `assert` and `raise` become msir.check (a raise in a runtime branch
# is a check that always fails, inside an msir.if); a slice with a runtime
# start and a static length is a bounds check and a take; a function chosen at
# run time is called in the branches of one msir.if.

import numpy as np


def checked(x):
    s = np.sum(x)
    assert s > 0, f"sum {s:.2f} is not positive"
    if s > 10:
        raise ValueError("too big")
    return x


# CHECKED:      %[[S:.*]] = msir.reduce_sum %x axes array<i64: 0> : tensor<3xf64> to tensor<f64>
# CHECKED:      %[[POS:.*]] = msir.compare gt, %[[S]], %{{.*}} : tensor<f64>
# CHECKED-NEXT: msir.check %[[POS]], "AssertionError", "sum {0:.2f} is not positive"(%[[S]] : tensor<f64>) : tensor<i1>
# CHECKED:      %[[BIG:.*]] = msir.compare gt, %[[S]], %{{.*}} : tensor<f64>
# CHECKED-NEXT: msir.if %[[BIG]] {
# CHECKED-NEXT:   %[[NO:.*]] = msir.constant dense<false> : tensor<i1>
# CHECKED-NEXT:   msir.check %[[NO]], "ValueError", "too big" : tensor<i1>
# CHECKED-NEXT:   msir.yield
# CHECKED-NEXT: } else {
# CHECKED-NEXT:   msir.yield
# CHECKED-NEXT: }


def window(x, i):
    return x[i:i + 3]


# WINDOW:      %[[LO:.*]] = msir.compare ge, %i, %{{.*}} : tensor<i64>
# WINDOW:      %[[HI:.*]] = msir.compare le, %i, %{{.*}} : tensor<i64>
# WINDOW-NEXT: %[[IN:.*]] = msir.and %[[LO]], %[[HI]] : tensor<i1>
# WINDOW-NEXT: msir.check %[[IN]], "IndexError", "slice start {0} is out of bounds for a window of 3 on axis 0 with size 6"(%i : tensor<i64>) {python_numbers = array<i64: 0>} : tensor<i1>
# WINDOW-NEXT: %[[K:.*]] = msir.iota 0 : tensor<3xi64>
# WINDOW-NEXT: %[[I:.*]] = msir.broadcast_to %i : tensor<i64> to tensor<3xi64>
# WINDOW-NEXT: %[[IDX:.*]] = msir.add %[[I]], %[[K]] : tensor<3xi64>
# WINDOW-NEXT: %[[W:.*]] = msir.take %x[%[[IDX]]] axis 0 : tensor<6xf64>, tensor<3xi64> to tensor<3xf64>
# WINDOW-NEXT: func.return %[[W]] : tensor<3xf64>


def chosen(x):
    f = np.sin if np.sum(x) < 0 else np.exp
    return f(x)


# CHOSEN:      %[[C:.*]] = msir.compare lt, %{{.*}}, %{{.*}} : tensor<f64>
# CHOSEN-NEXT: %[[R:.*]] = msir.if %[[C]] -> (tensor<3xf64>) {
# CHOSEN-NEXT:   %[[A:.*]] = msir.sin %x : tensor<3xf64>
# CHOSEN-NEXT:   msir.yield %[[A]] : tensor<3xf64>
# CHOSEN-NEXT: } else {
# CHOSEN-NEXT:   %[[B:.*]] = msir.exp %x : tensor<3xf64>
# CHOSEN-NEXT:   msir.yield %[[B]] : tensor<3xf64>
# CHOSEN-NEXT: }
# CHOSEN-NEXT: func.return %[[R]] : tensor<3xf64>
