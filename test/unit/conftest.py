"""Session-wide test setup.

The persistent compile cache (`msir.cache`) is pointed at a temporary directory
for the whole session (subprocesses inherit it), so the test suite never reads
or writes the user's real cache directory. `MSIR_VERIFY=1` makes every
compilation verify the module after each stage (msir.compiler), so a pass that
produces invalid IR fails the test that triggers it, naming the stage. Every
test starts and ends in GRAPH_MODE (`msir.set_context`), whatever the one
before it did; a test taking the `mode` fixture runs in GRAPH_MODE and in
PYNATIVE_MODE (it gets msir's constant).
"""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in ("MSIR_CACHE_DIR", "MSIR_VERIFY")}
    os.environ["MSIR_CACHE_DIR"] = str(tmp_path_factory.mktemp("msir-cache"))
    os.environ["MSIR_VERIFY"] = "1"
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(autouse=True)
def _graph_mode():
    import msir

    msir.set_context(mode=msir.GRAPH_MODE)
    yield
    msir.set_context(mode=msir.GRAPH_MODE)


@pytest.fixture(params=["graph", "pynative"])
def mode(request):
    import msir

    value = msir.GRAPH_MODE if request.param == "graph" else msir.PYNATIVE_MODE
    msir.set_context(mode=value)
    return value  # _graph_mode sets GRAPH_MODE again after the test
