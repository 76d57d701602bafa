"""Ctrl-C stops a compiled `while` loop that never ends: SIGINT during the
native call ends the loop at its next test and Python raises
KeyboardInterrupt (`msir.lowering.interrupt`). The loops run in child
processes under a watchdog, so a failure is a failed test, never a hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import numpy as np
    import msir

    def forever(x):
        while np.sum(x) > 0.0:
            x = x + 1.0
        return x

    def spin(n):  # scalar work: the loop polls every INTERRUPT_POLL_PERIOD iterations
        while n > 0.0:
            n = n + 1.0
        return n

    def interrupted_call(jf, forever_input, ending_input):
        print("ready", flush=True)
        try:
            jf(forever_input)
            print("returned", flush=True)
        except KeyboardInterrupt as e:
            print("interrupted", time.monotonic(), repr(str(e)), flush=True)
        # the next call is not stopped by the Ctrl-C already answered
        np.testing.assert_array_equal(jf(ending_input), ending_input)

    jf, js = msir.jit(forever), msir.jit(spin)
    np.testing.assert_array_equal(jf(-np.ones(3)), -np.ones(3))  # compiled, and it ends
    assert js(-1.0) == -1.0
    interrupted_call(jf, np.ones(3), -np.ones(3))  # Python's default handler: its KeyboardInterrupt
    interrupted_call(js, 1.0, -1.0)
    if sys.argv[1] == "and-a-custom-handler":
        seen = []
        signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
        interrupted_call(jf, np.ones(3), -np.ones(3))  # the handler does not raise: msir does
        print("handler saw", seen, flush=True)
    """
)


def _interrupt(tmp_path, case: str) -> list[tuple[float, str]]:
    """Run the child; send SIGINT 0.3 s after each "ready"; the latency and
    message of each interruption."""
    script = tmp_path / "child.py"  # msir compiles source: the child's function lives in a file
    script.write_text(CHILD)
    env = dict(os.environ, MSIR_CACHE_DIR=str(tmp_path / "cache"))
    child = subprocess.Popen([sys.executable, str(script), case], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120  # the watchdog (compiling on a loaded machine is slow)
    seen: list[tuple[float, str]] = []
    try:
        while True:
            line = child.stdout.readline()
            if not line:
                break
            line = line.strip()
            if line == "ready":
                time.sleep(0.3)  # well inside the native loop
                sent = time.monotonic()
                child.send_signal(signal.SIGINT)
                answer = child.stdout.readline().strip().split(maxsplit=2)
                assert answer[0] == "interrupted", answer
                seen.append((float(answer[1]) - sent, answer[2]))
            elif line:
                seen.append((0.0, line))
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(script, 120)
        child.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("the compiled loop did not stop on SIGINT")
    assert child.returncode == 0, child.stderr.read()
    return seen


def test_sigint_stops_a_compiled_while_loop(tmp_path):
    (default, default_message), (scalar, _), (custom, message), (_, handler) = _interrupt(
        tmp_path, "and-a-custom-handler")
    # the loop answers within an iteration (or, of scalar work, 1024 of them:
    # microseconds); the bound leaves room for a loaded machine's scheduling
    assert default < 0.5 and scalar < 0.5 and custom < 0.5, (default, scalar, custom)
    assert default_message == "''"  # Python's own KeyboardInterrupt, raised by its handler
    where = f"{tmp_path / 'child.py'}:7"  # forever's while
    assert message == f"'msir.forever: interrupted in the while loop at {where}'"
    assert handler == f"handler saw [{int(signal.SIGINT)}]"


def test_sigint_stops_a_loop_loaded_from_the_compile_cache(tmp_path):
    _interrupt(tmp_path, "default")  # fills the persistent cache
    (array_loop, _), (scalar_loop, _) = _interrupt(tmp_path, "default")  # object code from the cache
    assert array_loop < 0.5 and scalar_loop < 0.5, (array_loop, scalar_loop)
