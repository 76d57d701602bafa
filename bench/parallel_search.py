"""Time of the auto-parallel search (`msir.parallel.auto_shard`), split by stage:
tracing the function to its op graph, pricing the pairwise cost graph, solving.

* the attention block (q/k/v projections, scores, softmax, context, output
  projection; batch 8, sequence 512, model 1024, 16 heads) on a (2, 4) mesh;
* a 24-layer MLP stack (batch 1024, width 1024, bias and relu per layer) on (2, 4);
* the same stack under a memory limit of 0.8x what its unconstrained plan needs
  (the limit binds: the search runs Pareto elimination, or the ILP).

    python bench/parallel_search.py [--json out.json]

Targets (issue 12): attention <= 1 s, the MLP stack <= 5 s (no target for
the memory-bound case; the whole
`auto_shard` call, its first in the process: imports excluded, tracing
included). Each case is planned twice; the second call shows the cost without
the frontend's first-call work.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from msir import ops
from msir.parallel import CostModel
from msir.parallel.api import _gradient_leaves
from msir.parallel.cost_model import Setting
from msir.parallel.mesh_layout import Mesh
from msir.parallel.op_graph import build_graph
from msir.parallel.plan import Plan
from msir.parallel.search import build_problem, solve

MODEL = CostModel(alpha=[1e-5, 1e-6], bandwidth=[1e9, 1e11], flops=1e12)
MESH = Mesh((2, 4))
f32 = np.float32


def attention(x, wq, wk, wv, wo):
    q = ops.einsum("bsd,dhe->bshe", x, wq, name="q")
    k = ops.einsum("bsd,dhe->bshe", x, wk, name="k")
    v = ops.einsum("bsd,dhe->bshe", x, wv, name="v")
    s = ops.einsum("bshe,bthe->bhst", q, k, name="scores")
    p = ops.softmax(s, axis=-1, name="softmax")
    c = ops.einsum("bhst,bthe->bshe", p, v, name="context")
    o = ops.einsum("bshe,hed->bsd", c, wo, name="out")
    return ops.reduce_sum(o, name="loss")


def mlp_stack(x, layers):
    for w, b in layers:  # a loop over a tuple unrolls: 24 matmuls, bias adds and relus
        x = ops.relu(ops.add(ops.matmul(x, w), b))
    return ops.reduce_sum(x)


def cases():
    z = lambda *s: np.zeros(s, f32)  # noqa: E731
    heads = (z(1024, 16, 64), z(1024, 16, 64), z(1024, 16, 64), z(16, 64, 1024))
    layers = 24
    stack = (z(1024, 1024), tuple((z(1024, 1024), z(1024)) for _ in range(layers)))
    return [("attention (2, 4)", attention, (z(8, 512, 1024), *heads), 1.0),
            ("24-layer MLP (2, 4)", mlp_stack, stack, 5.0)]


def plan_timed(fn, args, memory_limit=None) -> tuple[Plan, dict]:
    t0 = time.perf_counter()
    graph = build_graph(fn, args)
    t1 = time.perf_counter()
    grad, params = _gradient_leaves(graph, args, None, None)
    setting = Setting(graph, MESH, MODEL, grad, params)
    problem = build_problem(setting, {}, {})
    t2 = time.perf_counter()
    solution = solve(problem, memory_limit)
    plan = Plan(setting, problem, solution)
    t3 = time.perf_counter()
    return plan, {"trace_s": t1 - t0, "price_s": t2 - t1, "solve_s": t3 - t2, "total_s": t3 - t0,
                  "variables": len(problem.variables), "method": solution.method,
                  "options": sum(len(v.options) for v in problem.variables)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the numbers to this file")
    opts = parser.parse_args()
    build_graph(attention, cases()[0][2])  # import the frontend and xDSL outside the timings
    report = {}
    runs = [(label, fn, args, target, None) for label, fn, args, target in cases()]
    stack_label, stack, stack_args, _ = cases()[1]
    free, _ = plan_timed(stack, stack_args)
    runs.append((stack_label + ", memory-bound", stack, stack_args, None, 0.8 * free.breakdown["memory_bytes"]))
    for label, fn, args, target, limit in runs:
        first_plan, first = plan_timed(fn, args, limit)
        _, second = plan_timed(fn, args, limit)
        report[label] = {"first": first, "second": second, "target_s": target, "memory_limit": limit}
        against = f"target {target:.0f} s, {first['total_s'] / target:.2f}x of it" if target else "no target"
        print(f"{label}: {first['total_s']:.3f} s ({against}): "
              f"trace {first['trace_s']:.3f} + price {first['price_s']:.3f} + solve {first['solve_s']:.3f} "
              f"({first['method']}, {first['variables']} variables, {first['options']} options); "
              f"again: {second['total_s']:.3f} s")
        print(f"  cost {first_plan.cost:.6g} s, {first_plan.breakdown['memory_bytes']:.4g} B per device; " + ", ".join(
            f"{n}: {first_plan.strategy_of(n)}" for n in list(first_plan.strategies)[:8]))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
