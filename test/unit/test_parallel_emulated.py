"""Plans run on emulated devices (`msir.parallel.emulated`): sharded equals
unsharded, forward, float32 against a float64 reference with
|a - b| <= 1e-5 |b| + 1e-5 max|b|, on meshes (2), (4), (2, 2), (2, 4)."""

import re

import numpy as np
import pytest

from msir import ops
from msir.errors import DTypeError, MsirTypeError, ShapeError
from msir.parallel import Layout, shard

MESHES = [(2,), (4,), (2, 2), (2, 4)]


def mlp(x, w1, b1, w2, b2):
    h = ops.relu(ops.add(ops.matmul(x, w1, name="fc1"), b1, name="bias1"), name="act")
    return ops.add(ops.matmul(h, w2, name="fc2"), b2, name="bias2")


def matmul(x, w):
    return ops.matmul(x, w, name="mm")


def _args(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


MLP_ARGS = _args((16, 32), (32, 64), (64,), (64, 32), (32,))
MM_ARGS = _args((16, 32), (32, 24))


def _ir_collectives(ir: str) -> list:
    return sorted((m[1], int(m[2])) for m in re.finditer(r"msir_shard\.(\w+) %\S+ on @mesh axis (\d+)", ir)
                  if m[1] != "all_slice")


def _priced_collectives(plan) -> list:
    """The forward collectives the cost model priced for the plan (all_slice, free, aside)."""
    terms = [*plan.rows, *plan.leaf_rows.values()]
    return sorted((c.kind, c.axis) for t in terms for c in t.fwd if c.kind != "all_slice")


def _moved(x, w):
    return ops.relu(ops.matmul(x, w, name="mm"), name="act")


def _scattered(x, w):
    return ops.tanh(ops.matmul(x, w, name="mm"), name="act")


def _softmax(x, w):
    return ops.softmax(ops.matmul(x, w, name="mm"), name="sm")


PRICED = {
    "megatron (4)": lambda: shard(mlp, 4, strategies=_megatron((4,)), example_args=MLP_ARGS, argnums=()),
    "megatron (2, 4)": lambda: shard(mlp, (2, 4), strategies=_megatron((2, 4)), example_args=MLP_ARGS, argnums=()),
    "all_to_all": lambda: shard(_moved, (2, 2), strategies={"mm": "k,-", "act": "-,m"},
                                input_layouts={0: Layout(((0,), ()))}, example_args=MM_ARGS, argnums=()),
    "reduce_scatter": lambda: shard(_scattered, (2, 2), strategies={"mm": "m,k", "act": "m,n"},
                                    example_args=MM_ARGS, argnums=()),
    "softmax": lambda: shard(_softmax, (2, 4), strategies={"mm": "m,n", "sm": "m,n"}, example_args=MM_ARGS,
                             argnums=()),
}


def _mlp_reference(x, w1, b1, w2, b2):
    x, w1, b1, w2, b2 = (a.astype(np.float64) for a in (x, w1, b1, w2, b2))
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def _assert_close(got, want):
    assert got.shape == want.shape and got.dtype == np.float32
    bound = 1e-5 * np.abs(want) + 1e-5 * np.abs(want).max()
    assert np.all(np.abs(got - want) <= bound), np.abs(got - want).max()


def _megatron(mesh):
    """Column-then-row on the last mesh axis, data parallel on the first of a 2-D mesh."""
    if len(mesh) == 1:
        return {"fc1": "n", "bias1": "n", "act": "n", "fc2": "k", "bias2": "-"}
    return {"fc1": "m,n", "bias1": "m,n", "act": "m,n", "fc2": "m,k", "bias2": "m,-"}


@pytest.mark.parametrize("mesh", MESHES)
def test_megatron_mlp_equals_unsharded(mesh):
    plan = shard(mlp, mesh, strategies=_megatron(mesh), example_args=MLP_ARGS, argnums=())
    _assert_close(plan.run(*MLP_ARGS), _mlp_reference(*MLP_ARGS))
    assert plan.device_ir.count("msir_shard.all_reduce") == 1  # Megatron's one all-reduce of the forward
    assert "all_gather" not in plan.device_ir


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("split", ["m", "n", "k"])
def test_matmul_split_equals_unsharded(mesh, split):
    strategy = split if len(mesh) == 1 else f"{split},{'k' if split != 'k' else 'm'}"
    plan = shard(matmul, mesh, strategies={"mm": strategy}, example_args=MM_ARGS, argnums=())
    x, w = (a.astype(np.float64) for a in MM_ARGS)
    _assert_close(plan.run(*MM_ARGS), x @ w)


@pytest.mark.parametrize("mesh", MESHES)
def test_searched_plan_equals_unsharded(mesh):
    from msir.parallel import auto_shard

    plan = auto_shard(mlp, mesh, MLP_ARGS, argnums=())
    _assert_close(plan.run(*MLP_ARGS), _mlp_reference(*MLP_ARGS))


def test_moved_split_runs_all_to_all_and_gathers():
    """x stored by rows on axis 0, read split by its contraction there (all_to_all);
    the product replicated from a partial sum over axis 1 then split by rows."""
    plan = PRICED["all_to_all"]()
    ir = plan.device_ir
    assert "msir_shard.all_to_all" in ir and "msir_shard.all_reduce" in ir
    x, w = (a.astype(np.float64) for a in MM_ARGS)
    _assert_close(plan.run(*MM_ARGS), np.maximum(x @ w, 0))


def test_reduce_scatter_onto_the_consumer_split():
    plan = PRICED["reduce_scatter"]()
    assert "msir_shard.reduce_scatter" in plan.device_ir
    x, w = (a.astype(np.float64) for a in MM_ARGS)
    _assert_close(plan.run(*MM_ARGS), np.tanh(x @ w))


def test_runs_are_deterministic_and_leave_the_arguments_alone():
    saved = [a.copy() for a in MLP_ARGS]
    plan = shard(mlp, (2, 4), strategies=_megatron((2, 4)), example_args=MLP_ARGS, argnums=())
    first, second = plan.run(*MLP_ARGS), plan.run(*MLP_ARGS)
    assert first.tobytes() == second.tobytes()
    assert all(np.array_equal(a, b) for a, b in zip(MLP_ARGS, saved))  # the devices share the callers' arrays


def test_arguments_unlike_the_planned_ones_are_located_errors():
    """Another shape, another rank, another dtype, another count: each names the argument (position and
    Python name), what the plan was made for and the layout it stores it in, at the function's parameter."""
    plan = shard(matmul, 2, strategies={"mm": "m"}, example_args=MM_ARGS, argnums=())
    x, w = MM_ARGS
    line = matmul.__code__.co_firstlineno
    with pytest.raises(ShapeError, match=r"argument 1 \('w'\) of 'matmul' has shape \(32, 8\) \(rank 2\); the plan "
                                         r"was made for shape \(32, 24\) \(rank 2\), stored in layout "
                                         r"dims=\[\[\],\[\]\], partial=\[\]") as e:
        plan.run(x, w[:, :8])
    assert (e.value.loc.line, e.value.loc.col) == (line, 15)
    with pytest.raises(ShapeError, match=r"argument 0 \('x'\) of 'matmul' has shape \(16, 32, 1\) \(rank 3\); the "
                                         r"plan was made for shape \(16, 32\) \(rank 2\), stored in layout "
                                         r"dims=\[\[0\],\[\]\], partial=\[\]") as e:
        plan.run(x[..., None], w)
    assert (e.value.loc.line, e.value.loc.col) == (line, 12)
    with pytest.raises(DTypeError, match=r"argument 0 \('x'\) of 'matmul' has dtype float64; the plan was made for "
                                         r"float32") as e:
        plan.run(x.astype(np.float64), w)
    assert e.value.loc.line == line
    with pytest.raises(MsirTypeError, match=r"the plan of 'matmul' takes 2 arguments, got 1") as e:
        plan.run(x)
    assert e.value.loc.line == line


@pytest.mark.parametrize("mesh", MESHES)
def test_softmax_over_a_split_axis_equals_unsharded(mesh):
    """The normalised axis split: the row max and the row sum are all-reduced (2 forward all-reduces)."""
    strategy = "n" if len(mesh) == 1 else "m,n"
    plan = shard(_softmax, mesh, strategies={"mm": strategy, "sm": strategy}, example_args=MM_ARGS, argnums=())
    assert 'kind "max"' in plan.device_ir and plan.device_ir.count("msir_shard.all_reduce") == 2
    x, w = (a.astype(np.float64) for a in MM_ARGS)
    logits = x @ w
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    _assert_close(plan.run(*MM_ARGS), e / e.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("mesh", MESHES)
def test_layer_norm_over_a_split_axis_equals_unsharded(mesh):
    """The normalised axis split: each device's mean is scaled to a partial sum and all-reduced (mean, variance)."""
    def f(x, w, g, b):
        return ops.layer_norm(ops.matmul(x, w, name="mm"), 24, g, b, name="ln")

    args = [*MM_ARGS, *_args((24,), (24,), seed=1)]
    strategy = "n" if len(mesh) == 1 else "m,n"
    plan = shard(f, mesh, strategies={"mm": strategy, "ln": strategy}, example_args=args, argnums=())
    assert plan.device_ir.count("msir_shard.all_reduce") == 2
    x, w, g, b = (a.astype(np.float64) for a in args)
    logits = x @ w
    centred = logits - logits.mean(axis=1, keepdims=True)
    want = centred / np.sqrt((centred ** 2).mean(axis=1, keepdims=True) + 1e-5) * g + b
    _assert_close(plan.run(*args), want)


def test_several_results_an_argument_and_a_python_float():
    """Results come back as a tuple; a returned argument is reassembled; a Python float is a runtime scalar."""
    def f(x, w, s):
        y = ops.matmul(x, w, name="mm") * s
        return y, x, ops.reduce_sum(y, name="total")

    x, w = MM_ARGS
    plan = shard(f, (2, 2), strategies={"mm": "m,k"}, example_args=(x, w, 2.0), argnums=())
    for s in (2.0, -3.0):
        y, x_back, total = plan.run(x, w, s)
        want = (x.astype(np.float64) @ w) * s
        _assert_close(y, want)
        assert np.array_equal(x_back, x)
        _assert_close(total, np.asarray(want.sum()))


@pytest.mark.parametrize("case", PRICED)
def test_the_device_ir_runs_the_collectives_the_cost_model_prices(case):
    plan = PRICED[case]()
    assert _ir_collectives(plan.device_ir) == _priced_collectives(plan) != []


def test_results_are_the_callers_own_arrays():
    """The runtime passes arguments as views and keeps collectives' outputs shared by a group: a result is never
    the caller's argument, a value another result or a later call also holds, or a collective's shared output."""
    def f(x, w):
        y = ops.matmul(x, w, name="mm")  # contraction split: y is all-reduced, the result is the collective's
        return y, x, y, ops.relu(y, name="act")

    x, w = MM_ARGS
    plan = shard(f, (2,), strategies={"mm": "k", "act": "-"}, example_args=MM_ARGS, argnums=())
    assert "msir_shard.all_reduce" in plan.device_ir
    first = plan.run(x, w)
    assert not np.shares_memory(first[1], x)
    for i, a in enumerate(first):
        assert all(not np.shares_memory(a, b) for b in first[i + 1:])
    expected = [a.copy() for a in first]
    for a in first:
        a[...] = np.nan  # the caller writes its results
    second = plan.run(x, w)
    assert all(np.array_equal(a, b) for a, b in zip(second, expected))
    assert all(not np.shares_memory(a, b) for a, b in zip(first, second))


def test_each_run_records_where_its_time_went():
    """`plan.last_profile` (and `msir.parallel.last_profile()`, the latest run's in the process): the native
    segments, the collectives with their count and bytes, and the rest; parts non-negative, at most the total."""
    import msir.parallel

    plan = shard(mlp, (2,), strategies=_megatron((2,)), example_args=MLP_ARGS, argnums=())
    assert plan.last_profile is None  # not run yet
    plan.run(*MLP_ARGS)
    first = plan.last_profile
    plan.run(*MLP_ARGS)
    profile = plan.last_profile
    assert profile is not first and msir.parallel.last_profile() is profile
    assert profile.segments_s > 0 and profile.collectives_s > 0
    assert profile.segments_s + profile.collectives_s <= profile.total_s
    assert profile.other_s == profile.total_s - profile.segments_s - profile.collectives_s
    # Megatron's one all_reduce of the 16x32 float32 partial sums, one device's input
    assert (profile.collective_calls, profile.collective_bytes) == (1, 16 * 32 * 4)
