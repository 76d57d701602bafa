# RUN: msir-opt %s --entry bcast --args 'tensor<4x8xf32>,tensor<8xf32>' | filecheck %s --check-prefix=BCAST
# RUN: msir-opt %s --entry bcast_both --args 'tensor<3x1xf32>,tensor<1x5xf32>' | filecheck %s --check-prefix=BOTH
# RUN: msir-opt %s --entry weak_float --args 'tensor<4xf32>' | filecheck %s --check-prefix=WEAK
# RUN: msir-opt %s --entry weak_float_arg --args 'tensor<4xf32>,f64' | filecheck %s --check-prefix=WARG
# RUN: msir-opt %s --entry weak_int --args 'tensor<4xi32>' | filecheck %s --check-prefix=WINT
# RUN: msir-opt %s --entry int_plus_float --args 'tensor<4xi32>' | filecheck %s --check-prefix=I32F
# RUN: msir-opt %s --entry promote --args 'tensor<4xi32>,tensor<4xf32>' | filecheck %s --check-prefix=PROMO
# RUN: msir-opt %s --entry repeated --args 'tensor<4xf32>,tensor<i64>' | filecheck %s --check-prefix=REPEAT

# Implicit NumPy broadcasting becomes an explicit msir.broadcast_to, and NEP 50
# weak typing decides the dtypes: Python scalars adapt to the array's kind,
# arrays of different kinds promote (int32 + float32 -> float64).

import numpy as np


def bcast(x, b):
    return x + b


# BCAST:      func.func @bcast(%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>) -> tensor<4x8xf32> {
# BCAST-NEXT:   %[[BB:.*]] = msir.broadcast_to %[[B]] : tensor<8xf32> to tensor<4x8xf32>
# BCAST-NEXT:   %[[R:.*]] = msir.add %[[X]], %[[BB]] : tensor<4x8xf32>
# BCAST-NEXT:   func.return %[[R]] : tensor<4x8xf32>


def bcast_both(a, b):
    return a * b


# Both operands stretch: 3x1 * 1x5 -> 3x5.
# BOTH:      func.func @bcast_both(%[[A:.*]]: tensor<3x1xf32>, %[[B:.*]]: tensor<1x5xf32>) -> tensor<3x5xf32> {
# BOTH-DAG:    %[[AB:.*]] = msir.broadcast_to %[[A]] : tensor<3x1xf32> to tensor<3x5xf32>
# BOTH-DAG:    %[[BB:.*]] = msir.broadcast_to %[[B]] : tensor<1x5xf32> to tensor<3x5xf32>
# BOTH:        msir.mul %[[AB]], %[[BB]] : tensor<3x5xf32>


def weak_float(x):
    return x * 2.0


# A Python float literal is weak: the product stays f32, with the constant
# folded to f32 (no cast of x, no f64 arithmetic).
# WEAK:      func.func @weak_float(%[[X:.*]]: tensor<4xf32>) -> tensor<4xf32> {
# WEAK-NOT:    msir.cast
# WEAK:        %[[C:.*]] = msir.constant dense<2.000000e+00> : tensor<f32>
# WEAK-NEXT:   %[[CB:.*]] = msir.broadcast_to %[[C]] : tensor<f32> to tensor<4xf32>
# WEAK-NEXT:   %[[R:.*]] = msir.mul %[[X]], %[[CB]] : tensor<4xf32>
# WEAK-NEXT:   func.return %[[R]] : tensor<4xf32>


def weak_float_arg(x, s):
    return x * s


# A Python float argument arrives as tensor<f64> and is cast down to f32.
# WARG:      func.func @weak_float_arg(%[[X:.*]]: tensor<4xf32>, %[[S:.*]]: tensor<f64>) -> tensor<4xf32> {
# WARG-NEXT:   %[[C:.*]] = msir.cast %[[S]] : tensor<f64> to tensor<f32>
# WARG-NEXT:   %[[CB:.*]] = msir.broadcast_to %[[C]] : tensor<f32> to tensor<4xf32>
# WARG-NEXT:   msir.mul %[[X]], %[[CB]] : tensor<4xf32>


def weak_int(x):
    return x * 2


# A Python int with an int32 array stays int32.
# WINT:      func.func @weak_int(%[[X:.*]]: tensor<4xi32>) -> tensor<4xi32> {
# WINT-NOT:    msir.cast
# WINT:        %[[C:.*]] = msir.constant dense<2> : tensor<i32>
# WINT-NEXT:   %[[CB:.*]] = msir.broadcast_to %[[C]] : tensor<i32> to tensor<4xi32>
# WINT-NEXT:   msir.mul %[[X]], %[[CB]] : tensor<4xi32>


def int_plus_float(x):
    return x + 1.5


# A Python float with an integer array is a change of kind: the result is f64.
# I32F:      func.func @int_plus_float(%[[X:.*]]: tensor<4xi32>) -> tensor<4xf64> {
# I32F-DAG:    %[[C:.*]] = msir.constant dense<1.500000e+00> : tensor<f64>
# I32F-DAG:    %[[XC:.*]] = msir.cast %[[X]] : tensor<4xi32> to tensor<4xf64>
# I32F:        %[[CB:.*]] = msir.broadcast_to %[[C]] : tensor<f64> to tensor<4xf64>
# I32F-NEXT:   %[[R:.*]] = msir.add %[[XC]], %[[CB]] : tensor<4xf64>
# I32F-NEXT:   func.return %[[R]] : tensor<4xf64>


def promote(a, b):
    return a + b


# int32 array + float32 array -> float64: both operands are cast.
# PROMO:      func.func @promote(%[[A:.*]]: tensor<4xi32>, %[[B:.*]]: tensor<4xf32>) -> tensor<4xf64> {
# PROMO-NEXT:   %[[AC:.*]] = msir.cast %[[A]] : tensor<4xi32> to tensor<4xf64>
# PROMO-NEXT:   %[[BC:.*]] = msir.cast %[[B]] : tensor<4xf32> to tensor<4xf64>
# PROMO-NEXT:   %[[R:.*]] = msir.add %[[AC]], %[[BC]] : tensor<4xf64>
# PROMO-NEXT:   func.return %[[R]] : tensor<4xf64>


def repeated(x, n):
    y = x * 0.5
    z = y * 0.5
    for _ in range(n):
        z = z * 0.5
    return z * 0.5 + 0.0 - (-0.0)


# A scalar met again in the same block reuses its constant (what CSE would
# merge later is never built; each use keeps its own broadcast, on its own
# line); a nested block builds its own, and 0.0 and -0.0 (equal in Python)
# are different constants.
# REPEAT:      func.func @repeated(%[[X:.*]]: tensor<4xf32>, %{{.*}}: tensor<i64>) -> tensor<4xf32> {
# REPEAT:        %[[C:.*]] = msir.constant dense<5.000000e-01> : tensor<f32>
# REPEAT-NEXT:   %[[CB:.*]] = msir.broadcast_to %[[C]] : tensor<f32> to tensor<4xf32>
# REPEAT-NEXT:   %[[Y:.*]] = msir.mul %[[X]], %[[CB]] : tensor<4xf32>
# REPEAT-NEXT:   %[[CB2:.*]] = msir.broadcast_to %[[C]] : tensor<f32> to tensor<4xf32>
# REPEAT-NEXT:   %{{.*}} = msir.mul %[[Y]], %[[CB2]] : tensor<4xf32>
# REPEAT:        msir.for
# REPEAT:          %[[IC:.*]] = msir.constant dense<5.000000e-01> : tensor<f32>
# REPEAT-NEXT:     %[[ICB:.*]] = msir.broadcast_to %[[IC]] : tensor<f32> to tensor<4xf32>
# REPEAT-NEXT:     msir.mul %{{.*}}, %[[ICB]] : tensor<4xf32>
# REPEAT:        }
# REPEAT-NOT:    msir.constant dense<5.000000e-01>
# REPEAT:        msir.broadcast_to %[[C]] : tensor<f32> to tensor<4xf32>
# REPEAT:        msir.constant dense<0.000000e+00> : tensor<f32>
# REPEAT:        msir.constant dense<-0.000000e+00> : tensor<f32>
# REPEAT:        func.return
