"""`msir.parallel`'s entry points: reachable lazily from `import msir` (which
stays light), scipy only imported for an ILP, `msir.jit` functions planned
like plain ones, ties broken towards data parallelism, and argument checks."""

import re
import subprocess
import sys

import numpy as np
import pytest

import msir
from msir import ops
from msir.errors import PlanningError
from msir.parallel import CostModel


def test_import_msir_stays_light_and_scipy_waits_for_an_ilp():
    code = (
        "import sys, numpy as np, msir\n"
        "assert 'msir.parallel' not in sys.modules\n"
        "p = msir.parallel\n"
        "assert not [m for m in ('xdsl', 'scipy', 'llvmlite') if m in sys.modules], sys.modules.keys()\n"
        "from test_parallel_api import weights_first\n"
        "plan = p.auto_shard(weights_first, (2,), (np.zeros((8, 8), np.float32),) * 2)\n"
        "assert 'scipy' not in sys.modules and 'llvmlite' not in sys.modules\n"
        "print(plan.strategy_of('mm'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=__file__.rsplit("/", 1)[0])
    assert out.returncode == 0, out.stderr[-2000:]


def weights_first(w, x):
    return ops.reduce_sum(ops.matmul(w, x, name="mm"), name="loss")


def test_equal_costs_go_to_data_parallelism():
    # No communication cost worth a femtosecond (alpha 0, bandwidth 1e30): splitting m (w's rows),
    # n (x's columns) or k costs the same compute. The enumeration order would pick m first; the
    # tie rule picks n, the loop the parameter w does not have.
    model = CostModel(alpha=[0.0], bandwidth=[1e30], flops=1e12)
    z = np.zeros((8, 8), np.float32)
    plan = msir.parallel.auto_shard(weights_first, (2,), (z, z), cost_model=model, argnums=(0,), params=(0,))
    assert plan.spec_of("mm") == "mk,kn->mn"
    assert plan.strategy_of("mm") == "n"


def test_jit_functions_are_planned_like_plain_ones():
    z = np.zeros((8, 8), np.float32)
    jitted = msir.jit(weights_first)
    a = msir.parallel.auto_shard(jitted, (2,), (z, z))
    b = msir.parallel.auto_shard(weights_first, (2,), (z, z))
    assert a.strategies == b.strategies and a.cost == b.cost


def test_argument_positions_are_checked():
    z = np.zeros((8, 8), np.float32)
    with pytest.raises(PlanningError, match=r"argnums: 5 is not an argument position of 'weights_first' "
                                            r"\(2 arguments\)"):
        msir.parallel.auto_shard(weights_first, (2,), (z, z), argnums=(5,))
    with pytest.raises(PlanningError, match=r"params=\(0,\) must be among argnums=\(1,\)"):
        msir.parallel.auto_shard(weights_first, (2,), (z, z), argnums=(1,), params=(0,))
    with pytest.raises(PlanningError, match="CostModel.alpha has 1 entries; the mesh \\(2, 2\\) has 2 axes"):
        msir.parallel.auto_shard(weights_first, (2, 2), (z, z), cost_model=CostModel(alpha=[1e-6]))


def diagonal(x):
    return np.einsum("ii->i", x)


def test_diagonals_are_refused_at_their_line():
    with pytest.raises(PlanningError, match="reads a diagonal") as e:
        msir.parallel.auto_shard(diagonal, (2,), (np.zeros((4, 4), np.float32),))
    assert e.value.loc.line == diagonal.__code__.co_firstlineno + 1


def inner_loss(w, x):
    return np.sum(np.tanh(x @ w))


def differentiates_inside(w, x):
    return msir.grad(inner_loss)(w, x)


def test_a_function_that_differentiates_inside_is_planned_as_its_loss():
    """Issue 12 step (c) lifted the refusal: the step is planned as the loss it differentiates (refusals of
    steps the planner cannot shard: test_parallel_training.py)."""
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((4, 4)).astype(np.float32), rng.standard_normal((4, 4)).astype(np.float32)
    plan = msir.parallel.auto_shard(differentiates_inside, (2,), (w, x))
    assert plan.graph.step.argnums == (0,)
    want = msir.grad(inner_loss)(w.astype(np.float64), x.astype(np.float64))
    np.testing.assert_allclose(plan.run(w, x), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def dense_layer(x, w, b):
    return ops.reduce_sum(ops.dense(x, w, b, name="fc"), name="loss")


def test_semi_auto_slices_of_a_dense_and_several_axes_on_one_loop():
    x, w, b = np.zeros((64, 32), np.float32), np.zeros((16, 32), np.float32), np.zeros(16, np.float32)
    mesh = msir.parallel.Mesh((2, 4), axis_names=("data", "model"))
    # MindSpore's Dense strategy slices its two matrix operands: x's rows in 2, w's rows (out) in 4
    plan = msir.parallel.shard(dense_layer, mesh, {"fc": ((2, 1), (4, 1))}, example_args=(x, w, b))
    assert plan.spec_of("fc") == "mk,nk,n->mn" and plan.strategy_of("fc") == "m,n"
    # both axes on the contraction: split 8 ways, axis 0 major
    plan = msir.parallel.shard(dense_layer, mesh, {"fc": "k,k"}, example_args=(x, w, b))
    assert plan.layout_of(1) == msir.parallel.Layout(((), (0, 1)))
    with pytest.raises(PlanningError, match=r"mesh axis 1 \('model', size 8\) splits loop n \(dimension 1 of the "
                                            r"output, size 16\) 32 ways, which does not divide it"):
        msir.parallel.shard(dense_layer, msir.parallel.Mesh((4, 8), ("data", "model")), {"fc": "n,n"},
                            example_args=(x, w, b))


@pytest.mark.parametrize("call, message", [
    (lambda a: msir.parallel.auto_shard(weights_first, "2x4", a), r"mesh '2x4': a mesh is a Mesh, a device count"),
    (lambda a: msir.parallel.auto_shard(weights_first, (2, 0), a), r"one or more axes of size >= 1"),
    (lambda a: msir.parallel.auto_shard(weights_first, (2,), a, cost_model=CostModel(alpha="fast")),
     r"CostModel.alpha must be a number or one number per mesh axis, got 'fast'"),
    (lambda a: msir.parallel.auto_shard(weights_first, (2,), a, cost_model=CostModel(memory_limit=-1)),
     r"CostModel.memory_limit must be a positive number or None, got -1"),
    (lambda a: msir.parallel.shard(weights_first, (2,), {"mm": 5}, example_args=a),
     r"op 'mm' \(mk,kn->mn\): a strategy is text \('m,-'\) or MindSpore slice tuples"),
    (lambda a: msir.parallel.shard(weights_first, (2,), input_layouts={0: 5}, example_args=a),
     r"input_layouts\[0\] for argument 'w': expected a msir.parallel.Layout or its text"),
])
def test_bad_arguments_are_msir_errors(call, message):
    z = np.zeros((8, 8), np.float32)
    with pytest.raises(PlanningError, match=message):
        call((z, z))


def affine_loss(w, b, x):
    return ops.reduce_sum(ops.add(ops.matmul(x, w, name="mm"), b, name="bias"), name="loss")


def affine_step(x, w, b):  # its positions are not the loss's: x is the step's 0 and the loss's 2
    return msir.value_and_grad(affine_loss, argnums=(0, 1))(w, b, x)


def _arg_col(fn, name):
    """The 1-based column of parameter `name` on `fn`'s def line (the location of its errors)."""
    import inspect

    line = inspect.getsource(fn).splitlines()[0]
    return line.index(f"{name},") + 1 if f"{name}," in line else line.index(f"{name})") + 1


@pytest.mark.parametrize("fn, position, layout, rank, name, shape", [
    (weights_first, 1, msir.parallel.Layout([[0]], []), 1, "x", (8, 8)),  # MindSpore's form, as lists
    (weights_first, 0, msir.parallel.Layout(((0,), (), ())), 3, "w", (8, 8)),
    (weights_first, 0, "dims=[[0]], partial=[]", 1, "w", (8, 8)),
    (affine_step, 0, "dims=[[0]]", 1, "x", (8, 16)),
    (affine_step, 2, "dims=[[0],[]]", 2, "b", (4,)),
])
def test_a_layout_of_another_rank_names_argument_layout_shape_and_line(fn, position, layout, rank, name, shape):
    """The step's own position is named (not the loss's), with the argument's name, the layout and its rank,
    the argument's rank and shape, at the argument's parameter."""
    args = (np.zeros((8, 8), np.float32),) * 2 if fn is weights_first else (
        np.zeros((8, 16), np.float32), np.zeros((16, 4), np.float32), np.zeros(4, np.float32))
    text = str(msir.parallel.Layout.of(layout)).replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(PlanningError, match=rf"input_layouts\[{position}\]: layout {text} has rank {rank}, but "
                                            rf"argument '{name}' has rank {len(shape)} "
                                            rf"\({'shape ' + re.escape(str(shape))}\)") as e:
        msir.parallel.shard(fn, (2,), input_layouts={position: layout}, example_args=args)
    assert (e.value.loc.line, e.value.loc.col) == (fn.__code__.co_firstlineno, _arg_col(fn, name))


def test_a_layout_that_does_not_divide_a_step_argument_names_the_step_position():
    args = (np.zeros((9, 16), np.float32), np.zeros((16, 4), np.float32), np.zeros(4, np.float32))
    with pytest.raises(PlanningError, match=r"input_layouts\[0\]: mesh axis 0 \(size 2\) splits dimension 0 "
                                            r"\(size 9\) of argument 'x' 2 ways, which does not divide it") as e:
        msir.parallel.shard(affine_step, (2,), input_layouts={0: "dims=[[0],[]]"}, example_args=args)
    assert (e.value.loc.line, e.value.loc.col) == (affine_step.__code__.co_firstlineno, _arg_col(affine_step, "x"))


def test_a_planned_step_run_on_an_argument_of_another_rank():
    """auto_shard's plan (stored layouts chosen by the search) run on arguments it was not made for."""
    args = (np.zeros((8, 16), np.float32), np.zeros((16, 4), np.float32), np.zeros(4, np.float32))
    plan = msir.parallel.auto_shard(affine_step, (2,), args)
    with pytest.raises(msir.errors.ShapeError, match=r"argument 2 \('b'\) of 'affine_step' has shape \(4, 1\) "
                                                     r"\(rank 2\); the plan was made for shape \(4,\) \(rank 1\), "
                                                     r"stored in layout dims=\[\[\]\], partial=\[\]") as e:
        plan.run(args[0], args[1], args[2][:, None])
    assert (e.value.loc.line, e.value.loc.col) == (affine_step.__code__.co_firstlineno, _arg_col(affine_step, "b"))


@pytest.mark.parametrize("slices, message", [
    (((2, 1, 1), (1, 1)), r"slice strategy entry \(2, 1, 1\) for input 0 has 3 numbers, the input has 2 dimensions "
                          r"\(mk\)"),
    (((2, 1),), r"slice strategy \(\(2, 1\),\) has 1 entries, the op has 2 inputs \(mk, kn\)"),
])
def test_slices_of_another_rank_name_the_op_and_its_line(slices, message):
    z = np.zeros((8, 8), np.float32)
    with pytest.raises(PlanningError, match=r"op 'mm' \(mk,kn->mn\): " + message) as e:
        msir.parallel.shard(weights_first, (2,), {"mm": slices}, example_args=(z, z))
    assert e.value.loc.line == weights_first.__code__.co_firstlineno + 1  # the op's call
