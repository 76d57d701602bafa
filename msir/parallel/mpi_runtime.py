"""MPI ranks: a sharded function run one device per process
(`../shared/parallel.md` §7), and the rank/world queries a script asks.

`get_rank()` / `get_group_size()` are this process's rank and the number of
ranks of the job: 0 / 1 unless the process was started by an MPI launcher
(`mpiexec`, `msir-launch`), which is read from the launcher's environment, so
a script that is not launched never imports mpi4py.

`program_for(module, entry, loc)` is what `Plan.run` executes, chosen by the
world: on one process, every device of the mesh emulated in-process
(`msir.parallel.emulated`); under N > 1 ranks, `MpiProgram`, in which rank r
is device r of the mesh (row-major) and runs only its own part. A mesh
larger than the world is an error; on a smaller mesh the first `mesh.size`
ranks are the devices and the other ranks receive the results. So the same
script runs unchanged on 1 process, emulated devices, or N ranks.

`MpiProgram` runs the same segments as the emulated runtime (the class
extends it), on one device's values, and each collective through mpi4py on
the communicator of its mesh axis (the ranks that differ only in that axis'
coordinate, ordered by it): all_reduce is `Allreduce` (sum or max),
reduce_scatter `Reduce_scatter_block`, all_gather `Allgather`, all_to_all
`Alltoall`; all_slice is local. Every rank holds the global arguments (the
script computes them, as on one process) and takes its own block; every rank
returns the global results: a split result assembled from the devices'
pieces with one `Allgather`, a replicated one (which every device holds
whole, equal on all: a sum is all-reduced to every rank alike) from this
rank's own copy, without communication. Sums over two ranks are the
emulated runtime's bit for bit; over more, MPI's reduction order may round
differently in the last bit.

Each run's `last_profile` (`msir.parallel.emulated.RunProfile`) is this
rank's: `segments_s` its native segments, `collectives_s` the program's
collectives through MPI, including the time this rank waits in them for the
others (so a slower rank shows up as a larger collective share on the
faster ones), `other_s` the rest (its blocks of the arguments, the results'
`Allgather`s, the broadcast to ranks beyond the mesh).

Under N > 1 ranks, an uncaught exception on one rank aborts the whole job
(never a hang), also under a bare `mpiexec python script.py`.

Each rank's thread count defaults to max(1, cores // ranks on this host):
`msir-launch` sets `MSIR_NUM_THREADS` so; under a bare `mpiexec`, the first
question to the world (`get_rank()`, `get_group_size()`, `Plan.run`) sets it
from the launcher's count of local ranks, unless `MSIR_NUM_THREADS` or
`OMP_NUM_THREADS` is set. So ranks do not oversubscribe the machine.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from msir.errors import MsirError, PlanningError, SourceLoc
from msir.parallel.emulated import EmulatedProgram, RunProfile, _record, _Segment

# The environment variables MPI launchers give each rank: its rank, the world
# size, the ranks on this host (MPICH's hydra, Open MPI, PMIx launchers)
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")

_world: dict = {}


def launched() -> bool:
    """Whether an MPI launcher started this process."""
    return any(v in os.environ for v in _RANK_VARS + _SIZE_VARS)


def world():
    """mpi4py's `COMM_WORLD` (MPI initialised on first use), or None when not launched."""
    if not launched():
        return None
    if "comm" not in _world:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise MsirError(f"this process was started by an MPI launcher, but mpi4py cannot be imported ({e}); "
                            f"install msir's MPI extra: pip install 'msir[mpi]'") from None
        _world["comm"] = MPI.COMM_WORLD
        _default_threads()
        if MPI.COMM_WORLD.Get_size() > 1:
            _abort_on_uncaught_exception(MPI.COMM_WORLD)
    return _world["comm"]


def _abort_on_uncaught_exception(comm) -> None:
    """Make an error that ends this rank end the job: the other ranks would
    otherwise wait for it in their next collective forever. (`python -m
    mpi4py`, which `msir-launch` runs, does the same; this covers a bare
    `mpiexec python script.py`.)"""
    previous = sys.excepthook

    def abort(kind, value, traceback):
        previous(kind, value, traceback)
        sys.stderr.flush()
        comm.Abort(1)

    sys.excepthook = abort


def get_rank() -> int:
    """This process's rank in the MPI job: 0 when not launched."""
    comm = world()
    return 0 if comm is None else comm.Get_rank()


def get_group_size() -> int:
    """The number of ranks of the MPI job: 1 when not launched."""
    comm = world()
    return 1 if comm is None else comm.Get_size()


def local_threads(local_ranks: int) -> int:
    """The threads each of `local_ranks` ranks on this host gets: max(1, cores // local_ranks)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, local_ranks))


def _default_threads() -> None:
    if os.environ.get("MSIR_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS"):
        return
    local = next((os.environ[v] for v in _LOCAL_SIZE_VARS if v in os.environ), None)
    if local is not None and local.isdigit():
        from msir.lowering import threads

        threads.set_num_threads(local_threads(int(local)))


def program_for(module, entry: str, loc: SourceLoc | None = None) -> EmulatedProgram:
    """The runtime of a per-device module in this process's world: emulated
    devices on one process, one device per rank under MPI."""
    comm = world()
    if comm is None or comm.Get_size() == 1:
        return EmulatedProgram(module, entry)
    return MpiProgram(module, entry, comm, loc)


class MpiProgram(EmulatedProgram):
    """A per-device function compiled once per rank; this rank runs its device."""

    def __init__(self, module, entry: str, comm, loc: SourceLoc | None = None):
        super().__init__(module, entry)
        size = math.prod(self.mesh.shape)
        if size > comm.Get_size():
            raise PlanningError(f"the mesh {self.mesh.shape} has {size} devices, more than the "
                                f"{comm.Get_size()} ranks of the MPI job: launch {size} ranks "
                                f"(msir-launch -n {size}) or plan on a mesh of at most {comm.Get_size()} "
                                f"devices", loc)
        self.world = comm
        self.mesh_size = size
        # the values a segment computes afresh on every run: returned as they are, the others copied
        self._fresh = {v for s in self.steps if isinstance(s, _Segment) for v in s.outputs}
        rank = comm.Get_rank()
        # device r of the mesh is rank r; the ranks beyond the mesh take no part in its collectives
        self.comm = comm.Split(0 if rank < size else _undefined(), rank)
        self.coord = self.devices[rank] if rank < size else None
        self.axis_comms = []
        if self.coord is not None:
            for axis in range(len(self.mesh.shape)):
                # the devices that differ from this one only along `axis`, ordered by their coordinate on it
                others = self.coord[:axis] + self.coord[axis + 1:]
                rest = self.mesh.shape[:axis] + self.mesh.shape[axis + 1:]
                color = int(np.ravel_multi_index(others, rest)) if others else 0
                self.axis_comms.append(self.comm.Split(color, self.coord[axis]))

    def run(self, *global_args) -> list[np.ndarray]:
        start = time.perf_counter()
        profile = RunProfile()
        args = self.global_arrays(global_args)
        results = None
        if self.coord is not None:
            env = self.local_arguments(args, self.coord)
            for step in self.steps:
                t = time.perf_counter()
                if isinstance(step, _Segment):
                    self.run_segment(step, env)
                    profile.segments_s += time.perf_counter() - t
                else:
                    profile.collective_bytes += self._mpi_collective(step, env)
                    profile.collectives_s += time.perf_counter() - t
                    profile.collective_calls += 1
            results, returned = [], set()
            for v, layout in zip(self.returned, self.result_layouts):
                if any(layout.dims):
                    results.append(self._assemble(self._gather(env[v]), layout, v))
                else:  # replicated: this rank's copy is the global value (copied unless a segment made it)
                    results.append(env[v] if v in self._fresh and v not in returned else np.array(env[v]))
                returned.add(v)
        if self.mesh_size < self.world.Get_size():
            results = self.world.bcast(results, root=0)
        profile.total_s = time.perf_counter() - start
        self.last_profile = profile
        _record(profile)
        return results

    def _gather(self, piece: np.ndarray) -> list[np.ndarray]:
        """Every device's piece of a result, in device order."""
        piece = _contiguous(piece)
        pieces = np.empty((self.comm.Get_size(), *piece.shape), piece.dtype)
        self.comm.Allgather(piece, pieces)
        return list(pieces)

    def _mpi_collective(self, op, env: dict) -> int:
        """Collective `op` through MPI on this rank's values `env`; returns its input's bytes."""
        from mpi4py import MPI

        import msir.dialects.msir_shard as S

        comm = self.axis_comms[op.axis.value.data]
        n = comm.Get_size()
        x = _contiguous(env[op.input])
        if isinstance(op, S.AllReduceOp):
            out = np.empty_like(x)
            comm.Allreduce(x, out, op=MPI.SUM if op.kind.data == "sum" else MPI.MAX)
        elif isinstance(op, S.ReduceScatterOp):
            dim = op.dim.value.data
            # MPI scatters blocks of the leading dimension: move `dim` there and back
            front = np.ascontiguousarray(np.moveaxis(x, dim, 0))
            block = np.empty((front.shape[0] // n, *front.shape[1:]), x.dtype)
            comm.Reduce_scatter_block(front, block, op=MPI.SUM)
            out = np.ascontiguousarray(np.moveaxis(block, 0, dim))
        elif isinstance(op, S.AllGatherOp):
            pieces = np.empty((n, *x.shape), x.dtype)
            comm.Allgather(x, pieces)
            out = np.concatenate(pieces, axis=op.dim.value.data)
        elif isinstance(op, S.AllSliceOp):
            out = np.ascontiguousarray(np.split(x, n, axis=op.dim.value.data)[comm.Get_rank()])
        else:  # all_to_all: chunk q along to_dim goes to rank q; the received chunks join along dim
            send = np.stack(np.split(x, n, axis=op.to_dim.value.data))
            received = np.empty_like(send)
            comm.Alltoall(send, received)
            out = np.concatenate(received, axis=op.dim.value.data)
        env[op.result] = out
        return x.nbytes


def _contiguous(x) -> np.ndarray:
    """`x` as a C-contiguous array, a rank-0 value staying rank 0 (`np.ascontiguousarray` makes it rank 1)."""
    return np.require(x, requirements="C")


def _undefined() -> int:
    from mpi4py import MPI

    return MPI.UNDEFINED
