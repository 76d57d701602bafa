"""One rank of the MPI tests' job: runs every plan of `sharded_cases` for
the job's rank count and writes this rank's results, its rank and world
size, its thread count, the profile of its data-parallel step's run,
whether that step's results are the caller's own arrays and the error of a
plan on a mesh larger than the world to `<out_dir>/rank<r>.npz` (`test_parallel_mpi.py` checks them)."""

import sys
from pathlib import Path

import numpy as np
from sharded_cases import MLP_ARGS, cases, flat, mlp

import msir
from msir.parallel import get_group_size, get_rank, last_profile, shard

out_dir = Path(sys.argv[1])
rank, size = get_rank(), get_group_size()
results, profile, owned = {}, {}, None
for name, (make, args, _) in cases(size).items():
    plan = make()
    results.update(flat(name, plan.run(*args)))
    if name == "dp_step":  # where this rank's run of the data-parallel step spent its time
        p = plan.last_profile
        assert last_profile() is p
        profile = {f"profile.{k}": getattr(p, k) for k in ("total_s", "segments_s", "collectives_s", "other_s",
                                                             "collective_calls", "collective_bytes")}
        # its results (replicated: this rank's own copies) are the caller's: no argument's, no other result's,
        # and not a later run's
        first, second = plan.run(*args), plan.run(*args)
        arrays = [*first, *second, *args]
        owned = all(not np.shares_memory(a, b) for i, a in enumerate(arrays[:8]) for b in arrays[i + 1:])
try:
    shard(mlp, 2 * size, strategies={"fc1": "n", "fc2": "k"}, example_args=MLP_ARGS, argnums=()).run(*MLP_ARGS)
    too_large = ""
except msir.errors.PlanningError as e:
    too_large = str(e)
np.savez(out_dir / f"rank{rank}.npz", rank=rank, size=size, threads=msir.get_num_threads(), too_large=too_large,
         owned=owned, **results, **profile)
