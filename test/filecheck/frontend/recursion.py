# RUN: msir-opt %s --entry sin_n --args 'tensor<4xf64>,tensor<i64>' | filecheck %s --check-prefix=DEPTH
# RUN: msir-opt %s --entry halve --args 'tensor<4xf64>' | filecheck %s --check-prefix=DATA
# RUN: msir-opt %s --entry unrolled --args 'tensor<4xf64>,i64=2' | filecheck %s --check-prefix=STATIC
# RUN: msir-opt %s --entry search --args 'tensor<4xf64>,i64' | filecheck %s --check-prefix=LOOP

# Recursion with a runtime depth is a function calling itself (its result type is
# that of the base case); with a compile-time depth it is unrolled. A `return`
# inside a loop becomes a carried flag and value.

import numpy as np


def sin_n(x, n):
    return x if n <= 0 else sin_n(np.sin(x) * 1.5, n - 1)


# The entry calls the recursive function, which calls itself in the else branch.
# DEPTH-LABEL: func.func @sin_n_1(%x: tensor<4xf64>, %n: tensor<i64>) -> tensor<4xf64> {
# DEPTH:         func.call @sin_n(%{{.*}}, %{{.*}}) : (tensor<4xf64>, tensor<i64>) -> tensor<4xf64>
# DEPTH-LABEL: func.func private @sin_n(%x: tensor<4xf64>, %n: tensor<i64>) -> tensor<4xf64> {
# DEPTH:         %[[C:.*]] = msir.compare le, %n, %{{.*}} : tensor<i64>
# DEPTH-NEXT:    %[[R:.*]] = msir.if %[[C]] -> (tensor<4xf64>) {
# DEPTH-NEXT:      msir.yield %x : tensor<4xf64>
# DEPTH-NEXT:    } else {
# DEPTH:           %[[X:.*]] = msir.mul %{{.*}}, %{{.*}} : tensor<4xf64>
# DEPTH:           %[[N:.*]] = msir.sub %n, %{{.*}} : tensor<i64>
# DEPTH-NEXT:      %[[Y:.*]] = func.call @sin_n(%[[X]], %[[N]]) : (tensor<4xf64>, tensor<i64>) -> tensor<4xf64>
# DEPTH-NEXT:      msir.yield %[[Y]] : tensor<4xf64>
# DEPTH-NEXT:    }
# DEPTH-NEXT:    func.return %[[R]] : tensor<4xf64>


def halve(x):
    if np.max(np.abs(x)) < 1:
        return x
    return 2.0 * halve(x / 2)


# DATA-LABEL: func.func private @halve(%x: tensor<4xf64>) -> tensor<4xf64> {
# DATA:         msir.if %{{.*}} -> (tensor<4xf64>) {
# DATA-NEXT:      msir.yield %x : tensor<4xf64>
# DATA-NEXT:    } else {
# DATA:           %[[H:.*]] = func.call @halve(%{{.*}}) : (tensor<4xf64>) -> tensor<4xf64>
# DATA:           msir.mul %{{.*}}, %[[H]] : tensor<4xf64>


def unrolled(x, n):
    return x if n <= 0 else unrolled(np.sin(x), n - 1)


# A Python int depth is decided at compile time: two sines, no call.
# STATIC-LABEL: func.func @unrolled(%x: tensor<4xf64>, %n: tensor<i64>) -> tensor<4xf64> {
# STATIC-NOT:     func.call
# STATIC:         %[[A:.*]] = msir.sin %x : tensor<4xf64>
# STATIC-NOT:     func.call
# STATIC:         %[[B:.*]] = msir.sin %[[A]] : tensor<4xf64>
# STATIC-NOT:     func.call
# STATIC:         func.return %[[B]] : tensor<4xf64>


def search(x, n):
    for i in range(n):
        x = x * 1.5
        if np.sum(x) > 10.0:
            return x
    return x * 0.0


# The loop carries the `returned` flag (%[[F0]]) and the returned value (zeros
# until a return sets it); `return x` sets both and breaks; after the loop an
# msir.if selects the returned value or runs the code after the loop.
# LOOP-LABEL: func.func @search(%x: tensor<4xf64>, %n: tensor<i64>) -> tensor<4xf64> {
# LOOP-NEXT:    %[[F0:.*]] = msir.constant dense<false> : tensor<i1>
# LOOP-NEXT:    %[[Z:.*]] = msir.constant dense<0.000000e+00> : tensor<f64>
# LOOP-NEXT:    %[[V0:.*]] = msir.broadcast_to %[[Z]] : tensor<f64> to tensor<4xf64>
# LOOP:         %{{.*}}, %{{.*}}, %[[V:.*]], %[[F:.*]], %[[X:.*]] = msir.for %{{.*}} to %n step %{{.*}} (%{{.*}}, %{{.*}}, %[[V0]], %[[F0]], %x)
# LOOP:             %[[T:.*]] = msir.constant dense<true> : tensor<i1>
# LOOP-NEXT:        msir.yield %[[T]], %{{.*}}, %[[T]] : tensor<i1>, tensor<4xf64>, tensor<i1>
# LOOP:         %[[RET:.*]] = msir.if %[[F]] -> (tensor<4xf64>) {
# LOOP-NEXT:      msir.yield %[[V]] : tensor<4xf64>
# LOOP-NEXT:    } else {
# LOOP:           %[[Y:.*]] = msir.mul %[[X]], %{{.*}} : tensor<4xf64>
# LOOP-NEXT:      msir.yield %[[Y]] : tensor<4xf64>
# LOOP-NEXT:    }
# LOOP-NEXT:    func.return %[[RET]] : tensor<4xf64>
