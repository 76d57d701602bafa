"""msir's thread pool when its workers are starved of cores.

Busy processes (one more than the CPUs this process may use) hog every core
while a child process runs parallel loops and matrix products with more
threads than cores,
pausing now and then so that workers fall asleep in the futex and must be
woken again. Every result must be bitwise the 1-thread result computed before
the hogs started, and the child must finish: it runs under a watchdog
(subprocess timeout), so a deadlock or a lost wake-up fails the test instead
of hanging it. The hogs are this test's own processes, killed by their pid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

WATCHDOG_S = 180
"""Far above the few seconds the child needs even on a loaded machine."""

CHILD = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import msir
    from msir.lowering import threads

    def chain(x):
        return np.tanh(0.7 * x + 0.1) * x + x * x

    def total(x):
        return np.sum(np.exp(x))

    def product(a, b):
        return a @ b  # large enough for msir's GEMM, whose first panel its tasks pack as they go

    rng = np.random.default_rng(3)
    x = rng.standard_normal(1 << 18, dtype=np.float32)
    a, b = rng.standard_normal((256, 512), dtype=np.float32), rng.standard_normal((512, 512), dtype=np.float32)
    f, g, h = msir.jit(chain), msir.jit(total), msir.jit(product)
    msir.set_num_threads(1)
    expect = (f(x).tobytes(), np.asarray(g(x)).tobytes(), h(a, b).tobytes())
    msir.set_num_threads(4)
    f(x), g(x), h(a, b)
    print("ready", flush=True)
    sys.stdin.readline()  # the hogs are running
    bad = 0
    t0 = time.perf_counter()
    for i in range(300):
        bad += f(x).tobytes() != expect[0]
        bad += np.asarray(g(x)).tobytes() != expect[1]
        if i % 3 == 0:
            bad += h(a, b).tobytes() != expect[2]
        if i % 10 == 0:
            time.sleep(0.002)  # long enough for the workers to sleep in the futex
    print("bad", bad, "workers", threads.workers_started(), time.perf_counter() - t0, flush=True)
    """
)


def test_parallel_loops_finish_and_agree_while_every_core_is_busy(tmp_path):
    script = tmp_path / "starved.py"  # msir compiles source: the child's functions live in a file
    script.write_text(CHILD)
    env = {**os.environ, "MSIR_NUM_THREADS": "4"}
    child = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    hogs: list[subprocess.Popen] = []
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        for _ in range(len(os.sched_getaffinity(0)) + 1):
            hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        try:
            out, err = child.communicate("go\n", timeout=WATCHDOG_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise AssertionError(f"parallel loops did not finish in {WATCHDOG_S} s with every core busy: "
                                 "a deadlock or a lost wake-up") from None
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    words = out.split()
    assert words[0] == "bad" and words[1] == "0", out
    assert int(words[3]) >= 1, out  # the workers took part
