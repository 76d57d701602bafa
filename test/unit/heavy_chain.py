"""A fused elementwise function whose loop body costs more than
`msir.lowering.to_llvm.FOLD_TAIL_MIN_COST` work units (8 tanh and 8 exp at 8
each, and 24 plain ops): its vector remainder is folded into masked code."""

import numpy as np


def heavy_chain(x, y):
    x = np.tanh(x) * y + np.exp(-x)
    x = np.tanh(x) * y + np.exp(-x)
    x = np.tanh(x) * y + np.exp(-x)
    x = np.tanh(x) * y + np.exp(-x)
    x = np.tanh(x) * y + np.exp(-x)
    x = np.tanh(x) * y + np.exp(-x)
    x = np.tanh(x) * y + np.exp(-x)
    x = np.tanh(x) * y + np.exp(-x)
    return x
