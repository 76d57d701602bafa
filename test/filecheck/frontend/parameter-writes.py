# RUN: msir-opt %s --entry accumulate --args 'tensor<3xf32>' | filecheck %s --check-prefix=ENTRY
# RUN: msir-opt %s --entry train_step --args 'tensor<3xf32>' | filecheck %s --check-prefix=GRAD

# A Parameter that traced code assigns (ops.assign, or `self.p = v` on a
# Parameter attribute) is not an effect in the IR: the entry function returns
# its new value after the user's results (the call writes it into the
# Parameter), and reads after the assignment see the new value. Assigned in a
# function differentiated by value_and_grad, the new value is one more
# auxiliary output of it (has_aux), which the entry returns in turn.

import numpy as np

import msir
from msir import Parameter, nn, ops


class Accumulator(nn.Cell):
    def __init__(self):
        super().__init__()
        self.total = Parameter(np.zeros(3, np.float32), name="total", requires_grad=False)
        self.scale = Parameter(np.ones(3, np.float32), name="scale")

    def construct(self, x):
        ops.assign(self.total, self.total + x)
        return (self.total * self.scale).sum()


ACC = Accumulator()


def accumulate(x):
    return ACC(x)


# ENTRY:      func.func @accumulate(%[[X:.*]]: tensor<3xf32>, %[[T:ACC_total]]: tensor<3xf32>, %[[S:ACC_scale]]: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
# ENTRY-NEXT:   %[[NEW:.*]] = msir.add %[[T]], %[[X]] : tensor<3xf32>
# ENTRY-NEXT:   %[[P:.*]] = msir.mul %[[NEW]], %[[S]] : tensor<3xf32>
# ENTRY-NEXT:   %[[SUM:.*]] = msir.reduce_sum %[[P]]
# ENTRY-NEXT:   func.return %[[SUM]], %[[NEW]] : tensor<f32>, tensor<3xf32>


def train_step(x):
    return msir.value_and_grad(ACC)(x)


# GRAD:       func.func @train_step(%[[X:.*]]: tensor<3xf32>, %[[T:ACC_total]]: tensor<3xf32>, %[[S:ACC_scale]]: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>) {
# GRAD-NEXT:    %[[C:.*]] = msir.closure @[[FN:.*]](%[[T]], %[[S]]) : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
# GRAD-NEXT:    %[[VG:.*]] = msir.value_and_grad %[[C]] argnums array<i64: 0> has_aux
# GRAD-NEXT:    %[[LOSS:.*]], %[[NEW:.*]], %[[G:.*]] = msir.apply %[[VG]](%[[X]])
# GRAD-NEXT:    func.return %[[LOSS]], %[[G]], %[[NEW]] : tensor<f32>, tensor<3xf32>, tensor<3xf32>
# GRAD:       func.func private @[[FN]](%[[A:.*]]: tensor<3xf32>, %[[FT:ACC_total]]: tensor<3xf32>, %{{.*}}: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
# GRAD-NEXT:    %[[FNEW:.*]] = msir.add %[[FT]], %[[A]] : tensor<3xf32>
# GRAD:         func.return %{{.*}}, %[[FNEW]] : tensor<f32>, tensor<3xf32>
