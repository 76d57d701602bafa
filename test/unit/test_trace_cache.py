"""The persistent trace cache (msir.trace_cache): a second process finds the
native code without running the frontend or importing xDSL, and every kind of
dependency change the frontend could see makes it trace again.

Every test uses its own temporary MSIR_CACHE_DIR; hits, misses and stale
entries are read from `msir.cache.stats` (in subprocesses: printed as JSON).
"""

import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import msir
from msir import cache, trace_cache
from msir.errors import MsirZeroDivisionError, SourceLoc


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("MSIR_CACHE_DIR", str(d))
    for var in ("MSIR_CACHE", "MSIR_TRACE_CACHE", "MSIR_CACHE_MAX_BYTES", "MSIR_CACHE_MAX_ENTRIES", "MSIR_DUMP"):
        monkeypatch.delenv(var, raising=False)
    cache.reset_stats()
    return d


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    """A directory on sys.path for modules the tests write, edit and re-import."""
    d = tmp_path / "pkg"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    names = set(sys.modules)
    yield d
    for name in set(sys.modules) - names:
        if name.startswith("tc_"):
            del sys.modules[name]


def write(d: Path, name: str, body: str) -> Path:
    path = d / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    importlib.invalidate_caches()
    return path


def fresh(name: str):
    """Import module `name` again from its (possibly edited) file."""
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return importlib.import_module(name)


def trace_entries(d: Path) -> list[Path]:
    return sorted(d.glob("*" + trace_cache.SUFFIX)) if d.is_dir() else []


def counts() -> dict:
    return {k: v for k, v in cache.stats.items() if v}


CHILD = """
import json, sys
import numpy as np
import msir
from msir import cache
sys.path.insert(0, sys.argv[1])
import tc_main
x = np.linspace(0.5, 2.0, 64, dtype=np.float32)
y = np.linspace(1.0, 3.0, 64, dtype=np.float32)
out = msir.jit(tc_main.f)(x, y)
print(json.dumps({"stats": cache.stats, "out": out.tobytes().hex(),
                  "xdsl": sorted(m for m in sys.modules if m == "xdsl" or m.startswith("xdsl.")),
                  "frontend": "msir.frontend.translate" in sys.modules}))
"""


def run_child(d: Path, cache_dir: Path, **env) -> dict:
    full = dict(os.environ, MSIR_CACHE_DIR=str(cache_dir), **env)
    full.pop("MSIR_LOG", None)
    r = subprocess.run([sys.executable, "-c", CHILD, str(d)], env=full, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


MAIN = """
import numpy as np
from tc_helper import helper


def f(x, y):
    a = helper(np.tanh(x) * y) + np.exp(-x)
    return np.sqrt(a * a + 1.0) / y
"""

HELPER = """
import numpy as np

SCALE = {scale}


def helper(v):
    return np.maximum(v, 0.25) * SCALE
"""


def reference(scale: float):
    x = np.linspace(0.5, 2.0, 64, dtype=np.float32)
    y = np.linspace(1.0, 3.0, 64, dtype=np.float32)
    a = np.maximum(np.tanh(x) * y, np.float32(0.25)) * np.float32(scale) + np.exp(-x)
    return np.sqrt(a * a + np.float32(1.0)) / y


def test_second_process_skips_frontend_and_xdsl(cdir, pkg):
    write(pkg, "tc_main", MAIN)
    write(pkg, "tc_helper", HELPER.format(scale="2.0"))
    first = run_child(pkg, cdir)
    assert first["stats"]["trace_misses"] == 1 and first["stats"]["trace_writes"] == 1
    assert len(trace_entries(cdir)) == 1
    second = run_child(pkg, cdir)
    assert second["stats"]["trace_hits"] == 1 and second["stats"]["hits"] == 1
    assert second["stats"]["misses"] == 0 and second["stats"]["trace_misses"] == 0
    assert second["xdsl"] == [] and not second["frontend"]
    assert second["out"] == first["out"]  # bit for bit
    got = np.frombuffer(bytes.fromhex(second["out"]), np.float32)
    np.testing.assert_allclose(got, reference(2.0), rtol=1e-5)


def test_edited_helper_misses_in_the_next_process(cdir, pkg):
    write(pkg, "tc_main", MAIN)
    write(pkg, "tc_helper", HELPER.format(scale="2.0"))
    run_child(pkg, cdir)
    write(pkg, "tc_helper", HELPER.format(scale="2.0").replace("0.25", "0.5"))
    second = run_child(pkg, cdir)
    assert second["stats"]["trace_stale"] == 1 and second["stats"]["trace_hits"] == 0
    x = np.linspace(0.5, 2.0, 64, dtype=np.float32)
    y = np.linspace(1.0, 3.0, 64, dtype=np.float32)
    a = np.maximum(np.tanh(x) * y, np.float32(0.5)) * np.float32(2.0) + np.exp(-x)
    got = np.frombuffer(bytes.fromhex(second["out"]), np.float32)
    np.testing.assert_allclose(got, np.sqrt(a * a + np.float32(1.0)) / y, rtol=1e-5)
    third = run_child(pkg, cdir)  # the rewritten entry
    assert third["stats"]["trace_hits"] == 1 and third["out"] == second["out"]


def test_edited_helper_misses_after_reimport(cdir, pkg):
    x = np.linspace(0.5, 2.0, 64, dtype=np.float32)
    y = np.linspace(1.0, 3.0, 64, dtype=np.float32)
    write(pkg, "tc_main", MAIN)
    write(pkg, "tc_helper", HELPER.format(scale="2.0"))
    fresh("tc_helper")
    np.testing.assert_allclose(msir.jit(fresh("tc_main").f)(x, y), reference(2.0), rtol=1e-5)
    # same size, same line numbers: only the code differs
    write(pkg, "tc_helper", HELPER.format(scale="2.0").replace("np.maximum", "np.minimum"))
    fresh("tc_helper")
    main = fresh("tc_main")
    a = np.minimum(np.tanh(x) * y, np.float32(0.25)) * np.float32(2.0) + np.exp(-x)
    np.testing.assert_allclose(msir.jit(main.f)(x, y), np.sqrt(a * a + np.float32(1.0)) / y, rtol=1e-5)
    assert cache.stats["trace_stale"] == 1 and cache.stats["trace_hits"] == 0
    msir.jit(main.f)(x, y)
    assert cache.stats["trace_hits"] == 1


def test_helper_global_constant_change_misses(cdir, pkg):
    """A constant read by a helper in another module: the manifest follows calls."""
    x = np.linspace(0.5, 2.0, 64, dtype=np.float32)
    y = np.linspace(1.0, 3.0, 64, dtype=np.float32)
    write(pkg, "tc_main", MAIN)
    write(pkg, "tc_helper", HELPER.format(scale="2.0"))
    helper_mod = fresh("tc_helper")
    main = fresh("tc_main")
    np.testing.assert_allclose(msir.jit(main.f)(x, y), reference(2.0), rtol=1e-5)
    helper_mod.SCALE = 3.0
    np.testing.assert_allclose(msir.jit(main.f)(x, y), reference(3.0), rtol=1e-5)
    assert cache.stats["trace_stale"] == 1
    helper_mod.SCALE = 3  # an int is another value for the frontend (weak int, not float)
    msir.jit(main.f)(x, y)
    assert cache.stats["trace_stale"] == 2
    helper_mod.SCALE = 3.0
    msir.jit(main.f)(x, y)
    assert cache.stats["trace_stale"] == 3  # one slot per function and signature
    np.testing.assert_allclose(msir.jit(main.f)(x, y), reference(3.0), rtol=1e-5)
    assert cache.stats["trace_hits"] == 1


def test_module_attribute_dependency(cdir, pkg):
    write(pkg, "tc_consts", "import numpy as np\nK = 2.0\n")
    write(pkg, "tc_attr", "import numpy as np\nimport tc_consts\n\n\ndef f(x):\n    return x * tc_consts.K\n")
    consts = fresh("tc_consts")
    m = fresh("tc_attr")
    x = np.arange(4.0)
    np.testing.assert_array_equal(msir.jit(m.f)(x), x * 2.0)
    np.testing.assert_array_equal(msir.jit(m.f)(x), x * 2.0)
    assert cache.stats["trace_hits"] == 1
    consts.K = 5.0
    np.testing.assert_array_equal(msir.jit(m.f)(x), x * 5.0)
    assert cache.stats["trace_stale"] == 1


CAPTURE = """
import numpy as np

W = np.arange(8, dtype=np.float64)
PAIR = (np.ones(3), np.zeros(3))


def f(x):
    return x * W


def g(x):
    return x + PAIR[0] - PAIR[1]
"""


def test_captured_array_values_shape_and_dtype(cdir, pkg):
    write(pkg, "tc_cap", CAPTURE)
    m = fresh("tc_cap")
    x = np.ones(8)
    np.testing.assert_array_equal(msir.jit(m.f)(x), m.W)
    m.W = m.W * 3.0  # new values, same dtype and shape: a hidden argument, read at the call
    np.testing.assert_array_equal(msir.jit(m.f)(x), m.W)
    assert cache.stats["trace_hits"] == 1 and cache.stats["trace_stale"] == 0
    jitted = msir.jit(m.f)
    np.testing.assert_array_equal(jitted(x), m.W)
    m.W = np.arange(8, dtype=np.float32)  # another dtype: traced again
    np.testing.assert_array_equal(jitted(x), x * m.W)
    assert cache.stats["trace_stale"] == 1
    m.W = np.arange(1.0, 2.0)  # another shape (broadcasts against x)
    np.testing.assert_array_equal(msir.jit(m.f)(x), x * m.W)
    assert cache.stats["trace_stale"] == 2
    y = np.full(3, 2.0)
    np.testing.assert_array_equal(msir.jit(m.g)(y), y + 1.0)
    m.PAIR = (np.full(3, 5.0), np.ones(3))
    np.testing.assert_array_equal(msir.jit(m.g)(y), y + 4.0)  # tuple items are captured too
    assert cache.stats["trace_hits"] == 3


def test_argument_dtypes_and_shapes_are_separate_entries(cdir, pkg):
    write(pkg, "tc_args", "import numpy as np\n\n\ndef f(x, s):\n    return np.sum(x * s, axis=0)\n")
    m = fresh("tc_args")
    cases = [np.ones((3, 2), np.float32), np.ones((3, 2), np.float64), np.ones((4, 2), np.float32)]
    for x in cases:
        np.testing.assert_allclose(msir.jit(m.f)(x, 2.0), np.sum(x * 2.0, axis=0))
    assert cache.stats["trace_misses"] == 3 and len(trace_entries(cdir)) == 3
    for x in cases:
        out = msir.jit(m.f)(x, 2.0)
        assert out.dtype == x.dtype
        np.testing.assert_allclose(out, np.sum(x * 2.0, axis=0))
    assert cache.stats["trace_hits"] == 3
    msir.jit(m.f)(cases[0], np.float64(2.0))  # a NumPy scalar is typed, a float is weak
    assert cache.stats["trace_misses"] == 4


def test_specialised_ints_key_by_value(cdir, pkg):
    write(pkg, "tc_static", "import numpy as np\n\n\ndef f(x, axis, k):\n    return np.sum(x, axis=axis) * k\n")
    m = fresh("tc_static")
    x = np.arange(6.0).reshape(2, 3)
    for axis in (0, 1, 0, 1):
        np.testing.assert_array_equal(msir.jit(m.f)(x, axis, 3), np.sum(x, axis=axis) * 3)
    assert cache.stats["trace_misses"] == 2 and cache.stats["trace_hits"] == 2
    # k is a runtime int: another value hits
    np.testing.assert_array_equal(msir.jit(m.f)(x, 1, 5), np.sum(x, axis=1) * 5)
    assert cache.stats["trace_hits"] == 3


def test_closure_cells_and_shadowed_builtins(cdir, pkg):
    write(pkg, "tc_clo", """
        import numpy as np


        def make(k):
            def f(x):
                return abs(x) * k
            return f
    """)
    m = fresh("tc_clo")
    x = np.array([-1.0, 2.0])
    np.testing.assert_array_equal(msir.jit(m.make(2.0))(x), [2.0, 4.0])
    np.testing.assert_array_equal(msir.jit(m.make(2.0))(x), [2.0, 4.0])
    assert cache.stats["trace_hits"] == 1
    np.testing.assert_array_equal(msir.jit(m.make(3.0))(x), [3.0, 6.0])
    assert cache.stats["trace_stale"] == 1
    m.abs = lambda v: v + 1.0  # a global now shadows the builtin the frontend used
    np.testing.assert_array_equal(msir.jit(m.make(3.0))(x), [0.0, 9.0])
    assert cache.stats["trace_stale"] == 2


def test_error_sites_on_a_hit(cdir, pkg):
    write(pkg, "tc_err", "import numpy as np\n\n\ndef f(a, b):\n    return a // b\n")
    m = fresh("tc_err")
    a, b = np.array([1, 2, 3]), np.array([1, 0, 1])
    for _ in range(2):
        with pytest.raises(MsirZeroDivisionError) as e:
            msir.jit(m.f)(a, b)
        assert e.value.loc == SourceLoc(str(pkg / "tc_err.py"), 5, 12)
    assert cache.stats["trace_hits"] == 1


def test_transformed_functions(cdir, pkg):
    write(pkg, "tc_grad", "import numpy as np\n\n\ndef f(x):\n    return np.sum(np.sin(x) * x)\n")
    m = fresh("tc_grad")
    x = np.linspace(0.0, 1.0, 5)
    g1 = msir.jit(msir.grad(m.f))(x)
    g2 = msir.jit(msir.grad(m.f))(x)
    assert cache.stats["trace_hits"] == 1
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_allclose(g2, np.sin(x) + x * np.cos(x), rtol=1e-12)
    v, g3 = msir.jit(msir.value_and_grad(m.f))(x)  # another transformation: another entry
    assert cache.stats["trace_hits"] == 1
    np.testing.assert_array_equal(g3, g1)


def test_disabled(cdir, pkg, monkeypatch):
    write(pkg, "tc_off", "import numpy as np\n\n\ndef f(x):\n    return x + 1.0\n")
    m = fresh("tc_off")
    monkeypatch.setenv("MSIR_CACHE", "0")
    msir.jit(m.f)(np.ones(3))
    msir.jit(m.f)(np.ones(3))
    assert not cdir.exists() or not any(cdir.iterdir())
    assert all(v == 0 for v in cache.stats.values())
    monkeypatch.setenv("MSIR_CACHE", "1")
    monkeypatch.setenv("MSIR_TRACE_CACHE", "0")  # object code only
    msir.jit(m.f)(np.ones(3))
    msir.jit(m.f)(np.ones(3))
    assert trace_entries(cdir) == [] and counts() == {"misses": 1, "writes": 1, "hits": 1}


@pytest.mark.parametrize("damage", ["garbage", "truncate", "wrong-key", "bad-manifest", "missing-field"])
def test_corrupt_trace_entry_recompiles(cdir, pkg, damage):
    write(pkg, "tc_bad", "import numpy as np\n\n\ndef f(x):\n    return np.exp(x) * 2.0\n")
    m = fresh("tc_bad")
    x = np.linspace(0.0, 1.0, 7)
    expected = msir.jit(m.f)(x)
    (path,) = trace_entries(cdir)
    data = path.read_text()
    entry = json.loads(data)
    if damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif damage == "truncate":
        path.write_text(data[: len(data) // 2])
    elif damage == "wrong-key":
        path.write_text(json.dumps({**entry, "key": "0" * 40}))
    elif damage == "bad-manifest":
        path.write_text(json.dumps({**entry, "manifest": {"deps": [[["x", 1], None]]}}))
    else:
        del entry["captures"]
        path.write_text(json.dumps(entry))
    np.testing.assert_array_equal(msir.jit(m.f)(x), expected)
    assert cache.stats["trace_hits"] == 0 and cache.stats["trace_writes"] == 2
    np.testing.assert_array_equal(msir.jit(m.f)(x), expected)
    assert cache.stats["trace_hits"] == 1


def test_missing_object_code_under_a_trace_entry(cdir, pkg):
    write(pkg, "tc_obj", "import numpy as np\n\n\ndef f(x):\n    return np.tanh(x) + 1.0\n")
    m = fresh("tc_obj")
    x = np.linspace(0.0, 1.0, 7)
    expected = msir.jit(m.f)(x)
    for p in cdir.glob("*" + cache.SUFFIX):
        p.write_bytes(b"MSIRC\x01\ngarbage")
    np.testing.assert_array_equal(msir.jit(m.f)(x), expected)
    # the failed key is not looked up twice: one corrupt entry, one miss, one write
    assert cache.stats["corrupt"] == 1 and cache.stats["misses"] == 2 and cache.stats["writes"] == 2
    np.testing.assert_array_equal(msir.jit(m.f)(x), expected)
    assert cache.stats["trace_hits"] == 1 and cache.stats["hits"] == 1


def test_two_processes_write_at_once(cdir, pkg):
    write(pkg, "tc_main", MAIN)
    write(pkg, "tc_helper", HELPER.format(scale="2.0"))
    full = dict(os.environ, MSIR_CACHE_DIR=str(cdir))
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(pkg)], env=full, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert outs[0]["out"] == outs[1]["out"]
    assert len(trace_entries(cdir)) == 1
    assert not [p for p in cdir.iterdir() if p.name.startswith(".tmp-")]
    third = run_child(pkg, cdir)
    assert third["stats"]["trace_hits"] == 1 and third["out"] == outs[0]["out"]


def test_trace_entries_are_bounded(cdir, pkg, monkeypatch):
    monkeypatch.setenv("MSIR_CACHE_MAX_ENTRIES", "3")
    write(pkg, "tc_ev", "import numpy as np\n\n\ndef f(x):\n    return x + 1.0\n")
    m = fresh("tc_ev")
    for n in (1, 2, 3, 4):
        msir.jit(m.f)(np.zeros(n))
    assert cache.stats["evicted"] > 0
    assert len(trace_entries(cdir)) <= 3 and len(list(cdir.glob("*" + cache.SUFFIX))) <= 3
    np.testing.assert_array_equal(msir.jit(m.f)(np.zeros(4)), np.ones(4))  # the newest stays
    assert cache.stats["trace_hits"] == 1
    np.testing.assert_array_equal(msir.jit(m.f)(np.zeros(1)), np.ones(1))  # the oldest went
    assert cache.stats["trace_hits"] == 1 and cache.stats["trace_misses"] == 5


def test_uncacheable_dependency_compiles_every_time(cdir, pkg):
    write(pkg, "tc_unc", """
        import numpy as np


        class Box:
            pass


        BOX = Box()


        def f(x):
            if BOX is None:
                return x
            return x * 2.0
    """)
    m = fresh("tc_unc")
    x = np.ones(3)
    for _ in range(2):
        np.testing.assert_array_equal(msir.jit(m.f)(x), x * 2.0)
    assert trace_entries(cdir) == [] and cache.stats["trace_misses"] == 2
    assert cache.stats["hits"] == 1  # the object code is still cached


def test_fingerprints():
    fp = trace_cache.Fingerprinter()
    assert fp(2) != fp(2.0) != fp(True)
    assert fp(np.float32(2.0)) != fp(np.float64(2.0))
    assert fp(np.ones((2, 3), np.float32)) == fp(np.zeros((2, 3), np.float32)) == ["array", "float32", [2, 3]]
    assert fp(np.ones(3)) != fp(np.ones(4))
    assert fp((1, [2.0, None])) == ["tuple", [["int", "1"], ["list", [["float", "2.0"], ["NoneType", "None"]]]]]
    assert fp(np) == ["module", "numpy"]
    assert fp(np.tanh)[0] == "builtin" and fp(np.sum)[0] in ("libfn", "builtin")
    with pytest.raises(trace_cache.Uncacheable):
        fp({"a": 1})
    with pytest.raises(trace_cache.Uncacheable):
        fp(object())


def test_code_hash_is_stable_across_processes():
    src = "import json\nfrom msir.trace_cache import code_hash\ndef f(x):\n    return {1, 'a', 'b'}, x * 2.5\n"
    src += "print(code_hash(f.__code__))"
    hashes = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        hashes.add(r.stdout.strip())
    assert len(hashes) == 1


def test_abi_constants_agree_with_the_lowering():
    from msir.lowering import jit, llvm_abi

    assert jit.ENTRY_SUFFIX == llvm_abi.ENTRY_SUFFIX and jit.SITE == llvm_abi.SITE
    assert jit.STACK_BASE == llvm_abi.STACK_BASE


def test_output_structure_and_closure_arrays_on_a_hit(cdir, pkg):
    write(pkg, "tc_out", """
        import numpy as np


        def make(w):
            def f(x, n):
                s = np.sum(x * w)
                return (x * 2.0, s, None, [x.shape[0] + n, np.float32(1.5)], "tag", x.dtype)
            return f
    """)
    m = fresh("tc_out")
    x = np.arange(3, dtype=np.float32)
    w = np.full(3, 2.0, np.float32)
    first = msir.jit(m.make(w))(x, 4)
    w[:] = 3.0  # the closure's array is a hidden argument: new values, same entry
    second = msir.jit(m.make(w))(x, 4)
    assert cache.stats["trace_hits"] == 1
    for a, b in zip(first, second):
        assert type(a) is type(b)
    np.testing.assert_array_equal(second[0], x * 2.0)
    assert second[1] == np.float32(9.0) and second[1].dtype == np.float32
    assert second[2] is None and second[4] == "tag" and second[5] == np.dtype(np.float32)
    assert isinstance(second[3], list) and second[3][0] == 7 and type(second[3][0]) is type(first[3][0])
    assert second[3][1] == np.float32(1.5) and second[3][1].dtype == np.float32


def _run(tmp_path: Path, code: str, **env) -> str:
    script = tmp_path / "script.py"  # a file: msir compiles functions from their source
    script.write_text(textwrap.dedent(code))
    r = subprocess.run([sys.executable, str(script)], env=dict(os.environ, **env), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_imports_are_lazy(tmp_path):
    out = _run(tmp_path, """
        import sys
        import msir
        heavy = ("xdsl", "llvmlite", "msir.api", "msir.frontend", "msir.compiler")
        print(sorted(m for m in sys.modules if m.startswith(heavy)))
    """)
    assert out == "[]"


def test_preload_imports_the_whole_pipeline(tmp_path):
    out = _run(tmp_path, """
        import sys
        import numpy as np
        import msir
        from msir.compiler import preload
        preload()
        before = set(sys.modules)

        def f(x):
            return np.sum(np.tanh(x) * x)

        msir.jit(f)(np.ones(3))
        msir.grad(f)(np.ones(3))
        print(sorted(m for m in set(sys.modules) - before if m.startswith(("xdsl", "msir"))))
    """, MSIR_CACHE="0")
    assert out == "[]"


def test_touched_file_hits_edited_file_misses(cdir, pkg):
    path = write(pkg, "tc_touch", "import numpy as np\n\n\ndef f(x):\n    return x * 2.0\n\n\ndef g(x):\n    return x\n")
    m = fresh("tc_touch")
    x = np.arange(3.0)
    msir.jit(m.f)(x)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same bytes, new mtime: hashed again, equal
    np.testing.assert_array_equal(msir.jit(m.f)(x), x * 2.0)
    assert cache.stats["trace_hits"] == 1
    # an edit elsewhere in the file (same line numbers for f): the file is read again and differs
    path.write_text(path.read_text().replace("return x\n", "return x + 1\n"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))
    np.testing.assert_array_equal(msir.jit(fresh("tc_touch").f)(x), x * 2.0)
    assert cache.stats["trace_stale"] == 1
