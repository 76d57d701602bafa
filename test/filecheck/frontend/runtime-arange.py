# RUN: msir-opt %s --entry count --args 'tensor<i64>,f64' | filecheck %s --check-prefix=COUNT
# RUN: msir-opt %s --entry span --args 'f64,f64' | filecheck %s --check-prefix=SPAN

# np.arange with runtime bounds is a msir.ramp of runtime length. Integer
# bounds with step 1 count max(stop - start, 0) exactly; a scalar meeting the
# result repeats along its length as a ramp of step zero with the same count.
# Other bounds compute the length as NumPy does, ceil((stop - start) / step),
# with runtime checks for a zero step (NumPy's ZeroDivisionError), a NaN and
# an oversized length. The bounds carry no derivative (stop_gradient).

import numpy as np


def count(n, w):
    return np.arange(n) * w


# COUNT:      func.func @count(%[[N:.*]]: tensor<i64>, %[[W:.*]]: tensor<f64>) -> tensor<?xf64> {
# COUNT:        %[[C:.*]] = msir.maximum %[[N]], %{{.*}} : tensor<i64>
# COUNT:        %[[R:.*]] = msir.ramp %{{.*}}, %{{.*}}, %[[C]] : tensor<i64>, tensor<i64> to tensor<?xi64>
# COUNT-NEXT:   %[[F:.*]] = msir.cast %[[R]] : tensor<?xi64> to tensor<?xf64>
# COUNT:        %[[Z:.*]] = msir.constant dense<0.000000e+00> : tensor<f64>
# COUNT-NEXT:   %[[WS:.*]] = msir.ramp %[[W]], %[[Z]], %[[C]] : tensor<f64>, tensor<i64> to tensor<?xf64>
# COUNT-NEXT:   %[[P:.*]] = msir.mul %[[F]], %[[WS]] : tensor<?xf64>
# COUNT-NEXT:   func.return %[[P]] : tensor<?xf64>


def span(a, b):
    return np.arange(a, b, 0.5)


# SPAN:      func.func @span(%[[A:.*]]: tensor<f64>, %[[B:.*]]: tensor<f64>) -> tensor<?xf64> {
# SPAN:        msir.check %{{.*}}, "ZeroDivisionError", "float division by zero" : tensor<i1>
# SPAN:        %[[D:.*]] = msir.sub %[[B]], %[[A]] : tensor<f64>
# SPAN-NEXT:   %[[Q:.*]] = msir.div %[[D]], %{{.*}} : tensor<f64>
# SPAN:        msir.check %{{.*}}, "ValueError", "arange: cannot compute length" : tensor<i1>
# SPAN:        msir.check %{{.*}}, "ValueError", "Maximum allowed size exceeded" : tensor<i1>
# SPAN:        %[[CEIL:.*]] = msir.ceil %[[Q]] : tensor<f64>
# SPAN-NEXT:   %[[LEN:.*]] = msir.select %{{.*}}, %{{.*}}, %[[CEIL]] : tensor<i1>, tensor<f64>
# SPAN-NEXT:   %[[ROUNDED:.*]] = msir.cast %[[LEN]] : tensor<f64> to tensor<i64>
# SPAN-NEXT:   %[[ROWS:.*]] = msir.maximum %[[ROUNDED]], %{{.*}} : tensor<i64>
# SPAN:        %[[FIRST:.*]] = msir.stop_gradient %[[A]] : tensor<f64>
# SPAN-NEXT:   %[[STEP:.*]] = msir.stop_gradient %{{.*}} : tensor<f64>
# SPAN-NEXT:   %[[R:.*]] = msir.ramp %[[FIRST]], %[[STEP]], %[[ROWS]] : tensor<f64>, tensor<i64> to tensor<?xf64>
# SPAN-NEXT:   func.return %[[R]] : tensor<?xf64>
