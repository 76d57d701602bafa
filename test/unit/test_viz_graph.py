"""`msir.viz.graph`: the IR at a stage as a Graphviz graph — nodes, edges and
clusters checked on the DOT text (parsed below), SVG through `dot` when installed."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import msir
from msir import ops
from msir.viz import VizError, graph, stage_names

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (.ci/run installs it with apt-get)")


class Dot:
    """The DOT text `msir.viz` writes, read back: each node's label and the
    clusters around it (outermost first), and the edges."""

    def __init__(self, text: str):
        self.labels: dict[str, str] = {}
        self.clusters: dict[str, list[str]] = {}
        self.edges: list[tuple[str, str, str]] = []
        stack: list[str] = []
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("subgraph cluster_"):
                stack.append("?")
            elif line == "}" and stack:
                stack.pop()
            elif m := re.match(r'label="((?:[^"\\]|\\.)*)";', line):
                if stack:
                    stack[-1] = m.group(1).replace("\\n", "\n")
            elif m := re.match(r'(n\d+) \[label="((?:[^"\\]|\\.)*)"', line):
                self.labels[m.group(1)] = m.group(2).replace("\\n", "\n")
                self.clusters[m.group(1)] = list(stack)
            elif m := re.match(r"(n\d+) -> (n\d+)(.*);", line):
                self.edges.append((m.group(1), m.group(2), m.group(3)))

    def nodes(self, first_line: str) -> list[str]:
        return [n for n, label in self.labels.items() if label.split("\n")[0] == first_line]

    def node(self, first_line: str) -> str:
        found = self.nodes(first_line)
        assert len(found) == 1, (first_line, found)
        return found[0]

    def has_edge(self, a: str, b: str) -> bool:
        return any(e[0] == a and e[1] == b for e in self.edges)


def dense_tanh(x, w):
    return np.tanh(x @ w)


def loop_loss(x, w):
    h = np.tanh(x @ w)
    s = 0.0
    for _ in range(3):
        s = s + np.sum(h * h)
    return s


def named_loss(x, w):
    return ops.reduce_sum(ops.relu(ops.matmul(x, w, name="fc1"), name="act"))


X = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
W = np.linspace(0.5, -0.5, 6).reshape(3, 2)


def test_frontend_stage_has_a_node_per_op_and_an_edge_per_use():
    d = Dot(graph(dense_tanh, X, W).dot)
    matmul, tanh, ret = d.node("matmul"), d.node("tanh"), d.node("return")
    x, w = d.node("arg 0"), d.node("arg 1")
    assert d.labels[matmul] == "matmul\n4x2xf64"
    assert d.labels[x] == "arg 0\n4x3xf64"
    assert d.has_edge(x, matmul) and d.has_edge(w, matmul)
    assert d.has_edge(matmul, tanh) and d.has_edge(tanh, ret)
    assert len(d.edges) == 4
    assert d.clusters[tanh] == ["@dense_tanh"]


def test_forward_adjoint_fusions_and_loops_are_clusters_after_msir_fuse():
    d = Dot(graph(msir.grad(loop_loss, argnums=1), X, W, stage="msir-fuse").dot)
    forward = "@loop_loss__fwd  (forward)"
    adjoint = "@loop_loss__bwd  (adjoint)"
    assert d.clusters[d.node("tanh")] == [forward]
    # the loop of the augmented forward, and the reversed loop of the adjoint
    fors = {tuple(d.clusters[n]) for n in d.nodes("for")}
    assert fors == {(forward, "for"), (adjoint, "for")}
    # tanh's adjoint 1 - y*y times the cotangent, fused
    fused = [n for n, c in d.clusters.items() if c == [adjoint, "fusion"]]
    assert sorted(d.labels[n].split("\n")[0] for n in fused if not d.labels[n][0].isdigit()) == ["mul", "mul", "sub"]
    # the adjoint's matmul (the gradient of w) reads the fusion
    grad_w = [n for n in d.nodes("matmul") if d.clusters[n] == [adjoint]]
    assert len(grad_w) == 1 and any(d.has_edge(f, grad_w[0]) for f in fused)


def test_named_ops_show_their_name_and_their_adjoint_is_marked():
    d = Dot(graph(msir.grad(named_loss, argnums=1), X, W, stage="msir-grad").dot)
    labels = list(d.labels.values())
    assert any(label.endswith("'fc1'") and label.startswith("matmul") for label in labels)
    grads = [n for n, label in d.labels.items() if label.endswith("'fc1/grad'")]
    assert grads and all(d.clusters[n][0].endswith("(adjoint)") for n in grads)


def test_a_region_over_the_limit_is_one_node():
    d = Dot(graph(loop_loss, X, W, max_region_ops=2).dot)
    (collapsed,) = [n for n, label in d.labels.items() if label.startswith("for, ")]
    assert re.match(r"for, \d+ ops\nf64$", d.labels[collapsed])
    assert d.nodes("reduce_sum") == []
    assert d.has_edge(collapsed, d.node("return"))
    expanded = Dot(graph(loop_loss, X, W).dot)
    assert len(expanded.nodes("reduce_sum")) == 1


def test_an_unknown_stage_lists_the_stages():
    with pytest.raises(VizError, match=r"unknown stage 'msir-fusion': the stages of the cpu target are "
                                       r"frontend, msir-grad-jvp, .*msir-fuse"):
        graph(dense_tanh, X, W, stage="msir-fusion")
    assert stage_names()[:2] == ["frontend", "msir-grad-jvp"]


def test_without_graphviz_a_requested_svg_is_written_as_dot(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    g = graph(dense_tanh, X, W, path=tmp_path / "f.svg")
    assert not (tmp_path / "f.svg").exists()
    assert (tmp_path / "f.dot").read_text() == g.dot
    with pytest.raises(VizError, match="needs Graphviz's 'dot'"):
        g.svg()


@needs_dot
def test_svg_through_graphviz(tmp_path):
    g = graph(msir.grad(loop_loss, argnums=1), X, W, stage="msir-fuse", path=tmp_path / "f.svg")
    svg = (tmp_path / "f.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert ">matmul</text>" in svg and ">fusion</text>" in svg
    assert g._repr_svg_() == svg


def wide(x, ws):
    h = x
    for w in ws:  # unrolled: ws is a tuple
        h = np.tanh(h @ w + 0.5 * h) * np.exp(-h * h)
    s = 0.0
    for i in range(4):
        s = s + np.sum(np.sin(h * (i + 1.0)) * np.cos(h))
    return s + np.sum(h)


@needs_dot
def test_a_function_of_hundreds_of_ops_lays_out():
    ws = tuple(np.eye(8) for _ in range(12))
    g = graph(msir.grad(wide, argnums=1), np.ones((4, 8)), ws, stage="msir-fuse")
    d = Dot(g.dot)
    assert len(d.labels) > 200
    assert "<svg" in g.svg()
