"""`msir.vjp` at the API boundary, compiled: two native functions per signature.

The augmented forward `@f__fwd` (results and residuals) and the adjoint
`@f__bwd` that `msir-grad` generates are both made public and compiled in one
module. `vjp(f, *primals)` runs the forward once and returns the results with a
`vjp_fn` that owns the residual arrays, so it can be called any number of times
(each call runs only the adjoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType
from xdsl.ir import Block, Region

from msir.calling import Entry, signature_key
from msir.tree import leaves as _leaves
from msir.tree import rebuild_leaves as _rebuild_leaves
from msir.errors import NotDifferentiableError, ShapeError

_CACHE: dict[Any, "_CompiledVjp"] = {}


@dataclass
class _CompiledVjp:
    fwd: Any
    bwd: Any
    traced: Any
    n_results: int
    float_results: list[int]
    float_args: list[int]
    fwd_order: list[int]  # declared position of each array the native forward returns

    def run_fwd(self, inputs) -> list:
        """The forward's results in their declared order (natively, the outputs
        of static shape come first, then those of dynamic shape, e.g. tapes)."""
        outs = self.fwd(*inputs)
        declared: list = [None] * len(outs)
        for pos, value in zip(self.fwd_order, outs):
            declared[pos] = value
        return declared


def _public_wrapper(module, name: str, callee, arg_types, result_types) -> None:
    block = Block(arg_types=list(arg_types))
    call = func.CallOp(callee, list(block.args), list(result_types))
    block.add_op(call)
    block.add_op(func.ReturnOp(*call.results))
    module.body.block.add_op(func.FuncOp(name, FunctionType.from_lists(list(arg_types), list(result_types)), Region(block)))


def _build(t, primals: tuple) -> _CompiledVjp:
    from msir.compiler import compile_module
    from msir.frontend.driver import spec_of, trace
    from msir.frontend.parameter_writes import refuse_parameter_writes
    from msir.passes.grad import ModuleAD
    from msir.passes.jvp import differentiate_all

    traced = trace(t.fn, [spec_of(p) for p in primals])
    refuse_parameter_writes(traced, "msir.vjp in GRAPH_MODE")
    module = traced.module
    differentiate_all(module)
    ad = ModuleAD(module)
    entry = ad.funcs[traced.entry]
    # has_aux's aux takes no cotangent: a symbolic zero (msir.passes.grad_zeros)
    n_outputs = len(entry.function_type.outputs.data)
    pair = ad.pair(traced.entry, entry, live=tuple(range(1 if t.has_aux else n_outputs)))
    fwd_f, bwd_f = ad.funcs[pair.fwd], ad.funcs[pair.bwd]
    _public_wrapper(module, "vjp_fwd", pair.fwd, fwd_f.function_type.inputs.data, fwd_f.function_type.outputs.data)
    _public_wrapper(module, "vjp_bwd", pair.bwd, bwd_f.function_type.inputs.data, bwd_f.function_type.outputs.data)
    # the declared outputs, read before compiling (msir-forward-arguments drops
    # the parameters the private @f__fwd returns)
    shapes = [t.get_shape() if hasattr(t, "get_shape") else () for t in fwd_f.function_type.outputs.data]
    compiled = compile_module(module, "vjp_fwd", also=("vjp_bwd",))
    static = [k for k, shape in enumerate(shapes) if all(d >= 0 for d in shape)]
    order = static + [k for k in range(len(shapes)) if k not in static]
    return _CompiledVjp(
        compiled.native, compiled.functions["vjp_bwd"], traced, pair.n_results, pair.float_results, pair.float_args,
        order,
    )


def compiled_vjp(t, primals: tuple):
    """`(f(*primals), vjp_fn)` with both halves compiled (see the module docstring)."""
    _check_differentiable(primals)
    key = (_fn_key(t.fn), t.has_aux, tuple(signature_key(p) for p in primals))
    c = _CACHE.get(key)
    if c is None or c.traced.static_positions:
        c = _CACHE[key] = _build(t, primals)
    leaves: list[Any] = []
    _leaves(primals, leaves)
    inputs = leaves + [cap.get() for cap in c.traced.captures]
    outs = c.run_fwd(inputs)
    results, residuals = outs[: c.n_results], outs[c.n_results :]
    entry = Entry(None, c.traced, len(leaves))
    value = entry.rebuild(c.traced.out_structure, results)
    main_value = value
    aux = None
    if t.has_aux:
        if not (isinstance(value, tuple) and len(value) == 2):
            raise ShapeError("with has_aux=True the function must return a pair (output, aux)")
        main_value, aux = value
    main_count = 1 if t.has_aux else c.n_results
    out_types = c.traced.out_types

    def vjp_fn(cotangent):
        ct_leaves: list[Any] = []
        _leaves(cotangent, ct_leaves)
        main_leaves: list[Any] = []
        _leaves(main_value, main_leaves)
        if len(ct_leaves) != len(main_leaves):
            raise ShapeError(
                f"vjp_fn expects a cotangent with the structure of the output ({len(main_leaves)} arrays), "
                f"got {len(ct_leaves)}"
            )
        cts = []
        for i in c.float_results:
            if i < main_count:
                like = np.asarray(results[i])
                ct = np.asarray(ct_leaves[i], dtype=like.dtype)
                if ct.shape != like.shape:
                    raise ShapeError(f"cotangent {i} has shape {ct.shape}, the output has shape {like.shape}")
                cts.append(ct)
            else:
                cts.append(np.zeros(out_types[i].get_shape(), results[i].dtype))
        grads = c.bwd(*cts, *residuals)
        by_leaf: dict[int, Any] = dict(zip(c.float_args, grads))
        out_leaves = []
        for k, leaf in enumerate(leaves):
            g = by_leaf.get(k)
            if g is None:
                out_leaves.append(None)
                continue
            out_leaves.append(g[()] if g.ndim == 0 and not isinstance(leaf, float) else (g.item() if g.ndim == 0 else g))
        return _rebuild_leaves(tuple(primals), iter(out_leaves))

    if t.has_aux:
        return main_value, vjp_fn, aux
    return value, vjp_fn


class _Identity:
    """A key equal only to itself that keeps the callable alive, so that its
    `id` cannot be reused by another function while the entry exists."""

    __slots__ = ("fn",)

    def __init__(self, fn) -> None:
        self.fn = fn

    def __hash__(self) -> int:
        return id(self.fn)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Identity) and other.fn is self.fn


def _fn_key(fn):
    """The callable itself as the cache key (never `id(fn)`: a freed function's
    address is reused by the next one, which would get the old code). The key
    holds a reference, so the function outlives its entry; bound methods of
    one object compare equal and share an entry."""
    try:
        hash(fn)
    except TypeError:
        return _Identity(fn)
    return fn


def _check_differentiable(primals) -> None:
    leaves: list[Any] = []
    _leaves(primals, leaves)
    if not any(np.issubdtype(np.asarray(x).dtype, np.floating) for x in leaves):
        raise NotDifferentiableError("msir.vjp needs at least one float primal")
