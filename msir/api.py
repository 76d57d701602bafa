"""The user-facing API: `jit`, execution modes and the context.

`jit(f)` compiles `f` for the types of the arguments it is called with, once per
signature (the in-memory cache), and calls the native code. The cache key is the
dtype and shape of every array, the Python type of every scalar, and the value of
the Python ints that reached a static position while tracing (a shape, an axis, a
slice bound). `MSIR_LOG=recompile` logs every new signature on stderr. A new
signature is first looked up in the persistent trace cache (`msir.trace_cache`),
which finds the native code of an earlier process without running the frontend.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from msir import trace_cache
from msir.errors import DonationWarning, MsirError

GRAPH_MODE = 0
"""Compile functions (and their derivatives) to native code."""
PYNATIVE_MODE = 1
"""Run functions eagerly, op by op (`jit` still compiles)."""

_context: dict[str, Any] = {"mode": GRAPH_MODE}


def set_context(mode: int | None = None) -> None:
    """Set the execution mode: `msir.set_context(mode=msir.PYNATIVE_MODE)`."""
    if mode is not None:
        if mode not in (GRAPH_MODE, PYNATIVE_MODE):
            raise ValueError(f"mode must be msir.GRAPH_MODE or msir.PYNATIVE_MODE, got {mode!r}")
        _context["mode"] = mode


def set_num_threads(n: int) -> None:
    """Run compiled code on `n` threads: msir's parallel loops (the calling
    thread plus n - 1 native workers) and OpenBLAS's matmuls. The default is
    `MSIR_NUM_THREADS`, else `OMP_NUM_THREADS`, else the CPUs this process may
    use (see `msir.lowering.threads`). Takes effect at once, also for
    functions compiled before."""
    from msir.lowering import threads

    threads.set_num_threads(n)


def get_num_threads() -> int:
    """The thread count compiled code uses (see `set_num_threads`)."""
    from msir.lowering import threads

    return threads.get_num_threads()


def get_context(key: str) -> Any:
    if key not in _context:
        raise ValueError(f"unknown context key {key!r} (known: {', '.join(_context)})")
    return _context[key]


def _key(a: Any) -> Any:
    t = type(a)
    if t is np.ndarray:
        return (a.dtype, a.shape)
    if t is float or t is int or t is bool:
        return t
    if t is tuple or t is list:
        return (t, tuple(_key(x) for x in a))
    if isinstance(a, np.generic):  # np.float64 included: it is strongly typed
        return (a.dtype, ())
    if a is None or t is str:
        return ("const", a)
    if t.__module__ == "msir.eager.tracer":
        raise _EagerArgument  # a PyNative tracer: run the function eagerly
    from msir.frontend.driver import spec_of

    return spec_of(a)  # raises a DTypeError naming the type


def _rebuild_leaves(template: Any, leaves) -> Any:
    """`template`'s tuples and lists with its leaves (not None/str) taken from `leaves`."""
    t = type(template)
    if t is tuple:
        return tuple(_rebuild_leaves(x, leaves) for x in template)
    if t is list:
        return [_rebuild_leaves(x, leaves) for x in template]
    if template is None or t is str:
        return template
    return next(leaves)


class _EagerArgument(Exception):
    """Raised by `_key` for a PyNative tracer: a jitted function called inside an
    eager transformation runs eagerly, so that the transformation sees its ops."""


def _leaves(a: Any, out: list[Any]) -> None:
    t = type(a)
    if t is tuple or t is list:
        for x in a:
            _leaves(x, out)
    elif not (a is None or t is str):
        out.append(a)


@dataclass
class _Entry:
    native: Any
    traced: Any
    n_leaves: int
    checked: bool = False

    def __post_init__(self):
        # Arguments without tuples, lists or constants are passed as they are.
        self.flat = all(spec[0] in ("array", "float", "int", "bool") for spec in self.traced.arg_specs)

    def call(self, args: tuple) -> Any:
        # Guards (msir.trace_cache.Guard) are known to hold at the first call: the entry was
        # just traced, or its manifest checked; a value that changes at every read then runs once.
        if self.checked and not all(g.holds() for g in self.traced.guards):
            return _STALE
        self.checked = True
        if self.flat:
            inputs = list(args)
        else:
            inputs = []
            _leaves(args, inputs)
        for c in self.traced.captures:
            value = c.get()
            if not isinstance(value, np.ndarray) or value.dtype.name != c.dtype or value.shape != c.shape:
                return _STALE
            inputs.append(value)
        outs = self.native(*inputs)
        return self._rebuild(self.traced.out_structure, outs)

    def _rebuild(self, structure, outs):
        kind, payload = structure
        if kind == "leaf":
            arr = outs[payload]
            if arr.ndim == 0:
                return arr.item() if self.traced.out_weak[payload] else arr[()]
            return arr
        if kind == "tuple":
            return tuple(self._rebuild(s, outs) for s in payload)
        if kind == "list":
            return [self._rebuild(s, outs) for s in payload]
        return payload


_STALE = object()


class JitFunction:
    """A function compiled on first call for each new argument signature."""

    __msir_jit__ = True

    def __init__(self, fn, donate_argnums: int | Sequence[int] = ()):
        fn = getattr(fn, "__wrapped__", fn) if isinstance(fn, JitFunction) else fn
        if not (inspect.isfunction(fn) or isinstance(fn, (Transformed, _JvpEntry))):
            raise TypeError(f"msir.jit expects a Python function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.__wrapped__ = fn
        self._static: dict[Any, frozenset[int]] = {}
        self._entries: dict[Any, _Entry] = {}
        self._lock = threading.Lock()
        self._signature = inspect.signature(fn)
        self._n_params = len(self._signature.parameters)
        self._donate = _donated_positions(donate_argnums, self._n_params, fn)

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != self._n_params:
            bound = self._signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = tuple(bound.arguments.values())
        try:
            key0 = tuple([(a.dtype, a.shape) if type(a) is np.ndarray else _key(a) for a in args])
        except _EagerArgument:
            return self.__wrapped__(*args)
        static = self._static.get(key0)
        key = key0 if not static else (key0, self._static_values(args, static))
        entry = self._entries.get(key)
        try:
            if entry is not None:
                result = entry.call(args)
                if result is not _STALE:
                    return result
            return self._compile(args, key0).call(args)
        except MsirError as e:
            # The user's source location is in the message: cut msir's frames.
            raise e.with_traceback(None) from None

    @staticmethod
    def _static_values(args: tuple, positions: frozenset[int]) -> tuple:
        leaves: list[Any] = []
        _leaves(args, leaves)
        return tuple(leaves[i] for i in sorted(positions))

    def _compile(self, args: tuple, key0: Any) -> _Entry:
        with self._lock:
            if len(args) < len(self._signature.parameters):
                bound = self._signature.bind(*args)
                bound.apply_defaults()
                args = tuple(bound.arguments.values())
            if "recompile" in os.environ.get("MSIR_LOG", "") and self._entries:
                print(
                    f"msir: recompiling {self.__qualname__} for a new signature "
                    f"({_describe(args)}); {len(self._entries) + 1} versions",
                    file=sys.stderr,
                )
            # The persistent trace cache first: on a hit neither the frontend nor xDSL runs.
            variant = ["donate", sorted(self._donate)] if self._donate else None
            probe = trace_cache.probe(self.__wrapped__, args, variant)
            if probe is not None and probe.hit is not None:
                hit = probe.hit
                return self._add_entry(args, key0, hit.static_positions, hit.native, hit.traced)

            from msir.compiler import _mangled, compile_module
            from msir.frontend.driver import spec_of, trace

            traced = trace(self.__wrapped__, [spec_of(a) for a in args], record=probe is not None)
            self._mark_donated(traced)
            compiled = compile_module(
                traced.module, traced.entry, known_miss=probe.failed_ir_key if probe is not None else None
            )
            if probe is not None:
                probe.store(traced, _mangled(traced.entry), compiled.cache_key, compiled.locations)
            return self._add_entry(args, key0, traced.static_positions, compiled.native, traced)

    def _mark_donated(self, traced: Any) -> None:
        """Mark the entry function's arguments that are leaves of donated
        parameters (`msir.donate`), for convert-msir-to-loops to pair with outputs."""
        if not self._donate:
            return
        from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, UnitAttr

        from msir.lowering.to_loops import DONATE_ATTR

        entry = next(op for op in traced.module.ops if getattr(op, "sym_name", None)
                     and op.sym_name.data == traced.entry)
        n_args = len(entry.function_type.inputs)
        attrs = list(entry.arg_attrs.data) if entry.arg_attrs is not None else [DictionaryAttr({})] * n_args
        k = 0
        for p, spec in enumerate(traced.arg_specs):
            n = _count_leaves(spec)
            if p in self._donate:
                for i in range(k, k + n):
                    attrs[i] = DictionaryAttr({**attrs[i].data, DONATE_ATTR: UnitAttr()})
            k += n
        entry.arg_attrs = ArrayAttr(attrs)

    def _add_entry(self, args: tuple, key0: Any, static: frozenset[int], native: Any, traced: Any) -> _Entry:
        for reason in getattr(native, "donation_refused", ()):
            warnings.warn(
                f"msir.jit({self.__qualname__}): donated {reason}; its output gets a new buffer",
                DonationWarning,
                stacklevel=4,
            )
        self._static[key0] = static
        key = key0 if not static else (key0, self._static_values(args, static))
        leaves: list[Any] = []
        _leaves(args, leaves)
        entry = _Entry(native, traced, len(leaves))
        self._entries[key] = entry
        return entry

    def lower(self, *args) -> str:
        """The `msir` IR of this function specialised to `args`, as text."""
        from msir.frontend.driver import spec_of, trace

        return str(trace(self.__wrapped__, [spec_of(a) for a in args]).module)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)


# ---------------------------------------------------------------------------
# Differentiation
# ---------------------------------------------------------------------------


class Transformed:
    """A function transformed by `grad`/`value_and_grad` (or, inside compiled
    code, `vjp`/`jvp`): calling it compiles (GRAPH_MODE) or runs eagerly
    (PYNATIVE_MODE) the derivative. It can be transformed again and jitted."""

    def __init__(self, kind: str, fn, argnums=0, has_aux: bool = False, tangents=None):
        if not callable(fn) and type(fn).__name__ != "Closure":  # frontend closures are compile-time
            raise TypeError(f"msir.{kind} expects a function, got {type(fn).__name__}")
        if not isinstance(argnums, int) and not (
            isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums)
        ):
            raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
        self.kind = kind
        self.fn = fn.__wrapped__ if isinstance(fn, JitFunction) else fn
        self.argnums = argnums
        self.has_aux = has_aux
        self.tangents = tangents
        self._jit: JitFunction | None = None
        base = self.fn
        while isinstance(base, Transformed):
            base = base.fn
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
        while isinstance(base, Transformed):
            base = base.fn
        return base

    def __call__(self, *args, **kwargs):
        if _context["mode"] == PYNATIVE_MODE:
            from msir.eager.engine import call_transformed

            return call_transformed(self, args, kwargs)
        if self._jit is None:
            self._jit = JitFunction(self)
        return self._jit(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<msir.{self.kind} of {self.source_function!r} argnums={self.argnums}>"


def grad(fn, argnums=0, has_aux: bool = False) -> Transformed:
    """The gradient of a function with a scalar float output, with respect to
    argument `argnums` (an int, or a tuple: then a tuple of gradients). A
    gradient has the structure, shape and dtype of its argument. With
    `has_aux=True` the function returns `(output, aux)` and the gradient
    function returns `(gradient, aux)`."""
    return Transformed("grad", fn, argnums, has_aux)


def value_and_grad(fn, argnums=0, has_aux: bool = False) -> Transformed:
    """Like `grad`, returning `(value, gradient)` (`((value, aux), gradient)` with `has_aux`)."""
    return Transformed("value_and_grad", fn, argnums, has_aux)


def vjp(fn, *primals, has_aux: bool = False):
    """`(fn(*primals), vjp_fn)`: `vjp_fn(cotangent)` returns the cotangents of all
    primals (a tuple). `vjp_fn` owns the residuals and can be called many times."""
    t = Transformed("vjp", fn, tuple(range(len(primals))), has_aux)
    if _context["mode"] == PYNATIVE_MODE:
        from msir.eager.engine import call_transformed

        return call_transformed(t, primals, {})
    from msir.vjp_runtime import compiled_vjp

    return compiled_vjp(t, primals)


def jvp(fn, primals, tangents, has_aux: bool = False):
    """Forward mode: `(fn(*primals), tangent of the output)` for `tangents` of the primals."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("msir.jvp(fn, primals, tangents): primals and tangents must be tuples")
    if len(primals) != len(tangents):
        raise TypeError(f"msir.jvp: {len(primals)} primals but {len(tangents)} tangents")
    t = Transformed("jvp", fn, tuple(range(len(primals))), has_aux, tangents=tuple(tangents))
    if _context["mode"] == PYNATIVE_MODE:
        from msir.eager.engine import call_transformed

        return call_transformed(t, tuple(primals), {})
    return JitFunction(_JvpEntry(t))(*primals, *tangents)


class _JvpEntry:
    """`jvp` as a function of (primals..., tangents...), for compiling."""

    def __init__(self, t: Transformed):
        self.t = t
        self.n = len(t.tangents)
        self.__name__ = t.__name__
        self.__qualname__ = t.__name__
        params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_ONLY) for i in range(2 * self.n)]
        self.__signature__ = inspect.Signature(params)

    def __call__(self, *args):
        raise TypeError("a jvp entry is only traced, not called")


def jacrev(fn, argnums=0, has_aux: bool = False) -> Transformed:
    """The Jacobian by reverse mode: one forward pass, then one adjoint per
    output element, in one compiled function. Shape: output shape + input shape."""
    return Transformed("jacrev", fn, argnums, has_aux)


def jacfwd(fn, argnums=0, has_aux: bool = False) -> Transformed:
    """The Jacobian by forward mode: one tangent pass per input element."""
    return Transformed("jacfwd", fn, argnums, has_aux)


def hessian(fn, argnums=0) -> Transformed:
    """The Hessian of a scalar function: `jacfwd(jacrev(fn))`."""
    return jacfwd(jacrev(fn, argnums), argnums)


class custom_vjp:
    """A function with a user-defined reverse-mode rule (in the spirit of
    MindSpore's `Cell.bprop` and JAX's `custom_vjp`)::

        @msir.custom_vjp
        def f(x): ...
        def f_fwd(x): return f(x), (residuals...)
        def f_bwd(residuals, g): return (gradient of each argument,)
        f.defvjp(f_fwd, f_bwd)

    All three are compiled. Differentiating `f` calls `f_fwd` in the forward
    pass and `f_bwd` in the adjoint; calling `f` runs `f`."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.fwd = None
        self.bwd = None
        self._jit: JitFunction | None = None

    def defvjp(self, fwd, bwd) -> "custom_vjp":
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args, **kwargs):
        if _context["mode"] == PYNATIVE_MODE and any(type(a).__module__ == "msir.eager.tracer" for a in args):
            from msir.errors import UnsupportedSyntaxError

            raise UnsupportedSyntaxError(
                f"custom_vjp function '{self.__name__}' cannot be differentiated in PYNATIVE_MODE yet "
                "(its rule would be ignored); use GRAPH_MODE"
            )
        if self._jit is None:
            self._jit = JitFunction(self.fn)
        return self._jit(*args, **kwargs)


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


def stop_gradient(x):
    """`x`, with a zero derivative (in compiled code: `msir.stop_gradient`)."""
    if _context["mode"] == PYNATIVE_MODE:
        from msir.eager.engine import stop_gradient as eager_stop_gradient

        return eager_stop_gradient(x)
    return x


def is_transform_api(fn) -> bool:
    """Is `fn` one of msir's transformations, called inside compiled code?"""
    return fn in (grad, value_and_grad, jacrev, jacfwd, hessian)


def _describe(args: tuple) -> str:
    parts = []
    for a in args:
        if isinstance(a, np.ndarray):
            parts.append(f"{a.dtype}{list(a.shape)}")
        else:
            parts.append(type(a).__name__)
    return ", ".join(parts)


def _count_leaves(spec: Any) -> int:
    """The number of arguments of the traced function a parameter's spec becomes."""
    if spec[0] in ("tuple", "list"):
        return sum(_count_leaves(s) for s in spec[1])
    return 0 if spec[0] == "const" else 1


def _donated_positions(donate_argnums: int | Sequence[int], n_params: int, fn: Any) -> frozenset[int]:
    positions = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
    for p in positions:
        if not isinstance(p, int) or isinstance(p, bool) or not -n_params <= p < n_params:
            raise ValueError(
                f"msir.jit({getattr(fn, '__qualname__', fn)}): donate_argnums has {p!r}, "
                f"not a parameter position (the function has {n_params} parameters)"
            )
    return frozenset(p % n_params for p in positions)


def jit(fn=None, *, donate_argnums: int | Sequence[int] = ()):
    """Compile a NumPy-style Python function to native code (usable as a decorator,
    with or without arguments).

    `donate_argnums`: positions of parameters whose arrays the caller gives away
    (all arrays of a tuple or list parameter). An output of the same shape and
    dtype whose computation ends the donated value's life is then written into
    the donated array, which is returned as that output, instead of a new
    buffer: an SGD step `w = step(w, x)` updates its weights in place. Whether
    an output may reuse a donated array is decided by the compiler (see
    convert-msir-to-loops, "Donation"); a donated array it cannot reuse is
    reported with a `msir.DonationWarning` naming the reason, never silently.
    After the call a donated array's contents are unspecified unless it is
    the array returned.
    """
    if fn is None:
        return functools.partial(jit, donate_argnums=donate_argnums)
    return JitFunction(fn, donate_argnums)


__all__ = [
    "jit", "set_context", "get_context", "GRAPH_MODE", "PYNATIVE_MODE", "grad", "value_and_grad",
    "vjp", "jvp", "jacrev", "jacfwd", "hessian", "stop_gradient", "custom_vjp",
]
