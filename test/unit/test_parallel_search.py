"""The exact search (`msir.parallel.search`) finds the classic strategies in
their regimes (issue 12's Done-when; the cost model's constants stated in each
test), agrees with brute-force enumeration of every plan, honours a memory
limit, and refuses bad input with located errors."""

import numpy as np
import pytest

import msir
from msir import ops
from msir.errors import PlanningError
from msir.parallel import CostModel
from msir.parallel.search import build_problem, plan_memory, solve

f32 = np.float32


def z(*shape):
    return np.zeros(shape, f32)


def mlp(x, w1, w2):
    h = ops.relu(ops.matmul(x, w1, name="fc1"), name="act")
    return ops.reduce_sum(ops.matmul(h, w2, name="fc2"), name="loss")


# An inner block of a model: its input x needs a gradient (it is an activation),
# w1 and w2 are parameters. 4 devices on one axis: 10 us per collective, 10 GB/s,
# 1 TFLOP/s.
ONE_AXIS = CostModel(alpha=[1e-5], bandwidth=[1e10], flops=1e12)


def test_weight_heavy_mlp_is_megatron():
    plan = msir.parallel.auto_shard(mlp, (4,), (z(64, 1024), z(1024, 4096), z(4096, 1024)), cost_model=ONE_AXIS,
                                    argnums=(0, 1, 2), params=(1, 2))
    # column split of fc1 (n), row split of fc2 (its contraction k): no weight gradient to sync
    assert (plan.strategy_of("fc1"), plan.strategy_of("act"), plan.strategy_of("fc2")) == ("n", "n", "k")


def test_batch_heavy_mlp_is_data_parallel():
    plan = msir.parallel.auto_shard(mlp, (4,), (z(8192, 1024), z(1024, 4096), z(4096, 1024)), cost_model=ONE_AXIS,
                                    argnums=(0, 1, 2), params=(1, 2))
    assert [plan.strategy_of(n) for n in ("fc1", "act", "fc2", "loss")] == ["m", "m", "m", "m"]
    assert plan.breakdown["comm_bwd_s"] > 0  # the weight gradients' all-reduces


def test_two_dimensional_mesh_data_parallel_on_the_slow_axis():
    # axis 0 slow (1 GB/s, 10 us), axis 1 fast (100 GB/s, 1 us), activations (16384 x 1024) larger
    # than the weights: tensor parallel on the fast axis, data parallel across the slow one
    model = CostModel(alpha=[1e-5, 1e-6], bandwidth=[1e9, 1e11], flops=1e12)
    plan = msir.parallel.auto_shard(mlp, (2, 4), (z(16384, 1024), z(1024, 4096), z(4096, 1024)), cost_model=model,
                                    argnums=(0, 1, 2), params=(1, 2))
    assert (plan.strategy_of("fc1"), plan.strategy_of("fc2")) == ("m,n", "m,k")


def projection(x, w):
    return ops.reduce_sum(ops.matmul(x, w, name="proj"), name="loss")


def test_huge_contraction_is_split():
    # K = 2^20, x an activation (it needs a gradient): splitting k leaves each device a quarter of x
    # and of w and a 16 KiB partial output; splitting m would all-reduce w's 256 MiB gradient,
    # splitting n x's 256 MiB gradient
    plan = msir.parallel.auto_shard(projection, (4,), (z(64, 1 << 20), z(1 << 20, 64)), cost_model=ONE_AXIS,
                                    argnums=(0, 1), params=(1,))
    assert plan.strategy_of("proj") == "k"
    assert plan.layout_of(0) == msir.parallel.Layout(((), (0,)))
    assert plan.layout_of(1) == msir.parallel.Layout(((0,), ()))


def attention(x, wq, wk, wv, wo):
    q = ops.einsum("bsd,dhe->bshe", x, wq, name="q")
    k = ops.einsum("bsd,dhe->bshe", x, wk, name="k")
    v = ops.einsum("bsd,dhe->bshe", x, wv, name="v")
    s = ops.einsum("bshe,bthe->bhst", q, k, name="scores")
    p = ops.softmax(s, axis=-1, name="softmax")
    c = ops.einsum("bhst,bthe->bshe", p, v, name="context")
    o = ops.einsum("bshe,hed->bsd", c, wo, name="out")
    return ops.reduce_sum(o, name="loss")


def attention_args(batch):
    return (z(batch, 128, 1024), z(1024, 16, 64), z(1024, 16, 64), z(1024, 16, 64), z(16, 64, 1024))


@pytest.mark.parametrize("batch, letter", [(2, "h"), (512, "b")])
def test_attention_splits_heads_at_small_batch_and_batch_at_large(batch, letter):
    plan = msir.parallel.auto_shard(attention, (4,), attention_args(batch), cost_model=ONE_AXIS,
                                    argnums=(0, 1, 2, 3, 4), params=(1, 2, 3, 4))
    for name in ("q", "k", "v", "scores", "context", "out"):
        assert plan.strategy_of(name) == letter, (name, plan)
    assert plan.spec_of("softmax") == "klmn->klmn"
    assert plan.strategy_of("softmax") == ("l" if letter == "h" else "k")


def test_memory_limit_rules_out_data_parallelism():
    args = (z(8192, 1024), z(1024, 4096), z(4096, 1024))
    free = msir.parallel.auto_shard(mlp, (4,), args, cost_model=ONE_AXIS, argnums=(0, 1, 2), params=(1, 2))
    assert free.strategy_of("fc1") == "m"
    limit = 0.9 * free.breakdown["memory_bytes"]
    model = CostModel(alpha=[1e-5], bandwidth=[1e10], flops=1e12, memory_limit=limit)
    plan = msir.parallel.auto_shard(mlp, (4,), args, cost_model=model, argnums=(0, 1, 2), params=(1, 2))
    assert plan.method == "pareto elimination"
    assert plan.breakdown["memory_bytes"] <= limit
    assert "m" not in (plan.strategy_of("fc1"), plan.strategy_of("fc2"))  # the weights are split
    # exact: the cheapest of all plans within the limit, by brute force over the cost graph
    problem = build_problem(plan.setting, {}, {})
    best = min(_all_plans(problem, limit))
    assert plan.cost == pytest.approx(best, rel=1e-9)
    by_ilp = solve(problem, limit, method="milp")
    assert by_ilp.method == "milp"
    assert _cost(problem, by_ilp.choice) == pytest.approx(best, rel=1e-9)
    assert plan_memory(problem, by_ilp.choice) <= limit


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.8, 0.95])
def test_pareto_elimination_and_ilp_equal_brute_force_under_memory_limits(fraction):
    # the residual block: x has its own layout and two readers, so two fronts meet at the skip add
    plan = msir.parallel.auto_shard(residual, (4,), (z(256, 64), z(64, 64), z(64, 64)), cost_model=ONE_AXIS,
                                    argnums=(0, 1, 2), params=(1, 2))
    problem = build_problem(plan.setting, {}, {})
    least = problem.base_memory + sum(float(m.min()) for m in problem.memory)
    limit = least + fraction * (plan.breakdown["memory_bytes"] - least)
    best = min(_all_plans(problem, limit))
    for method in (None, "milp"):
        solution = solve(problem, limit, method=method)
        assert solution.method == ("pareto elimination" if method is None else "milp")
        assert plan_memory(problem, solution.choice) <= limit
        assert _cost(problem, solution.choice) == pytest.approx(best, rel=1e-9)


def _all_plans(problem, limit):
    import itertools

    for choice in itertools.product(*(range(len(v.options)) for v in problem.variables)):
        if plan_memory(problem, list(choice)) <= limit:
            yield _cost(problem, choice)


def _cost(problem, choice):
    return sum(float(u[c]) for u, c in zip(problem.unary, choice)) + sum(
        float(t[choice[a], choice[b]]) for (a, b), t in problem.pairwise.items())


def test_memory_limit_no_plan_meets():
    model = CostModel(alpha=[1e-5], bandwidth=[1e10], flops=1e12, memory_limit=1e6)
    with pytest.raises(PlanningError, match=r"no plan fits memory_limit=1e\+06 bytes per device: the smallest "
                                            r"memory any plan needs is 3\.51\d+e\+07 bytes") as e:
        msir.parallel.auto_shard(mlp, (4,), (z(64, 1024), z(1024, 4096), z(4096, 1024)), cost_model=model)
    assert e.value.loc.line == mlp.__code__.co_firstlineno


def residual(x, w1, w2):
    h = ops.relu(ops.matmul(x, w1, name="fc1"), name="act")
    return ops.reduce_sum(ops.add(ops.matmul(h, w2, name="fc2"), x, name="skip"), name="loss")


MODELS = [
    CostModel(alpha=[1e-5, 1e-6], bandwidth=[1e9, 1e11], flops=1e12),
    CostModel(alpha=[1e-6, 1e-6], bandwidth=[1e12, 1e12], flops=1e9),
    CostModel(alpha=[1e-3, 1e-7], bandwidth=[1e8, 1e10], flops=1e13),
]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("fn, args", [(mlp, (z(64, 32), z(32, 128), z(128, 32))),
                                      (residual, (z(256, 64), z(64, 64), z(64, 64)))])
def test_elimination_equals_enumeration(model, fn, args):
    mesh = (2, 2) if fn is mlp else (2, 1)  # the residual block's x has its own layout: more plans
    plan = msir.parallel.auto_shard(fn, mesh, args, cost_model=model, argnums=(0, 1, 2), params=(1, 2))
    problem = build_problem(plan.setting, {}, {})
    by_elimination = solve(problem, method="elimination")
    by_enumeration = solve(problem, method="enumeration")
    assert by_elimination.choice == by_enumeration.choice
    brute = min(_cost(problem, c) for c in _every_choice(problem))
    assert _cost(problem, by_elimination.choice) == pytest.approx(brute, rel=1e-12)
    assert plan.cost == pytest.approx(brute, rel=1e-9)  # the plan's own total: the same optimum


def _every_choice(problem):
    import itertools

    return itertools.product(*(range(len(v.options)) for v in problem.variables))


def test_semi_auto_fixes_the_given_and_propagates_the_rest():
    args = (z(64, 1024), z(1024, 4096), z(4096, 1024))
    plan = msir.parallel.shard(mlp, (4,), {"fc1": ((1, 1), (1, 4))}, example_args=args, cost_model=ONE_AXIS,
                               argnums=(0, 1, 2), params=(1, 2))
    assert plan.strategy_of("fc1") == "n"  # MindSpore's slices: w1's columns in 4
    assert (plan.strategy_of("act"), plan.strategy_of("fc2")) == ("n", "k")
    best = plan.cost
    plan = msir.parallel.shard(mlp, (4,), {"fc1": "m"}, example_args=args, cost_model=ONE_AXIS,
                               argnums=(0, 1, 2), params=(1, 2))
    assert (plan.strategy_of("fc1"), plan.strategy_of("act")) == ("m", "m")
    assert plan.cost > best
    # the rest is the optimum given fc1's strategy: compare with every completion
    problem = build_problem(plan.setting, {0: ("m",)}, {})
    assert plan.cost == pytest.approx(min(_cost(problem, c) for c in _every_choice(problem)), rel=1e-9)


def test_bad_strategies_layouts_and_names():
    args = (z(64, 1024), z(1024, 4096), z(4096, 1024))
    line = mlp.__code__.co_firstlineno
    with pytest.raises(PlanningError, match=r"strategy 'm' of op 'fc1' \(mk,kn->mn\): mesh axis 0 \(size 3\) "
                                            r"splits loop m \(dimension 0 of the output, size 64\) 3 ways") as e:
        msir.parallel.shard(mlp, (3,), {"fc1": "m"}, example_args=args)
    assert e.value.loc.line == line + 1
    with pytest.raises(PlanningError, match=r"no op named 'fc3' in function 'mlp'; its ops are: fc1, act, fc2, "
                                            r"loss") as e:
        msir.parallel.shard(mlp, (4,), {"fc3": "m"}, example_args=args)
    assert e.value.loc.line == line
    with pytest.raises(PlanningError, match=r"input_layouts\[1\]: layout dims=\[\[0\]\], partial=\[\] has rank 1, "
                                            r"but argument 'w1' has rank 2 \(shape \(1024, 4096\)\)") as e:
        msir.parallel.shard(mlp, (4,), input_layouts={1: "dims=[[0]]"}, example_args=args)
    assert e.value.loc.line == line
    with pytest.raises(PlanningError, match=r"mesh axis 0 \(size 3\) splits dimension 0 \(size 1024\) of "
                                            r"argument 'w1' 3 ways") as e:
        msir.parallel.shard(mlp, (3,), input_layouts={1: "dims=[[0],[]]"}, example_args=args)
    assert e.value.loc.line == line
    plan = msir.parallel.auto_shard(mlp, (4,), args, cost_model=ONE_AXIS)
    with pytest.raises(PlanningError, match="no op named 'nope'"):
        plan.strategy_of("nope")


def test_report_has_one_row_per_op():
    plan = msir.parallel.auto_shard(mlp, (4,), (z(64, 1024), z(1024, 4096), z(4096, 1024)), cost_model=ONE_AXIS,
                                    argnums=(0, 1, 2), params=(1, 2))
    lines = str(plan).splitlines()
    assert lines[0].startswith("plan of 'mlp' on mesh (4,)")
    assert f"cost {plan.cost:.6g} s" in lines[0]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) >= {"fc1", "act", "fc2", "loss"}
    assert "64x1024, 1024x1024 -> 64x1024" in rows["fc1"]
    assert "reduce_scatter" in rows["loss"] or "all_reduce" in rows["loss"]


def test_pareto_elimination_on_a_2d_mesh_equals_brute_force():
    plan = msir.parallel.auto_shard(mlp, (2, 2), (z(64, 32), z(32, 128), z(128, 32)), cost_model=MODELS[0],
                                    argnums=(0, 1, 2), params=(1, 2))
    problem = build_problem(plan.setting, {}, {})
    least = problem.base_memory + sum(float(m.min()) for m in problem.memory)
    for fraction in (0.1, 0.6):
        limit = least + fraction * (plan.breakdown["memory_bytes"] - least)
        solution = solve(problem, limit)
        assert solution.method == "pareto elimination"
        assert plan_memory(problem, solution.choice) <= limit
        assert _cost(problem, solution.choice) == pytest.approx(min(_all_plans(problem, limit)), rel=1e-9)
