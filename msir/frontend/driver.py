"""Tracing entry points: a Python function and abstract arguments to an msir module.

Argument semantics (they decide the cache key):

* NumPy arrays and NumPy scalars are runtime values of their dtype and shape;
* Python floats are runtime, weakly-typed (NEP 50) float64 scalars;
* Python ints and bools are runtime int64/bool scalars, unless they reach a
  static position (a shape, an axis, a slice bound): then the function is
  specialised on their value, recorded in `Traced.static_positions`;
* tuples and lists are flattened into their leaves;
* arrays captured from enclosing scopes are hidden runtime arguments appended
  after the user's (`Traced.captures`), read again at every call;
* what the function read through plain objects (attributes, dict items:
  `msir.frontend.objects`) is checked before every call (`Traced.guards`).

`trace(..., record=True)` also records the names the frontend resolved outside
the function (`Traced.recorder`, a `msir.trace_cache.Recorder`): the
dependency manifest of the persistent trace cache.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block

from msir.dialects import msir as M
from msir.errors import DTypeError, UnsupportedSyntaxError
from msir.frontend.source import get_source
from msir.frontend.translate import Capture, TraceContext, _closure_env, build_function
from msir.frontend.values import KnownInt, Tensor
from msir.transforms import Jitted, JvpEntry, Transform, compiled_call_name

if TYPE_CHECKING:
    from msir.trace_cache import Guard

# An abstract argument: ("array", dtype, shape) | ("float",) | ("int", value) |
# ("bool", value) | ("tuple"|"list", [specs]) | ("const", value)
Spec = tuple


@dataclass
class Traced:
    """A traced function: its module and how to call it."""

    module: ModuleOp
    entry: str
    arg_specs: list[Spec]
    static_positions: frozenset[int]
    captures: list[Capture]
    out_structure: Any
    out_weak: list[bool]
    out_types: list[TensorType]
    recorder: Any = None
    guards: list[Guard] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)
    """The entry's last results are the new values of Parameters the code
    assigned (`msir.frontend.parameter_writes`): per one, the capture whose
    array the call writes it into."""


def spec_of(value: Any) -> Spec:
    """The abstract argument a Python value is traced as."""
    if isinstance(value, np.matrix):
        raise DTypeError(
            "msir cannot pass an np.matrix to compiled code: its * is a matrix product and its results stay "
            "2-d, which compiled code would not follow; pass np.asarray(m)"
        )
    # `np.ma` imports numpy.ma (~30 ms) on first touch; no masked array exists before it is imported
    ma = sys.modules.get("numpy.ma")
    if ma is not None and isinstance(value, ma.MaskedArray):
        raise DTypeError(
            "msir cannot pass a masked array to compiled code: the mask would be dropped; pass "
            "np.ma.filled(a, fill_value), or the data and the mask as two arrays"
        )
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.name, value.shape)
    if isinstance(value, np.generic):  # before float: np.float64 is a float subclass
        return ("array", value.dtype.name, ())
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float",)
    if isinstance(value, tuple):
        return ("tuple", [spec_of(v) for v in value])
    if isinstance(value, list):
        return ("list", [spec_of(v) for v in value])
    if value is None or isinstance(value, str):
        return ("const", value)
    raise DTypeError(
        f"msir cannot pass an argument of type {type(value).__name__} to compiled code "
        "(use NumPy arrays, Python numbers, or tuples/lists of them)"
    )


def _leaf_type(spec: Spec) -> TensorType:
    match spec[0]:
        case "array":
            if spec[1] not in M.DTYPES:
                raise DTypeError(f"arrays of dtype {spec[1]} are not supported (use one of {', '.join(M.DTYPES)})")
            return M.tensor_type(spec[2], spec[1])
        case "float":
            return M.tensor_type((), "float64")
        case "int":
            return M.tensor_type((), "int64")
        case "bool":
            return M.tensor_type((), "bool")
    raise AssertionError(spec)


def _bind(spec: Spec, block: Block, counter: list[int]) -> Any:
    """The frontend value of one argument, creating block arguments for its leaves."""
    kind = spec[0]
    if kind in ("tuple", "list"):
        items = [_bind(s, block, counter) for s in spec[1]]
        return tuple(items) if kind == "tuple" else items
    if kind == "const":
        return spec[1]
    pos = counter[0]
    counter[0] += 1
    arg = block.insert_arg(_leaf_type(spec), len(block.args))
    t = Tensor(arg, M.dtype_of(arg.type), M.shape_of(arg.type), weak=kind in ("float", "int", "bool"))
    if kind in ("int", "bool") and spec[1] is not None:
        return KnownInt(spec[1], frozenset([pos]), t)
    return t


def trace(fn, specs: list[Spec], kwargs_specs: dict[str, Spec] | None = None, record: bool = False) -> Traced:
    """Translate `fn` specialised to abstract arguments `specs` (with `record`,
    recording its dependencies in `Traced.recorder`)."""
    recorder = None
    if record:
        from msir.trace_cache import Recorder

        recorder = Recorder(fn)
    if isinstance(fn, (Transform, JvpEntry)) or not isinstance(fn, types.FunctionType):
        # a transform, a method of an object or a callable object (a Cell): its call is traced
        return _trace_transformed(fn, specs, recorder)
    src = get_source(fn)
    node = src.node
    if isinstance(node, ast.FunctionDef) and (node.args.vararg or node.args.kwarg or node.args.kwonlyargs):
        raise UnsupportedSyntaxError(
            "*args, **kwargs and keyword-only parameters of a compiled function are not supported",
            src.loc(node),
        )
    names = [a.arg for a in node.args.args]
    defaults = list(fn.__defaults__ or ())
    specs = list(specs)
    if len(specs) > len(names):
        raise TypeError(f"{fn.__name__}() takes {len(names)} arguments but {len(specs)} were given")
    kwargs_specs = dict(kwargs_specs or {})
    for name in names[len(specs) :]:
        if name in kwargs_specs:
            specs.append(kwargs_specs.pop(name))
        else:
            i = names.index(name) - (len(names) - len(defaults))
            if i < 0:
                raise TypeError(f"{fn.__name__}() missing required argument '{name}'")
            specs.append(spec_of(defaults[i]))
    if kwargs_specs:
        raise TypeError(f"{fn.__name__}() got an unexpected keyword argument '{next(iter(kwargs_specs))}'")

    tc = TraceContext(recorder=recorder)
    block = Block()
    tc.entry_block = block
    counter = [0]
    params = {}
    for i, (name, s) in enumerate(zip(names, specs)):
        try:
            params[name] = _bind(s, block, counter)
        except DTypeError as e:
            raise DTypeError(f"argument '{name}': {e.message}", src.loc(node.args.args[i])) from None
    for arg, name in zip(block.args, _leaf_names(names, specs)):
        arg.name_hint = name
    entry_name = re.sub(r"\W", "_", fn.__name__) or "fn"
    name, (structure, weak), ftype, _ = build_function(
        tc, entry_name, src, fn.__globals__, _closure_env(fn), params, public=True, block=block
    )
    entry_op = tc.module_ops.pop()
    module = ModuleOp([entry_op, *tc.module_ops])
    return Traced(
        module,
        name,
        specs,
        frozenset(tc.static_positions),
        tc.captures,
        structure,
        weak,
        list(ftype.outputs.data),
        recorder,
        tc.guards,
        tc.written_captures,
    )


def _leaf_names(names: list[str], specs: list[Spec]) -> list[str]:
    out: list[str] = []

    def walk(name: str, spec: Spec):
        if spec[0] in ("tuple", "list"):
            for i, s in enumerate(spec[1]):
                walk(f"{name}_{i}", s)
        elif spec[0] != "const":
            out.append(name)

    for n, s in zip(names, specs):
        walk(n, s)
    return out


# ---------------------------------------------------------------------------
# msir-opt's Python input
# ---------------------------------------------------------------------------


_ELEMENT_TYPES = tuple(M.element_type(d) for d in M.DTYPES)


def parse_arg_types(text: str) -> list[Spec]:
    """`'tensor<4x8xf32>, f64, i64=3'` to abstract arguments (i64 without a value is runtime)."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    specs: list[Spec] = []
    depth, cur, parts = 0, "", []
    for ch in text:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    ctx = Context()
    ctx.load_dialect(Builtin)
    for p in parts:
        if p == "f64":
            specs.append(("float",))
        elif p.startswith("i64"):
            specs.append(("int", int(p.split("=")[1]) if "=" in p else None))
        elif p.startswith("i1"):
            specs.append(("bool", {"true": True, "false": False}[p.split("=")[1]] if "=" in p else None))
        else:
            t = Parser(ctx, p).parse_type()
            if not isinstance(t, TensorType):
                raise DTypeError(f"--args: expected tensor<...>, f64, i64[=v] or i1[=v], got {p}")
            if t.element_type not in _ELEMENT_TYPES:
                raise DTypeError(f"--args: element type {t.element_type} of {p} is not supported "
                                 f"(use one of {', '.join(map(str, _ELEMENT_TYPES))})")
            specs.append(("array", M.dtype_of(t), tuple(t.get_shape())))
    return specs


def module_from_file(path: str, entry: str, arg_types: str) -> ModuleOp:
    """Import the Python file `path` and trace its function `entry`."""
    spec = importlib.util.spec_from_file_location("_msir_input_module", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    fn = getattr(mod, entry, None)
    if fn is None:
        raise SystemExit(f"msir-opt: {path} has no function '{entry}'")
    fn = getattr(fn, "__wrapped__", fn)
    if not callable(fn) or isinstance(fn, type):
        raise SystemExit(f"msir-opt: '{entry}' in {path} is not a function (its type: {type(fn).__name__})")
    return trace(fn, parse_arg_types(arg_types)).module


def _trace_transformed(t, specs: list[Spec], recorder=None) -> Traced:
    """Trace an entry that applies a differentiation transform to its arguments,
    or calls a method of an object or a callable object on them."""
    from msir.frontend.base import static_results_first, with_parameter_writes
    from msir.frontend.translate import Translator, flatten_result

    jvp_entry = isinstance(t, JvpEntry)
    base = _python_function(
        t.t.source_function if jvp_entry else t.source_function if isinstance(t, Transform) else t
    )
    src = get_source(base)
    tc = TraceContext(recorder=recorder)
    block = Block()
    tc.entry_block = block
    counter = [0]
    params = [_bind(s, block, counter) for s in specs]
    tr = Translator(tc, block, src, base.__globals__, _closure_env(base))
    if jvp_entry:
        n = t.n
        inner = Transform("jvp", t.t.fn, t.t.argnums, t.t.has_aux, tangents=tuple(params[n:]))
        value = tr.call_value(inner, params[:n], {}, src.node)
    elif isinstance(t, Transform):
        value = tr.call_value(t, params, {}, src.node)
    else:
        value = tr.call_value(_root_value(tr, t), params, {}, src.node)
    structure, leaves = static_results_first(*flatten_result(value, tr, src.node))
    leaves = with_parameter_writes(leaves, tr, src.node)
    from xdsl.dialects import func as func_dialect
    from xdsl.dialects.builtin import FunctionType
    from xdsl.ir import Region

    block.add_op(func_dialect.ReturnOp(*[leaf.ssa for leaf in leaves]))
    name = tc.unique_name(re.sub(r"\W", "_", getattr(t, "__name__", type(t).__name__)))
    ftype = FunctionType.from_lists([a.type for a in block.args], [leaf.ssa.type for leaf in leaves])
    entry = func_dialect.FuncOp(name, ftype, Region(block))
    module = ModuleOp([entry, *tc.module_ops])
    return Traced(
        module, name, specs, frozenset(tc.static_positions), tc.captures, structure,
        [leaf.weak for leaf in leaves], list(ftype.outputs.data), recorder, tc.guards, tc.written_captures,
    )


def _root_value(tr: Any, fn: Any) -> Any:
    """The jitted method of an object (or callable object, a Cell) as a
    frontend value reached from the jitted callable itself (the trace cache's
    reference ["root"]), so that what the trace reads through it is recorded
    and guarded."""
    from msir.frontend.state import MethodValue, Path

    if isinstance(fn, types.MethodType):
        owner = fn.__self__
        path = Path(lambda: owner, type(owner).__name__, ["a", ["root"], "__self__"])
        return MethodValue(tr.object_value(owner, path), fn.__func__, fn.__name__)
    return tr.object_value(fn, Path(lambda: fn, type(fn).__name__, ["root"]))


def _python_function(fn: Any) -> Any:
    """The Python function a transformed callable runs, for its source and
    scopes: a method's function, or a callable object's class's `__call__`
    (or the method its class names in `__msir_call__`: a Cell's `construct`)."""
    if isinstance(fn, types.MethodType):
        return fn.__func__
    call = getattr(type(fn), compiled_call_name(fn), None)
    if isinstance(call, Jitted):
        call = call.__wrapped__
    if not isinstance(fn, types.FunctionType) and isinstance(call, types.FunctionType):
        return call
    return fn
