"""Compile targets (msir.targets): `msir.jit(f, target=...)`,
`msir.set_context(device_target=...)`, the error for an unknown target, and
the target in the in-memory and persistent cache keys. A second target
("fake": the cpu target's pipeline under another name, counting its native
compilations) is registered for the tests that switch between targets."""

import sys
import types

import numpy as np
import pytest

import msir
from msir import cache, targets, trace_cache
from msir.compiler import pipeline_options
from msir.errors import UnknownTargetError
from msir.pipeline import Step
from msir.targets import Registered, Target

CPU = targets.get("cpu")


def f(x):
    return np.tanh(x) * 2.0 + 1.0


def g(x):
    return np.sum(x * x)


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("MSIR_CACHE_DIR", str(d))
    for var in ("MSIR_CACHE", "MSIR_TRACE_CACHE", "MSIR_DUMP"):
        monkeypatch.delenv(var, raising=False)
    cache.reset_stats()
    return d


@pytest.fixture
def fake(monkeypatch):
    """Registers target "fake" (device_target "Fake"); yields a list that
    grows by one per native compilation for it; the context's target is CPU after."""
    compiled: list = []

    def native(module, object_sink):
        compiled.append(module)
        return CPU.native.run(module, object_sink)

    package = types.ModuleType("msir_test_fake_target")
    package.FAKE = Target(
        name="fake",
        pipeline=CPU.pipeline,
        native=Step("fake-jit", native),
        symbol=CPU.symbol,
        key_options=lambda: {"fake": True},
        object_code=True,
    )
    monkeypatch.setitem(sys.modules, package.__name__, package)
    monkeypatch.setitem(targets.TARGETS, "fake", Registered("Fake", f"{package.__name__}:FAKE"))
    yield compiled
    msir.set_context(device_target="CPU")


def test_jit_for_the_cpu_target_in_any_case():
    x = np.linspace(-1, 1, 5)
    for spelling in ("cpu", "CPU", "Cpu"):
        np.testing.assert_allclose(msir.jit(f, target=spelling)(x), f(x))

    @msir.jit(target="cpu")
    def h(x):
        return x + 1.0

    np.testing.assert_array_equal(h(x), x + 1.0)


def test_device_target_in_mindspores_spelling():
    assert msir.get_context("device_target") == "CPU"
    msir.set_context(device_target="cpu")
    assert msir.get_context("device_target") == "CPU"
    x = np.arange(3.0)
    np.testing.assert_allclose(msir.jit(f)(x), f(x))


@pytest.mark.parametrize("call", [
    lambda: msir.jit(f, target="gpu"),
    lambda: msir.jit(target="TPU"),  # the decorator form fails at once too
    lambda: msir.set_context(device_target="GPU"),
    lambda: msir.set_context(device_target=""),
])
def test_an_unknown_target_is_an_error_listing_the_known_ones(call):
    with pytest.raises(UnknownTargetError) as e:
        call()
    assert isinstance(e.value, ValueError)
    assert "unknown compile target" in str(e.value)
    assert "the known targets are 'cpu' (device_target 'CPU')" in str(e.value)
    assert msir.get_context("device_target") == "CPU"


def test_a_rejected_set_context_changes_nothing():
    with pytest.raises(UnknownTargetError):
        msir.set_context(mode=msir.PYNATIVE_MODE, device_target="GPU")
    assert msir.get_context("mode") == msir.GRAPH_MODE


def test_switching_device_target_compiles_again_and_back_reuses(fake):
    jf = msir.jit(f)
    x = np.linspace(-1, 1, 4)
    np.testing.assert_allclose(jf(x), f(x))
    assert fake == []
    msir.set_context(device_target="fake")
    assert msir.get_context("device_target") == "Fake"
    np.testing.assert_allclose(jf(x), f(x))
    np.testing.assert_allclose(jf(x), f(x))
    assert len(fake) == 1  # compiled for fake once: the cpu entry was not reused
    msir.set_context(device_target="CPU")
    np.testing.assert_allclose(jf(x), f(x))
    assert len(fake) == 1  # the cpu entry again
    assert set(jf._entries_by_target) == {"CPU", "Fake"}


def test_jit_target_overrides_the_context(fake):
    pinned = msir.jit(g, target="cpu")
    x = np.arange(4.0)
    msir.set_context(device_target="fake")
    assert pinned(x) == g(x)
    assert fake == []
    assert msir.jit(pinned)(x) == g(x)  # jit of a jitted function keeps its target
    assert fake == []
    assert msir.jit(g, target="FAKE")(x) == g(x)
    assert len(fake) == 1


def test_the_target_is_in_the_persistent_keys(fake, cdir):
    cpu, other = pipeline_options("cpu"), pipeline_options("fake")
    assert cpu["target"] == "cpu" and other["target"] == "fake"
    assert cpu["pipeline"] == CPU.pipeline.text() and cpu["steps"] == ["mangle-symbols", "llvmlite-O3-mcjit"]
    x = np.arange(5.0)
    probe = trace_cache.probe(g, (x,), None, "cpu")
    assert probe.base != trace_cache.probe(g, (x,), None, "fake").base
    from msir.frontend.driver import spec_of, trace

    traced = trace(g, [spec_of(x)])
    assert cache.module_key(traced.module, "g", (), cpu)[0] != cache.module_key(traced.module, "g", (), other)[0]


def test_code_cached_for_one_target_is_not_loaded_for_another(fake, cdir):
    x = np.arange(5.0)
    assert msir.jit(g)(x) == g(x)  # cpu: written to both levels
    assert cache.stats["writes"] == 1 and cache.stats["trace_writes"] == 1
    cache.reset_stats()
    assert msir.jit(g)(x) == g(x)  # a new JitFunction: the trace level hits
    assert cache.stats["trace_hits"] == 1
    cache.reset_stats()
    msir.set_context(device_target="Fake")
    assert msir.jit(g)(x) == g(x)
    assert cache.stats["trace_hits"] == 0 and cache.stats["hits"] == 0
    assert len(fake) == 1
