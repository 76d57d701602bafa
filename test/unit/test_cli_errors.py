"""An unterminated string literal in IR is rejected fast (xDSL's lexer would
backtrack through it for minutes) with its location."""

import subprocess
import sys


def test_unterminated_string_literal_is_rejected_in_seconds(tmp_path):
    f = tmp_path / "s.mlir"
    f.write_text('func.func @f() {\n  "test.op"() {a = "' + "a " * 30 + '} : () -> ()\n  func.return\n}\n')
    for tool in ("msir_opt", "msir_run"):
        args = [str(f)] + (["--entry", "f"] if tool == "msir_run" else [])
        r = subprocess.run([sys.executable, "-c", f"from msir.tools.{tool} import main; main()", *args],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 1
        assert r.stderr.startswith(f"{f}:2:20: error: unterminated string literal\n"), r.stderr
        assert "Traceback" not in r.stderr
