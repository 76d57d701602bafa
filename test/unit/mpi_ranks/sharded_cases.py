"""The plans the MPI tests run, shared by the rank script (`run_plans.py`,
one process per rank) and the test that checks its results
(`test_parallel_mpi.py`, one process): each case is a function, its tiny
float32 arguments and its strategies, with a float64 reference, on the mesh
the job's rank count gives it. Together they cover every collective the MPI
runtime implements, on 1-D and 2-D meshes: all_reduce sum (Megatron's row
split) and max and sum (softmax over a split axis), all_to_all, and with 4
ranks also reduce_scatter, all_gather, all_slice and a mesh smaller than
the world."""

import numpy as np

from msir import ops
from msir.parallel import Layout, shard


def mlp(x, w1, b1, w2, b2):
    h = ops.relu(ops.add(ops.matmul(x, w1, name="fc1"), b1, name="bias1"), name="act")
    return ops.add(ops.matmul(h, w2, name="fc2"), b2, name="bias2")


def softmax_head(x, w):
    return ops.softmax(ops.matmul(x, w, name="mm"), name="sm")


def tanh_head(x, w):
    return ops.tanh(ops.matmul(x, w, name="mm"), name="act")


def relu_head(x, w):
    return ops.relu(ops.matmul(x, w, name="mm"), name="act")


def _args(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


MLP_ARGS = _args((16, 32), (32, 64), (64,), (64, 32), (32,))
HEAD_ARGS = _args((16, 32), (32, 24), seed=1)


def _f64(args):
    return [a.astype(np.float64) for a in args]


def mlp_reference(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def softmax_reference(x, w):
    z = x @ w
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def relu_reference(x, w):
    return np.maximum(x @ w, 0)


# name -> the function, its arguments and its float64 reference
FUNCTIONS = {"megatron": (mlp, MLP_ARGS, mlp_reference), "softmax": (softmax_head, HEAD_ARGS, softmax_reference),
             "reduce_scatter": (tanh_head, HEAD_ARGS, lambda x, w: np.tanh(x @ w)),
             "all_to_all": (relu_head, HEAD_ARGS, relu_reference), "all_gather": (relu_head, HEAD_ARGS, relu_reference),
             "smaller_mesh": (mlp, MLP_ARGS, mlp_reference)}
MEGATRON = {"fc1": "n", "fc2": "k", "bias2": "-"}  # column then row split: one all_reduce over the mesh


def cases(ranks: int) -> dict:
    """name -> (a function making the plan, its arguments, the float64
    reference of its result) for a job of `ranks` ranks (2 or 4)."""
    if ranks == 2:  # reduce_scatter and all_gather run in the 4-rank job, on 2 and 4 ranks
        meshes = {"megatron": (2,), "softmax": (2,), "all_to_all": (2,)}
        strategies = {"megatron": MEGATRON, "softmax": {"mm": "n", "sm": "n"}, "all_to_all": {"mm": "m", "act": "n"}}
        layouts = {}
    else:
        meshes = {"megatron": (4,), "softmax": (2, 2), "reduce_scatter": (2, 2), "all_to_all": (2, 2),
                  "all_gather": (4,), "smaller_mesh": (2,)}
        strategies = {"megatron": MEGATRON, "softmax": {"mm": "m,n", "sm": "m,n"},
                      "reduce_scatter": {"mm": "m,k", "act": "m,n"}, "all_to_all": {"mm": "k,-", "act": "-,m"},
                      "all_gather": {"mm": "m", "act": "-"}, "smaller_mesh": MEGATRON}
        layouts = {"all_to_all": {0: Layout(((0,), ()))}}
    out = {}
    for name, mesh in meshes.items():
        fn, args, reference = FUNCTIONS[name]

        def make(fn=fn, name=name, args=args):
            return shard(fn, meshes[name], strategies=strategies[name], input_layouts=layouts.get(name),
                         example_args=args, argnums=())

        out[name] = (make, args, reference(*_f64(args)))
    return out
