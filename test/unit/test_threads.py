"""msir's native thread pool (msir.lowering.threads) and the parallel loops
msir-lower-to-llvm outlines for it.

Results with n threads are compared with 1 thread: bitwise for elementwise
loops and row groups (every element is computed by the same code in one
chunk), and bitwise for float sums too (the chunks, hence the order in which
per-chunk partials are combined, depend on the trip count only); float sums
are also checked against float64 NumPy within 1e-5 relative (the partials
reassociate the sum), max and integer sums exactly. Thread counts above the
machine's core count are used on purpose: they give real concurrency even on
a 2-core machine.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import msir
from msir.errors import MsirIndexError, MsirZeroDivisionError
from msir.lowering import threads


@pytest.fixture(autouse=True)
def _restore_threads():
    before = threads.get_num_threads()
    yield
    threads.set_num_threads(before)


def chain(x, a, b):
    return np.tanh(a * x + b) * (1.0 / (1.0 + np.exp(-x))) + x**2


def softmax(x):
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=1, keepdims=True)


def layernorm(x):
    mu = x.mean(axis=1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + 1e-5)


def sum_exp(x):
    return np.sum(np.exp(x))


def max_sin(x):
    return np.max(np.sin(x))


def int_sum(x):
    return np.sum(x * 3 + 1)


def add(x, y):
    return x + y


def gather(x, i):
    return x[i]


def floordiv(x, y):
    return x // y


def _llvm_ir(fn, *args) -> str:
    from msir.compiler import compile_module
    from msir.frontend.driver import spec_of, trace

    return compile_module(trace(fn, [spec_of(a) for a in args]).module, fn.__name__).native_module.llvm_ir


def _at(n: int, fn, *args):
    threads.set_num_threads(n)
    return fn(*args)


RNG = np.random.default_rng(5)
X1 = RNG.standard_normal(1 << 20, dtype=np.float32)
X2 = RNG.standard_normal((2048, 1000), dtype=np.float32)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_elementwise_is_bitwise_equal_to_one_thread(n):
    f = msir.jit(chain)
    args = (X1, np.float32(0.7), np.float32(0.1))
    one = _at(1, f, *args)
    many = _at(n, f, *args)
    assert one.tobytes() == many.tobytes()
    np.testing.assert_allclose(many, chain(*args), rtol=2e-6, atol=2e-6)
    assert threads.workers_started() >= 1


def test_workers_run_chunks():
    # A worker the OS does not schedule in time leaves its chunks to the
    # caller (dynamic scheduling), so look over several calls.
    f = msir.jit(chain)
    args = (X1, np.float32(0.7), np.float32(0.1))
    threads.set_num_threads(2)
    before = threads.worker_chunks()
    for _ in range(200):
        f(*args)
        if threads.worker_chunks() > before:
            break
    assert threads.worker_chunks() > before


@pytest.mark.parametrize("fn", [softmax, layernorm])
def test_row_groups_are_bitwise_equal_to_one_thread(fn):
    f = msir.jit(fn)
    one = _at(1, f, X2)
    for n in (2, 4):
        assert _at(n, f, X2).tobytes() == one.tobytes()
    np.testing.assert_allclose(one, fn(X2.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_float_sum_within_tolerance_and_deterministic():
    f = msir.jit(sum_exp)
    ref = np.sum(np.exp(X1.astype(np.float64)))
    one = float(_at(1, f, X1))
    for n in (2, 3, 8):
        many = float(_at(n, f, X1))
        assert abs(many - one) <= 1e-5 * abs(one)
        assert abs(many - ref) <= 1e-5 * abs(ref)
        assert float(f(X1)) == many  # same thread count, same chunks, same bits


def sum_rows_exp(x):
    return np.sum(np.exp(x), axis=1)


def sum_all_exp(x):
    return np.sum(np.exp(x))


@pytest.mark.parametrize("fn,x", [(sum_exp, X1), (sum_rows_exp, X2), (sum_all_exp, X2)])
def test_float_reductions_are_bitwise_equal_across_thread_counts(fn, x):
    f = msir.jit(fn)
    one = np.asarray(_at(1, f, x))
    for n in (2, 3, 8):
        assert np.asarray(_at(n, f, x)).tobytes() == one.tobytes(), f"{n} threads"


def test_chunks_do_not_depend_on_the_thread_count():
    # the runtime's own answer: how many chunks a range is cut into
    counts = {}
    for n in (1, 2, 7):
        threads.set_num_threads(n)
        counts[n] = (threads.plan_chunks(1 << 20, 4096), threads.plan_chunks(100, 4096))
    assert counts[1] == counts[2] == counts[7] == (threads.MAX_CHUNKS, 1)
    assert threads.plan_chunks(10 * 4096, 4096) == 10


def test_max_and_int_sum_are_exact():
    fmax, fint = msir.jit(max_sin), msir.jit(int_sum)
    xi = RNG.integers(-1000, 1000, 1 << 20).astype(np.int64)
    one_max, one_int = float(_at(1, fmax, X1)), int(_at(1, fint, xi))
    assert one_int == int(np.sum(xi * 3 + 1))
    for n in (2, 5):
        assert float(_at(n, fmax, X1)) == one_max
        assert int(_at(n, fint, xi)) == one_int


def test_large_loops_are_outlined_small_ones_are_not():
    big = _llvm_ir(add, X1, X1)
    assert "__msir_parallel_for" in big and "add.par0.task" in big
    small = np.ones(1000, np.float32)
    assert "__msir_parallel_for" not in _llvm_ir(add, small, small)


def test_errors_raised_in_a_worker_reach_python():
    x = np.arange(1 << 20, dtype=np.float32)
    idx = np.arange(1 << 20, dtype=np.int64)
    idx[-3] = 1 << 21  # in the last chunk, which a worker usually runs
    assert "__msir_parallel_for" in _llvm_ir(gather, x, idx)
    threads.set_num_threads(3)
    with pytest.raises(MsirIndexError) as e:
        msir.jit(gather)(x, idx)
    assert "test_threads.py" in str(e.value)
    a = np.arange(1 << 20, dtype=np.int64)
    b = np.ones(1 << 20, dtype=np.int64)
    b[-5] = 0
    with pytest.raises(MsirZeroDivisionError):
        msir.jit(floordiv)(a, b)
    b[-5] = 1
    np.testing.assert_array_equal(msir.jit(floordiv)(a, b), a // b)


def test_two_python_threads_call_at_once():
    threads.set_num_threads(2)
    f, g = msir.jit(chain), msir.jit(softmax)
    args = (X1, np.float32(0.7), np.float32(0.1))
    expect_f, expect_g = f(*args), g(X2)
    failures: list[str] = []

    def run(fn, a, expect):
        for _ in range(40):
            if fn(*a).tobytes() != expect.tobytes():
                failures.append(fn.__name__)

    workers = [
        threading.Thread(target=run, args=(f, args, expect_f)),
        threading.Thread(target=run, args=(g, (X2,), expect_g)),
        threading.Thread(target=run, args=(f, args, expect_f)),
    ]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in workers), "a call deadlocked"
    assert failures == []


def test_ten_thousand_small_parallel_calls():
    threads.set_num_threads(2)
    x = RNG.standard_normal(60000, dtype=np.float32)
    y = RNG.standard_normal(60000, dtype=np.float32)
    assert "__msir_parallel_for" in _llvm_ir(add, x, y)
    f = msir.jit(add)
    expect = x + y
    bad = sum(not np.array_equal(f(x, y), expect) for _ in range(10_000))
    assert bad == 0


def _child_runs_parallel(queue):
    threads.set_num_threads(2)
    f = msir.jit(chain)
    queue.put(f(X1, np.float32(0.7), np.float32(0.1)).tobytes())


def test_fork_after_use_does_not_hang_the_child():
    threads.set_num_threads(2)
    f = msir.jit(chain)
    expect = f(X1, np.float32(0.7), np.float32(0.1)).tobytes()
    assert threads.workers_started() >= 1
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_runs_parallel, args=(queue,))
    child.start()
    got = queue.get(timeout=300)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert got == expect


def test_thread_count_settings():
    with pytest.raises(ValueError, match="between 1 and"):
        msir.set_num_threads(0)
    with pytest.raises(TypeError, match="must be an int"):
        msir.set_num_threads("2")
    msir.set_num_threads(3)
    assert msir.get_num_threads() == 3
    from msir.lowering import blas

    if blas.available():  # OpenBLAS follows the same count
        assert blas.get_num_threads() == 3
        msir.set_num_threads(1)
        assert blas.get_num_threads() == 1
    code = "import msir; print(msir.get_num_threads())"
    env = {k: v for k, v in os.environ.items() if k not in ("MSIR_NUM_THREADS", "OMP_NUM_THREADS")}
    for extra, expect in [
        ({"MSIR_NUM_THREADS": "3", "OMP_NUM_THREADS": "1"}, 3),
        ({"OMP_NUM_THREADS": "1"}, 1),
        ({}, len(os.sched_getaffinity(0))),
    ]:
        out = subprocess.run([sys.executable, "-c", code], env={**env, **extra},
                             capture_output=True, text=True, check=True).stdout
        assert int(out) == expect
    bad = subprocess.run([sys.executable, "-c", code], env={**env, "MSIR_NUM_THREADS": "two"},
                         capture_output=True, text=True, check=True)
    assert "ignoring MSIR_NUM_THREADS='two'" in bad.stderr
    assert int(bad.stdout) == len(os.sched_getaffinity(0))


def sum_2d(x):
    return np.sum(x * 2.0)


def test_full_reduction_of_a_nest_is_parallel():
    x = RNG.standard_normal((1024, 1000), dtype=np.float32)
    assert "__msir_parallel_for" in _llvm_ir(sum_2d, x)
    f = msir.jit(sum_2d)
    one = float(_at(1, f, x))
    ref = float(np.sum(x.astype(np.float64) * 2.0))
    for n in (2, 3):
        many = float(_at(n, f, x))
        assert abs(many - one) <= 1e-4 * np.abs(x).sum()
        assert abs(many - ref) <= 1e-4 * np.abs(x).sum()


PREFIX_SUM = """
func.func @prefix(%a: memref<65536xf32>, %out: memref<65536xf32>) -> f32 attributes {msir.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 65536 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
    %x = memref.load %a[%i] : memref<65536xf32>
    %e = math.exp %x : f32
    %acc1 = arith.addf %acc, %e : f32
    memref.store %acc1, %out[%i] : memref<65536xf32>
    scf.yield %acc1 : f32
  }
  func.return %s : f32
}
"""


def test_running_values_are_not_split():
    # the running sum is also stored per element: splitting it would be wrong
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, llvm, math, memref, scf
    from xdsl.parser import Parser

    from msir.lowering.jit import compile_llvm_module
    from msir.lowering.to_llvm import MsirLowerToLlvm

    ctx = Context()
    for dialect in (builtin.Builtin, func.Func, scf.Scf, arith.Arith, math.Math, memref.MemRef, llvm.LLVM):
        ctx.load_dialect(dialect)
    module = Parser(ctx, PREFIX_SUM).parse_module()
    MsirLowerToLlvm().apply(ctx, module)
    native = compile_llvm_module(module)
    assert "__msir_parallel_for" not in native.llvm_ir
    x = RNG.standard_normal(65536, dtype=np.float32)
    threads.set_num_threads(3)
    out, total = native.function("prefix")(x)
    np.testing.assert_allclose(out, np.cumsum(np.exp(x.astype(np.float64))), rtol=1e-4)
    assert float(total) == float(out[-1])


TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


def test_dispatches_that_wait_for_a_slow_worker_back_off():
    # A Python task stands in for generated code: the worker's chunk sleeps
    # (as a thread the OS descheduled), the caller's chunks are quick.
    threads.set_num_threads(2)
    main = threading.get_ident()
    worker_started = threading.Event()
    slow_worker = [True]
    runs: list[list[tuple[int, bool]]] = []

    def task(_ctx, k, _begin, _end):
        by_worker = threading.get_ident() != main
        runs[-1].append((k, by_worker))
        if by_worker:
            worker_started.set()
            time.sleep(0.2 if slow_worker[0] else 0)
        elif k == 0:
            worker_started.wait(timeout=30)  # let a worker claim a chunk first
        else:
            time.sleep(0.001)

    callback = TASK(task)
    assert threads.load()
    parallel_for = threads._state["parallel_for"]  # the runtime's entry point, as generated code calls it

    def dispatch(worker_expected: bool = True) -> tuple[bool, int]:
        runs.append([])
        if worker_expected:
            worker_started.clear()
        else:  # run in the caller alone: nothing to wait for
            worker_started.set()
        before = threads.backed_off()
        assert parallel_for(callback, None, 0, 16 * 16, 16) == 16
        assert sorted(k for k, _ in runs[-1]) == list(range(16))  # each chunk once
        return any(w for _, w in runs[-1]), threads.backed_off() - before

    def dispatch_backed_off() -> bool:
        shared, backed = dispatch(worker_expected=False)
        return not shared and backed == 1

    assert dispatch() == (True, 0)  # lost: back off for 1
    assert dispatch_backed_off()
    assert dispatch() == (True, 0)  # the probe loses again: back off for 2
    assert dispatch_backed_off() and dispatch_backed_off()
    slow_worker[0] = False
    assert dispatch() == (True, 0)  # the probe wins: no back-off
    assert dispatch() == (True, 0)
