"""`msir.parallel`: auto-parallel planning (issue 12, `../shared/parallel.md`).

    plan = msir.parallel.auto_shard(step, (2, 4), (x, w1, w2),
                                    cost_model=msir.parallel.CostModel(alpha=[1e-5, 1e-6],
                                                                       bandwidth=[1e10, 1e11], flops=1e12))
    plan.strategy_of("fc1")   # "m,n"
    print(plan)               # one row per op: strategy, local shapes, collectives, cost

The modules, one job each: `mesh_layout` (Mesh, Layout, strategies),
`op_graph` (one node per op call, its einsum loop spec), `reshard` (§3's
collectives), `cost_model` (§4's total), `search` (the exact optimum), `plan`
(the Plan and its report), `api` (`auto_shard`, `shard`), `emulated` (a
plan's per-device function run on every device of the mesh in one process:
`plan.run(*args)`; `last_profile()`: where the latest run's time went),
`mpi_runtime` (the same, one device per MPI rank;
`get_rank()`, `get_group_size()`), `launcher` (`launch(script, n)` and
`msir-launch -n N script.py`: a script on N ranks). scipy is imported only
when a binding memory limit makes the search fall back to an ILP; mpi4py only
in a process an MPI launcher started.
"""

from msir.parallel.api import auto_shard, shard
from msir.parallel.cost_model import CostModel
from msir.parallel.emulated import RunProfile, last_profile
from msir.parallel.launcher import launch
from msir.parallel.mesh_layout import Layout, Mesh
from msir.parallel.mpi_runtime import get_group_size, get_rank
from msir.parallel.plan import Plan

__all__ = ["CostModel", "Layout", "Mesh", "Plan", "RunProfile", "auto_shard", "get_group_size", "get_rank",
           "last_profile", "launch", "shard"]
