"""Plans of training steps (`msir.parallel.training`): a function that calls
`msir.value_and_grad` / `msir.grad` / `msir.vjp` inside is planned as its loss
and run sharded forward and backward; sharded equals unsharded, float32
against float64, |a - b| <= 1e-5 |b| + 1e-5 max|b|, on (2), (4), (2, 2), (2, 4)."""

import re

import numpy as np
import pytest

import msir
from msir import ops
from msir.errors import PlanningError
from msir.parallel import CostModel, auto_shard, shard


def loss(w1, b1, w2, x, y):
    h = ops.relu(ops.add(ops.matmul(x, w1, name="fc1"), b1, name="bias1"), name="act")
    d = ops.sub(ops.matmul(h, w2, name="fc2"), y, name="err")
    return ops.reduce_mean(ops.mul(d, d, name="sq"), name="mean")


def gradient_step(w1, b1, w2, x, y):
    value, grads = msir.value_and_grad(loss, argnums=(0, 1, 2))(w1, b1, w2, x, y)
    return value, *grads


def sgd_step(w1, b1, w2, x, y):
    g1, gb, g2 = msir.grad(loss, argnums=(0, 1, 2))(w1, b1, w2, x, y)
    return w1 - 0.1 * g1, b1 - 0.1 * gb, w2 - 0.1 * g2


def vjp_step(w1, b1, w2, x, y):
    value, pullback = msir.vjp(lambda w1, w2: loss(w1, b1, w2, x, y), w1, w2)
    return value, *pullback(ops.ones_like(value))


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16,), (16, 4), (16, 8), (16, 4)]]


ARGS = _args()
FORWARD = ("fc1", "bias1", "act", "fc2", "err", "sq", "mean")
STRATEGIES = {
    "data parallel (2)": ((2,), dict.fromkeys(FORWARD, "m")),
    "megatron (4)": ((4,), {"fc1": "n", "bias1": "n", "act": "n", "fc2": "k"}),
    "dp x megatron (2, 2)": ((2, 2), {"fc1": "m,n", "bias1": "m,n", "act": "m,n", "fc2": "m,k", "err": "m,-"}),
    "dp x megatron (2, 4)": ((2, 4), {"fc1": "m,n", "bias1": "m,n", "act": "m,n", "fc2": "m,k", "err": "m,-"}),
}


def _check(got, want):
    want = np.asarray(want)
    tol = 1e-5 * np.abs(want) + 1e-5 * np.max(np.abs(want))
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.all(np.abs(got - want) <= tol), np.max(np.abs(got - want))


_SERIAL = {}


def _serial(step):
    if step not in _SERIAL:
        _SERIAL[step] = msir.jit(step)(*[a.astype(np.float64) for a in ARGS])
    return _SERIAL[step]


@pytest.mark.parametrize("case", list(STRATEGIES))
def test_step_sharded_equals_serial(case):
    mesh, strategies = STRATEGIES[case]
    plan = shard(gradient_step, mesh, strategies=strategies, example_args=ARGS)
    for got, want in zip(plan.run(*ARGS), _serial(gradient_step)):
        _check(got, want)


def test_data_parallel_step_syncs_each_gradient_with_one_all_reduce():
    plan = shard(sgd_step, (2,), strategies=STRATEGIES["data parallel (2)"][1], example_args=ARGS)
    ir = plan.device_ir
    # the weights and the bias: replicated, their gradients partial over the batch split
    assert [m[1] for m in re.finditer(r"msir_shard\.all_reduce %\S+ on @mesh axis 0 kind \"sum\" : (tensor<\S+>)",
                                      ir)] == ["tensor<8x16xf32>", "tensor<16xf32>", "tensor<16x4xf32>"]
    # the batch arrives split and msir-grad's splat constants are built at the local shape: nothing is sliced
    assert "msir_shard.all_slice" not in ir
    assert "msir.constant dense<0.000000e+00> : tensor<8x16xf32>" in ir  # relu's zero, of the local batch of 8
    for got, want in zip(plan.run(*ARGS), _serial(sgd_step)):
        _check(got, want)


def test_data_parallel_step_runs_in_two_segments_around_its_gradient_sync():
    """The emulated runtime cuts by dependence: forward and backward, the three all_reduces, the update."""
    from msir.parallel.emulated import _Segment

    plan = shard(sgd_step, (2,), strategies=STRATEGIES["data parallel (2)"][1], example_args=ARGS)
    steps = plan._emulated().steps
    kinds = ["segment" if isinstance(s, _Segment) else s.name for s in steps]
    assert kinds == ["segment", *["msir_shard.all_reduce"] * 3, "segment"]
    assert {op.name for op in steps[-1].ops} <= {"msir.constant", "msir.broadcast_to", "msir.mul", "msir.sub"}
    first = plan.run(*ARGS)
    for got, again, want in zip(first, plan.run(*ARGS), _serial(sgd_step)):
        assert np.array_equal(got, again)  # deterministic
        _check(got, want)


def test_vjp_step_with_captures():
    plan = shard(vjp_step, (2, 2), strategies=STRATEGIES["dp x megatron (2, 2)"][1], example_args=ARGS)
    assert plan.graph.step.argnums == (0, 1)
    for got, want in zip(plan.run(*ARGS), _serial(vjp_step)):
        _check(got, want)


def test_auto_plan_of_a_batch_heavy_step_is_data_parallel():
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16,), (16, 4), (4096, 8), (4096, 4)]]
    plan = auto_shard(gradient_step, (2,), args, cost_model=CostModel(alpha=[1e-6], bandwidth=[1e9], flops=1e9))
    assert plan.strategy_of("fc1") == "m" and plan.strategy_of("fc2") == "m"
    assert plan.layout_of(0) == msir.parallel.Layout(((), ()))  # w1 replicated
    want = msir.jit(gradient_step)(*[a.astype(np.float64) for a in args])
    for got, w in zip(plan.run(*args), want):
        _check(got, w)


def test_argnums_default_to_the_transformation_and_positions_are_the_steps():
    plan = shard(gradient_step, (2,), strategies=STRATEGIES["data parallel (2)"][1], example_args=ARGS,
                 input_layouts={3: "dims=[[0],[]], partial=[]"})
    assert plan.graph.step.argnums == (0, 1, 2)
    assert plan.layout_of(3) == msir.parallel.Layout(((0,), ()))
    with pytest.raises(PlanningError, match="is not the position of an array argument that 'gradient_step' passes"):
        shard(gradient_step, (2,), example_args=ARGS, input_layouts={7: "dims=[[0],[]], partial=[]"})


def _differentiates_twice(w, x):
    g1 = msir.grad(lambda w: np.sum(ops.matmul(x, w, name="a")))(w)
    g2 = msir.grad(lambda w: np.sum(ops.matmul(x, w, name="b")))(w)
    return g1 + g2


def test_a_step_differentiating_twice_is_refused_at_its_line():
    with pytest.raises(PlanningError, match="differentiates 2 functions") as e:
        shard(_differentiates_twice, (2,), example_args=[np.ones((4, 3), np.float32), np.ones((2, 4), np.float32)])
    assert e.value.loc.line == _differentiates_twice.__code__.co_firstlineno + 2  # the second transformation


def _nested_step(weights, x, y):
    w1, b1, w2 = weights
    value, grads = msir.value_and_grad(loss, argnums=(0, 1, 2))(w1, b1, w2, x, y)
    return value, [grads[0], (grads[1], grads[2])]


def test_run_returns_the_steps_tuples_and_lists_and_names_a_tuples_arrays():
    weights = tuple(ARGS[:3])
    plan = shard(_nested_step, (2,), strategies=STRATEGIES["data parallel (2)"][1],
                 example_args=[weights, *ARGS[3:]])
    assert plan.graph.arg_names[:3] == ["weights_0", "weights_1", "weights_2"]
    value, [g1, (gb, g2)] = plan.run(weights, *ARGS[3:])
    for got, want in zip((value, g1, gb, g2), _serial(gradient_step)):
        _check(got, want)


def momentum_step(w1, b1, w2, x, y, m1):
    """SGD on b1 and w2; momentum on w1, whose velocity m1 the loss does not read."""
    g1, gb, g2 = msir.grad(loss, argnums=(0, 1, 2))(w1, b1, w2, x, y)
    v1 = 0.9 * m1 + g1
    return w1 - 0.1 * v1, b1 - 0.1 * gb, w2 - 0.1 * g2, v1


@pytest.mark.parametrize("case", STRATEGIES)
def test_a_steps_cost_counts_its_update_in_each_parameters_layout(case):
    """§4 prices every op of the step: the update's elementwise ops, 1 FLOP per local element each, in the
    layout of the parameter they update (no communication: the gradient arrives synced in that layout).
    By hand: sgd_step's update is a mul and a sub per element of w1 (8x16), b1 (16) and w2 (16x4)."""
    mesh, strategies = STRATEGIES[case]
    model = CostModel(alpha=1e-5, bandwidth=1e9, flops=1e9)
    step = shard(sgd_step, mesh, strategies=strategies, example_args=ARGS, cost_model=model)
    alone = shard(loss, mesh, strategies=strategies, example_args=ARGS, cost_model=model, argnums=(0, 1, 2))
    assert step.strategies == alone.strategies
    local = [np.prod(step.layout_of(i).local_shape(shape, step.mesh)) for i, shape in enumerate([(8, 16), (16,),
                                                                                                   (16, 4)])]
    update = 2 * sum(local) / model.flops
    assert step.cost == pytest.approx(alone.cost + update, rel=1e-9)
    assert step.breakdown["compute_s"] == pytest.approx(alone.breakdown["compute_s"] + update, rel=1e-9)
    assert step.breakdown["memory_bytes"] == alone.breakdown["memory_bytes"]  # the new values replace the old
    # the velocity: 0.9 * m1 reads no parameter (whole on every device, as it runs: m1 has no layout), the add
    # and the update of w1 run in w1's layout
    args = [*ARGS, np.zeros((8, 16), np.float32)]
    momentum = shard(momentum_step, mesh, strategies=strategies, example_args=args, cost_model=model)
    assert momentum.cost == pytest.approx(alone.cost + update + (8 * 16 + local[0]) / model.flops, rel=1e-9)
