# RUN: msir-opt %s --entry calls --args 'tensor<4xf32>,tensor<4xf32>' | filecheck %s --check-prefix=CALL
# RUN: msir-opt %s --entry calls_int --args 'tensor<4xf32>' | filecheck %s --check-prefix=INLINE
# RUN: msir-opt %s --entry nested --args 'tensor<4xf32>' | filecheck %s --check-prefix=NESTED
# RUN: msir-opt %s --entry pair --args 'tensor<4xf32>' | filecheck %s --check-prefix=TUPLE
# RUN: msir-opt %s --entry flatten --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=SHAPE
# RUN: msir-opt %s --entry static_k --args 'tensor<6xf32>,i64=3' | filecheck %s --check-prefix=KNOWN

# Calls to module-level functions with only array arguments stay calls to a
# private function; a call that passes a Python int is specialised by inlining,
# as are nested defs and lambdas. Tuples are flattened into multiple results,
# and shapes are compile-time Python ints.

import numpy as np


def helper(a, b):
    return a * b + 1.0


def calls(x, y):
    return helper(x, y) - helper(y, x)


# CALL:       func.func @calls(%[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>) -> tensor<4xf32> {
# CALL-NEXT:    %[[C0:.*]] = func.call @helper(%[[X]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
# CALL-NEXT:    %[[C1:.*]] = func.call @helper(%[[Y]], %[[X]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
# CALL-NEXT:    %[[R:.*]] = msir.sub %[[C0]], %[[C1]] : tensor<4xf32>
# CALL-NEXT:    func.return %[[R]] : tensor<4xf32>
# CALL-NEXT:  }
# CALL-NEXT:  func.func private @helper(%[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>) -> tensor<4xf32> {
# CALL-NEXT:    msir.mul %[[A]], %[[B]] : tensor<4xf32>
# CALL:         msir.add
# CALL:         func.return
# CALL-NOT:   func.func


def scale(a, k):
    return a * k


def calls_int(x):
    return scale(x, 3)


# INLINE:      func.func @calls_int(%[[X:.*]]: tensor<4xf32>) -> tensor<4xf32> {
# INLINE-NOT:    func.call
# INLINE:        %[[C:.*]] = msir.constant dense<3.000000e+00> : tensor<f32>
# INLINE-NEXT:   %[[CB:.*]] = msir.broadcast_to %[[C]] : tensor<f32> to tensor<4xf32>
# INLINE-NEXT:   msir.mul %[[X]], %[[CB]] : tensor<4xf32>
# INLINE-NOT:  func.func private @scale


def nested(x):
    def sq(t):
        return t * t

    inc = lambda t: t + 1.0  # noqa: E731
    return inc(sq(x))


# NESTED:      func.func @nested(%[[X:.*]]: tensor<4xf32>) -> tensor<4xf32> {
# NESTED-NEXT:   %[[SQ:.*]] = msir.mul %[[X]], %[[X]] : tensor<4xf32>
# NESTED-NOT:    func.call
# NESTED:        msir.add %[[SQ]], %{{.*}} : tensor<4xf32>
# NESTED-NOT:  func.func


def pair(x):
    return x + 1.0, x * 2.0


# TUPLE:     func.func @pair(%[[X:.*]]: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
# TUPLE:       %[[S:.*]] = msir.add %[[X]], %{{.*}} : tensor<4xf32>
# TUPLE:       %[[P:.*]] = msir.mul %[[X]], %{{.*}} : tensor<4xf32>
# TUPLE-NEXT:  func.return %[[S]], %[[P]] : tensor<4xf32>, tensor<4xf32>


def flatten(x):
    n, m = x.shape
    return x.reshape(n * m), x.reshape(m, -1)


# SHAPE:      func.func @flatten(%[[X:.*]]: tensor<3x4xf32>) -> (tensor<12xf32>, tensor<4x3xf32>) {
# SHAPE-NEXT:   msir.reshape %[[X]] : tensor<3x4xf32> to tensor<12xf32>
# SHAPE-NEXT:   msir.reshape %[[X]] : tensor<3x4xf32> to tensor<4x3xf32>


def static_k(x, k):
    return x[:k] * k


# A Python int argument with a value (`i64=3`) stays a runtime i64 scalar, but
# where it reaches a static position (the slice bound) its value is used.
# KNOWN:      func.func @static_k(%[[X:.*]]: tensor<6xf32>, %[[K:.*]]: tensor<i64>) -> tensor<3xf32> {
# KNOWN-NEXT:   %[[S:.*]] = msir.slice %[[X]] starts array<i64: 0> steps array<i64: 1> : tensor<6xf32> to tensor<3xf32>
# KNOWN-NEXT:   %[[KC:.*]] = msir.cast %[[K]] : tensor<i64> to tensor<f32>
# KNOWN-NEXT:   %[[KB:.*]] = msir.broadcast_to %[[KC]] : tensor<f32> to tensor<3xf32>
# KNOWN-NEXT:   msir.mul %[[S]], %[[KB]] : tensor<3xf32>
