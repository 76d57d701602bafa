"""Launching a script on N MPI ranks: `msir.parallel.launch(script, n)` and
the console script `msir-launch -n N script.py [args]`.

The job is `mpiexec -n N python -m mpi4py script.py args` with the `mpiexec`
beside `sys.executable` (the one of msir's MPI extra, `pip install
'msir[mpi]'`; never the one on PATH, which may belong to another MPI).
`python -m mpi4py` makes a rank's uncaught exception abort the whole job
instead of leaving the other ranks waiting in a collective, and MPICH then
names the rank that aborted. Every launch is bounded by `timeout` seconds:
past it the job's process group (mpiexec, its proxies and every rank) is
killed and a `LaunchError` says so. A failed job raises `LaunchError` with
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
    # its own session, so that a timeout can kill the whole job: mpiexec, its proxies and every rank
    proc = subprocess.Popen(cmd, stdout=pipe, stderr=pipe, text=True, env=rank_environment(n, env),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = _kill(proc)
        raise LaunchError(f"{os.fspath(script)} on {n} ranks ran past its timeout of {timeout:g} s: the job was "
                          f"killed{_tail(err)}") from None
    except BaseException:  # Ctrl-C or the like: never leave ranks running
        _kill(proc)
        raise
    if proc.returncode != 0:
        raise LaunchError(f"{os.fspath(script)} on {n} ranks failed: {_who(err)} (exit status "
                          f"{proc.returncode}){_tail(err)}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill(proc: subprocess.Popen) -> tuple[str | None, str | None]:
    """Kill the job's process group, politely first; what it printed."""
    for sig, wait in ((signal.SIGTERM, _KILL_GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.communicate()


def _who(err: str | None) -> str:
    """Which rank failed, as MPICH reports it."""
    ranks = sorted({int(m) for m in re.findall(r"rank (\d+) in comm 0", err or "")}
                   | {int(m) for m in re.findall(r"RANK (\d+) PID \d+ RUNNING AT", err or "")})
    if not ranks:
        return "a rank failed"
    return f"rank {ranks[0]} failed" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))} failed"


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
