# RUN: msir-opt %s --entry branch --args 'tensor<4xf32>,f64' | filecheck %s --check-prefix=IF
# RUN: msir-opt %s --entry early --args 'tensor<4xf32>' | filecheck %s --check-prefix=EARLY
# RUN: msir-opt %s --entry static_branch --args 'tensor<4xf32>,i64=3' | filecheck %s --check-prefix=STATIC
# RUN: msir-opt %s --entry count --args 'tensor<4xf32>,i64' | filecheck %s --check-prefix=FOR
# RUN: msir-opt %s --entry back --args 'tensor<4xf32>,i64' | filecheck %s --check-prefix=BACK
# RUN: msir-opt %s --entry rows --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=ROWS
# RUN: msir-opt %s --entry halve --args 'tensor<4xf32>' | filecheck %s --check-prefix=WHILE

# Runtime control flow becomes msir.if / msir.for / msir.while with the
# variables the statement assigns as results (SSA merging); conditions on
# compile-time values are decided while translating.

import numpy as np


def branch(x, t):
    if np.sum(x) > t:
        y = np.exp(x)
    else:
        y = x * 2.0
    return y


# The Python float is a runtime tensor<f64>, weak: the comparison is in float32.
# IF-LABEL:  func.func @branch(%x: tensor<4xf32>, %t: tensor<f64>) -> tensor<4xf32> {
# IF:          %[[S:.*]] = msir.reduce_sum %x axes array<i64: 0> : tensor<4xf32> to tensor<f32>
# IF-NEXT:     %[[T:.*]] = msir.cast %t : tensor<f64> to tensor<f32>
# IF-NEXT:     %[[C:.*]] = msir.compare gt, %[[S]], %[[T]] : tensor<f32>
# IF-NEXT:     %[[Y:.*]] = msir.if %[[C]] -> (tensor<4xf32>) {
# IF-NEXT:       %[[E:.*]] = msir.exp %x : tensor<4xf32>
# IF-NEXT:       msir.yield %[[E]] : tensor<4xf32>
# IF-NEXT:     } else {
# IF:            %[[M:.*]] = msir.mul %x, %{{.*}} : tensor<4xf32>
# IF-NEXT:       msir.yield %[[M]] : tensor<4xf32>
# IF-NEXT:     }
# IF-NEXT:     func.return %[[Y]] : tensor<4xf32>


def early(x):
    if np.max(x) > 1.0:
        return np.tanh(x)
    return x - 1.0


# An early return: the rest of the function is the else branch; msir.if yields
# the returned value.
# EARLY-LABEL: func.func @early(
# EARLY:         %[[R:.*]] = msir.if %{{.*}} -> (tensor<4xf32>) {
# EARLY-NEXT:      %[[A:.*]] = msir.tanh %x : tensor<4xf32>
# EARLY-NEXT:      msir.yield %[[A]] : tensor<4xf32>
# EARLY-NEXT:    } else {
# EARLY:           %[[B:.*]] = msir.sub %x, %{{.*}} : tensor<4xf32>
# EARLY-NEXT:      msir.yield %[[B]] : tensor<4xf32>
# EARLY-NEXT:    }
# EARLY-NEXT:    func.return %[[R]] : tensor<4xf32>


def static_branch(x, k):
    if k > 2:
        y = x + 1.0
    elif x.shape[0] == 4:
        y = x - 1.0
    else:
        y = x
    return y


# STATIC-LABEL: func.func @static_branch(
# STATIC-NOT:     msir.if
# STATIC:         msir.add %x
# STATIC-NOT:     msir.sub
# STATIC:         func.return


def count(x, n):
    s = x
    for i in range(n):
        s = np.tanh(s)
    return s


# range(n) on a runtime int: bounds 0, %n, 1; the body takes the counter and
# the carried value.
# FOR-LABEL: func.func @count(%x: tensor<4xf32>, %n: tensor<i64>) -> tensor<4xf32> {
# FOR-NEXT:    %[[LB:.*]] = msir.constant dense<0> : tensor<i64>
# FOR-NEXT:    %[[ST:.*]] = msir.constant dense<1> : tensor<i64>
# FOR-NEXT:    %[[R:.*]] = msir.for %[[LB]] to %n step %[[ST]] (%x) : (tensor<4xf32>) {
# FOR-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[S:.*]]: tensor<4xf32>):
# FOR-NEXT:      %[[T:.*]] = msir.tanh %[[S]] : tensor<4xf32>
# FOR-NEXT:      msir.yield %[[T]] : tensor<4xf32>
# FOR-NEXT:    }
# FOR-NEXT:    func.return %[[R]] : tensor<4xf32>


def back(x, n):
    s = x
    for i in range(n, 0, -2):
        s = s + i
    return s


# A negative step: from %n down to 0 by -2; the counter is used (cast to f32).
# BACK-LABEL: func.func @back(
# BACK:         %[[UB:.*]] = msir.constant dense<0> : tensor<i64>
# BACK-NEXT:    %[[ST:.*]] = msir.constant dense<-2> : tensor<i64>
# BACK-NEXT:    msir.for %n to %[[UB]] step %[[ST]] (%x) : (tensor<4xf32>) {
# BACK-NEXT:    ^bb0(%[[I:.*]]: tensor<i64>, %{{.*}}: tensor<4xf32>):
# BACK:           msir.cast %[[I]] : tensor<i64> to tensor<f32>


def rows(m):
    acc = np.zeros(4, dtype=np.float32)
    for row in m:
        acc = acc + row * row
    return acc


# `for row in m` is a counted loop over the first axis reading m[i].
# ROWS-LABEL: func.func @rows(%m: tensor<3x4xf32>) -> tensor<4xf32> {
# ROWS:         %[[UB:.*]] = msir.constant dense<3> : tensor<i64>
# ROWS-NEXT:    %[[ST:.*]] = msir.constant dense<1> : tensor<i64>
# ROWS-NEXT:    msir.for %{{.*}} to %[[UB]] step %[[ST]] (%{{.*}}) : (tensor<4xf32>) {
# ROWS-NEXT:    ^bb0(%[[I:.*]]: tensor<i64>, %{{.*}}: tensor<4xf32>):
# ROWS-NEXT:      %[[ROW:.*]] = msir.take %m[%[[I]]] axis 0 : tensor<3x4xf32>, tensor<i64> to tensor<4xf32>
# ROWS-NEXT:      msir.mul %[[ROW]], %[[ROW]] : tensor<4xf32>


def halve(x):
    k = 0
    while np.max(x) > 1.0:
        x = x * 0.5
        k = k + 1
    return x, k


# The carried variables (sorted by name: k, then x) are the while's operands;
# the condition region recomputes the test on them.
# WHILE-LABEL: func.func @halve(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<i64>) {
# WHILE:         %[[K0:.*]] = msir.constant dense<0> : tensor<i64>
# WHILE-NEXT:    %[[K:.*]], %[[X:.*]] = msir.while (%[[K0]], %x) : (tensor<i64>, tensor<4xf32>) {
# WHILE-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[CX:.*]]: tensor<4xf32>):
# WHILE-NEXT:      %[[MAX:.*]] = msir.reduce_max %[[CX]] axes array<i64: 0> : tensor<4xf32> to tensor<f32>
# WHILE:           %[[C:.*]] = msir.compare gt, %[[MAX]], %{{.*}} : tensor<f32>
# WHILE-NEXT:      msir.condition %[[C]] : tensor<i1>
# WHILE-NEXT:    } do {
# WHILE-NEXT:    ^bb0(%[[BK:.*]]: tensor<i64>, %[[BX:.*]]: tensor<4xf32>):
# WHILE:           %[[H:.*]] = msir.mul %[[BX]], %{{.*}} : tensor<4xf32>
# WHILE:           %[[K1:.*]] = msir.add %[[BK]], %{{.*}} : tensor<i64>
# WHILE-NEXT:      msir.yield %[[K1]], %[[H]] : tensor<i64>, tensor<4xf32>
# WHILE-NEXT:    }
# WHILE-NEXT:    func.return %[[X]], %[[K]] : tensor<4xf32>, tensor<i64>
