"""Plain Python objects: attributes, dict items and methods read at compile time.

An instance of a user class (a model, a layer, a config) or a dict that the
traced code reaches (a global, a closure variable, an attribute or item of
another one, a method's `self`) is an `ObjectValue`: the object and the
`Path` it was reached by. Reading through it:

* `obj.attr` and `d["key"]` (constant keys) read the Python value now. A
  NumPy array becomes a hidden runtime argument (a `Capture`, like an array
  global); Python numbers, strings, None and NumPy scalars are compile-time
  constants; tuples and lists are read item by item; objects and dicts are
  `ObjectValue`s again; functions, classes and modules are compile-time
  values.
* `obj.method(...)`, `obj(...)` (its class's `__call__`) inline the method
  with `self` bound to the object, so methods calling methods, a list of
  layers called in a loop (unrolled), or a `Cell`'s `__call__` running its
  `construct` are all ordinary inlined calls.

Every read is part of the compiled code's key: the trace records a
`msir.trace_cache.Guard` for it (the constant's value, the object's class,
the list's length, the method's function, the identity of a compile-time
function), checked before every call of the compiled code, and the trace
cache's recorder notes it in the manifest. Changing what a compiled method
read (`obj.scale = 3.0`, `obj.w` rebound to an array of another shape, a
layer appended) therefore compiles again; arrays are read anew at every call
anyway. Compiled code does not change objects: assigning to an attribute or
item is refused (`msir.frontend.statements`), except a Parameter's value
(`ops.assign`, `self.p = v`: `msir.frontend.parameter_writes`), which a read
of it later in the trace sees.
"""

from __future__ import annotations

import ast
import re
import types
from typing import Any

import numpy as np

from msir.common.tensor import Tensor as UserTensor
from msir.common.tensor import TracedTensorRead, is_traced
from msir.errors import MsirError, UnsupportedSyntaxError
from msir.frontend.base import AttributeError_, KeyError_, TypeError_
from msir.frontend.parameter_writes import remember_parameter_read, written_value
from msir.frontend.state import MethodValue, ObjectValue, Path
from msir.frontend.values import KnownInt, Tensor
from msir.trace_cache import ABSENT, Guard, is_plain_object, item_or_absent
from msir.transforms import BindParameters, Jitted, compiled_call_name

_CONSTANT_TYPES = (bool, int, float, complex, str, type(None))


class ObjectsMixin:
    """Reading plain objects and dicts, calling their methods."""

    def object_value(self, obj: Any, path: Path) -> ObjectValue:
        """`obj` reached by `path`: an object whose class the code depends on."""
        self.guard("type", path, obj)
        return ObjectValue(obj, path)

    def guard(self, mode: str, path: Path, value: Any) -> None:
        """The compiled code depends on `value` read at `path` (see `Guard`)."""
        self.tc.guards.append(Guard.of(mode, path.get, value))
        if self.tc.recorder is not None:
            self.tc.recorder.guard(path.ref, mode, value)

    def identity(self, value: Any) -> Any:
        """The Python object `value` is, for an `is` comparison: the code then
        depends on which object an `ObjectValue` is."""
        if isinstance(value, ObjectValue):
            self.guard("identity", value.path, value.obj)
            return value.obj
        return value

    # Paths read what is there now, ABSENT where the object changed so that
    # nothing is: a guard or captured array then sees another value.

    def attribute_path(self, parent: Path, attr: str, value: Any) -> Path:
        get = parent.get
        ref = self.tc.recorder.read(parent.ref, "a", attr, value) if self.tc.recorder is not None else None
        return Path(lambda: getattr(get(), attr, ABSENT), f"{parent.name}.{attr}", ref)

    def item_path(self, parent: Path, key: Any, value: Any) -> Path:
        get = parent.get
        ref = self.tc.recorder.read(parent.ref, "i", key, value) if self.tc.recorder is not None else None
        return Path(lambda: item_or_absent(get(), key), parent.name + "_" + re.sub(r"\W", "_", str(key)), ref)

    def object_attribute(self, value: ObjectValue, attr: str, node: ast.AST) -> Any:
        obj = value.obj
        if isinstance(obj, dict):
            raise self.error(
                UnsupportedSyntaxError,
                f"attribute '.{attr}' of a dict is not supported in compiled functions; "
                f"read its items with constant keys ({_source_of(node, 'value', value.path.name)}['key'])",
                node,
            )
        try:
            v = getattr(obj, attr)
        except AttributeError:
            raise self.error(AttributeError_, f"'{type(obj).__name__}' object has no attribute '{attr}'", node) from None
        path = self.attribute_path(value.path, attr, v)
        if is_method_of_object(v) and v.__self__ is obj:
            self.guard("method", path, v)
            return MethodValue(value, v.__func__, attr)
        read = self.localize(self.read_through(v, path, node))
        return remember_parameter_read(self, v, read) if isinstance(v, UserTensor) else read

    def object_item(self, value: ObjectValue, key: Any, node: ast.AST) -> Any:
        obj = value.obj
        if not isinstance(obj, dict):
            raise self.error(TypeError_, f"'{type(obj).__name__}' object is not subscriptable", node)
        if isinstance(key, KnownInt):
            key = self.static_int(key, "a dict key", node)
        if isinstance(key, (Tensor, slice)) or not _is_constant_key(key):
            raise self.error(
                UnsupportedSyntaxError,
                f"a dict key must be a constant known at compile time (a str, number or tuple of them), "
                f"got {self.describe(key)}",
                node,
            )
        if key not in obj:
            raise self.error(KeyError_, f"the dict '{_source_of(node, 'value', value.path.name)}' has no key {key!r}", node)
        v = obj[key]
        read = self.localize(self.read_through(v, self.item_path(value.path, key, v), node))
        return remember_parameter_read(self, v, read) if isinstance(v, UserTensor) else read

    def read_through(self, v: Any, path: Path, node: ast.AST) -> Any:
        """The frontend value of `v`, read through an object at `path`, guarded."""
        if isinstance(v, np.ndarray):
            return self.capture(v, path.name, path.get, node)
        if isinstance(v, UserTensor):
            get = path.get
            return self.tensor_value(v, path.name, lambda: array_of(get()), node)
        if isinstance(v, (tuple, list)):
            self.guard("len", path, v)
            items = [self.read_through(x, self.item_path(path, i, x), node) for i, x in enumerate(v)]
            return tuple(items) if isinstance(v, tuple) else items
        if isinstance(v, dict) or is_plain_object(v):
            return self.object_value(v, path)
        if is_method_of_object(v):
            self.guard("method", path, v)
            return self.external(v, path.name, node, path.get, path.ref)
        if isinstance(v, (*_CONSTANT_TYPES, np.generic)):
            self.guard("value", path, v)
        else:  # a function, class, module...: the code specialises on which one
            self.guard("identity", path, v)
        return self.external(v, path.name, node)

    def call_object(self, value: ObjectValue, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """`obj(...)`: its class's `__call__` (as Python calls it, whatever the
        instance's own attributes), or the method its class names in
        `__msir_call__` (a Cell's `construct`), inlined with `self` bound. An
        object whose `__msir_custom_vjp__()` gives a `CustomVjp` (a Cell with a
        `bprop`) is called as that function, with its reverse rule."""
        custom = getattr(type(value.obj), "__msir_custom_vjp__", None)
        try:
            # The rule's methods are read through this object's path, like any method of it.
            rule = custom(value.obj, lambda name: self.python_value(self.object_attribute(value, name, node))) \
                if custom is not None else None
        except MsirError as e:
            if e.loc is not None:
                raise
            raise self.error(type(e), e.message, node) from None
        if rule is not None:
            return self.call_custom_vjp(rule, args, node)
        method = compiled_call_name(value.obj)
        call = getattr(type(value.obj), method, None)
        function = call.__wrapped__ if isinstance(call, Jitted) else call  # `@msir.jit def construct`
        if isinstance(value.obj, dict) or not isinstance(function, types.FunctionType):
            raise self.error(
                TypeError_,
                f"'{type(value.obj).__name__}' object is not callable in compiled functions "
                "(it has no __call__ defined in Python)",
                node,
            )
        get = value.path.get
        ref = self.tc.recorder.read(value.path.ref, "t", method, call) if self.tc.recorder is not None else None
        self.guard("identity", Path(lambda: getattr(type(get()), method, ABSENT), f"{value.path.name}.{method}", ref), call)
        try:
            return self.call_user(function, [value, *args], kwargs, node)
        except MsirError as e:
            if method != "__call__":  # a Cell's construct: say which one the error is in
                _name_the_method(e, f"{type(value.obj).__qualname__}.{method}", function)
            raise

    def tensor_value(self, t: UserTensor, name: str, getter, node: ast.AST) -> Tensor:
        """A `msir.Tensor` (or Parameter) read by the traced code: the value
        it is bound to (`bind_parameters`), else its array as a hidden runtime
        argument that `getter` reads again at every call (a Parameter updated
        in place or by `set_data` is read anew, without compiling again). A
        Parameter the trace assigned reads as its new value."""
        written = written_value(self, t)
        if written is not None:
            return written
        for _, bound in reversed(self.tc.bound_parameters):
            if id(t) in bound:
                return bound[id(t)]
        if is_traced(t):
            raise TracedTensorRead
        return self.capture(t.asnumpy(), _argument_name(name), getter, node)

    def parameter_value(self, p: UserTensor, node: ast.AST) -> Tensor:
        """The value of Parameter `p` differentiated with respect to (`weights=`)."""
        return self.localize(self.tensor_value(p, getattr(p, "name", "parameter"), lambda: array_of(p), node))

    def call_binding_parameters(self, fn: BindParameters, args: list[Any], kwargs: dict[str, Any], node) -> Any:
        """A call of `BindParameters(f, params)(*args, values)`: `f(*args)` with
        every read of one of `params` giving its value in `values`."""
        *args, values = args
        if not isinstance(values, tuple) or len(values) != len(fn.parameters):
            raise self.error(TypeError_, "the values of the bound parameters must be a tuple, one per parameter", node)
        self.tc.bound_parameters.append((len(self.tc.bound_parameters_seen), {id(p): v for p, v in zip(fn.parameters, values)}))
        self.tc.bound_parameters_seen.append(fn)
        try:
            return self.call_value(fn.fn, list(args), kwargs, node)
        finally:
            self.tc.bound_parameters.pop()

    def python_value(self, v: Any) -> Any:
        """A frontend value given to Python code while tracing (the function
        `msir.grad` receives): the object itself, remembered so that calling
        it again from the trace reads it through the same path."""
        if isinstance(v, ObjectValue):
            raw = v.obj
        elif isinstance(v, MethodValue):
            raw = types.MethodType(v.fn, v.self_value.obj)
        else:
            return v
        self.tc.python_values[id(raw)] = (raw, v)
        return raw

    def from_python(self, fn: Any) -> ObjectValue | MethodValue:
        """A plain object or bound method met as a Python value (the function a
        transform calls): the frontend value it was, or one reached by itself."""
        known = self.tc.python_values.get(id(fn))
        if known is not None and known[0] is fn:
            return known[1]
        if isinstance(fn, types.MethodType):
            owner = fn.__self__
            return MethodValue(self.from_python(owner), fn.__func__, fn.__name__)
        return self.object_value(fn, Path(lambda: fn, type(fn).__name__))


def _name_the_method(e: MsirError, qualname: str, function: types.FunctionType) -> None:
    """Begin `e`'s message with "in Net.construct: " if its location is in `function`."""
    loc, code = e.loc, function.__code__
    if loc is None or loc.file != code.co_filename:
        return
    lines = [line for _, _, line in code.co_lines() if line is not None]
    where = f"in {qualname}: "
    if lines and code.co_firstlineno <= loc.line <= max(lines) and not e.message.startswith(where):
        e.message = where + e.message
        if isinstance(e, UnsupportedSyntaxError):
            e.msg = e.message


def _argument_name(name: str) -> str:
    """`name` (a Parameter's "0.weight") as an IR argument's name hint, which must not start with a digit."""
    name = re.sub(r"\W", "_", name)
    return name if name[:1].isalpha() or name[:1] == "_" else "p_" + name


def array_of(value: Any) -> Any:
    """The array a Tensor read again holds (anything else as it is: the
    compiled entry then sees a value of another type and traces again)."""
    return value._data if isinstance(value, UserTensor) else value


def _source_of(node: ast.AST, field: str, default: str) -> str:
    """The source text of `node.field` (the object an error is about), else `default`."""
    part = getattr(node, field, None)
    return ast.unparse(part) if isinstance(part, ast.AST) else default


def _is_constant_key(key: Any) -> bool:
    if isinstance(key, tuple):
        return all(_is_constant_key(k) for k in key)
    return isinstance(key, _CONSTANT_TYPES)


def is_method_of_object(v: Any) -> bool:
    """Is `v` a Python method bound to a plain object?"""
    return isinstance(v, types.MethodType) and is_plain_object(v.__self__) and isinstance(v.__func__, types.FunctionType)
