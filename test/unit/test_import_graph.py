"""msir's modules import each other without a cycle.

Every `import` statement counts — at module level and inside functions, since a
function-level import that closes a cycle still ties the modules together —
except those under `if TYPE_CHECKING:`, which never run. The modules are
found from `pyproject.toml`'s package-dir mapping, as the wheel installs them.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = config["package-dir"]
    out: dict[str, Path] = {}
    for package in config["packages"]:
        top = next(p for p in sorted(dirs, key=len, reverse=True) if package == p or package.startswith(p + "."))
        folder = ROOT / dirs[top] / Path(*package[len(top) + 1 :].split(".")) if package != top else ROOT / dirs[top]
        for f in folder.glob("*.py"):
            out[package if f.stem == "__init__" else f"{package}.{f.stem}"] = f
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST) -> list[str]:
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.extend(f"{node.module}.{a.name}" for a in node.names)
            names.append(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = {resolve(n) for n in _imported(ast.parse(path.read_text(), str(path)))}
        # `from msir import x` names the package, whose __init__ imports nothing eagerly
        graph[name] = {d for d in deps if d is not None and d != name and d != "msir"}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_covers_every_package():
    graph = import_graph()
    for name in ("msir.api", "msir.frontend.driver", "msir.eager.engine", "msir.passes.grad", "msir.lowering.jit",
                 "msir.dialects.msir", "msir.tools.msir_opt"):
        assert name in graph
    assert "msir.frontend.driver" in graph["msir.api"]  # function-level imports count


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
