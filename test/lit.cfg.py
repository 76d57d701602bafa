"""lit configuration: every `.mlir` and `.py` file under test/filecheck is a test."""

import os

import lit.formats

config.name = "msir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
# The suite's root is test/ itself, so that a path below it (`lit test/filecheck/dialects`)
# maps onto its tests; test/unit holds pytest files and test/fuzz the fuzzers, not lit tests.
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Inputs", "lit.cfg.py", "unit", "fuzz"]
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
for var in ("PATH", "HOME", "PYTHONPATH", "MSIR_CACHE_DIR", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.substitutions.append(("%python", "python3"))
# Never write the user's compile cache from the tests.
if "MSIR_CACHE_DIR" not in os.environ:
    import tempfile

    config.environment["MSIR_CACHE_DIR"] = tempfile.mkdtemp(prefix="msir-lit-cache-")
