"""Calls: of user functions, closures, NumPy functions and msir's transforms.

Calls to other user functions whose arguments are all arrays become `func.call`
of a separate function (one per callee and argument types); other calls (with
Python values, functions or tuples as arguments, or callees that capture arrays)
are inlined. Nested `def`s and lambdas are compile-time closures, inlined where
called; so are methods of plain objects (`obj.method(x)`, `obj(x)`, with
`self` bound to the object: see `msir.frontend.objects`). A `*args`
parameter binds the tuple of the extra positional arguments. A NumPy function
is looked up in the handler table (`msir.frontend.numpy_handlers`);
`msir.grad` and the other transforms are translated by
`msir.frontend.differentiation`; a call reaching a function being built is a
recursion (`msir.frontend.recursion`).
"""

from __future__ import annotations

import ast
import types
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import UnitAttr

from msir.dialects import msir as M
from msir.errors import UnsupportedSyntaxError
from msir.frontend.base import TypeError_
from msir.frontend.control_flow import CallableChoice
from msir.frontend.numpy_handlers import _BoundMethod, _call_method, _handler_for
from msir.frontend.objects import is_method_of_object
from msir.frontend.source import get_source
from msir.frontend.recursion import _MAX_SPECIALISED_RECURSION
from msir.frontend.state import FunctionValue, MethodValue, ObjectValue, _Callee
from msir.frontend.structure import _rebuild
from msir.frontend.values import Closure, KnownInt, Tensor
from msir.trace_cache import is_plain_object
from msir.transforms import BindParameters, CustomVjp, Jitted, Transform, checkpoint, compile_time_kind


class CallsMixin:
    """Calls of compile-time callables, inlined or outlined."""

    def call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value)
                if isinstance(v, Tensor) and v.ndim > 0:
                    v = self.unpack(v, None, a)  # its rows, as Python iterates an array
                if not isinstance(v, (tuple, list)):
                    raise self.unsupported("*args of a runtime value", a)
                args.extend(v)
            else:
                args.append(self.expr(a))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.unsupported("**kwargs", kw.value)
            kwargs[kw.arg] = self.expr(kw.value)
        self.loc = self.source.loc(node)
        return self.call_value(fn, args, kwargs, node)

    def call_value(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """Call a compile-time callable (user function, closure, NumPy function,
        differentiation transform...) on frontend values."""
        if isinstance(fn, Transform):
            return self.call_transformed(fn, args, kwargs, node)
        if isinstance(fn, CustomVjp):
            return self.call_custom_vjp(fn, args, node)
        if isinstance(fn, checkpoint):
            return self.call_checkpoint(fn, args, kwargs, node)
        if isinstance(fn, BindParameters):
            return self.call_binding_parameters(fn, args, kwargs, node)
        translate = getattr(type(fn), "__msir_translate__", None)
        if translate is not None:  # msir's own callables that drive the translator (msir.nn.cell)
            return translate(fn, self, args, kwargs, node)
        api_kind = compile_time_kind(fn)
        if api_kind in ("transform", "python"):
            return fn(*[self.python_value(a) for a in args], **kwargs)
        if api_kind == "stop_gradient":
            (x,) = args
            t = self.as_tensor(x, node)
            return self.tensor(M.StopGradientOp(t.ssa), t.weak)
        if api_kind in ("vjp", "jvp"):
            return self.transform_now(api_kind, args, kwargs, node)
        if isinstance(fn, FunctionValue):
            return self.apply_function_value(fn, args, node)
        if isinstance(fn, _BoundMethod):
            return _call_method(self, fn, args, kwargs, node)
        if isinstance(fn, Closure):
            return self.call_closure(fn, args, kwargs, node)
        if isinstance(fn, CallableChoice):
            return self.call_choice(fn, args, kwargs, node)
        if is_method_of_object(fn) or is_plain_object(fn):
            fn = self.from_python(fn)
        if isinstance(fn, MethodValue):
            return self.call_user(fn.fn, [fn.self_value, *args], kwargs, node)
        if isinstance(fn, ObjectValue):
            return self.call_object(fn, args, kwargs, node)
        handler = _handler_for(fn)
        if handler is not None:
            return handler(self, args, kwargs, node)
        if isinstance(fn, Jitted):
            fn = fn.__wrapped__
            if not isinstance(fn, types.FunctionType):  # a jitted method or Cell
                return self.call_value(fn, args, kwargs, node)
        if isinstance(fn, types.FunctionType):
            return self.call_user(fn, args, kwargs, node)
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
        module = getattr(fn, "__module__", None) or ""
        if module.startswith("numpy") or isinstance(fn, np.ufunc):
            sub = module.removeprefix("numpy").strip(".").split(".")
            public = [p for p in sub if p and not p.startswith("_")]
            qual = ".".join(["np", *public, getattr(fn, "__name__", name)])
            raise self.error(
                UnsupportedSyntaxError,
                f"the NumPy function {qual} is not supported in compiled functions",
                node,
            )
        raise self.error(
            UnsupportedSyntaxError,
            f"calling '{name}' is not supported in compiled functions (only NumPy functions msir "
            "knows and Python functions defined in source files)",
            node,
        )

    def bind(self, node: ast.FunctionDef | ast.Lambda, defaults: list[Any], args, kwargs, call_node) -> dict[str, Any]:
        a = node.args
        if a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise self.unsupported("**kwargs, keyword-only and positional-only parameters", node)
        names = [p.arg for p in a.args]
        if len(args) > len(names) and a.vararg is None:
            raise self.error(
                TypeError_, f"the function takes {len(names)} arguments but {len(args)} were given", call_node
            )
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                raise self.error(TypeError_, f"unexpected or repeated argument '{k}'", call_node)
            bound[k] = v
        for name, d in zip(names[len(names) - len(defaults) :], defaults):
            bound.setdefault(name, d)
        missing = [n for n in names if n not in bound]
        if missing:
            raise self.error(TypeError_, f"missing argument '{missing[0]}'", call_node)
        if a.vararg is not None:
            bound[a.vararg.arg] = tuple(args[len(names) :])
        return bound

    def call_closure(self, c: Closure, args, kwargs, node) -> Any:
        bound = self.bind(c.node, c.defaults, args, kwargs, node)
        if self.native_recursion(c.node, bound):
            name = c.node.name if isinstance(c.node, ast.FunctionDef) else "lambda"
            callee = _Callee(c.node, name, c.source, self.globals, {**self.closure, **c.env}, c.node)
            return self.outline(callee, self.runtime_arguments(callee, bound, node), node)
        sub = type(self)(self.tc, self.block, c.source, self.globals, self.closure)
        sub.scope = dict(c.env)
        sub.scope.update(bound)
        self.tc.inlining.append(c.node)
        try:
            if isinstance(c.node, ast.Lambda):
                return sub.expr(c.node.body)
            result = sub.run_body(c.node.body)
        finally:
            self.tc.inlining.pop()
        return None if result is None else result[1]

    def call_user(self, fn: types.FunctionType, args, kwargs, node) -> Any:
        src = get_source(fn)
        if not isinstance(src.node, (ast.FunctionDef, ast.Lambda)):
            raise self.unsupported("this callable", node)
        defaults = list(fn.__defaults__ or ())
        bound = self.bind(src.node, defaults, args, kwargs, node)
        closure = _closure_env(fn)
        values = list(bound.values())
        callee = _Callee(fn.__code__, fn.__name__, src, fn.__globals__, closure, src.node)
        if all(isinstance(v, Tensor) for v in values):
            return self.outline(callee, bound, node)
        if self.native_recursion(fn.__code__, bound):
            return self.outline(callee, self.runtime_arguments(callee, bound, node), node)
        sub = type(self)(self.tc, self.block, src, fn.__globals__, closure)
        sub.scope.update(bound)
        self.tc.inlining.append(fn.__code__)
        try:
            if isinstance(src.node, ast.Lambda):
                return sub.expr(src.node.body)
            result = sub.run_body(src.node.body)
        finally:
            self.tc.inlining.pop()
        return None if result is None else result[1]

    def call_checkpoint(self, cp: Any, args: list[Any], kwargs: dict[str, Any], node) -> Any:
        """A call of a `msir.checkpoint` function: always a `func.call` (its
        Python numbers become runtime values), marked `msir.checkpoint` so that
        msir-grad recomputes its residuals instead of keeping them."""
        fn = cp.fn
        if not isinstance(fn, types.FunctionType):
            raise self.error(UnsupportedSyntaxError, f"msir.checkpoint of {self.describe(fn)} (expected a Python function)", node)
        src = get_source(fn)
        if not isinstance(src.node, (ast.FunctionDef, ast.Lambda)):
            raise self.unsupported("this callable", node)
        bound = self.bind(src.node, list(fn.__defaults__ or ()), args, kwargs, node)
        runtime = {}
        for name, v in bound.items():
            if isinstance(v, KnownInt):
                v = v.tensor
            elif isinstance(v, (bool, int, float)) and not isinstance(v, Tensor):
                v = self.as_tensor(v, node)
            elif not isinstance(v, Tensor):
                raise self.error(
                    UnsupportedSyntaxError,
                    f"a msir.checkpoint function takes arrays and numbers; argument '{name}' of "
                    f"'{fn.__name__}' is {self.describe(v)} (pass the arrays of a tuple separately)",
                    node,
                )
            runtime[name] = v
        callee = _Callee(fn.__code__, fn.__name__, src, fn.__globals__, _closure_env(fn), src.node)
        return self.outline(callee, runtime, node, checkpoint=True)

    def outline(self, fn: "_Callee", bound: dict[str, Any], node, checkpoint: bool = False) -> Any:
        """Build (once per argument types) a separate func.func for a call with
        array arguments. Compile-time arguments (functions, as a recursion that
        is too deep to unroll may pass) are part of the function, by identity.
        `checkpoint` marks the call `msir.checkpoint` (see `call_checkpoint`)."""
        # A function translated while parameters are bound reads them as other values.
        key = (fn.code, tuple(
            (v.dtype, v.shape, v.weak) if isinstance(v, Tensor) else ("static", id(v)) for v in bound.values()
        ), tuple(number for number, _ in self.tc.bound_parameters))
        self.tc.static_arguments += [v for v in bound.values() if not isinstance(v, Tensor)]
        if key in self.tc.active:
            return self.recursive_call(key, bound, node)
        levels = sum(1 for k in self.tc.active if k[0] is fn.code)
        if levels >= _MAX_SPECIALISED_RECURSION:
            types = ", ".join(f"{M.fmt_shape(v.shape)} {v.dtype}" for v in bound.values() if isinstance(v, Tensor))
            raise self.error(
                UnsupportedSyntaxError,
                f"recursion whose argument shapes change at every level is not supported: '{fn.name}' "
                f"calls itself with arguments ({types}), another type at each of {levels} levels; "
                "a native recursive call needs the arguments' shapes and dtypes to repeat",
                node,
            )
        if key not in self.tc.callees:
            self.tc.active.append(key)
            try:
                self.tc.callees[key] = self.build_callee(key, fn, bound)
            finally:
                self.tc.active.pop()
        name, structure, ftype, captured = self.tc.callees[key]
        operands = [v.ssa for v in bound.values() if isinstance(v, Tensor)] + [self.localize(c).ssa for c in captured]
        call = self.emit(func.CallOp(name, operands, list(ftype.outputs.data)))
        if checkpoint:
            call.attributes[M.CHECKPOINT_ATTR] = UnitAttr()
        results = [
            Tensor(r, M.dtype_of(r.type), M.shape_of(r.type), weak) for r, weak in zip(call.results, structure[1])
        ]
        return _rebuild(structure[0], iter(results))


def _closure_env(fn: types.FunctionType) -> dict[str, Any]:
    if not fn.__closure__:
        return {}
    return dict(zip(fn.__code__.co_freevars, fn.__closure__))


