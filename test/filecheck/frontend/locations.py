# RUN: msir-opt %s --entry f --args 'tensor<3xf32>,tensor<3xf32>' --print-debuginfo | filecheck %s

# Every op carries the file:line:col of the Python expression it came from
# (1-based columns; a binary operation starts at its left operand). The file
# path varies with the checkout, so it is matched with {{.*}}.

import numpy as np


def f(x, y):
    z = x * y
    w = np.exp(z) + \
        y
    return w[::-1]


# CHECK:      func.func @f(%[[X:.*]]: tensor<3xf32> loc(unknown), %[[Y:.*]]: tensor<3xf32> loc(unknown)) -> tensor<3xf32> {
# CHECK-NEXT:   %[[Z:.*]] = msir.mul %[[X]], %[[Y]] : tensor<3xf32> loc("{{.*}}locations.py":11:9)
# CHECK-NEXT:   %[[E:.*]] = msir.exp %[[Z]] : tensor<3xf32> loc("{{.*}}locations.py":12:9)
# CHECK-NEXT:   %[[W:.*]] = msir.add %[[E]], %[[Y]] : tensor<3xf32> loc("{{.*}}locations.py":12:9)
# CHECK-NEXT:   %[[R:.*]] = msir.slice %[[W]] {{.*}} loc("{{.*}}locations.py":14:12)
# CHECK-NEXT:   func.return %[[R]] : tensor<3xf32> loc("{{.*}}locations.py":14:5)
# CHECK-NEXT: } loc("{{.*}}locations.py":10:1)
