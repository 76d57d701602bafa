"""The plans the MPI tests run, shared by the rank script (`run_plans.py`,
one process per rank) and the test that checks its results
(`test_parallel_mpi.py`, one process): each case is a function, its tiny
float32 arguments and its strategies, with a float64 reference, on the mesh
the job's rank count gives it. Together they cover every collective the MPI
runtime implements, on 1-D and 2-D meshes: all_reduce sum (Megatron's row
split) and max and sum (softmax over a split axis), all_to_all, and with 4
ranks also reduce_scatter, all_gather, all_slice and a mesh smaller than
the world. The training-step cases run a function calling
`msir.value_and_grad` of an MLP's loss forward and backward sharded, planned
by `shard` (data parallel, Megatron, both on a 2-D mesh) and by `auto_shard`:
their results are the loss and the three gradients, against a float64 NumPy
gradient written out by hand. A case's results are flattened by `flat` to
the names the rank script saves them under."""

import numpy as np

import msir
from msir import ops
from msir.parallel import CostModel, Layout, auto_shard, shard


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


def loss(w1, b1, w2, x, y):
    h = ops.relu(ops.add(ops.matmul(x, w1, name="fc1"), b1, name="bias1"), name="act")
    d = ops.sub(ops.matmul(h, w2, name="fc2"), y, name="err")
    return ops.reduce_mean(ops.mul(d, d, name="sq"), name="mean")


def gradient_step(w1, b1, w2, x, y):
    value, grads = msir.value_and_grad(loss, argnums=(0, 1, 2))(w1, b1, w2, x, y)
    return value, *grads


def gradient_step_reference(w1, b1, w2, x, y):
    """The loss and its gradients in w1, b1, w2, by the chain rule in float64."""
    pre = x @ w1 + b1
    h = np.maximum(pre, 0)
    d = h @ w2 - y
    dd = 2 * d / d.size
    dh = (dd @ w2.T) * (pre > 0)
    return np.mean(d * d), x.T @ dh, dh.sum(axis=0), h.T @ dd


STEP_ARGS = _args((8, 16), (16,), (16, 4), (16, 8), (16, 4), seed=2)
FORWARD = ("fc1", "bias1", "act", "fc2", "err", "sq", "mean")
# compute dear and communication cheap: the search splits the step's work over every device
SPLITTING_COSTS = {(2,): CostModel(alpha=[1e-9], bandwidth=[1e12], flops=1e3),
                   (2, 2): CostModel(alpha=[1e-9, 1e-9], bandwidth=[1e12, 1e12], flops=1e3)}


# name -> the function, its arguments and its float64 reference
FUNCTIONS = {"megatron": (mlp, MLP_ARGS, mlp_reference), "softmax": (softmax_head, HEAD_ARGS, softmax_reference),
             "reduce_scatter": (tanh_head, HEAD_ARGS, lambda x, w: np.tanh(x @ w)),
             "all_to_all": (relu_head, HEAD_ARGS, relu_reference), "all_gather": (relu_head, HEAD_ARGS, relu_reference),
             "smaller_mesh": (mlp, MLP_ARGS, mlp_reference),
             "dp_step": (gradient_step, STEP_ARGS, gradient_step_reference),
             "megatron_step": (gradient_step, STEP_ARGS, gradient_step_reference),
             "auto_step": (gradient_step, STEP_ARGS, gradient_step_reference)}
MEGATRON = {"fc1": "n", "fc2": "k", "bias2": "-"}  # column then row split: one all_reduce over the mesh


def cases(ranks: int) -> dict:
    """name -> (a function making the plan, its arguments, the float64
    reference of its result) for a job of `ranks` ranks (2 or 4)."""
    if ranks == 2:  # reduce_scatter and all_gather run in the 4-rank job, on 2 and 4 ranks
        meshes = {"megatron": (2,), "softmax": (2,), "all_to_all": (2,), "dp_step": (2,), "megatron_step": (2,),
                  "auto_step": (2,)}
        strategies = {"megatron": MEGATRON, "softmax": {"mm": "n", "sm": "n"}, "all_to_all": {"mm": "m", "act": "n"},
                      "dp_step": dict.fromkeys(FORWARD, "m"),
                      "megatron_step": {"fc1": "n", "bias1": "n", "act": "n", "fc2": "k"}}
        layouts = {}
    else:
        meshes = {"megatron": (4,), "softmax": (2, 2), "reduce_scatter": (2, 2), "all_to_all": (2, 2),
                  "all_gather": (4,), "smaller_mesh": (2,), "dp_step": (4,), "megatron_step": (2, 2),
                  "auto_step": (2, 2)}
        strategies = {"megatron": MEGATRON, "softmax": {"mm": "m,n", "sm": "m,n"},
                      "reduce_scatter": {"mm": "m,k", "act": "m,n"}, "all_to_all": {"mm": "k,-", "act": "-,m"},
                      "all_gather": {"mm": "m", "act": "-"}, "smaller_mesh": MEGATRON,
                      "dp_step": dict.fromkeys(FORWARD, "m"),
                      "megatron_step": {"fc1": "m,n", "bias1": "m,n", "act": "m,n", "fc2": "m,k", "err": "m,-"}}
        layouts = {"all_to_all": {0: Layout(((0,), ()))}}
    out = {}
    for name, mesh in meshes.items():
        fn, args, reference = FUNCTIONS[name]

        def make(fn=fn, name=name, args=args):
            if name == "auto_step":
                return auto_shard(fn, meshes[name], args, cost_model=SPLITTING_COSTS[meshes[name]])
            # a training step's argnums are its transformation's; the other plans are of inference
            argnums = None if fn is gradient_step else ()
            return shard(fn, meshes[name], strategies=strategies[name], input_layouts=layouts.get(name),
                         example_args=args, argnums=argnums)

        out[name] = (make, args, reference(*_f64(args)))
    return out


def flat(name: str, results) -> dict:
    """A case's results by the names they are saved under: `name` for one array, `name.i` for the i-th of several."""
    if isinstance(results, tuple):
        return {f"{name}.{i}": np.asarray(r) for i, r in enumerate(results)}
    return {name: np.asarray(results)}
