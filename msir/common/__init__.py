"""MindSpore's common layer on msir: `dtype`, `Tensor`, `Parameter`, `ParameterTuple`, `set_seed`.

Light to import (NumPy only): `msir/__init__` reaches these lazily, and the
frontend and the API read `Tensor` to unwrap user tensors into arrays.
"""
