# RUN: msir-opt %s --entry sums --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=SUM
# RUN: msir-opt %s --entry means --args 'tensor<2x3x4xf32>' | filecheck %s --check-prefix=MEAN
# RUN: msir-opt %s --entry argmaxes --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=ARGMAX
# RUN: msir-opt %s --entry products --args 'tensor<2x3xf32>,tensor<3x4xf32>,tensor<4xf32>' | filecheck %s --check-prefix=MM
# RUN: msir-opt %s --entry mixed_dot --args 'tensor<2x3xf32>,tensor<3x2xf64>' | filecheck %s --check-prefix=DOT

# Reductions carry their axes as an i64 array; keepdims shows only in the result
# rank. argmax always yields i64. `@`, np.matmul and np.dot all become msir.matmul.

import numpy as np


def sums(x):
    return np.sum(x, axis=1, keepdims=True), x.sum(axis=0), x.sum(axis=-1)


# SUM:      func.func @sums(%[[X:.*]]: tensor<3x4xf32>) -> (tensor<3x1xf32>, tensor<4xf32>, tensor<3xf32>) {
# SUM-NEXT:   %[[K:.*]] = msir.reduce_sum %[[X]] axes array<i64: 1> : tensor<3x4xf32> to tensor<3x1xf32>
# SUM-NEXT:   %[[A0:.*]] = msir.reduce_sum %[[X]] axes array<i64: 0> : tensor<3x4xf32> to tensor<4xf32>
# SUM-NEXT:   %[[A1:.*]] = msir.reduce_sum %[[X]] axes array<i64: 1> : tensor<3x4xf32> to tensor<3xf32>
# SUM-NEXT:   func.return %[[K]], %[[A0]], %[[A1]] : tensor<3x1xf32>, tensor<4xf32>, tensor<3xf32>


def means(x):
    return np.mean(x, axis=(0, 1), keepdims=True), x.max(axis=-1, keepdims=True)


# MEAN:      msir.reduce_mean %{{.*}} axes array<i64: 0, 1> : tensor<2x3x4xf32> to tensor<1x1x4xf32>
# MEAN-NEXT: msir.reduce_max %{{.*}} axes array<i64: 2> : tensor<2x3x4xf32> to tensor<2x3x1xf32>


def argmaxes(x):
    return np.argmax(x, axis=1), np.argmax(x), np.argmax(x, axis=0, keepdims=True)


# ARGMAX:      func.func @argmaxes(%[[X:.*]]: tensor<3x4xf32>) -> (tensor<3xi64>, tensor<i64>, tensor<1x4xi64>) {
# ARGMAX-NEXT:   msir.argmax %[[X]] axis 1 : tensor<3x4xf32> to tensor<3xi64>
# ARGMAX-NEXT:   msir.argmax %[[X]] : tensor<3x4xf32> to tensor<i64>
# ARGMAX-NEXT:   msir.argmax %[[X]] axis 0 : tensor<3x4xf32> to tensor<1x4xi64>


def products(a, b, v):
    return a @ b, np.matmul(a, b), np.dot(b, v), a.T @ a


# MM:      func.func @products(%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3x4xf32>, %[[V:.*]]: tensor<4xf32>)
# MM-SAME:   -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<3xf32>, tensor<3x3xf32>) {
# MM-NEXT:   msir.matmul %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
# MM-NEXT:   msir.matmul %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
# MM-NEXT:   msir.matmul %[[B]], %[[V]] : tensor<3x4xf32>, tensor<4xf32> to tensor<3xf32>
# MM-NEXT:   %[[AT:.*]] = msir.transpose %[[A]], array<i64: 1, 0> : tensor<2x3xf32> to tensor<3x2xf32>
# MM-NEXT:   msir.matmul %[[AT]], %[[A]] : tensor<3x2xf32>, tensor<2x3xf32> to tensor<3x3xf32>


def mixed_dot(x, y):
    return np.dot(x, y)


# Operands of different float widths promote before the product.
# DOT:      %[[XC:.*]] = msir.cast %{{.*}} : tensor<2x3xf32> to tensor<2x3xf64>
# DOT-NEXT: msir.matmul %[[XC]], %{{.*}} : tensor<2x3xf64>, tensor<3x2xf64> to tensor<2x2xf64>
