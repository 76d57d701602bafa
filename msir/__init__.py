"""msir: NumPy-style Python compiled through an xDSL functional IR to native code.

The public API (`jit`, `set_context`, modes, errors, the functional operators
`msir.ops`, auto-parallel planning `msir.parallel`) is loaded lazily, so that
importing a dialect (`import msir.dialects.msir`, what every lit RUN line
pays) does not load llvmlite or the frontend.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "jit": "msir.api",
    "set_context": "msir.api",
    "set_device": "msir.context",
    "set_auto_parallel_context": "msir.context",
    "reset_auto_parallel_context": "msir.context",
    "get_auto_parallel_context": "msir.context",
    "get_context": "msir.api",
    "set_num_threads": "msir.api",
    "get_num_threads": "msir.api",
    "GRAPH_MODE": "msir.api",
    "PYNATIVE_MODE": "msir.api",
    "grad": "msir.api",
    "value_and_grad": "msir.api",
    "vjp": "msir.api",
    "jvp": "msir.api",
    "stop_gradient": "msir.api",
    "jacrev": "msir.api",
    "jacfwd": "msir.api",
    "hessian": "msir.api",
    "custom_vjp": "msir.api",
    "checkpoint": "msir.api",
    "errors": "msir.errors",
    "ops": "msir.ops",
    "viz": "msir.viz",
    "parallel": "msir.parallel",
    "SummaryRecord": "msir.viz.summary",
    "DonationWarning": "msir.errors",
    # MindSpore's programming model (issue 14): Tensor, Parameter, dtypes, nn, context
    "nn": "msir.nn",
    "train": "msir.train",
    "dataset": "msir.dataset",
    "save_checkpoint": "msir.train.serialization",
    "load_checkpoint": "msir.train.serialization",
    "load_param_into_net": "msir.train.serialization",
    "context": "msir.context",
    "common": "msir.common",
    "dtype": "msir.common.dtype",
    "Tensor": "msir.common.tensor",
    "Parameter": "msir.common.parameter",
    "ParameterTuple": "msir.common.parameter",
    "dtype_to_nptype": "msir.common.dtype",
    "set_seed": "msir.common.seed",
    "get_seed": "msir.common.seed",
    "pytype_to_dtype": "msir.common.dtype",
    **{t: "msir.common.dtype" for t in (
        "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
        "float32", "float64", "complex64", "complex128", "int_", "uint", "float_", "half", "single", "double",
    )},
}
_MODULES = ("errors", "ops", "viz", "parallel", "nn", "train", "dataset", "context", "common", "dtype")
"""The names in `_LAZY` that are modules (the others are names in the module given)."""


def __getattr__(name: str):
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if name in _MODULES else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'msir' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
