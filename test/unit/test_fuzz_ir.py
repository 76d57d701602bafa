"""CI's share of the IR fuzzer (`test/fuzz/ir_mutants.py`): mutated lit inputs
through `msir-opt` end as IR or as one located error — never an internal
error, a verifier failure after a pass, or a hang. Fixed seeds; the budget is
a number of trials and a time cap (the trials are deterministic by index, so a
failure names the one to replay: `python test/fuzz/ir_mutants.py --replay S:I`)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[1] / "fuzz" / "ir_mutants.py"
TRIALS = 80
"""Trials per seed in CI (about 15 s on 2 cores); the long run is
`python test/fuzz/ir_mutants.py --trials 10000 --seed S`."""


def _fuzzer():
    spec = importlib.util.spec_from_file_location("ir_mutants", FUZZ)
    module = importlib.util.module_from_spec(spec)
    sys.modules["ir_mutants"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", [0, 1])
def test_mutated_ir_never_fails_inside(seed):
    fuzz = _fuzzer()
    corpus, ops, pipes = fuzz.seeds(), fuzz._op_names(), fuzz.pipelines()
    deadline = time.monotonic() + 45.0  # a guard for a slow machine: the budget is the trials
    failures, counts = [], {}
    for i in range(TRIALS):
        if time.monotonic() > deadline:
            break
        name, text, pipe = fuzz.make_trial(seed, i, corpus, ops, pipes)
        outcome = fuzz.trial(text, pipe, timeout=20.0)
        counts[outcome.kind] = counts.get(outcome.kind, 0) + 1
        if outcome.kind in ("internal", "hang"):
            failures.append(f"--replay {seed}:{i} [{name} | -p {pipe}]: {outcome.kind} {outcome.detail}")
    assert sum(counts.values()) >= TRIALS // 2, counts  # the budget ran trials, not only setup
    assert not failures, "\n".join(failures)
