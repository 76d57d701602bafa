"""What msir's transformations are, apart from how they run.

The objects the user API creates — a function to differentiate (`Transform`),
one with a custom reverse rule (`CustomVjp`), a checkpointed function
(`checkpoint`), a jitted function (`Jitted`) — are read by three layers: the
frontend (inside compiled code), the eager engine (PyNative mode) and the
persistent trace cache. They live here, in a leaf of msir's import graph, so
that those layers recognise them with `isinstance` and import nothing above
them; `msir.api` subclasses them with what calling them from Python does
(compile, or run eagerly).

`COMPILE_TIME` names the API functions that compiled code may call, and what
the frontend does with each: `msir.api` registers them as it defines them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from msir.frontend.values import Closure
from msir.library_callables import as_python_function


class Jitted:
    """Base of `msir.jit`'s function objects: `__wrapped__` is the Python function."""

    __wrapped__: Callable


class Transform:
    """A function transformed by `grad`/`value_and_grad`/`jacrev`/`jacfwd` (or,
    inside compiled code, `vjp`/`jvp`): `kind`, the function `fn` (a Python
    function, a frontend `Closure`, or another `Transform`), `argnums`,
    `has_aux`, and for `jvp` the `tangents`."""

    def __init__(self, kind: str, fn, argnums=0, has_aux: bool = False, tangents=None, weights=None,
                 aux_tuple: bool | None = None):
        if not callable(fn) and not isinstance(fn, Closure):  # frontend closures are compile-time
            raise TypeError(f"msir.{kind} expects a function, got {type(fn).__name__}")
        if weights is not None:
            weights = _parameters(weights, kind)
        if not (argnums is None and weights is not None) and not isinstance(argnums, int) and not (
            isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums)
        ):
            if argnums is None:
                raise ValueError(f"msir.{kind}: grad_position and weights cannot both be None")
            raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
        self.kind = kind
        self.fn = fn.__wrapped__ if isinstance(fn, Jitted) else as_python_function(fn)
        self.argnums = argnums
        self.has_aux = has_aux
        self.tangents = tangents
        self.weights = weights
        """The Parameters differentiated with respect to besides the arguments
        (MindSpore's `weights=`), or None."""
        self.aux_tuple = weights is not None if aux_tuple is None else aux_tuple
        """`grad` with `has_aux` gives the outputs after the first as a tuple,
        also for a pair `(output, aux)`: `(gradient, (aux,))`, MindSpore's form
        (msir's own, without it: `(gradient, aux)`); by default with `weights`."""
        base = self.source_function
        self.__name__ = f"{kind}_{getattr(base, '__name__', 'fn')}"
        if not callable(base):
            return
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(base, "__doc__", None)
        try:
            self.__signature__ = inspect.signature(base)
        except (TypeError, ValueError):
            pass

    @property
    def source_function(self):
        """The innermost Python function (for source locations)."""
        base = self.fn
        while isinstance(base, (Transform, BindParameters)):
            base = base.fn
        return base

    def with_weights_as_argument(self, n_args: int) -> "Transform":
        """This transform (with `weights`) as one without: its function takes
        the weights' values as an extra last argument, a tuple
        (`BindParameters`), and is differentiated with respect to it too. Its
        result is arranged by `arrange_result`."""
        positions = () if self.argnums is None else (
            (self.argnums,) if isinstance(self.argnums, int) else tuple(self.argnums)
        )
        return Transform(self.kind, BindParameters(self.fn, self.weights), (*positions, n_args), self.has_aux,
                         aux_tuple=self.aux_tuple)

    def arrange_gradients(self, grads: tuple) -> Any:
        """MindSpore's layout of the gradients `with_weights_as_argument` gives
        (one per position, then the weights' tuple): the weights' gradients
        alone without `grad_position`, else (position gradients, weights' gradients)."""
        *by_position, by_weight = grads
        if self.argnums is None:
            return by_weight
        return (by_position[0] if isinstance(self.argnums, int) else tuple(by_position)), by_weight

    def arrange_result(self, result: Any) -> Any:
        """The result of `with_weights_as_argument`'s transform, its gradients
        arranged by `arrange_gradients`: `grad` gives the gradients (and the
        aux with `has_aux`), `value_and_grad` the value and the gradients."""
        if self.kind == "grad":
            if self.has_aux:
                grads, aux = result
                return self.arrange_gradients(grads), aux
            return self.arrange_gradients(result)
        value, grads = result
        return value, self.arrange_gradients(grads)

    def __repr__(self) -> str:
        return f"<msir.{self.kind} of {self.source_function!r} argnums={self.argnums}>"


class BindParameters:
    """`fn` taking the values of `parameters` (Parameters, `msir.common.parameter`)
    as an extra last argument, a tuple: called with `(*args, values)` it runs
    `fn(*args)` with every read of one of the parameters giving its value
    instead. It is what differentiating with respect to `weights=` differentiates:
    in compiled code the frontend binds the parameters to the argument's
    values (`msir.frontend.calls`); in Python (PyNative mode) the parameters
    hold the values (eager tracers) while `fn` runs. Tensor arguments stay
    Tensors for `fn` and its Tensor results are given back as arrays."""

    def __init__(self, fn, parameters: tuple):
        self.fn = fn
        self.parameters = parameters
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, *args):
        from msir.common.tensor import unwrap, wrap

        *args, values = args
        saved = [p._data for p in self.parameters]
        try:
            for p, v in zip(self.parameters, values):
                p._data = v
            return unwrap(self.fn(*wrap(tuple(args))))
        finally:
            for p, v in zip(self.parameters, saved):
                p._data = v


def _parameters(weights, kind: str) -> tuple:
    """`weights` (a Parameter, or a tuple or list of them) as a tuple of Parameters."""
    from msir.common.parameter import Parameter

    items = (weights,) if isinstance(weights, Parameter) else weights
    if not isinstance(items, (tuple, list)) or not all(isinstance(p, Parameter) for p in items):
        raise TypeError(
            f"msir.{kind}: weights must be a Parameter, a ParameterTuple or a list of Parameters "
            f"(net.trainable_params()), got {type(weights).__name__}"
        )
    return tuple(items)


class JvpEntry:
    """`jvp` as a function of (primals..., tangents...), for compiling."""

    def __init__(self, t: Transform):
        self.t = t
        self.n = len(t.tangents)
        self.__name__ = t.__name__
        self.__qualname__ = t.__name__
        params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_ONLY) for i in range(2 * self.n)]
        self.__signature__ = inspect.Signature(params)

    def __call__(self, *args):
        raise TypeError("a jvp entry is only traced, not called")


class CustomVjp:
    """A function `fn` with a user-defined reverse rule: `fwd` returns the
    output and residuals, `bwd` the cotangents from residuals and the output's
    cotangent (see `msir.api.custom_vjp`)."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd, bwd) -> "CustomVjp":
        self.fwd, self.bwd = fwd, bwd
        return self


class checkpoint:
    """A function whose residuals reverse mode recomputes instead of storing
    (gradient checkpointing: MindSpore's `Cell.recompute()`, `jax.checkpoint`)::

        layer = msir.checkpoint(layer)        # or @msir.checkpoint

    Calling it runs the function. Differentiated in compiled code, a call of
    it keeps only its arguments for the backward pass; the adjoint runs the
    function's augmented forward again to get its intermediates, then its
    adjoint. Memory: the call's intermediates live only inside its adjoint;
    cost: one more forward of the function. Derivatives are unchanged.
    In PYNATIVE_MODE the function runs as written (nothing is recomputed)."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"msir.checkpoint expects a function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


COMPILE_TIME: list[tuple[Callable, str]] = []
"""The API functions compiled code may call, each with what the frontend does:
"transform" (call it while tracing: it returns a `Transform`), "vjp" and "jvp"
(differentiate at the call), "stop_gradient" (emit `msir.stop_gradient`),
"python" (call it while tracing on the compile-time values, e.g. a layer's
check of its input's static shape: `msir.nn.cell.check_input`)."""


def compile_time(kind: str):
    """Register the decorated API function as callable in compiled code (see `COMPILE_TIME`)."""

    def register(fn: Callable) -> Callable:
        COMPILE_TIME.append((fn, kind))
        return fn

    return register


def compile_time_kind(fn: Any) -> str | None:
    """What compiled code does with a call of `fn` (None: not an API function)."""
    return next((kind for f, kind in COMPILE_TIME if f is fn), None)


def compiled_call_name(obj: Any) -> str:
    """The method compiled code runs for a call `obj(...)` of a plain object:
    the one its class names in `__msir_call__` (a Cell's "construct", whose
    `__call__` is Python-side dispatch), else `__call__`."""
    return getattr(type(obj), "__msir_call__", "__call__")
