"""Eager (PyNative) execution: msir primitives and their differentiation rules
run directly on NumPy arrays."""

from msir.eager.numpy_builder import NumpyBuilder

__all__ = ["NumpyBuilder"]
