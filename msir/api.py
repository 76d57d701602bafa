"""The user-facing API: `jit`, execution modes and the context.

`jit(f)` compiles `f` for the types of the arguments it is called with, once per
signature (the in-memory cache), and calls the native code. The cache key is the
dtype and shape of every array, the Python type of every scalar, and the value of
the Python ints that reached a static position while tracing (a shape, an axis, a
slice bound). Code that read values through objects (a Cell's attributes) is
kept in up to eight versions per signature, one per set of values it read:
switching back (`set_train(False)`) runs the earlier version without tracing
again. `MSIR_LOG=recompile` logs every new signature on stderr. A new
signature is first looked up in the persistent trace cache (`msir.trace_cache`),
which finds the native code of an earlier process without running the frontend.

This is the top of msir's import graph: it adds what calling a transformation
from Python does (compile it, or run it eagerly in PYNATIVE_MODE) to the
objects of `msir.transforms`, which the frontend, the eager engine and the
caches read without importing this module. The execution context lives in
`msir.context`, the calling convention of compiled versions in `msir.calling`.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import types
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from msir import targets, trace_cache
from msir.calling import STALE, EagerArgument, Entry, signature_key
from msir.context import GRAPH_MODE, PYNATIVE_MODE, auto_parallel_key, device_target, get_context, pynative, set_context
from msir.errors import DonationWarning, MsirError, UnsupportedSyntaxError
from msir.library_callables import as_python_function
from msir.common.tensor import TracedTensorRead, contains_tensor, unwrap, wrap
from msir.grad_operation import SumOfOutputs
from msir.transforms import (
    CustomVjp, Jitted, JvpEntry, Transform, checkpoint, compile_time, compiled_call_name,
)
from msir.tree import count_leaves, leaves

__all__ = [
    "jit", "set_context", "get_context", "GRAPH_MODE", "PYNATIVE_MODE", "grad", "value_and_grad",
    "vjp", "jvp", "jacrev", "jacfwd", "hessian", "stop_gradient", "custom_vjp", "checkpoint",
]


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


_VERSIONS_KEPT = 8
"""Versions of one signature a jitted function keeps (for values read through objects)."""


class JitFunction(Jitted):
    """A function compiled on first call for each new argument signature."""

    def __init__(self, fn, donate_argnums: int | Sequence[int] = (), target: str | None = None):
        if isinstance(fn, JitFunction):
            target = fn._target if target is None else target
        fn = getattr(fn, "__wrapped__", fn) if isinstance(fn, JitFunction) else as_python_function(fn)
        if not (inspect.isfunction(fn) or isinstance(fn, (Transform, JvpEntry)) or _is_object_callable(fn)):
            raise TypeError(
                f"msir.jit expects a Python function, a method of an object or a callable object (a Cell), "
                f"got {type(fn).__name__}"
            )
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__qualname__"):
            self.__qualname__ = self.__name__ = type(fn).__name__
        self.__wrapped__ = fn
        self._static: dict[Any, frozenset[int]] = {}
        self._target = None if target is None else targets.device_target(target)
        """jit's `target` in MindSpore's spelling; None: the context's `device_target`."""
        self._entries_by_target: dict[str, dict[tuple, dict[Any, Entry]]] = {}
        """Per target, per its options (`targets.options_key`) and signature, the entry called."""
        self._versions: dict[tuple[str, Any], list[Entry]] = {}
        """Per target and signature, the versions compiled for what the code read
        through objects (guards), newest last: `_call_other_version`."""
        self._lock = threading.Lock()
        self._plans: dict[tuple, Any] = {}
        """Per auto-parallel context and signature, the plan the function runs with (`msir.parallel`)."""
        self._signature = inspect.signature(_compiled_call(fn))
        self._n_params = len(self._signature.parameters)
        self._donate = _donated_positions(donate_argnums, self._n_params, fn)

    def _current_target(self) -> str:
        return self._target or device_target()

    def _current_variant(self) -> tuple[str, tuple]:
        """The target a call now compiles for and its options (`targets.options_key`)."""
        target = self._current_target()
        return target, targets.options_key(target)

    @property
    def _entries(self) -> dict[Any, Entry]:
        """The versions compiled for the target, and its options, a call now
        compiles for, so that switching `device_target` or the target's
        options (`MSIR_ASCEND_CHIP`) never reuses code compiled for others."""
        target, options = self._current_variant()
        by_options = self._entries_by_target.get(target)
        if by_options is None:
            by_options = self._entries_by_target.setdefault(target, {})
        entries = by_options.get(options)
        if entries is None:
            entries = by_options.setdefault(options, {})
        return entries

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != self._n_params:
            bound = self._signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = tuple(bound.arguments.values())
        if not all(type(a) is np.ndarray for a in args) and contains_tensor(args):
            # Tensors are passed as their arrays; the results come back as Tensors.
            return wrap(self(*unwrap(args)))
        try:
            key0 = tuple([(a.dtype, a.shape) if type(a) is np.ndarray else signature_key(a) for a in args])
        except EagerArgument:
            return self.__wrapped__(*args)
        parallel = auto_parallel_key()
        if parallel is not None:  # msir.set_auto_parallel_context: run sharded on emulated devices
            return self._call_sharded(args, (parallel, self._current_target(), key0))
        static = self._static.get(key0)
        key = key0 if not static else (key0, self._static_values(args, static))
        entry = self._entries.get(key)
        try:
            if entry is not None:
                result = entry.call(args)
                if result is not STALE:
                    return result
                result = self._call_other_version(key, entry, args)
                if result is not STALE:
                    return result
            return self._compile(args, key0).call(args)
        except TracedTensorRead:  # a Parameter PyNative mode differentiates: run eagerly
            return self.__wrapped__(*args)
        except MsirError as e:
            # The user's source location is in the message: cut msir's frames.
            raise e.with_traceback(None) from None

    def _call_sharded(self, args: tuple, key: tuple) -> Any:
        plan = self._plans.get(key)
        try:
            if plan is None:
                from msir.parallel.context_plan import plan_for_context

                with self._lock:
                    plan = self._plans[key] = plan_for_context(self.__wrapped__, args)
            return plan.run(*args)
        except MsirError as e:
            raise e.with_traceback(None) from None

    def _call_other_version(self, key: Any, stale: Entry, args: tuple) -> Any:
        """Call a version of signature `key` compiled earlier whose guards hold
        again (a Cell switched back by `set_train(False)`, an attribute set
        back): it becomes the one tried first. STALE if there is none."""
        for entry in self._versions.get((self._current_variant(), key), ()):
            if entry is not stale:
                result = entry.call(args)
                if result is not STALE:
                    self._entries[key] = entry
                    return result
        return STALE

    @staticmethod
    def _static_values(args: tuple, positions: frozenset[int]) -> tuple:
        flat: list[Any] = []
        leaves(args, flat)
        return tuple(flat[i] for i in sorted(positions))

    def _compile(self, args: tuple, key0: Any) -> Entry:
        with self._lock:
            target = self._current_target()
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
            prepare = targets.get(target).prepare
            if prepare is not None:
                prepare()
            # The persistent trace cache first: on a hit neither the frontend nor xDSL runs.
            variant = ["donate", sorted(self._donate)] if self._donate else None
            probe = trace_cache.probe(self.__wrapped__, args, variant, target)
            if probe is not None and probe.hit is not None:
                hit = probe.hit
                return self._add_entry(args, key0, hit.static_positions, hit.native, hit.traced)

            from msir.compiler import compile_module
            from msir.frontend.driver import spec_of, trace

            traced = trace(self.__wrapped__, [spec_of(a) for a in args], record=probe is not None)
            self._mark_donated(traced)
            compiled = compile_module(
                traced.module, traced.entry, known_miss=probe.failed_ir_key if probe is not None else None,
                target=target,
            )
            if probe is not None:
                probe.store(traced, compiled.symbol, compiled.cache_key, compiled.locations)
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
            n = count_leaves(spec)
            if p in self._donate:
                for i in range(k, k + n):
                    attrs[i] = DictionaryAttr({**attrs[i].data, DONATE_ATTR: UnitAttr()})
            k += n
        entry.arg_attrs = ArrayAttr(attrs)

    def _add_entry(self, args: tuple, key0: Any, static: frozenset[int], native: Any, traced: Any) -> Entry:
        for reason in getattr(native, "donation_refused", ()):
            warnings.warn(
                f"msir.jit({self.__qualname__}): donated {reason}; its output gets a new buffer",
                DonationWarning,
                stacklevel=4,
            )
        self._static[key0] = static
        key = key0 if not static else (key0, self._static_values(args, static))
        flat: list[Any] = []
        leaves(args, flat)
        entry = Entry(native, traced, len(flat))
        self._entries[key] = entry
        versions = self._versions.setdefault((self._current_variant(), key), [])
        versions.append(entry)
        del versions[:-_VERSIONS_KEPT]
        return entry

    @property
    def profile(self) -> Any:
        """The timing profile of this function's last call on a target that
        emulates its hardware (`ascend`: cycles, per-pipe busy time, the
        critical pipe; printing it gives the table), else None."""
        runs = [e.native.last_run for by_options in self._entries_by_target.values()
                for entries in by_options.values() for e in entries.values()
                if getattr(e.native, "last_run", None) is not None]
        return max(runs, key=lambda run: run[0])[1] if runs else None

    def lower(self, *args) -> str:
        """The `msir` IR of this function specialised to `args`, as text."""
        from msir.frontend.driver import spec_of, trace

        return str(trace(self.__wrapped__, [spec_of(a) for a in args]).module)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        from msir.trace_cache import is_plain_object

        if not (inspect.isfunction(self.__wrapped__) and is_plain_object(obj) and hasattr(obj, "__dict__")):
            return functools.partial(self, obj)
        # A jitted method of a plain object (`@msir.jit def construct(self, x)`): the
        # method bound to the object is compiled, reading `self` like any object.
        key = f"__msir_jit_{id(self)}"
        bound = vars(obj).get(key)
        if bound is None:
            donated = [p - 1 for p in self._donate if p > 0]
            bound = JitFunction(types.MethodType(self.__wrapped__, obj), donated, self._target)
            vars(obj)[key] = bound
        return bound


# ---------------------------------------------------------------------------
# Differentiation
# ---------------------------------------------------------------------------


class Transformed(Transform):
    """A function transformed by `grad`/`value_and_grad`/`jacrev`/`jacfwd`:
    calling it compiles (GRAPH_MODE) or runs eagerly (PYNATIVE_MODE) the
    derivative. It can be transformed again and jitted. Called on Tensors
    (or with `weights`) it gives Tensors."""

    def __init__(self, kind: str, fn, argnums=0, has_aux: bool = False, tangents=None, weights=None,
                 aux_tuple: bool | None = None):
        super().__init__(kind, fn, argnums, has_aux, tangents, weights, aux_tuple)
        self._jit: JitFunction | None = None
        self._mindspore_form: Transformed | None = None

    def __call__(self, *args, **kwargs):
        if self.kind in ("grad", "value_and_grad") and (
            self.weights is not None or contains_tensor(args) or contains_tensor(kwargs)
        ):
            return self._call_in_mindspore_form(args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if pynative():
            return self._call_eagerly(args, kwargs)
        if self._jit is None:
            self._jit = JitFunction(self)
        return self._jit(*args, **kwargs)

    def _call_in_mindspore_form(self, args: tuple, kwargs: dict) -> Any:
        """`grad` / `value_and_grad` called on Tensors (or with `weights`), as
        MindSpore's: every output is differentiated with a sensitivity of ones
        (the first only with `has_aux`, the others come back as a tuple), and
        the results are Tensors. Differentiates `SumOfOutputs(fn)`, which also
        returns the outputs."""
        inner = self._mindspore_form
        if inner is None:
            inner = Transformed(self.kind, SumOfOutputs(self.fn, self.has_aux), self.argnums, True,
                                weights=self.weights, aux_tuple=False)
            self._mindspore_form = inner
        result = inner._call(args, kwargs)
        if self.kind == "grad":
            grads, outputs = result
            return wrap((grads, tuple(outputs[1:])) if self.has_aux else grads)
        (_, outputs), grads = result
        return wrap((outputs, grads))

    def _call_eagerly(self, args: tuple, kwargs: dict) -> Any:
        from msir.eager.engine import call_transformed

        if self.weights is None:
            if not (contains_tensor(args) or contains_tensor(kwargs)):
                return call_transformed(self, args, kwargs)
            # the Tensors' arrays (SumOfOutputs gives the function Tensors again)
            return call_transformed(self, unwrap(self._bind_arguments(args, kwargs) if kwargs else args), {})
        if kwargs:
            args = self._bind_arguments(args, kwargs)
        args = unwrap(args)
        inner = self.with_weights_as_argument(len(args))
        values = tuple(p.asnumpy() for p in self.weights)
        return self.arrange_result(call_transformed(inner, (*args, values), {}))

    def _bind_arguments(self, args: tuple, kwargs: dict) -> tuple:
        bound = inspect.signature(self).bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.arguments.values())


def _grad_position(grad_position, argnums, fname: str):
    """MindSpore's `grad_position`, or msir's (and JAX's) keyword `argnums` for it."""
    if argnums is None:
        return grad_position
    if grad_position != 0:
        raise TypeError(f"msir.{fname}: give grad_position or its alias argnums, not both")
    return argnums


@compile_time("transform")
def grad(fn, grad_position=0, weights=None, has_aux: bool = False, *, argnums=None) -> Transformed:
    """The gradient of a function with a scalar float output (MindSpore's
    `mindspore.grad`), with respect to argument `grad_position` (an int; a
    tuple: then a tuple of gradients; None: no argument) and to the
    Parameters `weights` (a Parameter, a `ParameterTuple` such as
    `net.trainable_params()`, or a list). A gradient has the structure,
    shape and dtype of what it differentiates; with both, the result is
    `(gradients of the arguments, gradients of the weights)`, with weights
    only the weights' tuple. `argnums=` is a keyword alias of `grad_position`.

    With `has_aux=True` the function returns several outputs: the first is
    differentiated, the others come back as they are, `(gradient, aux)`,
    where `aux` is the second output for a pair `(output, aux)` and the
    tuple of the others for more (MindSpore returns a tuple for a pair too:
    a difference msir keeps, see the README)."""
    return Transformed("grad", fn, _grad_position(grad_position, argnums, "grad"), has_aux, weights=weights)


@compile_time("transform")
def value_and_grad(fn, grad_position=0, weights=None, has_aux: bool = False, *, argnums=None) -> Transformed:
    """Like `grad`, returning `(value, gradient)`: the value is everything the
    function returns (`(output, aux...)` with `has_aux`), as MindSpore's
    `mindspore.value_and_grad`."""
    return Transformed(
        "value_and_grad", fn, _grad_position(grad_position, argnums, "value_and_grad"), has_aux, weights=weights
    )


@compile_time("vjp")
def vjp(fn, *primals, has_aux: bool = False):
    """`(fn(*primals), vjp_fn)`: `vjp_fn(cotangent)` returns the cotangents of all
    primals (a tuple). `vjp_fn` owns the residuals and can be called many times.
    Given Tensors, it gives Tensors (and `vjp_fn` takes and gives them)."""
    if contains_tensor(primals):
        out, vjp_fn, *aux = vjp(fn, *unwrap(primals), has_aux=has_aux)
        return (wrap(out), lambda cotangent: wrap(vjp_fn(unwrap(cotangent))), *wrap(tuple(aux)))
    t = Transformed("vjp", fn, tuple(range(len(primals))), has_aux)
    if pynative():
        from msir.eager.engine import call_transformed

        return call_transformed(t, primals, {})
    from msir.vjp_runtime import compiled_vjp

    return compiled_vjp(t, primals)


@compile_time("jvp")
def jvp(fn, primals, tangents, has_aux: bool = False):
    """Forward mode: `(fn(*primals), tangent of the output)` for `tangents` of the primals."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("msir.jvp(fn, primals, tangents): primals and tangents must be tuples")
    if len(primals) != len(tangents):
        raise TypeError(f"msir.jvp: {len(primals)} primals but {len(tangents)} tangents")
    if contains_tensor(primals) or contains_tensor(tangents):  # Tensors in, Tensors out
        return wrap(jvp(fn, unwrap(tuple(primals)), unwrap(tuple(tangents)), has_aux=has_aux))
    t = Transformed("jvp", fn, tuple(range(len(primals))), has_aux, tangents=tuple(tangents))
    if pynative():
        from msir.eager.engine import call_transformed

        return call_transformed(t, tuple(primals), {})
    return JitFunction(JvpEntry(t))(*primals, *tangents)


@compile_time("transform")
def jacrev(fn, argnums=0, has_aux: bool = False) -> Transformed:
    """The Jacobian by reverse mode: one forward pass, then one adjoint per
    output element, in one compiled function. Shape: output shape + input shape."""
    return Transformed("jacrev", fn, argnums, has_aux)


@compile_time("transform")
def jacfwd(fn, argnums=0, has_aux: bool = False) -> Transformed:
    """The Jacobian by forward mode: one tangent pass per input element."""
    return Transformed("jacfwd", fn, argnums, has_aux)


@compile_time("transform")
def hessian(fn, argnums=0) -> Transformed:
    """The Hessian of a scalar function: `jacfwd(jacrev(fn))`."""
    return jacfwd(jacrev(fn, argnums), argnums)


class custom_vjp(CustomVjp):
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
        super().__init__(fn)
        self._jit: JitFunction | None = None

    def __call__(self, *args, **kwargs):
        if pynative() and _any_tracer(args):
            raise UnsupportedSyntaxError(
                f"custom_vjp function '{self.__name__}' cannot be differentiated in PYNATIVE_MODE yet "
                "(its rule would be ignored); use GRAPH_MODE"
            )
        if self._jit is None:
            self._jit = JitFunction(self.fn)
        return self._jit(*args, **kwargs)


def _any_tracer(args: tuple) -> bool:
    from msir.eager.tracer import Tracer

    return any(isinstance(a, Tracer) for a in args)


@compile_time("stop_gradient")
def stop_gradient(x):
    """`x`, with a zero derivative (in compiled code: `msir.stop_gradient`)."""
    if pynative():
        from msir.eager.engine import stop_gradient as eager_stop_gradient

        return eager_stop_gradient(x)
    return x


def _is_object_callable(fn: Any) -> bool:
    """Is `fn` a method of a plain object, or a callable plain object (a Cell), that jit compiles?"""
    from msir.trace_cache import is_plain_object

    if inspect.ismethod(fn):
        return inspect.isfunction(fn.__func__) and is_plain_object(fn.__self__)
    method = getattr(type(fn), compiled_call_name(fn), None)
    return is_plain_object(fn) and inspect.isfunction(method.__wrapped__ if isinstance(method, Jitted) else method)


def _compiled_call(fn: Any) -> Any:
    """What a call of jitted `fn` runs, for its signature: a callable object's
    compiled method (`msir.transforms.compiled_call_name`), bound."""
    if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, (Transform, JvpEntry)):
        return fn
    return getattr(fn, compiled_call_name(fn))


def _describe(args: tuple) -> str:
    parts = []
    for a in args:
        if isinstance(a, np.ndarray):
            parts.append(f"{a.dtype}{list(a.shape)}")
        else:
            parts.append(type(a).__name__)
    return ", ".join(parts)


def _donated_positions(donate_argnums: int | Sequence[int], n_params: int, fn: Any) -> frozenset[int]:
    positions = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
    for p in positions:
        if not isinstance(p, int) or isinstance(p, bool) or not -n_params <= p < n_params:
            raise ValueError(
                f"msir.jit({getattr(fn, '__qualname__', fn)}): donate_argnums has {p!r}, "
                f"not a parameter position (the function has {n_params} parameters)"
            )
    return frozenset(p % n_params for p in positions)


def jit(fn=None, *, donate_argnums: int | Sequence[int] = (), target: str | None = None):
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

    `target`: the target to compile for (`"cpu"`, any case; see
    `msir.targets`) instead of the context's `device_target`; one that names
    no target raises `msir.errors.UnknownTargetError` listing the known ones.
    """
    if fn is None:
        if target is not None:
            targets.canonical(target)  # an unknown target fails at the decorator, not at the call
        return functools.partial(jit, donate_argnums=donate_argnums, target=target)
    return JitFunction(fn, donate_argnums, target)
