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
}


def __getattr__(name: str):
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if _LAZY[name] == f"msir.{name}" else getattr(module, name)  # a submodule, or a name in one
        globals()[name] = value
        return value
    raise AttributeError(f"module 'msir' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
