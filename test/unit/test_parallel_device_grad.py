"""A sharded per-device function differentiated again (`msir-grad` with the
collectives' transposes, `msir.parallel.device_grad`) computes the gradient
of the unsharded function: float32 on emulated devices against float64
`msir.value_and_grad` of the serial function, |a - b| <= 1e-5 |b| + 1e-5 max|b|,
on meshes (2), (4), (2, 2), (2, 4); each case names the collectives whose
transposes it exercises."""

import numpy as np
import pytest

import msir
from msir import ops
from msir.errors import CompileError
from msir.parallel import shard
from msir.parallel.device_grad import jvp_module, value_and_grad_module
from msir.parallel.emulated import EmulatedProgram


def mlp_loss(x, w1, b1, w2):
    h = ops.relu(ops.add(ops.matmul(x, w1, name="fc1"), b1, name="bias1"), name="act")
    o = ops.matmul(h, w2, name="fc2")
    return ops.reduce_mean(ops.mul(o, o, name="sq"), name="mean")


def softmax_loss(x, w, t):
    return ops.reduce_sum(ops.mul(ops.softmax(ops.matmul(x, w, name="mm"), name="sm"), t, name="dot"), name="sum")


def max_loss(x, w):
    return ops.reduce_max(ops.matmul(x, w, name="mm"), name="top")


def _args(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


MLP_ARGS = _args((16, 8), (8, 16), (16,), (16, 8))

# (mesh, strategies, input layouts, the collectives the gradient function holds)
CASES = {
    "data parallel (2)": ((2,), {"fc1": "m", "bias1": "m", "act": "m", "fc2": "m", "sq": "m", "mean": "m"}, {},
                          {"all_reduce"}),
    "megatron (4)": ((4,), {"fc1": "n", "bias1": "n", "act": "n", "fc2": "k"}, {}, {"all_reduce"}),
    "column then rows (2)": ((2,), {"fc1": "n", "bias1": "n", "act": "n", "fc2": "m"}, {},
                             {"all_reduce", "all_to_all"}),
    "contraction split (4)": ((4,), {"fc1": "k", "bias1": "m", "act": "m", "fc2": "m"}, {},
                              {"all_reduce", "reduce_scatter", "all_gather"}),
    "stored split, computed whole (2)": ((2,), {}, {0: "dims=[[0],[]], partial=[]"}, {"all_gather", "reduce_scatter"}),
    "stored whole, computed split (2)": ((2,), {"fc1": "m", "bias1": "m", "act": "m", "fc2": "m"},
                                         {0: "dims=[[],[]], partial=[]"}, {"all_slice", "all_gather"}),
    "dp x megatron (2, 2)": ((2, 2), {"fc1": "m,n", "bias1": "m,n", "act": "m,n", "fc2": "m,k"}, {},
                             {"all_reduce"}),
    "dp x megatron (2, 4)": ((2, 4), {"fc1": "m,n", "bias1": "m,n", "act": "m,n", "fc2": "m,k"}, {},
                             {"all_reduce"}),
    "megatron then rows (2, 4)": ((2, 4), {"fc1": "m,n", "bias1": "m,n", "act": "m,n", "fc2": "-,m"}, {},
                                  {"all_reduce", "all_to_all", "all_gather"}),
}


def _check(got, want):
    want = np.asarray(want)
    tol = 1e-5 * np.abs(want) + 1e-5 * np.max(np.abs(want))
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.all(np.abs(got - want) <= tol), np.max(np.abs(got - want))


def _collectives(module) -> set:
    return {op.name.removeprefix("msir_shard.") for op in module.walk()
            if op.name.startswith("msir_shard.") and op.name != "msir_shard.mesh"}


def _sharded_value_and_grad(fn, mesh, args, strategies=None, input_layouts=None):
    plan = shard(fn, mesh, strategies=strategies or {}, input_layouts=input_layouts or {}, example_args=args)
    argnums = tuple(range(len(args)))
    module, name = value_and_grad_module(plan.device_module, plan.graph.entry, argnums)
    return module, EmulatedProgram(module, name).run(*args)


_SERIAL = {}


def _serial_value_and_grad(fn, args):
    key = (fn, tuple(a.shape for a in args), tuple(float(a.flat[0]) for a in args))
    if key not in _SERIAL:  # one compile per function and arguments
        wide = [a.astype(np.float64) for a in args]
        _SERIAL[key] = msir.value_and_grad(fn, argnums=tuple(range(len(args))))(*wide)
    return _SERIAL[key]


@pytest.mark.parametrize("case", list(CASES))
def test_sharded_gradient_equals_serial(case):
    mesh, strategies, layouts, collectives = CASES[case]
    module, (value, *grads) = _sharded_value_and_grad(mlp_loss, mesh, MLP_ARGS, strategies, layouts)
    assert collectives <= _collectives(module)
    want_value, want_grads = _serial_value_and_grad(mlp_loss, MLP_ARGS)
    _check(value, want_value)
    for g, w in zip(grads, want_grads):
        _check(g, w)


def test_gradient_sync_is_an_all_reduce_of_the_weight_gradient():
    """Data parallel: the replicated weights' gradients are partial per device; msir-grad sums them."""
    module, _ = _sharded_value_and_grad(mlp_loss, (2,), MLP_ARGS, CASES["data parallel (2)"][1])
    from xdsl.dialects import func

    step = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data.endswith("__value_and_grad"))
    returned = step.body.block.last_op.operands
    for position in (2, 3, 4):  # w1, b1, w2
        producer = returned[position].owner
        assert producer.name == "msir_shard.all_reduce" and producer.kind.data == "sum"
    assert returned[1].owner.name != "msir_shard.all_reduce"  # x's gradient stays split: no sync


def test_replicated_result_of_a_varying_value_is_seeded_once():
    """The mean computed whole after an all_gather: each device's replica gets 1/n of the cotangent."""
    args = MLP_ARGS
    module, (value, *grads) = _sharded_value_and_grad(
        mlp_loss, (4,), args, {"fc1": "m", "bias1": "m", "act": "m", "fc2": "m", "sq": "m", "mean": "-"})
    assert "all_gather" in _collectives(module)
    want_value, want_grads = _serial_value_and_grad(mlp_loss, args)
    _check(value, want_value)
    for g, w in zip(grads, want_grads):
        _check(g, w)


@pytest.mark.parametrize("mesh", [(2,), (2, 2)])
def test_softmax_over_a_split_axis(mesh):
    """The row statistics' all_reduce(max) and all_reduce(sum) transposed."""
    args = _args((8, 6), (6, 8), (8, 8), seed=1)
    strategies = {"mm": ",".join(["n", "m"][: len(mesh)]), "sm": ",".join(["n", "m"][: len(mesh)])}
    module, (value, *grads) = _sharded_value_and_grad(softmax_loss, mesh, args, strategies)
    assert "all_reduce" in _collectives(module)
    want_value, want_grads = _serial_value_and_grad(softmax_loss, args)
    _check(value, want_value)
    for g, w in zip(grads, want_grads):
        _check(g, w)


def test_max_over_a_split_axis_routes_the_cotangent_to_the_maximum():
    args = _args((8, 4), (4, 6), seed=2)
    module, (value, gx, gw) = _sharded_value_and_grad(max_loss, (2,), args, {"mm": "m", "top": "m"})
    kinds = {op.kind.data for op in module.walk() if op.name == "msir_shard.all_reduce"}
    assert "max" in kinds
    want_value, (wx, ww) = _serial_value_and_grad(max_loss, args)
    _check(value, want_value)
    _check(gx, wx)
    _check(gw, ww)


def test_finite_differences_of_the_sharded_function():
    """The sharded gradient against central differences of the sharded forward itself."""
    args = MLP_ARGS
    strategies = CASES["megatron then rows (2, 4)"][1]
    plan = shard(mlp_loss, (2, 4), strategies=strategies, example_args=args)
    _, (_, *grads) = _sharded_value_and_grad(mlp_loss, (2, 4), args, strategies)
    wide = [a.astype(np.float64) for a in args]
    rng = np.random.default_rng(3)
    for i in (1, 3):
        direction = rng.standard_normal(args[i].shape)
        eps = 1e-3  # small enough that no relu crosses its kink
        plus = [a.copy() for a in wide]
        minus = [a.copy() for a in wide]
        plus[i] += eps * direction
        minus[i] -= eps * direction
        fd = (float(plan.run(*[a.astype(np.float32) for a in plus]))
              - float(plan.run(*[a.astype(np.float32) for a in minus]))) / (2 * eps)
        assert abs(fd - float(np.sum(grads[i] * direction))) <= 2e-3 * max(1.0, abs(fd))


def test_not_a_per_device_function_is_refused():
    plan = shard(mlp_loss, (2,), strategies=CASES["data parallel (2)"][1], example_args=MLP_ARGS)
    with pytest.raises(CompileError, match="is not a per-device function"):
        value_and_grad_module(plan.graph.module, plan.graph.entry, (0,))


@pytest.mark.parametrize("case", ["contraction split (4)", "megatron then rows (2, 4)",
                                  "stored whole, computed split (2)"])
def test_sharded_jvp_equals_serial(case):
    """Forward mode through the collectives: the tangent of the loss against the serial jvp (float64)."""
    mesh, strategies, layouts, _ = CASES[case]
    plan = shard(mlp_loss, mesh, strategies=strategies, input_layouts=layouts, example_args=MLP_ARGS)
    argnums = (0, 1, 3)
    module, name = jvp_module(plan.device_module, plan.graph.entry, argnums)
    tangents = _args(*(MLP_ARGS[i].shape for i in argnums), seed=4)
    value, tangent = EmulatedProgram(module, name).run(*MLP_ARGS, *tangents)
    wide = [a.astype(np.float64) for a in MLP_ARGS]
    want_value, want_tangent = msir.jvp(lambda x, w1, w2: mlp_loss(x, w1, wide[2], w2),
                                        (wide[0], wide[1], wide[3]), tuple(t.astype(np.float64) for t in tangents))
    _check(value, want_value)
    _check(tangent, want_tangent)


HAND_WRITTEN = """
msir_shard.mesh @mesh(shape = 2)
func.func @loss(%x: tensor<2x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[0],[]]>},
                %w: tensor<4x3xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[],[]]>})
    -> (tensor<f32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[]>}) attributes {msir_shard.mesh = @mesh} {
  %g = msir_shard.all_gather %x on @mesh axis 0 dim 0 : tensor<2x4xf32> to tensor<4x4xf32>
  %s = msir_shard.all_slice %g on @mesh axis 0 dim 1 : tensor<4x4xf32> to tensor<4x2xf32>
  %t = msir_shard.all_to_all %s on @mesh axis 0 dims 1 to 0 : tensor<4x2xf32> to tensor<2x4xf32>
  %e = msir.tanh %t : tensor<2x4xf32>
  %y = msir.matmul %e, %w : tensor<2x4xf32>, tensor<4x3xf32> to tensor<2x3xf32>
  %p = msir.reduce_sum %y axes array<i64: 0, 1> : tensor<2x3xf32> to tensor<f32>
  %l = msir_shard.all_reduce %p on @mesh axis 0 kind "sum" : tensor<f32>
  func.return %l : tensor<f32>
}
"""


def test_slice_of_a_gathered_value_against_finite_differences():
    """all_slice of a varying value (the devices' equal copies of an all_gather's result): the cotangents
    of the copies are shares, not each the whole (which would double x's gradient)."""
    from xdsl.parser import Parser

    from msir.compiler import make_context

    module = Parser(make_context(), HAND_WRITTEN).parse_module()
    x, w = _args((4, 4), (4, 3), seed=5)
    grad_module, name = value_and_grad_module(module, "loss", (0, 1))
    _, gx, gw = EmulatedProgram(grad_module, name).run(x, w)
    forward = EmulatedProgram(module, "loss")
    eps = 1e-3
    for arg, g in ((0, gx), (1, gw)):
        direction = np.random.default_rng(arg).standard_normal(g.shape).astype(np.float32)
        at = [x, w]
        plus = [a.astype(np.float64) for a in at]
        minus = [a.astype(np.float64) for a in at]
        plus[arg] += eps * direction
        minus[arg] -= eps * direction
        fd = (float(forward.run(*[a.astype(np.float32) for a in plus])[0])
              - float(forward.run(*[a.astype(np.float32) for a in minus])[0])) / (2 * eps)
        assert abs(fd - float(np.sum(g * direction))) <= 2e-3 * max(1.0, abs(fd))
