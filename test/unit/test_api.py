"""The jit API's observable behaviour: logging, IR dumps, composition."""

import os
import subprocess
import sys
import textwrap

import numpy as np

import msir

SCRIPT = textwrap.dedent(
    """
    import numpy as np, msir

    def f(x, n):
        return x.reshape(n, -1).sum()

    jf = msir.jit(f)
    jf(np.ones(6), 2)
    jf(np.ones(6), 3)
    jf(np.ones(6), 3)
    """
)


def _run(tmp_path, env: dict[str, str]) -> subprocess.CompletedProcess:
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )


def test_recompile_log_names_the_function_once_per_new_signature(tmp_path):
    r = _run(tmp_path, {"MSIR_LOG": "recompile"})
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "recompiling" in line]
    assert len(lines) == 1, r.stderr
    assert "f for a new signature" in lines[0] and "2 versions" in lines[0]


def test_dump_prints_every_stage(tmp_path):
    r = _run(tmp_path, {"MSIR_DUMP": "1"})
    assert r.returncode == 0, r.stderr
    for stage in ("the frontend", "msir-grad", "msir-fuse", "convert-msir-to-loops", "msir-lower-to-llvm"):
        assert f"IR after {stage}" in r.stderr
    assert "msir.reduce_sum" in r.stderr and "scf.for" in r.stderr and "llvm.func" in r.stderr


def double(x):
    return x * 2.0


def test_jit_of_jit_and_decorator():
    jj = msir.jit(msir.jit(double))
    np.testing.assert_array_equal(jj(np.arange(3.0)), [0.0, 2.0, 4.0])

    @msir.jit
    def g(x):
        return double(x) + 1.0

    np.testing.assert_array_equal(g(np.arange(3.0)), [1.0, 3.0, 5.0])


def test_set_context_validates_the_mode():
    import pytest

    with pytest.raises(ValueError, match="GRAPH_MODE or msir.PYNATIVE_MODE"):
        msir.set_context(mode=7)
    msir.set_context(mode=msir.GRAPH_MODE)
    assert msir.get_context("mode") == msir.GRAPH_MODE


def test_importing_the_dialect_does_not_load_llvmlite_or_the_frontend():
    code = "import sys, msir.dialects.msir; print('llvmlite' in sys.modules, 'msir.frontend.translate' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", "False"], r.stdout + r.stderr


def test_a_first_compile_does_not_import_numpy_ma_and_a_masked_array_is_still_refused(tmp_path):
    """`numpy.ma` costs ~30 ms to import (W8's cold compile): the argument check for masked arrays
    reads it from sys.modules (no masked array exists before numpy.ma is imported)."""
    (tmp_path / "double.py").write_text("def double(x):\n    return x * 2.0\n")
    code = ("import sys, numpy as np, msir\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "from double import double\n"
            "f = msir.jit(double)\n"
            "assert (f(np.ones(3)) == 2.0).all()\n"
            "print('numpy.ma' in sys.modules)\n"
            "import numpy.ma\n"
            "try:\n"
            "    f(np.ma.masked_array(np.ones(3), mask=[0, 1, 0]))\n"
            "except msir.errors.DTypeError as e:\n"
            "    print('refused:', 'cannot pass a masked array' in str(e))\n")
    env = dict(os.environ, MSIR_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.stdout.splitlines() == ["False", "refused: True"], \
        r.stdout + r.stderr
