"""Every verifier message of the ascend dialect is pinned by a case of
test/filecheck/dialects/ascend/invalid.mlir (issue 13, "Done when"): the
messages are read from dialects/ascend.py's VerifyException /
AscendVerifyException calls; each must match a CHECK line whole, an
f-string field `', '.join(...)` matching a comma-separated list of words,
any other field any text."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pattern(node) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(re.escape(v.value) if isinstance(v, ast.Constant) else _field(v.value) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _pattern(node.left) + _pattern(node.right)
    return ".*"


def _field(value) -> str:
    joined = (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "join"
              and isinstance(value.func.value, ast.Constant) and value.func.value.value == ", ")
    return r"[^ ,]+(?:, [^ ,]+)*" if joined else ".*"


def _messages() -> list[tuple[int, str, str]]:
    src = (ROOT / "dialects" / "ascend.py").read_text()
    out = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("VerifyException", "AscendVerifyException"):
            at = 0 if n.func.id == "VerifyException" else 2
            assert len(n.args) > at, f"dialects/ascend.py:{n.lineno}: a verifier error without a message"
            prefix = "" if at == 0 else r"'ascend\.\w+' "  # (AscendVerifyException names the op)
            out.append((n.lineno, prefix + _pattern(n.args[at]), ast.get_source_segment(src, n.args[at])))
    return out


def test_every_verifier_message_has_an_invalid_mlir_case():
    checks = [re.sub(r"\{\{\^\}\}|\{\{\$\}\}", "", line.split("CHECK:", 1)[1].strip())
              for line in (ROOT / "test" / "filecheck" / "dialects" / "ascend" / "invalid.mlir").open()
              if "CHECK:" in line]
    messages = _messages()
    assert len(messages) > 40  # (the scan found the verifiers)
    missing = [f"line {no}: {text}" for no, pat, text in messages if not any(re.fullmatch(pat, c) for c in checks)]
    assert not missing, "verifier messages without an invalid.mlir case:\n" + "\n".join(missing)
