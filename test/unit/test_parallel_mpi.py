"""Plans on MPI ranks (`msir.parallel.mpi_runtime`) and the launcher
(`msir.parallel.launch`, `msir-launch`).

One job of 2 ranks and one of 4 run every plan of `mpi_ranks/sharded_cases.py`
(tiny shapes, every collective, and training steps calling
`msir.value_and_grad`): sharded equals unsharded, forward and gradient,
float32 against a float64 reference with |a - b| <= 1e-5 |b| + 1e-5 max|b|;
every rank returns the same global results, and they are the emulated
runtime's (bit for bit where every sum is over at most two ranks). A rank raising an error ends
the job with that error, a killed rank ends it naming the rank, and a hung
job is killed, every rank with it, at its timeout. The MPI tests
skip, with the reason, only where mpi4py or the mpiexec beside this Python
(msir's `mpi` extra, part of the `test` extra) is missing.
"""

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from mpi_ranks.sharded_cases import cases, flat

from msir.errors import LaunchError
from msir.parallel import get_group_size, get_rank, launch
from msir.parallel.mpi_runtime import local_threads

RANK_SCRIPT = Path(__file__).parent / "mpi_ranks" / "run_plans.py"
MPIEXEC = Path(sys.executable).parent / "mpiexec"

# the collective each case exists to exercise, as it reads in the per-device IR
COLLECTIVE = {"megatron": "msir_shard.all_reduce", "softmax": 'kind "max"',
              "reduce_scatter": "msir_shard.reduce_scatter", "all_to_all": "msir_shard.all_to_all",
              "all_gather": "msir_shard.all_gather", "smaller_mesh": "msir_shard.all_reduce",
              "dp_step": "msir_shard.all_reduce", "megatron_step": "msir_shard.all_reduce",
              "auto_step": "msir_shard.all_reduce"}


def _missing_mpi() -> str | None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install -e '.[mpi]')"
    if not MPIEXEC.is_file():
        return f"no mpiexec beside {sys.executable} (the mpich wheel: pip install -e '.[mpi]')"
    return None


needs_mpi = pytest.mark.skipif(_missing_mpi() is not None, reason=str(_missing_mpi()))


def _default_env() -> dict:
    """This process's environment without a thread count, so that the launcher's default applies."""
    return {k: v for k, v in os.environ.items() if k not in ("MSIR_NUM_THREADS", "OMP_NUM_THREADS")}


@pytest.fixture(scope="module", params=[2, 4], ids=["2 ranks", "4 ranks"])
def job(request, tmp_path_factory):
    """(ranks, the cases with their emulated results, each rank's results)."""
    n = request.param
    # emulated first: the ranks then find the segments in the session's compile cache
    emulated = {name: (make(), args, reference) for name, (make, args, reference) in cases(n).items()}
    emulated = {name: (plan, plan.run(*args), reference) for name, (plan, args, reference) in emulated.items()}
    out = tmp_path_factory.mktemp(f"mpi{n}")
    launch(RANK_SCRIPT, n, [str(out)], timeout=240, env=_default_env())
    ranks = [dict(np.load(out / f"rank{r}.npz")) for r in range(n)]
    return n, emulated, ranks


@needs_mpi
def test_sharded_equals_unsharded(job):
    n, emulated, ranks = job
    for name, (plan, want_emulated, reference) in emulated.items():
        assert COLLECTIVE[name] in plan.device_ir, name
        exact = _widest_sum(plan) <= 2  # MPI may sum more ranks in another order, rounding the last bit otherwise
        want_emulated = flat(name, want_emulated)
        for key, want in flat(name, reference).items():
            got = ranks[0][key]
            assert got.shape == want.shape and got.dtype == np.float32, key
            bound = 1e-5 * np.abs(want) + 1e-5 * np.abs(want).max()
            assert np.all(np.abs(got - want) <= bound), (key, np.abs(got - want).max())
            for r, other in enumerate(ranks[1:], 1):
                assert np.array_equal(other[key], got), f"{key}: rank {r} differs from rank 0"
            if exact:
                assert np.array_equal(got, want_emulated[key]), key
            else:
                scale = np.abs(want_emulated[key]).max()
                np.testing.assert_allclose(got, want_emulated[key], rtol=1e-6, atol=1e-6 * scale)


@needs_mpi
def test_each_rank_profiles_its_run(job):
    """Each rank's `plan.last_profile` of the data-parallel step: its parts non-negative and at most its total,
    the program's collectives counted as the emulated runtime counts them (one device's bytes)."""
    n, emulated, ranks = job
    want = emulated["dp_step"][0].last_profile
    for r in ranks:
        total, segments, collectives = (float(r[f"profile.{k}"]) for k in ("total_s", "segments_s", "collectives_s"))
        assert segments > 0 and collectives > 0 and float(r["profile.other_s"]) >= 0
        assert segments + collectives <= total
        assert int(r["profile.collective_calls"]) == want.collective_calls > 0
        assert int(r["profile.collective_bytes"]) == want.collective_bytes > 0
        assert bool(r["owned"])  # its results share no memory with its arguments, each other, or a later run's


def _widest_sum(plan) -> int:
    """The most devices one all_reduce or reduce_scatter of the plan's per-device step sums over."""
    import msir.dialects.msir_shard as S

    sums = [op for op in plan.device_module.walk() if isinstance(op, (S.AllReduceOp, S.ReduceScatterOp))
            and not (isinstance(op, S.AllReduceOp) and op.kind.data == "max")]
    return max((plan.mesh.shape[op.axis.value.data] for op in sums), default=1)


def test_auto_planned_steps_split_their_work():
    """The auto_step case exercises a plan the search made: its constants make it split every op's work."""
    for n in (2, 4):
        make, _, _ = cases(n)["auto_step"]
        plan = make()
        assert all("-" not in plan.strategy_of(name) for name in ("fc1", "fc2")), plan


@needs_mpi
def test_ranks_know_their_place_and_threads(job):
    n, _, ranks = job
    assert [int(r["rank"]) for r in ranks] == list(range(n))
    assert {int(r["size"]) for r in ranks} == {n}
    assert {int(r["threads"]) for r in ranks} == {local_threads(n)}  # max(1, cores // n)


@needs_mpi
def test_mesh_larger_than_the_world_is_an_error(job):
    n, _, ranks = job
    message = str(ranks[0]["too_large"])
    assert f"the mesh ({2 * n},) has {2 * n} devices, more than the {n} ranks of the MPI job" in message
    assert f"msir-launch -n {2 * n}" in message
    assert "sharded_cases.py:" in message and "def mlp(x, w1, b1, w2, b2):" in message  # the user's source


def test_one_process_is_rank_0_of_1_without_mpi4py():
    code = "import sys, msir.parallel as p; print(p.get_rank(), p.get_group_size(), 'mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["0", "1", "False"]
    assert (get_rank(), get_group_size()) == (0, 1)


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return path


@needs_mpi
def test_a_failing_rank_ends_the_job_with_its_error(tmp_path):
    script = _script(tmp_path, """
        from mpi4py import MPI
        from msir import ops
        from msir.parallel import get_rank, shard
        import numpy as np

        def head(x, w):
            return ops.matmul(x, w, name="mm")

        if get_rank() == 1:  # 5 rows cannot be split 2 ways
            x, w = np.ones((5, 4), np.float32), np.ones((4, 3), np.float32)
            shard(head, 2, strategies={"mm": "m"}, example_args=[x, w], argnums=())
        MPI.COMM_WORLD.Barrier()  # rank 0 waits here for a rank that never comes
    """)
    start = time.monotonic()
    with pytest.raises(LaunchError) as e:
        launch(script, 2, timeout=120)
    assert time.monotonic() - start < 60  # aborted, not timed out
    message = str(e.value)
    assert "job.py on 2 ranks failed: rank 1 failed" in message
    assert "PlanningError" in message and "splits loop m" in message and "which does not divide it" in message


@needs_mpi
def test_a_killed_rank_ends_the_job_naming_it(tmp_path):
    script = _script(tmp_path, """
        import os, signal, time
        from mpi4py import MPI
        if MPI.COMM_WORLD.Get_rank() == 1:
            time.sleep(1)  # MPICH reports a dead rank by its pid: give the launcher time to learn it
            os.kill(os.getpid(), signal.SIGKILL)
        MPI.COMM_WORLD.Barrier()
    """)
    start = time.monotonic()
    with pytest.raises(LaunchError, match=r"job\.py on 2 ranks failed: rank 1 \(pid \d+\) died: Killed \(signal 9\)"):
        launch(script, 2, timeout=120)
    assert time.monotonic() - start < 60


@needs_mpi
def test_a_hung_job_is_killed_at_its_timeout(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    script = _script(tmp_path, f"""
        import os, time
        from mpi4py import MPI
        open(os.path.join({str(pids)!r}, str(os.getpid())), "w").close()
        MPI.COMM_WORLD.Barrier()
        time.sleep(600)
    """)
    start = time.monotonic()
    with pytest.raises(LaunchError, match=r"job\.py on 2 ranks ran past its timeout of 4 s: the job was killed"):
        launch(script, 2, timeout=4)
    assert time.monotonic() - start < 30
    ranks = [int(p.name) for p in pids.iterdir()]
    assert len(ranks) == 2
    for pid in ranks:
        assert not _alive(pid), f"rank process {pid} survived the timeout"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@needs_mpi
def test_msir_launch_runs_a_script_on_n_ranks(tmp_path):
    script = _script(tmp_path, f"""
        import os, sys
        from msir.parallel import get_group_size, get_rank
        with open(os.path.join({str(tmp_path)!r}, f"rank{{get_rank()}}"), "w") as f:
            f.write(f"{{get_rank()}} {{get_group_size()}} {{sys.argv[1:]}}")
        if get_rank() == 0:  # the ranks' output interleaves: one rank speaks
            print("ranks", get_group_size())
    """)
    cli = Path(sys.executable).parent / "msir-launch"
    out = subprocess.run([str(cli), "-n", "2", "--timeout", "60", str(script), "a", "-b"], capture_output=True,
                         text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ranks 2\n"
    assert [(tmp_path / f"rank{r}").read_text() for r in range(2)] == ["0 2 ['a', '-b']", "1 2 ['a', '-b']"]


@pytest.mark.parametrize("n, script, timeout, message", [
    (0, "job.py", 10, "the number of ranks must be a positive integer, got 0"),
    (2, "no-such-script.py", 10, "no script 'no-such-script.py' to launch"),
    (2, "job.py", 0, "timeout must be a positive number of seconds, got 0: every launch is bounded"),
])
def test_launch_refuses_bad_arguments(tmp_path, monkeypatch, n, script, timeout, message):
    _script(tmp_path, "print('never run')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LaunchError, match=re.escape(message)):
        launch(script, n, timeout=timeout)


@needs_mpi
def test_a_bare_mpiexec_divides_the_cores_among_the_ranks(tmp_path):
    script = _script(tmp_path, """
        import msir
        from msir.parallel import get_rank
        if get_rank() == 0:
            print(msir.get_num_threads())
    """)
    out = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, "-m", "mpi4py", str(script)], capture_output=True,
                         text=True, timeout=90, env=_default_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(local_threads(2))]


@needs_mpi
def test_under_a_bare_mpiexec_a_failing_rank_aborts_the_job(tmp_path):
    script = _script(tmp_path, """
        from mpi4py import MPI
        from msir.parallel import get_rank
        if get_rank() == 1:
            raise RuntimeError("rank 1 has no data")
        MPI.COMM_WORLD.Barrier()  # rank 0 would wait here forever
    """)
    start = time.monotonic()
    out = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, str(script)], capture_output=True, text=True,
                         timeout=90)
    assert time.monotonic() - start < 60
    assert out.returncode != 0
    assert "RuntimeError: rank 1 has no data" in out.stderr


@needs_mpi
def test_msir_launch_fails_when_a_rank_fails(tmp_path):
    script = _script(tmp_path, """
        from mpi4py import MPI
        if MPI.COMM_WORLD.Get_rank() == 1:
            raise RuntimeError("rank 1 has no data")
        MPI.COMM_WORLD.Barrier()
    """)
    cli = Path(sys.executable).parent / "msir-launch"
    out = subprocess.run([str(cli), "-n", "2", "--timeout", "60", str(script)], capture_output=True, text=True,
                         timeout=90)
    assert out.returncode == 1
    assert "RuntimeError: rank 1 has no data" in out.stderr  # the rank's own output, passed through
    assert f"msir-launch: error: {script} on 2 ranks failed" in out.stderr
