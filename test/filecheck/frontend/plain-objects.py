# RUN: msir-opt %s --entry forward --args 'tensor<2x3xf32>' | filecheck %s --check-prefix=METHOD
# RUN: msir-opt %s --entry stack --args 'tensor<2x3xf32>' | filecheck %s --check-prefix=LIST
# RUN: msir-opt %s --entry configured --args 'tensor<3xf32>' | filecheck %s --check-prefix=DICT

# Methods of plain Python objects are inlined with `self` bound to the object:
# its array attributes become hidden arguments after the user's (named by the
# path they were read by), its numbers and strings are compile-time constants,
# a loop over a list of layers is unrolled, and dict items with constant keys
# are read at compile time.

import numpy as np


class Linear:
    def __init__(self, n_in, n_out, activation):
        self.w = np.ones((n_in, n_out), np.float32)
        self.b = np.zeros(n_out, np.float32)
        self.activation = activation

    def __call__(self, x):
        y = x @ self.w + self.b
        return np.tanh(y) if self.activation == "tanh" else y


class Stack:
    def __init__(self):
        self.layers = [Linear(3, 4, "tanh"), Linear(4, 2, None)]
        self.scale = 0.5

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x * self.scale


LAYER = Linear(3, 4, "tanh")
NET = Stack()
CFG = {"shift": 2.0, "weights": {"w": np.arange(3, dtype=np.float32)}}


def forward(x):
    return LAYER(x)


# METHOD:      func.func @forward(%[[X:.*]]: tensor<2x3xf32>, %[[W:LAYER.w]]: tensor<3x4xf32>, %[[B:LAYER.b]]: tensor<4xf32>) -> tensor<2x4xf32> {
# METHOD-NOT:    func.call
# METHOD-NEXT:   %[[M:.*]] = msir.matmul %[[X]], %[[W]] : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
# METHOD-NEXT:   %[[BB:.*]] = msir.broadcast_to %[[B]] : tensor<4xf32> to tensor<2x4xf32>
# METHOD-NEXT:   %[[Y:.*]] = msir.add %[[M]], %[[BB]] : tensor<2x4xf32>
# METHOD-NEXT:   %[[T:.*]] = msir.tanh %[[Y]] : tensor<2x4xf32>
# METHOD-NEXT:   func.return %[[T]] : tensor<2x4xf32>
# METHOD-NOT:  func.func


def stack(x):
    return NET(x)


# LIST:       func.func @stack(%{{.*}}: tensor<2x3xf32>, %{{NET.layers_0.w}}: tensor<3x4xf32>, %{{NET.layers_0.b}}: tensor<4xf32>, %{{NET.layers_1.w}}: tensor<4x2xf32>, %{{NET.layers_1.b}}: tensor<2xf32>) -> tensor<2x2xf32> {
# LIST:         msir.matmul
# LIST:         msir.tanh
# LIST:         msir.matmul
# LIST-NOT:     msir.tanh
# LIST:         msir.constant dense<5.000000e-01> : tensor<f32>
# LIST:         msir.mul
# LIST-NOT:   func.func


def configured(x):
    return x * CFG["weights"]["w"] + CFG["shift"]


# DICT:       func.func @configured(%[[X:.*]]: tensor<3xf32>, %[[W:CFG_weights_w]]: tensor<3xf32>) -> tensor<3xf32> {
# DICT-NEXT:    %[[M:.*]] = msir.mul %[[X]], %[[W]] : tensor<3xf32>
# DICT:         %[[C:.*]] = msir.constant dense<2.000000e+00> : tensor<f32>
# DICT-NEXT:    %[[CB:.*]] = msir.broadcast_to %[[C]] : tensor<f32> to tensor<3xf32>
# DICT-NEXT:    %[[R:.*]] = msir.add %[[M]], %[[CB]] : tensor<3xf32>
# DICT-NEXT:    func.return %[[R]] : tensor<3xf32>
