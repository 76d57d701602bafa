"""Launching a script on N MPI ranks: `msir.parallel.launch(script, n)` and
the console script `msir-launch -n N script.py [args]`.

The job is `mpiexec -n N python -m mpi4py script.py args` with the `mpiexec`
beside `sys.executable` (the one of msir's MPI extra, `pip install
'msir[mpi]'`; never the one on PATH, which may belong to another MPI).
`python -m mpi4py` makes a rank's uncaught exception abort the whole job
instead of leaving the other ranks waiting in a collective, and MPICH then
names the rank that aborted. Every launch is bounded by `timeout` seconds:
past it the job (mpiexec, its proxies and every rank) is killed and a
`LaunchError` says so. A failed job raises `LaunchError` with
the failing rank and the tail of its error output.

Each rank gets `MSIR_NUM_THREADS = max(1, cores // n)` unless the caller set
`MSIR_NUM_THREADS` or `OMP_NUM_THREADS`, so N ranks on one host do not
oversubscribe its cores, and `UCX_TLS=self,sm` (unless set) so that MPICH
keeps the ranks' messages in shared memory.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from msir.errors import LaunchError

DEFAULT_TIMEOUT = 3600.0  # seconds; a bound on every launch, never unbounded
_ERROR_LINES = 40  # lines of the job's error output a LaunchError shows
_KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL of a timed-out job


def mpiexec() -> str:
    """The `mpiexec` installed beside this Python (msir's MPI extra)."""
    path = Path(sys.executable).parent / "mpiexec"
    if not path.is_file():
        raise LaunchError(f"no mpiexec beside {sys.executable}: install msir's MPI extra (pip install 'msir[mpi]', "
                          f"which brings mpi4py and MPICH)")
    return str(path)


def rank_environment(n: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of each of `n` local ranks: `base` (default: this
    process's) with the thread count and MPICH's transport defaulted."""
    from msir.parallel.mpi_runtime import local_threads

    env = dict(os.environ if base is None else base)
    if not env.get("MSIR_NUM_THREADS") and not env.get("OMP_NUM_THREADS"):
        env["MSIR_NUM_THREADS"] = str(local_threads(n))
    env.setdefault("UCX_TLS", "self,sm")
    return env


def command(script: str | os.PathLike, n: int, args: Sequence[str] = ()) -> list[str]:
    """The command line of the job."""
    return [mpiexec(), "-n", str(n), sys.executable, "-m", "mpi4py", os.fspath(script), *map(str, args)]


def launch(script: str | os.PathLike, n: int, args: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT,
           env: Mapping[str, str] | None = None, capture: bool = True) -> subprocess.CompletedProcess:
    """Run `script` (with `args`) on `n` MPI ranks and wait for it, at most
    `timeout` seconds. Returns the finished job (its `stdout`/`stderr` as
    text when `capture`; otherwise they go to this process's). Raises
    `LaunchError` if a rank fails or the timeout passes."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise LaunchError(f"the number of ranks must be a positive integer, got {n!r}")
    if not timeout or timeout <= 0:
        raise LaunchError(f"timeout must be a positive number of seconds, got {timeout!r}: every launch is bounded")
    if not Path(script).is_file():
        raise LaunchError(f"no script {os.fspath(script)!r} to launch")
    cmd = command(script, n, args)
    pipe = subprocess.PIPE if capture else None
    # its own session: a Ctrl-C meant for this process does not reach the job before `_kill` ends it
    proc = subprocess.Popen(cmd, stdout=pipe, stderr=pipe, text=True, env=rank_environment(n, env),
                            start_new_session=True)
    try:
        out, err, ranks = _wait(proc, n, timeout)
    except subprocess.TimeoutExpired:
        out, err = _kill(proc)
        raise LaunchError(f"{os.fspath(script)} on {n} ranks ran past its timeout of {timeout:g} s: the job was "
                          f"killed{_tail(err)}") from None
    except BaseException:  # Ctrl-C or the like: never leave ranks running
        _kill(proc)
        raise
    if proc.returncode != 0:
        raise LaunchError(f"{os.fspath(script)} on {n} ranks failed: {_who(out, err, ranks)} (exit status "
                          f"{proc.returncode}){_tail(err)}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _wait(proc: subprocess.Popen, n: int, timeout: float) -> tuple[str | None, str | None, dict[int, int]]:
    """The job's output once it ends, and the pid -> rank map of its `n`
    ranks, learnt while it runs (MPICH names a rank that died by its pid).
    Raises `subprocess.TimeoutExpired` after `timeout` seconds."""
    ranks: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    poll = 0.05
    while True:
        try:
            out, err = proc.communicate(timeout=max(0.0, min(poll, deadline - time.monotonic())))
            return out, err, ranks
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
            if len(ranks) < n:
                ranks.update(_rank_pids(proc.pid))
            poll = min(2 * poll, 1.0)


def _descendants(root: int) -> list[int]:
    """The processes below `root` (Linux's /proc; empty elsewhere). Hydra's
    proxies and the ranks each start their own session, so the job is a
    process tree, not a process group."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _rank_pids(root: int) -> dict[int, int]:
    """pid -> MPI rank of the ranks below `root`."""
    found = {}
    for pid in _descendants(root):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        rank = next((v[len(b"PMI_RANK="):] for v in environ if v.startswith(b"PMI_RANK=")), None)
        if rank is not None and rank.isdigit():
            found[pid] = int(rank)
    return found


def _kill(proc: subprocess.Popen) -> tuple[str | None, str | None]:
    """End the job: SIGTERM to mpiexec, which stops its ranks; after a grace
    period SIGKILL to every process of the job's tree; what it printed."""
    tree = _descendants(proc.pid)
    proc.terminate()
    try:
        return proc.communicate(timeout=_KILL_GRACE)
    except subprocess.TimeoutExpired:
        pass
    for pid in [proc.pid, *tree]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.communicate()


def _who(out: str | None, err: str | None, ranks: dict[int, int]) -> str:
    """Which ranks failed and how: those that aborted on an error, as MPICH
    reports them on stderr, else those that died, as it reports them (by pid)
    on stdout."""
    aborted = sorted({int(m) for m in re.findall(r"rank (\d+) in comm 0", err or "")})
    if aborted:
        return f"rank {aborted[0]} failed" if len(aborted) == 1 else f"ranks {', '.join(map(str, aborted))} failed"
    died = re.findall(r"PID (\d+) RUNNING AT", out or "")
    if not died:
        return "a rank failed"
    how = re.search(r"EXIT STRING: ([^\n]*)", out or "")
    names = [f"rank {ranks[int(pid)]} (pid {pid})" if int(pid) in ranks else f"the rank of pid {pid}" for pid in died]
    return f"{', '.join(names)} died" + (f": {how[1].strip()}" if how else "")


def _tail(err: str | None) -> str:
    lines = (err or "").rstrip().splitlines()[-_ERROR_LINES:]
    return ":\n" + "\n".join(lines) if lines else ""


def main(argv: Sequence[str] | None = None) -> int:
    """`msir-launch -n N [--timeout S] script.py [args...]`."""
    parser = argparse.ArgumentParser(prog="msir-launch", description="Run a Python script on N MPI ranks "
                                     "(the mpiexec of msir's MPI extra); one failing rank ends the job.")
    parser.add_argument("-n", "--np", dest="n", type=int, required=True, help="the number of ranks")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds before the whole job is killed (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    try:
        launch(options.script, options.n, options.args, timeout=options.timeout, capture=False)
    except LaunchError as e:
        print(f"msir-launch: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
