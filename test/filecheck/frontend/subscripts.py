# RUN: msir-opt %s --entry static_int --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=INT
# RUN: msir-opt %s --entry negative_int --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=NEGINT
# RUN: msir-opt %s --entry reverse --args 'tensor<5xf32>' | filecheck %s --check-prefix=REV
# RUN: msir-opt %s --entry strided --args 'tensor<5xf32>' | filecheck %s --check-prefix=STRIDE
# RUN: msir-opt %s --entry clamp --args 'tensor<5xf32>' | filecheck %s --check-prefix=CLAMP
# RUN: msir-opt %s --entry newaxis --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=NEWAXIS
# RUN: msir-opt %s --entry runtime_int --args 'tensor<3x4xf32>,i64' | filecheck %s --check-prefix=TAKE
# RUN: msir-opt %s --entry runtime_int_axis1 --args 'tensor<3x4xf32>,i64' | filecheck %s --check-prefix=TAKE1
# RUN: msir-opt %s --entry list_index --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=LIST

# Static subscripts become msir.slice (normalised non-negative starts, signed
# steps) plus msir.reshape to drop integer-indexed axes or add `None` axes; a
# runtime integer or a list becomes msir.take.

import numpy as np


def static_int(x):
    return x[1]


# INT:      func.func @static_int(%[[X:.*]]: tensor<3x4xf32>) -> tensor<4xf32> {
# INT-NEXT:   %[[S:.*]] = msir.slice %[[X]] starts array<i64: 1, 0> steps array<i64: 1, 1> : tensor<3x4xf32> to tensor<1x4xf32>
# INT-NEXT:   %[[R:.*]] = msir.reshape %[[S]] : tensor<1x4xf32> to tensor<4xf32>
# INT-NEXT:   func.return %[[R]] : tensor<4xf32>


def negative_int(x):
    return x[-1, -2:]


# NEGINT:      msir.slice %{{.*}} starts array<i64: 2, 2> steps array<i64: 1, 1> : tensor<3x4xf32> to tensor<1x2xf32>
# NEGINT-NEXT: msir.reshape %{{.*}} : tensor<1x2xf32> to tensor<2xf32>


def reverse(x):
    return x[::-1]


# REV:      func.func @reverse(%[[X:.*]]: tensor<5xf32>) -> tensor<5xf32> {
# REV-NEXT:   msir.slice %[[X]] starts array<i64: 4> steps array<i64: -1> : tensor<5xf32> to tensor<5xf32>


def strided(x):
    return x[::-2], x[3:0:-2]


# STRIDE:      msir.slice %{{.*}} starts array<i64: 4> steps array<i64: -2> : tensor<5xf32> to tensor<3xf32>
# STRIDE-NEXT: msir.slice %{{.*}} starts array<i64: 3> steps array<i64: -2> : tensor<5xf32> to tensor<2xf32>


def clamp(x):
    return x[1:100], x[-100:2]


# Out-of-range slice bounds clamp, as in NumPy.
# CLAMP:      msir.slice %{{.*}} starts array<i64: 1> steps array<i64: 1> : tensor<5xf32> to tensor<4xf32>
# CLAMP-NEXT: msir.slice %{{.*}} starts array<i64: 0> steps array<i64: 1> : tensor<5xf32> to tensor<2xf32>


def newaxis(x):
    return x[:, None], x[None]


# NEWAXIS:      func.func @newaxis(%[[X:.*]]: tensor<3x4xf32>) -> (tensor<3x1x4xf32>, tensor<1x3x4xf32>) {
# NEWAXIS-NEXT:   msir.reshape %[[X]] : tensor<3x4xf32> to tensor<3x1x4xf32>
# NEWAXIS-NEXT:   msir.reshape %[[X]] : tensor<3x4xf32> to tensor<1x3x4xf32>


def runtime_int(x, i):
    return x[i]


# TAKE:      func.func @runtime_int(%[[X:.*]]: tensor<3x4xf32>, %[[I:.*]]: tensor<i64>) -> tensor<4xf32> {
# TAKE-NEXT:   %[[R:.*]] = msir.take %[[X]][%[[I]]] axis 0 : tensor<3x4xf32>, tensor<i64> to tensor<4xf32>
# TAKE-NEXT:   func.return %[[R]] : tensor<4xf32>


def runtime_int_axis1(x, i):
    return x[:, i]


# TAKE1: msir.take %{{.*}}[%{{.*}}] axis 1 : tensor<3x4xf32>, tensor<i64> to tensor<3xf32>


def list_index(x):
    return x[[2, -1, 0]]


# A list index is a constant i64 index tensor; negative entries stay negative
# (msir.take wraps them at run time).
# LIST:      func.func @list_index(%[[X:.*]]: tensor<3x4xf32>) -> tensor<3x4xf32> {
# LIST:        %[[IDX:.*]] = msir.constant dense<[2, -1, 0]> : tensor<3xi64>
# LIST-NEXT:   %[[R:.*]] = msir.take %[[X]][%[[IDX]]] axis 0 : tensor<3x4xf32>, tensor<3xi64> to tensor<3x4xf32>
# LIST-NEXT:   func.return %[[R]] : tensor<3x4xf32>
