"""Derivatives of a per-device function, as per-device functions.

Both take a module after `msir-shard` (per-device function `entry`, its
arguments and results carrying `msir_shard.layout`s) and return a copy with
one more per-device function, flattened into one body, that
`msir.parallel.emulated.EmulatedProgram` runs like any other:

* `value_and_grad_module(module, entry, argnums)` adds
  `@<entry>__value_and_grad`: `entry`'s arguments, returning its results and
  then the gradient of its first result with respect to each argument in
  `argnums`, each in its argument's layout (`msir-grad`: the collectives'
  transposes of `msir.passes.grad_rules` and the gradient synchronisation of
  `msir.passes.grad_shard`);
* `jvp_module(module, entry, argnums)` adds `@<entry>__jvp`: the arguments,
  then a tangent per argument in `argnums` (in its layout), returning the
  results and then their tangents (in the results' layouts).

This is how a sharded function is differentiated *again*: the global
derivative it computes equals the derivative of the unsharded function.
"""

from __future__ import annotations

from collections.abc import Sequence

from msir.errors import CompileError

# after msir-grad: the stages the cpu target runs to flatten a differentiated step (lowering/cpu.py)
_FLATTEN = ("msir-grad-jvp", "msir-symbol-dce", "msir-forward-arguments", "msir-inline", "dce")


def value_and_grad_module(module, entry: str, argnums: Sequence[int]):
    """A copy of `module` with `@<entry>__value_and_grad` (module docstring); returns (module, its name)."""
    return _transformed(module, entry, tuple(argnums), "value_and_grad")


def jvp_module(module, entry: str, argnums: Sequence[int]):
    """A copy of `module` with `@<entry>__jvp` (module docstring); returns (module, its name)."""
    return _transformed(module, entry, tuple(argnums), "jvp")


def _transformed(module, entry: str, argnums: tuple[int, ...], kind: str):
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ArrayAttr, FunctionType
    from xdsl.ir import Block, Region

    import msir.dialects.msir as M
    import msir.dialects.msir_shard as S
    from msir.compiler import make_context
    from msir.pipeline import pass_class

    module = module.clone()
    f = next((op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == entry), None)
    if f is None or S.MESH_ATTR not in f.attributes:
        raise CompileError(f"@{entry} is not a per-device function of the module (run msir-shard first)")
    inputs, outputs = list(f.function_type.inputs.data), list(f.function_type.outputs.data)
    for i in argnums:
        if not 0 <= i < len(inputs):
            raise CompileError(f"argnums: {i} is not a parameter position of @{entry} ({len(inputs)} parameters)")
    arg_attrs, res_attrs = list(f.arg_attrs.data), list(f.res_attrs.data)
    if kind == "jvp":
        step_inputs, step_arg_attrs = inputs + [inputs[i] for i in argnums], arg_attrs + [arg_attrs[i] for i in argnums]
        step_res_attrs = res_attrs * 2
        transform_cls = M.JvpOp
    else:
        step_inputs, step_arg_attrs = inputs, arg_attrs
        step_res_attrs = res_attrs + [arg_attrs[i] for i in argnums]
        transform_cls = M.ValueAndGradOp
    name = f"{entry}__{kind}"
    block = Block(arg_types=step_inputs)
    closure = M.ClosureOp(entry, [], FunctionType.from_lists(inputs, outputs))
    transform = transform_cls(closure.result, argnums)
    apply = M.ApplyOp(transform.result, list(block.args))
    for op in (closure, transform, apply):
        op.location = f.location
        block.add_op(op)
    block.add_op(func.ReturnOp(*apply.results))
    step = func.FuncOp(name, (step_inputs, [r.type for r in apply.results]), Region(block))
    step.location = f.location
    step.arg_attrs = ArrayAttr(step_arg_attrs)
    step.res_attrs = ArrayAttr(step_res_attrs)
    step.attributes[S.MESH_ATTR] = f.attributes[S.MESH_ATTR]
    module.body.block.add_op(step)
    ctx = make_context()
    for stage in _FLATTEN:
        pass_class(stage)().apply(ctx, module)
    module.verify()
    flat = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == name)
    call = next((op for op in flat.body.walk() if isinstance(op, func.CallOp)), None)
    if call is not None:  # a function called from elsewhere in the module too stays a call
        raise CompileError(f"@{name} still calls @{call.callee.string_value()} after inlining: differentiate a "
                           f"module that holds only the per-device function")
    return module, name
