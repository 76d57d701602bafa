# RUN: msir-opt %s --entry tril --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=TRIL
# RUN: msir-opt %s --entry diagonal --args 'tensor<3x4xf32>' | filecheck %s --check-prefix=DIAG
# RUN: msir-opt %s --entry logaddexp --args 'tensor<4xf32>,f64' | filecheck %s --check-prefix=LSE

# NumPy functions composed of existing primitives (msir.frontend.numpy_bodies):
# a triangle is an iota mask and a select, no constant of the matrix's size;
# the diagonal of a matrix is one strided slice of the flattened matrix;
# logaddexp keeps float32 with a weak Python float and computes
# max(a, b) + log1p(exp(-|a - b|)).

import numpy as np


def tril(x):
    return np.tril(x, -1)


# TRIL:      func.func @tril(%[[X:.*]]: tensor<3x4xf32>) -> tensor<3x4xf32> {
# TRIL-NEXT:   %[[COL:.*]] = msir.iota 1 : tensor<3x4xi64>
# TRIL-NEXT:   %[[ROW:.*]] = msir.iota 0 : tensor<3x4xi64>
# TRIL-NEXT:   %[[OFF:.*]] = msir.sub %[[COL]], %[[ROW]] : tensor<3x4xi64>
# TRIL-NEXT:   %[[K:.*]] = msir.constant dense<-1> : tensor<3x4xi64>
# TRIL-NEXT:   %[[KEEP:.*]] = msir.compare le, %[[OFF]], %[[K]] : tensor<3x4xi64>
# TRIL-NEXT:   %[[ZERO:.*]] = msir.constant dense<0.000000e+00> : tensor<3x4xf32>
# TRIL-NEXT:   %[[R:.*]] = msir.select %[[KEEP]], %[[X]], %[[ZERO]] : tensor<3x4xi1>, tensor<3x4xf32>
# TRIL-NEXT:   func.return %[[R]] : tensor<3x4xf32>


def diagonal(x):
    return np.diag(x, 1)


# DIAG:      func.func @diagonal(%[[X:.*]]: tensor<3x4xf32>) -> tensor<3xf32> {
# DIAG-NEXT:   %[[FLAT:.*]] = msir.reshape %[[X]] : tensor<3x4xf32> to tensor<12xf32>
# DIAG-NEXT:   %[[D:.*]] = msir.slice %[[FLAT]] starts array<i64: 1> steps array<i64: 5> : tensor<12xf32> to tensor<3xf32>
# DIAG-NEXT:   func.return %[[D]] : tensor<3xf32>


def logaddexp(a, b):
    return np.logaddexp(a, b)


# LSE:      func.func @logaddexp(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<f64>) -> tensor<4xf32> {
# LSE:        msir.compare eq
# LSE:        msir.select
# LSE:        msir.abs
# LSE:        msir.neg
# LSE:        msir.exp
# LSE:        msir.log1p
# LSE:        msir.maximum
# LSE:        msir.add
# LSE:        func.return %{{.*}} : tensor<4xf32>
