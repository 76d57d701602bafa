"""Mutated IR through `msir-opt`: every trial must end in printed IR or in one
located error line, never an internal traceback, a verifier failure after a
pass, or a hang.

Seeds are the IR inputs of the lit tests (`test/filecheck/**/*.mlir`, their
comment lines dropped). A trial applies one to three mutations to a seed —
drop, duplicate or swap a line, rename an SSA value to another, change an
element type, a dimension (to another size, to `?`, to 0) or an integer, swap
an op name for another op of the dialect, cut the text at a random point, drop
a character — and runs `msir-opt` in this process on it, once without passes
(the input is valid or rejected) and, if valid, with a pipeline drawn from the
registry (a single pass, or the CPU pipeline's passes in order).

Each trial is classified:

* `ok`: the output is IR;
* `rejected`: exit status 1 with an `error:` line on stderr and no traceback;
* `internal`: an exception escaped `msir-opt`'s `main`, a traceback or
  "internal error" was printed, or a valid input failed the verifier after a
  pass (a pass produced invalid IR);
* `hang`: a trial took longer than `timeout` seconds (SIGALRM).

    python test/fuzz/ir_mutants.py --trials 10000 --seed 0   # the long run
    python test/fuzz/ir_mutants.py --replay 0:1234           # one trial, printed

The CI run is `test/unit/test_fuzz_ir.py` (fixed seeds, a bounded number).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import signal
import sys
import tempfile
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEED_DIR = ROOT / "test" / "filecheck"

_SSA = re.compile(r"%[A-Za-z0-9_]+")
_TYPE = re.compile(r"\b(f16|f32|f64|i1|i32|i64)\b")
_DIMS = re.compile(r"tensor<((?:\?|\d+)x)+")
_INT = re.compile(r"(?<![%@\w])-?\d+(?![\w.])")
_OP = re.compile(r"\bmsir\.([a-z_]+)\b")


def seeds() -> list[tuple[str, str]]:
    """(name, IR text) of every lit test input that is IR, comments dropped."""
    out = []
    for path in sorted(SEED_DIR.rglob("*.mlir")):
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//"))
        if "func.func" in text or "builtin.module" in text:
            out.append((str(path.relative_to(SEED_DIR)), text))
    return out


def _op_names() -> list[str]:
    from msir.dialects.msir import Msir

    return sorted(op.name.removeprefix("msir.") for op in Msir.operations)


def _replace_nth(pattern: re.Pattern, text: str, rng: random.Random, make) -> str:
    matches = list(pattern.finditer(text))
    if not matches:
        return text
    m = rng.choice(matches)
    return text[: m.start()] + make(m) + text[m.end():]


def mutate(text: str, rng: random.Random, op_names: list[str]) -> str:
    lines = text.splitlines()
    kind = rng.randrange(11)
    if kind == 0 and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    elif kind == 1 and lines:
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    elif kind == 2 and len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        text = "\n".join(lines)
        if kind == 3:
            names = sorted(set(_SSA.findall(text)))
            if names:
                text = _replace_nth(_SSA, text, rng, lambda m: rng.choice(names))
        elif kind == 4:
            text = _replace_nth(_TYPE, text, rng, lambda m: rng.choice(["f16", "f32", "f64", "i1", "i32", "i64"]))
        elif kind == 5:
            text = _replace_nth(re.compile(r"(?<=[<x])(\d+|\?)(?=x)"), text, rng,
                                lambda m: rng.choice(["?", "0", "1", "3", "7", "65536"]))
        elif kind == 6:
            text = _replace_nth(_INT, text, rng,
                                lambda m: str(rng.choice([-1, 0, 1, 2, 5, -(2**63), 2**63, 2**70])))
        elif kind == 7:
            text = _replace_nth(_OP, text, rng, lambda m: "msir." + rng.choice(op_names))
        elif kind == 8 and text:
            text = text[: rng.randrange(len(text))]
        elif kind == 9 and text:
            i = rng.randrange(len(text))
            text = text[:i] + text[i + 1:]
        else:
            text = _replace_nth(re.compile(r"@[A-Za-z0-9_]+"), text, rng,
                                lambda m: rng.choice(["@f", "@main", "@missing", m.group(0) + "x"]))
        return text
    return "\n".join(lines)


def pipelines() -> list[str]:
    from msir import pipeline, targets

    cpu = targets.get("cpu").pipeline
    singles = [p.text() for p in cpu.passes()] + [n for n in pipeline.PASSES if n not in {p.name for p in cpu.passes()}]
    return [*singles, cpu.text(), "msir-grad,msir-inline,msir-fuse", "msir-fuse,convert-msir-to-loops"]


@dataclass
class Outcome:
    kind: str  # ok | rejected | internal | hang
    detail: str = ""


class _Hang(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


def run_opt(argv: list[str], timeout: float) -> tuple[str, int | None, str, str]:
    """Run msir-opt's main in this process: (status, exit code, stdout, stderr),
    status 'exit', 'exception' (with the traceback as stderr) or 'hang'."""
    from msir.tools.msir_opt import main

    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
                code: int | None = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, int) and e.code is not None:
                    print(e.code, file=sys.stderr)
        return "exit", code, out.getvalue(), err.getvalue()
    except _Hang:
        return "hang", None, out.getvalue(), err.getvalue()
    except Exception:
        return "exception", None, out.getvalue(), err.getvalue() + traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _classify(status: str, code: int | None, err: str, after_pass: bool) -> Outcome:
    if status == "hang":
        return Outcome("hang")
    if status == "exception":
        return Outcome("internal", err.strip().splitlines()[-1] if err.strip() else "exception")
    if "Traceback" in err or "internal error" in err:
        return Outcome("internal", err.strip().splitlines()[-1])
    if code == 0:
        return Outcome("ok")
    if code == 1 and "error" in err:
        if after_pass and ("Verification" in err or "verif" in err.split("error:")[-1][:80].lower()):
            return Outcome("internal", "invalid IR after a pass: " + err.strip().splitlines()[0])
        return Outcome("rejected")
    return Outcome("internal", f"exit status {code}: {err.strip()[:200]}")


def trial(text: str, pipeline_text: str, timeout: float = 10.0) -> Outcome:
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        status, code, _, err = run_opt([path], timeout)
        first = _classify(status, code, err, after_pass=False)
        if first.kind != "ok":
            return first
        status, code, _, err = run_opt([path, "-p", pipeline_text], timeout)
        return _classify(status, code, err, after_pass=True)
    finally:
        os.unlink(path)


def make_trial(seed: int, index: int, corpus, op_names, pipes) -> tuple[str, str, str]:
    rng = random.Random(seed * 1_000_003 + index)
    name, text = rng.choice(corpus)
    for _ in range(rng.randint(1, 3)):
        text = mutate(text, rng, op_names)
    return name, text, rng.choice(pipes)


def run(trials: int, seed: int = 0, timeout: float = 10.0, start: int = 0, verbose: bool = False):
    """Run `trials` trials; return the Counter of kinds and the failing (index, seed name, pipeline, detail)."""
    corpus, ops, pipes = seeds(), _op_names(), pipelines()
    counts: Counter[str] = Counter()
    failures = []
    for i in range(start, start + trials):
        name, text, pipe = make_trial(seed, i, corpus, ops, pipes)
        outcome = trial(text, pipe, timeout)
        counts[outcome.kind] += 1
        if outcome.kind in ("internal", "hang"):
            failures.append((i, name, pipe, outcome.detail))
            if verbose:
                print(f"{seed}:{i} {outcome.kind} [{name} | -p {pipe}] {outcome.detail}", flush=True)
    return counts, failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--replay", type=str, default=None, help="SEED:INDEX: print the trial's input and outcome")
    args = ap.parse_args()
    if args.replay:
        seed, index = map(int, args.replay.split(":"))
        name, text, pipe = make_trial(seed, index, seeds(), _op_names(), pipelines())
        print(f"// seed {name}, -p {pipe}\n{text}")
        print(trial(text, pipe, args.timeout))
        return
    counts, failures = run(args.trials, args.seed, args.timeout, args.start, verbose=True)
    print(dict(counts))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
