"""The persistent compile cache (msir.cache): hits across processes, misses on
changes, the switch, corrupt entries, concurrent writers, the size bound.

Every test uses its own temporary MSIR_CACHE_DIR; hits and misses are read
from `msir.cache.stats` (in subprocesses: printed as JSON), never from timing.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import msir
from msir import cache
from msir.errors import MsirZeroDivisionError, SourceLoc


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("MSIR_CACHE_DIR", str(d))
    monkeypatch.delenv("MSIR_CACHE", raising=False)
    monkeypatch.delenv("MSIR_CACHE_MAX_BYTES", raising=False)
    monkeypatch.delenv("MSIR_CACHE_MAX_ENTRIES", raising=False)
    monkeypatch.delenv("MSIR_DUMP", raising=False)
    cache.reset_stats()
    return d


def entries(d: Path) -> list[Path]:
    return sorted(d.glob("*" + cache.SUFFIX)) if d.is_dir() else []


def write_module(path: Path, body: str, prefix_lines: int = 0) -> Path:
    path.write_text("\n" * prefix_lines + "import numpy as np\n\n\n" + textwrap.dedent(body))
    return path


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CHAIN = """
def f(x, y):
    a = np.tanh(x) * y + np.exp(-x)
    b = np.maximum(a, y) - 0.5
    return np.sqrt(b * b + 1.0) / y
"""

CHILD = """
import json, sys, importlib.util
import numpy as np
import msir
from msir import cache
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
x = np.linspace(0.5, 2.0, 64, dtype=np.float32)
y = np.linspace(1.0, 3.0, 64, dtype=np.float32)
out = msir.jit(m.f)(x, y)
print(json.dumps({"stats": cache.stats, "out": out.tobytes().hex()}))
"""


def run_child(module: Path, cache_dir: Path, **env) -> dict:
    full = dict(os.environ, MSIR_CACHE_DIR=str(cache_dir), **env)
    full.pop("MSIR_LOG", None)
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(module)], env=full, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_process_hits_with_identical_results(cdir, tmp_path):
    module = write_module(tmp_path / "chain.py", CHAIN)
    first = run_child(module, cdir)
    assert first["stats"]["misses"] == 1 and first["stats"]["writes"] == 1 and first["stats"]["hits"] == 0
    assert len(entries(cdir)) == 1
    second = run_child(module, cdir)
    assert second["stats"]["hits"] == 1 and second["stats"]["misses"] == 0 and second["stats"]["writes"] == 0
    assert second["out"] == first["out"]  # bit for bit
    m = load_module(module, "cache_chain")
    x = np.linspace(0.5, 2.0, 64, dtype=np.float32)
    y = np.linspace(1.0, 3.0, 64, dtype=np.float32)
    got = np.frombuffer(bytes.fromhex(second["out"]), np.float32)
    np.testing.assert_allclose(got, m.f(x, y), rtol=1e-5)


def test_hit_in_process_for_a_new_jit_object(cdir, tmp_path):
    m = load_module(write_module(tmp_path / "chain2.py", CHAIN), "cache_chain2")
    x = np.linspace(0.5, 2.0, 16, dtype=np.float32)
    a = msir.jit(m.f)(x, x)
    assert cache.stats["misses"] == 1 and cache.stats["writes"] == 1
    b = msir.jit(m.f)(x, x)
    assert cache.stats["hits"] == 1
    np.testing.assert_array_equal(a, b)
    # another signature is another entry
    msir.jit(m.f)(x.astype(np.float64), x.astype(np.float64))
    assert cache.stats["misses"] == 2 and len(entries(cdir)) == 2


def test_changed_source_misses(cdir, tmp_path):
    x = np.arange(8, dtype=np.float64)
    p1 = write_module(tmp_path / "v1.py", "def f(x):\n    return x * 2.0 + 1.0\n")
    np.testing.assert_array_equal(msir.jit(load_module(p1, "cache_v1").f)(x), x * 2 + 1)
    p2 = write_module(tmp_path / "v2.py", "def f(x):\n    return x * 3.0 + 1.0\n")
    np.testing.assert_array_equal(msir.jit(load_module(p2, "cache_v2").f)(x), x * 3 + 1)
    assert cache.stats["hits"] == 0 and cache.stats["misses"] == 2
    assert len(entries(cdir)) == 2


def test_error_sites_follow_the_callers_source(cdir, tmp_path):
    """Locations are not part of the key (the same function elsewhere hits),
    but runtime errors point at the caller's own file and line."""
    body = "def f(a, b):\n    return a // b\n"
    p1 = write_module(tmp_path / "a.py", body)
    p2 = write_module(tmp_path / "b.py", body, prefix_lines=3)
    a = np.array([1, 2, 3])
    b = np.array([1, 0, 1])
    with pytest.raises(MsirZeroDivisionError) as e1:
        msir.jit(load_module(p1, "cache_sites_a").f)(a, b)
    assert cache.stats["misses"] == 1
    with pytest.raises(MsirZeroDivisionError) as e2:
        msir.jit(load_module(p2, "cache_sites_b").f)(a, b)
    assert cache.stats["hits"] == 1
    assert e1.value.loc is not None and e2.value.loc is not None
    assert e1.value.loc.file == str(p1) and e2.value.loc.file == str(p2)
    assert e2.value.loc == SourceLoc(str(p2), e1.value.loc.line + 3, e1.value.loc.col)


def test_disabled_cache_never_writes(cdir, tmp_path, monkeypatch):
    monkeypatch.setenv("MSIR_CACHE", "0")
    m = load_module(write_module(tmp_path / "off.py", CHAIN), "cache_off")
    x = np.linspace(0.5, 2.0, 16, dtype=np.float32)
    msir.jit(m.f)(x, x)
    msir.jit(m.f)(x, x)
    assert not cdir.exists() or not any(cdir.iterdir())
    assert all(v == 0 for v in cache.stats.values())
    monkeypatch.setenv("MSIR_CACHE", "off")
    msir.jit(m.f)(x, x)
    assert not cdir.exists() or not any(cdir.iterdir())


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_corrupt_entry_is_ignored_and_rewritten(cdir, tmp_path, damage):
    m = load_module(write_module(tmp_path / f"c_{damage}.py", CHAIN), f"cache_c_{damage}")
    x = np.linspace(0.5, 2.0, 16, dtype=np.float32)
    expected = msir.jit(m.f)(x, x)
    (path,) = entries(cdir)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) - 100])
    elif damage == "flip":
        i = len(data) - 500  # inside the object code
        path.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(os.urandom(len(data)))
    np.testing.assert_array_equal(msir.jit(m.f)(x, x), expected)
    assert cache.stats["corrupt"] == 1 and cache.stats["hits"] == 0 and cache.stats["writes"] == 2
    assert path.read_bytes() == data  # rewritten (compilation is deterministic)
    np.testing.assert_array_equal(msir.jit(m.f)(x, x), expected)
    assert cache.stats["hits"] == 1


def test_two_processes_compile_concurrently(cdir, tmp_path):
    module = write_module(tmp_path / "conc.py", CHAIN)
    full = dict(os.environ, MSIR_CACHE_DIR=str(cdir))
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(module)], env=full, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert outs[0]["out"] == outs[1]["out"]
    assert len(entries(cdir)) == 1
    assert not [p for p in cdir.iterdir() if p.name.startswith(".tmp-")]
    third = run_child(module, cdir)
    assert third["stats"]["hits"] == 1 and third["out"] == outs[0]["out"]


def test_threads_compile_concurrently(cdir, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    m = load_module(write_module(tmp_path / "thr.py", CHAIN), "cache_thr")
    xs = [np.linspace(0.5, 2.0, n, dtype=np.float32) for n in (8, 8, 9, 9)]
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda x: msir.jit(m.f)(x, x), xs))
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out, m.f(x, x), rtol=1e-5)
    assert len(entries(cdir)) == 2


def test_size_bound_evicts_least_recently_used(cdir, tmp_path, monkeypatch):
    monkeypatch.setenv("MSIR_CACHE_MAX_ENTRIES", "3")
    monkeypatch.setenv("MSIR_TRACE_CACHE", "0")  # object code only (trace entries: test_trace_cache)
    m = load_module(write_module(tmp_path / "ev.py", "def f(x):\n    return x + 1.0\n"), "cache_ev")
    for n in (1, 2, 3):
        msir.jit(m.f)(np.zeros(n))
    assert len(entries(cdir)) == 3
    old = entries(cdir)
    for i, p in enumerate(sorted(old, key=lambda p: p.stat().st_mtime)):
        os.utime(p, (1000 + i, 1000 + i))  # a deterministic LRU order
    lru = min(old, key=lambda p: p.stat().st_mtime)
    msir.jit(m.f)(np.zeros(4))  # a 4th entry: evict down to 90% of 3 entries
    left = entries(cdir)
    assert cache.stats["evicted"] == 2 and len(left) == 2
    assert lru not in left
    assert max(left, key=lambda p: p.stat().st_mtime) not in old  # the new entry stays


def test_hit_refreshes_recency_and_byte_bound(cdir):
    cdir.mkdir()
    paths = []
    for i in range(5):
        p = cdir / f"{i:040x}{cache.SUFFIX}"
        p.write_bytes(b"x" * 1000)
        os.utime(p, (1000 + i, 1000 + i))
        paths.append(p)
    (cdir / "unrelated.txt").write_bytes(b"y" * 10000)
    os.utime(paths[0], (5000, 5000))  # used recently
    assert cache.evict(max_bytes=10_000) == 0
    assert cache.evict(max_bytes=3000) == 3  # down to <= 2700 bytes: two entries
    assert sorted(p for p in paths if p.exists()) == [paths[0], paths[4]]
    assert (cdir / "unrelated.txt").exists()  # only cache entries are evicted


def test_stale_temporaries_are_removed(cdir):
    cdir.mkdir()
    stale = cdir / ".tmp-dead.part"
    stale.write_bytes(b"partial")
    os.utime(stale, (time.time() - 7200,) * 2)
    fresh = cdir / ".tmp-live.part"
    fresh.write_bytes(b"partial")
    cache.evict()
    assert not stale.exists() and fresh.exists()


def test_vjp_functions_are_cached(cdir):
    def f(x):
        return np.sum(np.sin(x) * x)

    x = np.linspace(0.0, 1.0, 5)
    g1 = msir.grad(f)(x)
    assert cache.stats["writes"] >= 1
    hits = cache.stats["hits"]
    g2 = msir.grad(f)(x)
    assert cache.stats["hits"] == hits + 1
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_allclose(g1, np.sin(x) + x * np.cos(x), rtol=1e-12)


def test_key_covers_the_environment(cdir, tmp_path):
    from msir.compiler import pipeline_options
    from msir.frontend.driver import spec_of, trace

    # (a body of its own: the frontend caches sources by code object, and equal
    # code objects from two files share one entry)
    m = load_module(write_module(tmp_path / "key.py", CHAIN, prefix_lines=11), "cache_key")
    x = np.ones(4, np.float32)
    t1 = trace(m.f, [spec_of(x), spec_of(x)])
    t2 = trace(m.f, [spec_of(x), spec_of(x)])
    k1, locs = cache.module_key(t1.module, t1.entry, (), pipeline_options())
    assert cache.module_key(t2.module, t2.entry, (), pipeline_options())[0] == k1
    assert locs and all(loc[0] == str(tmp_path / "key.py") for loc in locs)
    assert cache.module_key(t1.module, t1.entry, ("g",), pipeline_options())[0] != k1
    assert cache.module_key(t1.module, t1.entry, (), {**pipeline_options(), "x": 1})[0] != k1
    env = cache.environment()
    for part in ("msir-source=", "cpu=", "features=", "llvm=", "llvmlite=", "xdsl="):
        assert part in env


def test_default_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("MSIR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "msir"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "msir"


def _rewrite_header(path: Path, edit, sign: bool = True) -> None:
    """Edit an entry's header; `sign`: with a valid digest (an entry as msir
    would write it), else as a damaged file would be."""
    data = path.read_bytes()
    start = len(cache.MAGIC) + cache.DIGEST_BYTES
    n = int.from_bytes(data[start : start + 4], "little")
    header = json.loads(data[start + 4 : start + 4 + n])
    edit(header)
    new = cache.pack_entry(json.dumps(header).encode(), data[start + 4 + n :])
    if not sign:
        new = data[:start] + new[start:]
    path.write_bytes(new)


def test_a_damaged_header_is_a_corrupt_entry(cdir, tmp_path):
    m = load_module(write_module(tmp_path / "hdr.py", CHAIN), "cache_hdr")
    x = np.linspace(0.5, 2.0, 16, dtype=np.float32)
    expected = msir.jit(m.f)(x, x)
    (path,) = entries(cdir)
    data = path.read_bytes()
    _rewrite_header(path, lambda h: h["functions"].clear(), sign=False)
    np.testing.assert_array_equal(msir.jit(m.f)(x, x), expected)
    assert cache.stats["corrupt"] == 1 and cache.stats["hits"] == 0 and cache.stats["writes"] == 2
    assert path.read_bytes() == data  # removed and written again
    msir.jit(m.f)(x, x)
    assert cache.stats["hits"] == 1


def test_unresolved_symbol_is_a_miss_not_a_crash(cdir, tmp_path):
    m = load_module(write_module(tmp_path / "sym.py", CHAIN), "cache_sym")
    x = np.linspace(0.5, 2.0, 16, dtype=np.float32)
    expected = msir.jit(m.f)(x, x)
    (path,) = entries(cdir)
    _rewrite_header(path, lambda h: h["symbols"].append("__msir_no_such_symbol"))
    np.testing.assert_array_equal(msir.jit(m.f)(x, x), expected)
    assert cache.stats["hits"] == 0 and cache.stats["misses"] == 2 and cache.stats["writes"] == 2
    msir.jit(m.f)(x, x)
    assert cache.stats["hits"] == 1


def test_hit_keeps_the_optimised_ir(cdir):
    from msir.compiler import compile_module
    from msir.frontend.driver import spec_of, trace

    def f(x):
        return x * 2.0

    x = np.ones(8)
    first = compile_module(trace(f, [spec_of(x)]).module, "f")
    second = compile_module(trace(f, [spec_of(x)]).module, "f")
    assert cache.stats["hits"] == 1
    assert second.native_module.llvm_ir == first.native_module.llvm_ir
    assert "f__entry" in second.native_module.asm
    np.testing.assert_array_equal(second.native(x)[0], x * 2.0)
