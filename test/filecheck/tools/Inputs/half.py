import numpy as np


def scale(x, y):
    return np.tanh(x) * 2.0 + y.astype(np.float16)


def mixed(x, i):
    return x + i
