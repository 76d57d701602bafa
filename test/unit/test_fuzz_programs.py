"""The CI run of the generated-program fuzzer (`test/fuzz/programs.py`):
hypothesis draws small NumPy programs (derandomized, so every run draws the
same ones, in a bounded number), and each runs in the fuzzer's worker
subprocess through `msir.jit` in GRAPH and PYNATIVE mode and `msir.grad`,
against NumPy and finite differences. No trial may be wrong, internal, a
crash or a hang; hypothesis shrinks a failing program before reporting it.
The long run is `python test/fuzz/programs.py --trials 2000 --seed 0`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings

_spec = importlib.util.spec_from_file_location(
    "fuzz_programs", Path(__file__).resolve().parents[1] / "fuzz" / "programs.py")
programs = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = programs  # its dataclasses look their module up
_spec.loader.exec_module(programs)


@pytest.fixture(scope="module")
def worker():
    w = programs.Worker(timeout=120.0)
    yield w
    w.close()


@settings(derandomize=True, max_examples=80, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(program=programs.hypothesis_programs())
def test_generated_programs_match_numpy_and_finite_differences(worker, program):
    outcome = worker.run(program)
    event(outcome.kind)  # pytest --hypothesis-show-statistics counts the classes
    assert outcome.kind not in programs.FAILURES, f"{outcome.kind}: {outcome.detail}\n{program.source}"


def _program(body: str, *args) -> programs.Program:
    return programs.Program(f"import os\nimport signal\nimport numpy as np\n\n\ndef f(x):\n{body}\n",
                            [programs.Arg("x", "float64", [3], 7), *args])


def test_the_harness_classifies_a_crash_a_hang_and_a_rejection():
    with_short_timeout = programs.Worker(timeout=10.0)
    try:
        assert with_short_timeout.run(_program("    os.kill(os.getpid(), signal.SIGSEGV)")).kind == "crash"
        assert with_short_timeout.run(_program("    while True:\n        pass")).kind == "hang"
        assert with_short_timeout.run(_program("    return np.sum(np.sin(x))")).kind == "ok"  # restarted
        rejected = with_short_timeout.run(_program("    try:\n        return x\n    except ValueError:\n        return x"))
        assert rejected.kind == "rejected" and "try" in rejected.detail
    finally:
        with_short_timeout.close()


def test_the_comparison_sees_dtype_shape_value_and_nan_differences():
    import numpy as np

    compare = programs._compare
    assert compare("r", np.float64(1.0), np.float64(1.0 + 1e-12)) is None
    assert "dtype" in compare("r", np.float32(1.0), np.float64(1.0))
    assert "shape" in compare("r", np.zeros((1, 3)), np.zeros(3))
    assert "values" in compare("r", np.array([1.0, 2.0]), np.array([1.0, 2.001]))
    assert "NaN" in compare("r", np.array([0.0]), np.array([np.nan]))
    assert "values" in compare("r", np.array([1, 2]), np.array([1, 3]))
    assert compare("r", np.float32(1.0), np.float32(1.0 + 1e-5)) is None
