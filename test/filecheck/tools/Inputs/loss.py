import numpy as np


def loss(x):
    return np.sin(x)
