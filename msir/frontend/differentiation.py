"""Differentiation inside compiled code: `msir.grad` and friends as IR ops.

`msir.grad(f)(*args)`, `value_and_grad`, `vjp`, `jvp`, `jacrev`/`jacfwd` and
`custom_vjp` calls translate `f` into a private function of its own
(`outline_callable`: runtime leaves of the arguments become parameters,
arrays of enclosing functions trailing ones) and apply the transform op
(`msir.grad`, `msir.vjp`, ...) to its closure; `msir-grad`/`msir-jvp` expand
them later. A Jacobian unrolls one adjoint (jacrev) or tangent (jacfwd) call
per element, in the one function.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, FileLineColLoc, FunctionType, SymbolRefAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from msir.dialects import msir as M
from msir.errors import MsirError, NotDifferentiableError, ShapeError, SourceLoc, UnsupportedSyntaxError
from msir.frontend.base import ValueError_, _loc_attr, flatten_result
from msir.frontend.parameter_writes import lift_outlined_writes, record_write
from msir.frontend.state import FunctionValue, Outlined
from msir.frontend.structure import _rebuild, _rebuild_like, _runtime_leaves, _struct_leaves, _structure_of, _tensors
from msir.frontend.values import Closure, KnownInt, Tensor
from msir.transforms import Transform

_MAX_JACOBIAN = 4096
"""Jacobians unroll one call per output (jacrev) or input (jacfwd) element."""


class DifferentiationMixin:
    """Transforms of functions applied in compiled code, and function values."""

    def outline_callable(self, fn: Any, args: list[Any], node: ast.AST, differentiated: str = "") -> "Outlined":
        """Build a private func.func that calls `fn` on parameters of `args`' types.

        Runtime leaves of `args` (arrays, runtime scalars) become parameters in
        order; Python values stay compile-time constants; values of enclosing
        functions that `fn` reads become trailing parameters (`captured`).
        `differentiated` ("all", or "first" with has_aux) names the results a
        transformation differentiates: Python numbers there are returned as
        (weak) runtime values, so that a function whose output does not depend
        on its inputs (`return 1.0`) has a zero derivative, not none."""
        block = Block()
        self.tc.fn_captures[block] = ({}, [])
        leaves: list[Tensor] = []

        def param(v: Any) -> Any:
            if isinstance(v, (tuple, list)):
                items = [param(x) for x in v]
                return tuple(items) if isinstance(v, tuple) else items
            if isinstance(v, KnownInt):
                leaves.append(v.tensor)
                arg = block.insert_arg(v.tensor.ssa.type, len(block.args))
                return KnownInt(v.value, v.deps, Tensor(arg, v.dtype, v.tensor.shape, True))
            if isinstance(v, Tensor):
                leaves.append(v)
                arg = block.insert_arg(v.ssa.type, len(block.args))
                return Tensor(arg, v.dtype, v.shape, v.weak)
            return v

        params = [param(a) for a in args]
        n_params = len(block.args)
        sub = type(self)(self.tc, block, self.source, self.globals, self.closure)
        sub.loc = self.loc
        value = sub.call_value(fn, params, {}, node)
        if differentiated == "all":
            value = _numbers_as_tensors(sub, value, node)
        elif differentiated == "first" and isinstance(value, tuple) and value:
            value = (_numbers_as_tensors(sub, value[0], node), *value[1:])
        value, writes = lift_outlined_writes(sub, block, value, differentiated)
        structure, results = flatten_result(value, sub, node)
        ret = func.ReturnOp(*[r.ssa for r in results])
        ret.location = _loc_attr(self.loc)
        block.add_op(ret)
        name = self.tc.unique_name(_callable_name(fn))
        ftype = FunctionType.from_lists([a.type for a in block.args], [r.ssa.type for r in results])
        f = func.FuncOp(name, ftype, Region(block), visibility="private")
        f.location = _loc_attr(self.loc)
        self.tc.module_ops.append(f)
        captured = [self.localize(c) for c in self.tc.fn_captures[block][1]]
        visible = FunctionType.from_lists([a.type for a in block.args[:n_params]], [r.ssa.type for r in results])
        return Outlined(name, visible, leaves, captured, structure, [r.weak for r in results], writes)

    def not_differentiable_output(self, o: "Outlined", node: ast.AST) -> MsirError:
        """An error naming the op that made the (integer or boolean) output."""
        funcs = {op.sym_name.data: op for op in self.tc.module_ops if isinstance(op, func.FuncOp)}
        ret = funcs[o.name].body.block.last_op
        value = ret.operands[0] if ret is not None and ret.operands else None
        dtype = M.dtype_of(value.type) if value is not None else "?"
        producer = value.owner if value is not None else None
        while isinstance(producer, func.CallOp) and producer.callee.string_value() in funcs:
            callee_ret = funcs[producer.callee.string_value()].body.block.last_op
            value = callee_ret.operands[list(producer.results).index(value)]
            producer = value.owner
        if isinstance(producer, Operation) and isinstance(producer.location, FileLineColLoc):
            loc = producer.location
            where = SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
            return NotDifferentiableError(
                f"cannot differentiate: the output is computed by '{producer.name}', whose {dtype} "
                "result has no derivative",
                where,
            )
        return self.error(
            NotDifferentiableError, f"cannot differentiate a function whose output has dtype {dtype}", node
        )

    def closure_of(self, o: "Outlined") -> SSAValue:
        op = M.ClosureOp(o.name, [c.ssa for c in o.captured], o.type)
        return self.emit(op).results[0]

    def apply(self, fn: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
        return list(self.emit(M.ApplyOp(fn, args)).results)

    def basis(self, index: Tensor, i: int, shape: tuple[int, ...], dtype: str) -> Tensor:
        """The i-th unit array of `shape` (row-major), built from a shared iota."""
        flat = math.prod(shape)
        hit = self.tensor(M.CompareOp("eq", index.ssa, self.constant(i, "int64", shape=(flat,)).ssa))
        return self.reshape(self.cast(hit, dtype, False), shape, None)

    def jacobian(self, t: Any, args: list[Any], argnums: tuple[int, ...], node: ast.AST) -> Any:
        """jacrev: one forward and one adjoint call per output element; jacfwd: one
        forward-mode call per input element; all in this one function."""
        for a in argnums:
            if not isinstance(args[a], Tensor):
                raise self.error(
                    UnsupportedSyntaxError,
                    f"{t.kind} needs array (or float) arguments at argnums, got {self.describe(args[a])}",
                    node,
                )
        single = isinstance(t.argnums, int)
        aux = None
        if t.kind == "jacrev":
            res = self.call_transformed(Transform("vjp", t.fn, tuple(argnums), t.has_aux), args, {}, node)
            out, pb = res[0], res[1]
            aux = res[2] if t.has_aux else None
            if not isinstance(out, Tensor):
                raise self.error(UnsupportedSyntaxError, "jacrev needs a function returning one array", node)
            m = math.prod(out.shape)
            if m > _MAX_JACOBIAN:
                raise self.error(
                    ShapeError,
                    f"jacrev of an output with {m} elements would unroll {m} adjoint calls "
                    f"(limit {_MAX_JACOBIAN}); use jacfwd or vjp",
                    node,
                )
            index = self.tensor(M.IotaOp(0, M.tensor_type((m,), "int64")))
            rows = []
            for i in range(m):
                g = self.apply_function_value(pb, [self.basis(index, i, out.shape, out.dtype)], node)
                rows.append(g if isinstance(g, tuple) else (g,))
            jac = []
            for k, a in enumerate(argnums):
                stacked = self.tensor(M.StackOp([r[k].ssa for r in rows], 0))
                jac.append(self.reshape(stacked, (*out.shape, *args[a].shape), node))
        else:
            jac = []
            for a in argnums:
                x = args[a]
                n = math.prod(x.shape)
                if n > _MAX_JACOBIAN:
                    raise self.error(
                        ShapeError,
                        f"jacfwd of an input with {n} elements would unroll {n} forward-mode calls "
                        f"(limit {_MAX_JACOBIAN}); use jacrev or jvp",
                        node,
                    )
                index = self.tensor(M.IotaOp(0, M.tensor_type((n,), "int64")))
                cols, out = [], None
                for j in range(n):
                    tangent = self.basis(index, j, x.shape, x.dtype)
                    jt = Transform("jvp", t.fn, (a,), t.has_aux, tangents=(tangent,))
                    res = self.call_transformed(jt, args, {}, node)
                    out, tan = res[0], res[1]
                    if t.has_aux:
                        aux = res[2]
                    if not isinstance(tan, Tensor):
                        raise self.error(UnsupportedSyntaxError, "jacfwd needs a function returning one array", node)
                    cols.append(tan)
                stacked = self.tensor(M.StackOp([c.ssa for c in cols], len(out.shape)))
                jac.append(self.reshape(stacked, (*out.shape, *x.shape), node))
        result = jac[0] if single else tuple(jac)
        return (result, aux) if t.has_aux else result

    def call_custom_vjp(self, cv: Any, args: list[Any], node: ast.AST) -> Any:
        """A call of a `msir.custom_vjp` function: the primal function carries its
        rule (`msir.custom_vjp = [@fwd, @bwd]`) for `msir-grad` to use."""
        if cv.fwd is None or cv.bwd is None:
            raise self.error(UnsupportedSyntaxError, f"custom_vjp function '{cv.__name__}' has no defvjp(fwd, bwd)", node)
        primal = self.outline_callable(cv.fn, args, node)
        fwd = self.outline_callable(cv.fwd, args, node)
        if fwd.structure[0] != "tuple" or len(fwd.structure[1]) != 2:
            raise self.error(ValueError_, f"the custom_vjp forward '{cv.fwd.__name__}' must return (output, residuals)", node)
        n_out = len(primal.type.outputs.data)
        fwd_types = list(fwd.type.outputs.data)
        if fwd_types[:n_out] != list(primal.type.outputs.data):
            raise self.error(
                ShapeError,
                f"the custom_vjp forward '{cv.fwd.__name__}' returns outputs of types "
                f"({', '.join(map(str, fwd_types[:n_out]))}), the function "
                f"({', '.join(map(str, primal.type.outputs.data))})",
                node,
            )
        res_struct, out_struct = fwd.structure[1][1], primal.structure

        def placeholders(structure: Any, types: list) -> Any:
            # Values of the right types for tracing `bwd`; only their types are used.
            dummy = Block(arg_types=list(types))
            return _rebuild(structure, iter(_tensors(list(dummy.args), [False] * len(types))))

        res_vals = placeholders(res_struct, fwd_types[n_out:])
        ct_vals = placeholders(out_struct, list(primal.type.outputs.data))
        bwd = self.outline_callable(cv.bwd, [res_vals, ct_vals], node)
        arg_leaf_types = [leaf.ssa.type for leaf in primal.leaves]
        if list(bwd.type.outputs.data) != arg_leaf_types:
            raise self.error(
                ShapeError,
                f"the custom_vjp backward '{cv.bwd.__name__}' must return one gradient per argument, of its "
                f"shape and dtype: ({', '.join(map(str, arg_leaf_types))}), got "
                f"({', '.join(map(str, bwd.type.outputs.data))})",
                node,
            )
        for o in (primal, fwd, bwd):
            if o.captured:
                raise self.error(
                    UnsupportedSyntaxError,
                    "custom_vjp functions must not read arrays from enclosing scopes; pass them as arguments",
                    node,
                )
        f_op = next(op for op in self.tc.module_ops if isinstance(op, func.FuncOp) and op.sym_name.data == primal.name)
        f_op.attributes["msir.custom_vjp"] = ArrayAttr([SymbolRefAttr(fwd.name), SymbolRefAttr(bwd.name)])
        call = self.emit(func.CallOp(primal.name, [self.localize(x).ssa for x in primal.leaves], list(primal.type.outputs.data)))
        return _rebuild(primal.structure, iter(_tensors(list(call.results), primal.weak)))

    def transform_now(self, kind: str, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """`msir.vjp(f, *primals)` / `msir.jvp(f, primals, tangents)` (`kind`) inside compiled code."""
        has_aux = bool(kwargs.pop("has_aux", False))
        if kwargs:
            raise self.error(UnsupportedSyntaxError, f"unexpected keyword {next(iter(kwargs))}", node)
        f, *rest = args
        if kind == "jvp":
            primals, tangents = rest
            t = Transform("jvp", f, tuple(range(len(primals))), has_aux, tangents=tuple(tangents))
            return self.call_transformed(t, list(primals), {}, node)
        t = Transform("vjp", f, tuple(range(len(rest))), has_aux)
        return self.call_transformed(t, list(rest), {}, node)

    def apply_function_value(self, fv: "FunctionValue", args: list[Any], node: ast.AST) -> Any:
        leaves: list[Tensor] = []
        for a in args:
            _, ls = flatten_result(a, self, node)
            leaves.extend(ls)
        expected = list(fv.ssa.type.inputs.data)
        got = [leaf.ssa.type for leaf in leaves]
        if got != expected:
            raise self.error(
                ShapeError,
                f"the function value expects arguments of types ({', '.join(map(str, expected))}), "
                f"got ({', '.join(map(str, got))})",
                node,
            )
        outs = self.apply(fv.ssa, [leaf.ssa for leaf in leaves])
        return _rebuild(fv.structure, iter(_tensors(outs, fv.weak)))

    def call_transformed_with_weights(self, t: Any, args: list[Any], node: ast.AST) -> Any:
        """`msir.grad(f, grad_position, weights=params)(*args)`: the weights'
        current values are one more argument of `f` (the parameters bound to
        it while `f` is translated: `msir.transforms.BindParameters`), and the
        gradients are arranged as MindSpore does."""
        values = tuple(self.parameter_value(p, node) for p in t.weights)
        return t.arrange_result(self.call_transformed(t.with_weights_as_argument(len(args)), [*args, values], {}, node))

    def call_transformed(self, t: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """`msir.grad(f)(*args)` and friends: outline `f`, apply the transform op."""
        if kwargs:
            raise self.error(UnsupportedSyntaxError, "keyword arguments to a differentiated function", node)
        if getattr(t, "weights", None) is not None:
            return self.call_transformed_with_weights(t, args, node)
        argnums = (t.argnums,) if isinstance(t.argnums, int) else tuple(t.argnums)
        for a in argnums:
            if not -len(args) <= a < len(args):
                raise self.error(
                    ValueError_, f"argnums {t.argnums} out of range for {len(args)} arguments", node
                )
        argnums = tuple(a % len(args) for a in argnums)
        # Python numbers differentiated with respect to become (weak) runtime values.
        args = [
            self.as_tensor(a, node) if i in argnums and isinstance(a, (int, float)) else a
            for i, a in enumerate(args)
        ]
        if t.kind in ("jacrev", "jacfwd"):
            return self.jacobian(t, list(args), argnums, node)
        o = self.outline_callable(t.fn, list(args), node, "first" if getattr(t, "has_aux", False) else "all")
        # leaf positions of each Python argument
        spans, start = [], 0
        for a in args:
            n = len(_runtime_leaves(a))
            spans.append(range(start, start + n))
            start += n
        leaf_nums = [i for a in argnums for i in spans[a]]
        for a in argnums:
            for i in spans[a]:
                if not M.is_float(o.leaves[i].dtype):
                    raise self.error(
                        NotDifferentiableError,
                        f"cannot differentiate with respect to argument {a}: it holds a value of dtype "
                        f"{o.leaves[i].dtype}; only float arguments have derivatives",
                        node,
                    )
        if o.writes and t.kind not in ("grad", "value_and_grad"):
            raise self.error(
                UnsupportedSyntaxError,
                f"the Parameter '{o.writes[0].name}' is assigned in a function differentiated by {t.kind}; "
                "only grad and value_and_grad carry Parameter updates out",
                node,
            )
        user_aux = bool(getattr(t, "has_aux", False))
        # The new values of assigned Parameters are the last auxiliary output (never differentiated).
        has_aux = user_aux or bool(o.writes)
        main_struct, single_aux = o.structure, False
        if user_aux:
            if o.structure[0] != "tuple" or len(o.structure[1]) < 2 + bool(o.writes):
                raise self.error(
                    ValueError_, "with has_aux=True the function must return a pair (output, aux)", node
                )
        if has_aux:
            # MindSpore's has_aux: the first output is differentiated, the others come back as they are.
            main_struct, *aux_structs = o.structure[1]
            user_structs = aux_structs[:-1] if o.writes else aux_structs
            single_aux = len(user_structs) == 1 and not t.aux_tuple
        n_main = len(_struct_leaves(main_struct))
        if t.kind in ("grad", "value_and_grad"):
            if n_main != 1:
                raise self.error(
                    ShapeError, "grad needs a function returning one scalar (rank-0) float value", node
                )
            out_t = o.type.outputs.data[0]
            if M.shape_of(out_t) != ():
                raise self.error(
                    ShapeError,
                    f"grad needs a scalar output, but the function returns an array of shape "
                    f"{M.fmt_shape(M.shape_of(out_t))}; reduce it (e.g. .sum()) or use msir.vjp",
                    node,
                )
            if not M.is_float(M.dtype_of(out_t)):
                raise self.not_differentiable_output(o, node)
        closure = self.closure_of(o)
        leaf_ssa = [self.localize(leaf).ssa for leaf in o.leaves]

        def grads_of(values: list[SSAValue]) -> Any:
            it = iter(_tensors(values, [o.leaves[i].weak for i in leaf_nums]))
            per_arg = [_rebuild_like(args[a], it) for a in argnums]
            return per_arg[0] if isinstance(t.argnums, int) else tuple(per_arg)

        if t.kind in ("grad", "value_and_grad"):
            op_cls = M.GradOp if t.kind == "grad" else M.ValueAndGradOp
            g = self.emit(op_cls(closure, leaf_nums, has_aux)).results[0]
            outs = self.apply(g, leaf_ssa)
            n_out = len(o.type.outputs.data)
            if t.kind == "grad":
                grads = grads_of(outs[: len(leaf_nums)])
                if not has_aux:
                    return grads
                aux_values = _rebuild(("tuple", aux_structs), iter(_tensors(outs[len(leaf_nums) :], o.weak[1:])))
                if o.writes:
                    self.write_back_lifted(o, aux_values[-1], node)
                    aux_values = aux_values[:-1]
                if not user_aux:
                    return grads
                return grads, aux_values[0] if single_aux else aux_values
            n_vals = n_out if has_aux else 1
            values = _rebuild(o.structure if has_aux else main_struct, iter(_tensors(outs[:n_vals], o.weak)))
            if o.writes:
                self.write_back_lifted(o, values[-1], node)
                values = values[:-1] if user_aux else values[0]
            return values, grads_of(outs[n_vals:])
        if t.kind == "vjp":
            v = self.emit(M.VjpOp(closure, leaf_nums, has_aux)).results[0]
            outs = self.apply(v, leaf_ssa)
            results = _rebuild(o.structure, iter(_tensors(outs[:-1], o.weak)))
            arg_struct = [args[a] for a in argnums]
            pb = FunctionValue(
                outs[-1],
                ("tuple", [_structure_of(a) for a in arg_struct]) if not isinstance(t.argnums, int)
                else _structure_of(arg_struct[0]),
                [o.leaves[i].weak for i in leaf_nums],
            )
            if has_aux:
                return results[0], pb, results[1]
            return results, pb
        if t.kind == "jvp":
            tangents = t.tangents
            t_leaves = [self.localize(x) for x in _runtime_leaves(tangents)]
            t_leaves = [self.as_tensor(x, node) for x in t_leaves]
            for i, tl in zip(leaf_nums, t_leaves):
                if tl.ssa.type != o.leaves[i].ssa.type:
                    tl_cast = self.cast(tl, o.leaves[i].dtype) if tl.shape == o.leaves[i].shape else None
                    if tl_cast is None:
                        raise self.error(
                            ShapeError,
                            f"tangent of shape {M.fmt_shape(tl.shape)} does not match its primal's shape "
                            f"{M.fmt_shape(o.leaves[i].shape)}",
                            node,
                        )
            if len(t_leaves) != len(leaf_nums):
                raise self.error(ShapeError, "jvp needs one tangent per primal", node)
            t_ssa = [self.cast(tl, o.leaves[i].dtype).ssa for i, tl in zip(leaf_nums, t_leaves)]
            j = self.emit(M.JvpOp(closure, leaf_nums, has_aux)).results[0]
            outs = self.apply(j, leaf_ssa + t_ssa)
            n_out = len(o.type.outputs.data)
            primal_out = _rebuild(o.structure, iter(_tensors(outs[:n_out], o.weak)))
            tangent_out = _rebuild(main_struct, iter(_tensors(outs[n_out:], o.weak)))
            if has_aux:
                return primal_out[0], tangent_out, primal_out[1]
            return primal_out, tangent_out
        raise AssertionError(t.kind)


    def write_back_lifted(self, o: "Outlined", new_values: tuple, node: ast.AST) -> None:
        """The Parameters `o` assigned are now the values its transform returned."""
        for parameter, value in zip(o.writes, new_values):
            record_write(self, parameter, value, node)


def _numbers_as_tensors(tr: Any, value: Any, node: ast.AST) -> Any:
    """`value` with its Python numbers (not bools) as weak runtime scalars."""
    if isinstance(value, (tuple, list)):
        items = [_numbers_as_tensors(tr, v, node) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return tr.as_tensor(value, node)
    return value


def _callable_name(fn: Any) -> str:
    import re

    if isinstance(fn, Closure):
        name = getattr(fn.node, "name", "lambda")
    else:
        name = getattr(getattr(fn, "fn", None), "__name__", None) or getattr(fn, "__name__", "fn")
        if hasattr(fn, "kind"):
            name = f"{fn.kind}_{name}"
    return re.sub(r"\W", "_", name) or "fn"
