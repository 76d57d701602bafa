"""The one-line switch (`msir.set_auto_parallel_context`): `msir.jit`
functions run sharded on emulated devices, training loops give the serial
losses, MindSpore's primitive `ops.MatMul().shard(...)` sets semi-auto
strategies, and the context is part of the plans' cache key."""

import sys
from pathlib import Path

import numpy as np
import pytest

import msir
from msir import ops
from msir.errors import PlanningError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from workloads import w5_loss2  # noqa: E402  (the W5 MLP's loss, plain NumPy)


@pytest.fixture(autouse=True)
def _stand_alone():
    yield
    msir.reset_auto_parallel_context()


@msir.jit
def w5_step(w1, b1, w2, b2, x, onehot):
    loss, g = msir.value_and_grad(w5_loss2, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, onehot)
    return loss, w1 - 0.05 * g[0], b1 - 0.05 * g[1], w2 - 0.05 * g[2], b2 - 0.05 * g[3]


def _w5_data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 32), dtype=np.float32)
    onehot = np.eye(16, dtype=np.float32)[rng.integers(0, 16, 64)]
    params = [(rng.standard_normal((32, 16)) * 0.3).astype(np.float32), np.zeros(16, np.float32),
              (rng.standard_normal((16, 16)) * 0.3).astype(np.float32), np.zeros(16, np.float32)]
    return params, x, onehot


def _train(steps=20):
    params, x, onehot = _w5_data()
    losses = []
    for _ in range(steps):
        loss, *params = w5_step(*params, x, onehot)
        losses.append(float(loss))
    return np.array(losses), params


SERIAL = {}


def _serial():
    if not SERIAL:
        SERIAL["losses"], SERIAL["params"] = _train()
    return SERIAL["losses"], SERIAL["params"]


@pytest.mark.parametrize("mode, mesh", [("data_parallel", (2, 4)), ("auto_parallel", (2,)),
                                        ("auto_parallel", (2, 2))])
def test_training_loop_gives_the_serial_losses(mode, mesh):
    serial_losses, serial_params = _serial()
    assert serial_losses[-1] < serial_losses[0]  # it trains
    msir.set_auto_parallel_context(parallel_mode=mode, mesh=mesh)
    losses, params = _train()
    np.testing.assert_allclose(losses, serial_losses, rtol=1e-4)
    for p, q in zip(params, serial_params):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)
    plan = w5_step._plans[next(k for k in w5_step._plans if k[0][:2] == (mode, mesh))]
    assert plan.mesh.shape == mesh
    if mode == "data_parallel":  # the batch split over every device, the parameters replicated
        assert plan.layout_of(4) == msir.parallel.Layout((tuple(range(len(mesh))), ()))
        assert plan.layout_of(0) == msir.parallel.Layout(((), ()))


def test_device_num_and_the_context_keys():
    msir.set_auto_parallel_context(parallel_mode="data_parallel", device_num=4)
    assert msir.get_auto_parallel_context("mesh") == (4,)
    assert msir.get_auto_parallel_context("device_num") == 4
    msir.set_auto_parallel_context(mesh=(2, 4))
    assert msir.get_auto_parallel_context("parallel_mode") == "data_parallel"
    assert msir.get_auto_parallel_context("device_num") == 8
    msir.reset_auto_parallel_context()
    assert msir.get_auto_parallel_context("parallel_mode") == "stand_alone"
    assert msir.get_auto_parallel_context("mesh") is None


@pytest.mark.parametrize("kwargs, message", [
    ({"parallel_mode": "hybrid"}, "unknown parallel_mode 'hybrid'"),
    ({"mesh": (2, 0)}, "mesh must be a shape of positive ints"),
    ({"mesh": (2, 4), "device_num": 4}, r"mesh \(2, 4\) has 8 devices, not device_num=4"),
    ({"device_num": 0}, "device_num must be a positive int"),
])
def test_bad_context_is_refused(kwargs, message):
    with pytest.raises(PlanningError, match=message):
        msir.set_auto_parallel_context(**kwargs)


def test_the_context_is_part_of_the_cache_key():
    """Switching the context switches the plan (and back): no run reuses another context's code."""
    params, x, onehot = _w5_data()
    serial = w5_step(*params, x, onehot)
    msir.set_auto_parallel_context(parallel_mode="data_parallel", mesh=(2,))
    dp = w5_step(*params, x, onehot)
    msir.set_auto_parallel_context(mesh=(4,))
    dp4 = w5_step(*params, x, onehot)
    keys = [k for k in w5_step._plans if k[0][0] == "data_parallel"]
    assert {k[0][1] for k in keys} >= {(2,), (4,)}
    msir.reset_auto_parallel_context()
    again = w5_step(*params, x, onehot)
    for a, b, c, d in zip(serial, dp, dp4, again):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(d, a)


def test_data_parallel_batch_the_mesh_does_not_divide_names_the_argument():
    params, x, onehot = _w5_data()
    msir.set_auto_parallel_context(parallel_mode="data_parallel", mesh=(3,))
    with pytest.raises(PlanningError, match="splits dimension 0 \\(size 64\\) of argument 'x' 3 ways") as e:
        w5_step(*params, x, onehot)
    assert e.value.loc.line == w5_step.__wrapped__.__code__.co_firstlineno + 1  # the def's parameters


MM1 = ops.MatMul().shard(((2, 1), (1, 4)))
MM2 = ops.MatMul(transpose_b=True).shard(((1, 2), (4, 2)))


@msir.jit
def two_primitives(x, w1, w2):
    return MM2(ops.relu(MM1(x, w1)), w2)


def test_primitive_shard_sets_semi_auto_strategies():
    rng = np.random.default_rng(2)
    x, w1, w2 = [rng.standard_normal(s).astype(np.float32) for s in [(8, 4), (4, 8), (16, 8)]]
    want = np.maximum(x.astype(np.float64) @ w1, 0) @ w2.T.astype(np.float64)
    np.testing.assert_allclose(two_primitives(x, w1, w2), want, rtol=1e-5, atol=1e-5)
    msir.set_auto_parallel_context(parallel_mode="semi_auto_parallel", mesh=(2, 4))
    got = two_primitives(x, w1, w2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    plan = next(iter(two_primitives._plans.values()))
    assert plan.strategy_of(MM1.name) == "m,n"  # rows 2 ways on axis 0, columns 4 ways on axis 1
    assert plan.strategy_of(MM2.name) == "k,n"  # w2 given as (n, k): n 4 ways, k 2 ways


@pytest.mark.parametrize("strategy, why", [
    (((2, 1),), ""), (((2, 1), (1, 0)), ""), ("m,n", ""),
    (((2, 1), (1, 4, 1)), ": the entry for input 1 has 3 numbers, but the input is a matrix (rank 2)"),
])
def test_primitive_shard_refuses_bad_strategies(strategy, why):
    with pytest.raises(msir.ops.BadArgumentError, match="two tuples of two positive ints") as e:
        ops.MatMul().shard(strategy)
    assert str(e.value).splitlines()[0].endswith(f"got {strategy!r}{why}")
    assert e.value.loc.file == __file__  # the user's .shard(...), at its column
    assert e.value.loc.source_line()[e.value.loc.col - 1:] == "ops.MatMul().shard(strategy)"


UNSLICEABLE = ops.MatMul().shard(((3, 1), (1, 1)))
ROWS_BY_TWO = ops.MatMul().shard(((2, 1), (1, 4)))


@msir.jit
def unsliceable(x, w):
    return UNSLICEABLE(x, w)


@msir.jit
def rows_by_two(x, w):
    return ROWS_BY_TWO(x, w)


def test_primitive_strategies_that_do_not_fit_name_op_loop_axis_and_line():
    msir.set_auto_parallel_context(parallel_mode="semi_auto_parallel", mesh=(2, 4))
    with pytest.raises(PlanningError, match=f"op '{UNSLICEABLE.name}' .*multiply to 3 \\(loop m\\)") as e:
        unsliceable(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
    assert e.value.loc.line == unsliceable.__wrapped__.__code__.co_firstlineno + 2
    with pytest.raises(PlanningError, match=f"strategy 'm,n' of op '{ROWS_BY_TWO.name}' .*mesh axis 0 \\(size 2\\) "
                                            "splits loop m \\(dimension 0 of the output, size 5\\) 2 ways") as e:
        rows_by_two(np.ones((5, 4), np.float32), np.ones((4, 8), np.float32))
    assert e.value.loc.line == rows_by_two.__wrapped__.__code__.co_firstlineno + 2
