# RUN: not msir-opt %s --entry soft --args 'tensor<64xf32>' -p convert-msir-to-ascend 2>&1 | filecheck %s --check-prefix=TANH
# RUN: not msir-opt %s --entry biased --args 'tensor<4x8xf32>,tensor<8xf32>' -p convert-msir-to-ascend 2>&1 | filecheck %s --check-prefix=BCAST
# RUN: not msir-opt %s --entry counts --args 'tensor<8xi32>' -p convert-msir-to-ascend 2>&1 | filecheck %s --check-prefix=INT
# RUN: not msir-opt %s --entry soft --args 'tensor<64xf32>' -p 'convert-msir-to-ascend{chip="310P"}' 2>&1 | filecheck %s --check-prefix=CHIP

# A program the target cannot run is refused at compile time, naming the op
# and the user's line, with the line and a caret; never a traceback.

import numpy as np


def soft(x):
    return np.tanh(x) * 2.0
# TANH: convert-msir-to-ascend-errors.py:[[# @LINE - 1]]:12: error: msir.tanh: has no Ascend lowering (the target lowers matmul and the elementwise ops abs, add, div, exp, log, maximum, minimum, mul, neg, sqrt, sub)
# TANH-NEXT: return np.tanh(x) * 2.0
# TANH-NEXT: ^
# TANH-NOT: Traceback


def biased(x, b):
    return x + b
# BCAST: convert-msir-to-ascend-errors.py:[[# @LINE - 1]]:12: error: msir.broadcast_to: broadcasting a tensor has no Ascend lowering yet (splat constants only)


def counts(x):
    return x + 1
# INT: convert-msir-to-ascend-errors.py:[[# @LINE - 2]]:1: error: func.func: the Ascend target computes f16 and f32 tensors, not i32

# CHIP: error: unknown Ascend chip '310P' (known: 910A, 910B)
