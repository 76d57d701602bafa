"""The planner's graph (`msir.parallel.op_graph`): one node per op call, its
einsum loop spec with the frontend's broadcasts and transposes folded in,
composites (softmax, layer_norm, dense) as single nodes, unnamed ops named by
their source location, and use counts of leaves."""

import numpy as np
import pytest

from msir import ops
from msir.errors import PlanningError
from msir.parallel.op_graph import build_graph

f32 = np.float32


def z(*shape):
    return np.zeros(shape, f32)


def layer(x, w, b, w2, gamma, beta):
    h = ops.add(ops.matmul(x, w, name="fc1"), b, name="bias")
    h = ops.softmax(ops.relu(h, name="act"), name="sm")
    h = ops.layer_norm(h, (h.shape[-1],), gamma, beta, name="ln")
    return ops.reduce_sum(ops.dense(h, w2, name="fc2"), name="loss")


def test_specs_of_a_layer():
    g = build_graph(layer, (z(8, 4), z(4, 6), z(6), z(3, 6), z(6), z(6)))
    specs = {n.name: (n.kind, n.spec) for n in g.nodes}
    assert specs == {
        "fc1": ("einsum", "mk,kn->mn"),
        "bias": ("elementwise", "mn,n->mn"),   # the broadcast of the bias folds into the add
        "act": ("elementwise", "mn->mn"),      # relu's zero is a constant: no input
        "sm": ("softmax", "mn->mn"),           # one node, not its seven primitive ops
        "ln": ("layer_norm", "mn,n,n->mn"),
        "fc2": ("einsum", "mk,nk->mn"),        # dense: the transpose of its weight folds in
        "loss": ("reduce", "mn->"),
    }
    sm, ln = g.node("sm"), g.node("ln")
    assert sm.normalised == "n" and ln.normalised == "n"
    assert g.node("fc1").sizes == {"m": 8, "k": 4, "n": 6}


def attention_scores(q, k):
    return np.einsum("bqhd,bkhd->bhqk", q, k)


def test_einsum_keeps_the_users_letters_and_unnamed_ops_their_location():
    g = build_graph(attention_scores, (z(2, 5, 3, 4), z(2, 7, 3, 4)))
    (node,) = g.nodes
    assert node.spec == "bqhd,bkhd->bhqk"
    assert node.loops == "bhqkd"
    assert node.name == f"test_parallel_graph.py:{attention_scores.__code__.co_firstlineno + 1}:12"


def transposed(x, w):
    return ops.matmul(x, w.T, name="mm")


def square(x):
    return ops.reduce_sum(ops.mul(x, x, name="sq"), name="s")


def test_user_transposes_fold_and_a_leaf_read_twice_counts_twice():
    g = build_graph(transposed, (z(8, 4), z(6, 4)))
    assert [n.spec for n in g.nodes] == ["mk,nk->mn"]
    g = build_graph(square, (z(4, 8),))
    assert g.node("sq").spec == "mn,mn->mn"
    assert len(g.uses_of(g.leaves[0])) == 2


def twice(x, w):
    for weight in (w, w):  # a loop over a tuple unrolls
        x = ops.matmul(x, weight, name="mm")
    return x


def test_a_name_met_again_is_a_second_node():
    g = build_graph(twice, (z(4, 4), z(4, 4)))
    assert [n.name for n in g.nodes] == ["mm", "mm#1"]
    assert len(g.uses_of(g.leaves[1])) == 2


def sliced(x):
    return x[1:]


def test_unmodelled_ops_are_refused_at_their_line():
    with pytest.raises(PlanningError, match="does not model 'msir.slice'") as e:
        build_graph(sliced, (z(4, 4),))
    assert e.value.loc.line == sliced.__code__.co_firstlineno + 1
