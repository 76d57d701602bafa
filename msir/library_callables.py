"""NumPy's functions and ufuncs, and Python's builtins, as functions msir can
transform: `msir.grad(np.sin)`, `msir.vjp(np.tanh, x)`, `msir.jit(np.sum)`.

msir compiles Python source, and a ufunc or a builtin has none (a NumPy
function's source is NumPy's implementation, which is not what the frontend
compiles: it knows the function itself). Each such callable is given a
generated one-line Python function that calls it, `def sin(x): return
sin(x)`, whose source is registered with `linecache` under a file name of its
own (`<msir: numpy.sin>`), so the frontend, the eager engine and error
locations treat it as any user function. The parameters are the callable's
required positional ones: a ufunc's `nin` inputs, or those of its signature
without a default (`np.sum(a)`, `abs(x)`).
"""

from __future__ import annotations

import inspect
import keyword
import linecache
import types
from typing import Any

import numpy as np

_WRAPPERS: dict[Any, types.FunctionType] = {}
"""The generated function of each library callable (NumPy's functions are
module-level objects, so keying by the callable keeps nothing alive that
would not live anyway)."""

_LIBRARY_MODULES = ("numpy", "math", "builtins", "cmath")


def is_library_callable(fn: Any) -> bool:
    """A ufunc, a builtin function, or a function of NumPy or `math`."""
    if isinstance(fn, type) or isinstance(fn, types.MethodType):
        return False
    if isinstance(fn, (np.ufunc, types.BuiltinFunctionType)):
        return getattr(fn, "__self__", None) is None or isinstance(getattr(fn, "__self__", None), types.ModuleType)
    module = getattr(fn, "__module__", None) or ""
    return callable(fn) and module.split(".")[0] in _LIBRARY_MODULES and hasattr(fn, "__name__")


def as_python_function(fn: Any) -> Any:
    """`fn` as a Python function with source: itself unless it is a library
    callable (`is_library_callable`), else its generated caller."""
    if not is_library_callable(fn):
        return fn
    try:
        cached = _WRAPPERS.get(fn)
    except TypeError:  # unhashable: not a module-level library object
        return fn
    if cached is None:
        cached = _WRAPPERS[fn] = _generate(fn)
    return cached


def _generate(fn: Any) -> types.FunctionType:
    name = fn.__name__ if fn.__name__.isidentifier() and not keyword.iskeyword(fn.__name__) else "library_function"
    qualified = f"{getattr(fn, '__module__', None) or 'numpy'}.{fn.__name__}"
    params = ", ".join(_parameters(fn, qualified))
    filename = f"<msir: {qualified}>"
    source = f"def {name}({params}):\n    return __msir_library_callable__({params})\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {"__msir_library_callable__": fn, "__name__": f"msir.library_callables.{name}"}
    exec(compile(source, filename, "exec"), scope)
    generated = scope[name]
    generated.__doc__ = getattr(fn, "__doc__", None)
    generated.__qualname__ = qualified
    return generated


def _parameters(fn: Any, qualified: str) -> list[str]:
    if isinstance(fn, np.ufunc):
        return ["x"] if fn.nin == 1 else [f"x{i + 1}" for i in range(fn.nin)]
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        raise TypeError(
            f"msir cannot tell which arguments {qualified} takes (it has no signature): "
            f"call it from a function of your own, e.g. `lambda x: {qualified}(x)`"
        ) from None
    required = [
        p.name for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return [p if p.isidentifier() and not keyword.iskeyword(p) else f"x{i}" for i, p in enumerate(required)]
