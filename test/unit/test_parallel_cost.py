"""`plan.cost` and `plan.breakdown` equal the §4 total computed by hand
(`../shared/parallel.md`), to rtol 1e-6. Constants in every test: alpha = 1e-6
s, bandwidth = 1e9 B/s, flops = 1e9 FLOP/s, mesh (2,), float32."""

import numpy as np
import pytest

import msir
from msir import ops

CM = msir.parallel.CostModel(alpha=[1e-6], bandwidth=[1e9], flops=1e9)
A, B, F = 1e-6, 1e9, 1e9


def matmul_sum(x, w):
    return ops.reduce_sum(ops.matmul(x, w, name="mm"), name="loss")


def test_row_split_matmul_then_gathered_sum():
    x, w = np.zeros((8, 4), np.float32), np.zeros((4, 6), np.float32)
    plan = msir.parallel.shard(matmul_sum, (2,), {"mm": "m", "loss": "-"}, example_args=(x, w), cost_model=CM,
                               argnums=(1,))
    # mm: local loops m 4, n 6, k 4 = 96; forward 2*96, backward 2*96 for w (x needs none)
    # loss: a reduction over its 48 local loop points, forward 1 and 1 backward (its input needs a gradient)
    compute = (2 * 96 * 2 + 48 * 2) / F
    # edge mm -> loss: rows split (4x6 floats = 96 B local) to replicated: all_gather, alpha + (n-1) s / B;
    # its cotangent comes back replicated: a free slice
    comm_fwd = A + 1 * 96 / B
    # w is tied to mm's use: its cotangent is partial over axis 0 (m does not index w): the
    # data-parallel all-reduce of its 96 B, alpha + 2 (n-1)/n s / B
    comm_bwd = A + 2 * (1 / 2) * 96 / B
    # w: 4 x 96 B (parameter); x: half of 128 B; mm's output: 96 B local; the loss: 4 B
    memory = 4 * 96 + 64 + 96 + 4
    assert plan.cost == pytest.approx(compute + comm_fwd + comm_bwd, rel=1e-6)
    assert plan.breakdown == pytest.approx(
        {"compute_s": compute, "comm_fwd_s": comm_fwd, "comm_bwd_s": comm_bwd, "memory_bytes": memory}, rel=1e-6)
    assert plan.strategy_of("mm") == "m" and plan.spec_of("mm") == "mk,kn->mn"


def softmax_sum(x):
    return ops.reduce_sum(ops.softmax(x, name="sm"), name="loss")


def test_softmax_split_on_its_normalised_axis():
    x = np.zeros((4, 8), np.float32)
    plan = msir.parallel.shard(softmax_sum, (2,), {"sm": "n", "loss": "n"}, example_args=(x,), cost_model=CM,
                               argnums=(0,), params=())
    # sm: 4x4 local elements, 5 FLOPs forward + 4 backward; loss: 16 loop points, 1 + 1
    compute = (16 * (5 + 4) + 16 * 2) / F
    # sm's row statistics: 4 rows = 16 B, all-reduced twice forward (max, sum), once backward;
    # the loss's output is partial over axis 0 (n is reduced): a 4 B all-reduce
    comm_fwd = 2 * (A + 2 * (1 / 2) * 16 / B) + (A + 2 * (1 / 2) * 4 / B)
    comm_bwd = A + 2 * (1 / 2) * 16 / B
    memory = 64 + 64 + 4  # x (data: once), sm's output, the loss
    assert plan.cost == pytest.approx(compute + comm_fwd + comm_bwd, rel=1e-6)
    assert plan.breakdown == pytest.approx(
        {"compute_s": compute, "comm_fwd_s": comm_fwd, "comm_bwd_s": comm_bwd, "memory_bytes": memory}, rel=1e-6)


def square_sum(x):
    return ops.reduce_sum(ops.mul(x, x, name="sq"), name="loss")


def test_leaf_read_twice_has_its_own_layout():
    x = np.zeros((4, 8), np.float32)
    plan = msir.parallel.shard(square_sum, (2,), {"sq": "m", "loss": "m"}, input_layouts={0: "dims=[[],[]]"},
                               example_args=(x,), cost_model=CM)
    # sq: 2x8 local, forward 1, backward mul's 2 per input needing a gradient (two uses); loss: 1 + 1
    compute = (16 * (1 + 2 * 2) + 16 * 2) / F
    # x stored whole: each use slices its rows (free); the loss's output is partial over axis 0
    comm_fwd = A + 2 * (1 / 2) * 4 / B
    # each use's cotangent (rows split, 64 B) is gathered back to x's layout: twice alpha + (n-1) s / B
    comm_bwd = 2 * (A + 1 * 64 / B)
    memory = 4 * 128 + 64 + 4  # x a parameter (4x, whole), sq's output, the loss
    assert plan.cost == pytest.approx(compute + comm_fwd + comm_bwd, rel=1e-6)
    assert plan.breakdown == pytest.approx(
        {"compute_s": compute, "comm_fwd_s": comm_fwd, "comm_bwd_s": comm_bwd, "memory_bytes": memory}, rel=1e-6)
    assert str(plan.layout_of(0)) == "dims=[[],[]], partial=[]"


def bias_layer(x, w, b):
    return ops.reduce_sum(ops.add(ops.matmul(x, w, name="mm"), b, name="bias"), name="loss")


def test_inference_has_no_backward_and_a_bias_add_is_elementwise():
    x, w, b = np.zeros((8, 4), np.float32), np.zeros((4, 6), np.float32), np.zeros(6, np.float32)
    plan = msir.parallel.shard(bias_layer, (2,), {"mm": "k", "bias": "m", "loss": "m"}, example_args=(x, w, b),
                               cost_model=CM, argnums=())
    assert plan.spec_of("bias") == "mn,n->mn"
    # mm: local loops 8*6*2 = 96, forward only; bias: 4x6 local elements; loss: 24
    compute = (2 * 96 + 24 + 24) / F
    # mm's output (8x6 floats = 192 B, partial over axis 0) to bias's rows: reduce_scatter,
    # alpha + (n-1)/n s / B; the loss's partial scalar: an all-reduce
    comm_fwd = (A + (1 / 2) * 192 / B) + (A + 2 * (1 / 2) * 4 / B)
    memory = 64 + 48 + 24 + 192 + 96 + 4  # x, w, b (data: once each, local), mm, bias, loss outputs
    assert plan.breakdown == pytest.approx(
        {"compute_s": compute, "comm_fwd_s": comm_fwd, "comm_bwd_s": 0.0, "memory_bytes": memory}, rel=1e-6)
