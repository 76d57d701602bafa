"""Runtimes compiled from LLVM IR once per machine (msir.lowering.runtime_object):
the object code lands in the cache directory and a later load uses it."""

from __future__ import annotations

import ctypes

from msir.lowering import runtime_object

IR = """
define i64 @__msir_test_triple(i64 %x) {
  %y = mul i64 %x, 3
  ret i64 %y
}
"""
OPTIONS = {"opt": 0, "codemodel": "jitdefault"}


def _call(engine, x: int) -> int:
    return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(engine.get_function_address("__msir_test_triple"))(x)


def test_object_is_kept_and_reloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("MSIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MSIR_CACHE", raising=False)
    path = runtime_object.object_path("test-runtime", IR, OPTIONS)
    assert path.parent == tmp_path and path.name.startswith("test-runtime-") and not path.exists()
    assert _call(runtime_object.compile_cached("test-runtime", IR, OPTIONS, "__msir_test_triple"), 14) == 42
    assert path.exists()
    stamp = path.stat().st_mtime_ns
    assert _call(runtime_object.compile_cached("test-runtime", IR, OPTIONS, "__msir_test_triple"), 5) == 15
    assert path.stat().st_mtime_ns == stamp  # loaded, not written again
    # another IR or other target options: another file
    assert runtime_object.object_path("test-runtime", IR + "\n", OPTIONS) != path
    assert runtime_object.object_path("test-runtime", IR, {**OPTIONS, "opt": 2}) != path


def test_without_the_cache_the_ir_is_compiled_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv("MSIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MSIR_CACHE", "0")
    assert runtime_object.object_path("test-runtime", IR, OPTIONS) is None
    assert _call(runtime_object.compile_cached("test-runtime", IR, OPTIONS, "__msir_test_triple"), 2) == 6
    assert list(tmp_path.iterdir()) == []


_FIRST_CALL = """
import sys, threading, numpy as np, msir

sys.setswitchinterval(0.003)

@msir.jit
def f(x):
    return np.tanh(x) * 2.0 + 1.0

x = np.linspace(-1.0, 1.0, 5000)
assert np.allclose(f(x), np.tanh(x) * 2.0 + 1.0)
# the background build of the runtimes (msir.lowering.jit.start_runtimes) is over
# once the first call returns: no thread of msir's is left working
assert [t.name for t in threading.enumerate() if t.name == "msir-runtimes" and t.is_alive()] == []
from msir.lowering import allocator, threads
assert allocator._engine is not None and threads.load()
# the build ran with a short switch interval (jit._build_runtimes) and gave
# back the one it found
assert sys.getswitchinterval() == 0.003, sys.getswitchinterval()
"""


def test_the_allocator_and_the_pool_are_built_once_per_machine(tmp_path):
    """A first process compiles the allocator's and the thread pool's runtimes
    (in the background, while it traces) and keeps their object code; a second
    process with the same cache directory loads them."""
    import os
    import subprocess
    import sys

    cache = tmp_path / "cache"
    env = {**os.environ, "MSIR_CACHE_DIR": str(cache)}
    env.pop("MSIR_CACHE", None)
    script = tmp_path / "first_call.py"
    script.write_text(_FIRST_CALL)
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        names = sorted(p.name.rsplit("-", 1)[0] for p in cache.iterdir() if p.suffix == ".o")
        assert names == ["allocator-runtime", "threads-runtime"], names


def test_a_runtime_has_an_llvm_context_of_its_own(tmp_path, monkeypatch):
    # runtimes build beside the JIT's compiles (jit.start_runtimes' thread), which
    # use LLVM's global context under the JIT's lock: sharing it would be a race
    import llvmlite.binding as llvm

    monkeypatch.setenv("MSIR_CACHE_DIR", str(tmp_path))
    global_context = llvm.get_global_context()
    for cached in (False, True):  # compiled, then loaded from the object file
        engine = runtime_object.compile_cached("test-runtime", IR, OPTIONS, "__msir_test_triple")
        assert runtime_object.object_path("test-runtime", IR, OPTIONS).exists()
        (module,) = engine._modules
        assert _address(module._context) != _address(global_context), cached
        assert _call(engine, 7) == 21


def _address(ref) -> int:
    return ctypes.cast(ref._ptr, ctypes.c_void_p).value
