"""Wrong answers fixed at their mechanism: the `msir.vjp` cache key, Python bools
read as signed i1 constants, and the derivatives of `0 ** 0` and of
`np.maximum`/`np.minimum` at a NaN operand.

Values are compared with NumPy (exactly, for the integer and constant cases)
and with JAX's conventions for the derivatives, in GRAPH and PYNATIVE mode.
"""

from __future__ import annotations

import gc

import numpy as np

import msir

# -- the vjp cache ----------------------------------------------------------


def test_vjp_of_a_new_function_at_a_freed_address_is_its_own():
    """A cache keyed by `id(fn)` hands a new function the code of a freed one
    that had the same address; each of these must get its own gradient."""
    x = np.array([1.0, 2.0, 3.0])
    for k in range(1, 7):
        # a new function object each time; the previous one is freed first
        fn = (lambda x: x * k) if k % 2 else (lambda x: x * x + k)
        _, vjp_fn = msir.vjp(fn, x)
        (g,) = vjp_fn(np.ones(3))
        np.testing.assert_array_equal(g, np.full(3, float(k)) if k % 2 else 2 * x)
        del fn, vjp_fn
        gc.collect()
