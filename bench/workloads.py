"""The benchmark workloads: one registry, one entry per workload.

A workload is a name, an input builder (NumPy arrays, full and ``--quick`` sizes), a
NumPy reference, the work it does (bytes moved and/or flops, for GB/s and GFLOP/s),
a tolerance, and per-framework implementations. Each implementation is a *builder*:
``builder(mod)`` gets the framework's module(s) and returns the function to time,
which takes the framework's own arrays (converted once, outside the timing).

Frameworks: ``msir`` (the NumPy source below, through ``msir.jit``), ``numpy``,
``jax`` (under ``jax.jit``), ``torch`` (eager), ``torch.compile`` (the torch
implementation through ``torch.compile``) and ``mindspore`` (graph mode). A
framework without an entry for a workload is reported as "n/a" for it.

This module imports NumPy only: it is also imported by the MindSpore worker, which
runs in its own virtualenv with numpy<2 and without msir.

Adding a workload (a training step, a gradient, ...) means adding one
``register(Workload(...))`` call; the harness picks it up by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# --------------------------------------------------------------------------------------
# the registry


@dataclass
class Workload:
    name: str
    desc: str
    make_inputs: Callable[[bool, np.random.Generator], tuple]  # (quick, rng) -> inputs
    reference: Callable  # NumPy: the computation every framework must agree with
    impls: dict[str, Callable] = field(default_factory=dict)  # framework -> builder(mod)
    bytes_moved: Callable[[tuple], float] | None = None  # minimum traffic, for GB/s
    flops: Callable[[tuple], float] | None = None  # for GFLOP/s
    # agreement: max|out - ref| <= tol * max|ref| (NumPy float32 result as reference)
    tol: float = 1e-4


REGISTRY: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    REGISTRY[w.name] = w
    return w


def _f32(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


# --------------------------------------------------------------------------------------
# W1: fused elementwise chain with transcendentals.
# The NumPy functions below are also the msir implementations (msir compiles source).


def w1_numpy(x, a, b):
    return np.tanh(a * x + b) * (1.0 / (1.0 + np.exp(-x))) + x**2


def _w1_jax(m):
    jnp = m["jnp"]

    def f(x, a, b):
        return jnp.tanh(a * x + b) * (1.0 / (1.0 + jnp.exp(-x))) + x**2

    return m["jax"].jit(f)


def _w1_torch(m):
    torch = m["torch"]

    def f(x, a, b):
        return torch.tanh(a * x + b) * (1.0 / (1.0 + torch.exp(-x))) + x**2

    return f


def _w1_ms(m):
    ms, ops = m["ms"], m["ops"]

    @ms.jit
    def f(x, a, b):
        return ops.tanh(a * x + b) * (1.0 / (1.0 + ops.exp(-x))) + x * x

    return f


register(
    Workload(
        name="W1",
        desc="tanh(a*x+b)*sigmoid(x)+x**2, 2^22 f32 (sigmoid = 1/(1+exp(-x)))",
        make_inputs=lambda quick, rng: (
            _f32(rng, 1 << (16 if quick else 22)),
            np.float32(0.7),
            np.float32(0.1),
        ),
        reference=w1_numpy,
        impls={"msir": lambda m: m["msir"].jit(w1_numpy), "numpy": lambda m: w1_numpy,
               "jax": _w1_jax, "torch": _w1_torch, "mindspore": _w1_ms},
        bytes_moved=lambda inp: 8.0 * inp[0].size,  # read x, write out
        tol=1e-5,
    )
)

# --------------------------------------------------------------------------------------
# W2: row softmax, W3: row layernorm (eps 1e-5, no affine)


def w2_numpy(x):
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=1, keepdims=True)


def w3_numpy(x):
    mu = x.mean(axis=1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + 1e-5)


def _w2_jax(m):
    jnp = m["jnp"]

    def f(x):
        e = jnp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return m["jax"].jit(f)


def _w3_jax(m):
    jnp = m["jnp"]

    def f(x):
        mu = x.mean(axis=1, keepdims=True)
        d = x - mu
        var = (d * d).mean(axis=1, keepdims=True)
        return d / jnp.sqrt(var + 1e-5)

    return m["jax"].jit(f)


def _w2_torch(m):  # PyTorch's native softmax (what a user would pick)
    torch = m["torch"]
    return lambda x: torch.softmax(x, dim=1)


def _w3_torch(m):  # PyTorch's native layer_norm, no affine
    F = m["torch"].nn.functional
    return lambda x: F.layer_norm(x, (x.shape[1],), eps=1e-5)


def _w2_ms(m):
    ms, ops = m["ms"], m["ops"]

    @ms.jit
    def f(x):
        return ops.softmax(x, axis=1)

    return f


def _w3_ms(m):
    ms, ops = m["ms"], m["ops"]

    @ms.jit
    def f(x):
        mu = x.mean(axis=1, keep_dims=True)
        d = x - mu
        var = (d * d).mean(axis=1, keep_dims=True)
        return d / ops.sqrt(var + 1e-5)

    return f


_rows = lambda quick, rng: (_f32(rng, 256, 128) if quick else _f32(rng, 4096, 1024),)  # noqa: E731

register(
    Workload(
        name="W2",
        desc="row softmax, 4096x1024 f32",
        make_inputs=_rows,
        reference=w2_numpy,
        impls={"msir": lambda m: m["msir"].jit(w2_numpy), "numpy": lambda m: w2_numpy,
               "jax": _w2_jax, "torch": _w2_torch, "mindspore": _w2_ms},
        bytes_moved=lambda inp: 8.0 * inp[0].size,
        tol=1e-5,
    )
)
register(
    Workload(
        name="W3",
        desc="row layernorm, 4096x1024 f32, eps 1e-5, no affine",
        make_inputs=_rows,
        reference=w3_numpy,
        impls={"msir": lambda m: m["msir"].jit(w3_numpy), "numpy": lambda m: w3_numpy,
               "jax": _w3_jax, "torch": _w3_torch, "mindspore": _w3_ms},
        bytes_moved=lambda inp: 8.0 * inp[0].size,
        tol=1e-4,
    )
)

# --------------------------------------------------------------------------------------
# W4: matmul n^3 f32, plain and with a transposed operand (no copy in the source)


def mm_numpy(a, b):
    return a @ b


def mm_ta_numpy(a, b):
    return a.T @ b


def mm_tb_numpy(a, b):
    return a @ b.T


def _mm_jax(variant):
    def build(m):
        fns = {"": lambda a, b: a @ b, "Ta": lambda a, b: a.T @ b, "Tb": lambda a, b: a @ b.T}
        return m["jax"].jit(fns[variant])

    return build


def _mm_torch(variant):
    def build(m):
        return {"": lambda a, b: a @ b, "Ta": lambda a, b: a.T @ b, "Tb": lambda a, b: a @ b.T}[variant]

    return build


def _mm_ms(variant):
    def build(m):
        ms, ops = m["ms"], m["ops"]
        ta, tb = variant == "Ta", variant == "Tb"
        matmul = ops.MatMul(transpose_a=ta, transpose_b=tb)

        @ms.jit
        def f(a, b):
            return matmul(a, b)

        return f

    return build


for _n, _qn in ((512, 64), (1024, 128)):
    for _v, _ref in (("", mm_numpy), ("Ta", mm_ta_numpy), ("Tb", mm_tb_numpy)):
        _label = {"": "a @ b", "Ta": "a.T @ b", "Tb": "a @ b.T"}[_v]
        register(
            Workload(
                name=f"W4-{_n}" + (f"-{_v}" if _v else ""),
                desc=f"matmul {_label}, {_n}^3 f32",
                make_inputs=lambda quick, rng, n=_n, qn=_qn: (
                    _f32(rng, qn if quick else n, qn if quick else n),
                    _f32(rng, qn if quick else n, qn if quick else n),
                ),
                reference=_ref,
                impls={"msir": lambda m, f=_ref: m["msir"].jit(f), "numpy": lambda m, f=_ref: f,
                       "jax": _mm_jax(_v), "torch": _mm_torch(_v), "mindspore": _mm_ms(_v)},
                flops=lambda inp: 2.0 * inp[0].shape[0] * inp[0].shape[1] * inp[1].shape[1],
                tol=1e-4,
            )
        )

# W4-1024-relu: a dense layer's forward relu(x @ w + b), the bias and activation the
# epilogue of the product (msir fuses it into the GEMM: lowering/blas.py, "Epilogues";
# bench/gemm_epilogue.py compares fused and unfused msir in one process)


def dense_relu_numpy(x, w, b):
    return np.maximum(x @ w + b, 0.0)


def _dense_relu_jax(m):
    jnp = m["jnp"]
    return m["jax"].jit(lambda x, w, b: jnp.maximum(x @ w + b, 0.0))


def _dense_relu_torch(m):
    torch = m["torch"]
    return lambda x, w, b: torch.relu(torch.addmm(b, x, w))


register(
    Workload(
        name="W4-1024-relu",
        desc="dense layer relu(x @ w + b), 1024^3 f32",
        make_inputs=lambda quick, rng: (_f32(rng, 128 if quick else 1024, 128 if quick else 1024),
                                        _f32(rng, 128 if quick else 1024, 128 if quick else 1024),
                                        _f32(rng, 128 if quick else 1024)),
        reference=dense_relu_numpy,
        impls={"msir": lambda m: m["msir"].jit(dense_relu_numpy), "numpy": lambda m: dense_relu_numpy,
               "jax": _dense_relu_jax, "torch": _dense_relu_torch},
        flops=lambda inp: 2.0 * inp[0].shape[0] * inp[0].shape[1] * inp[1].shape[1],
        tol=1e-4,
    )
)

# --------------------------------------------------------------------------------------
# W8: compile time of a 200-op straight-line elementwise function, in a first and a
# second process. The module is written to a file (msir compiles source, and a
# function built by exec has none); `np` is bound to numpy, jax.numpy or torch, which
# all spell these ops the same. Same op mix as bench/compile_time.py.

W8_OPS = ["np.tanh(x) * y", "np.exp(-x) + y", "np.maximum(x, y) - 0.5", "np.sqrt(x * x + 1.0) / y"]
W8_FRAMEWORKS = {"msir": "numpy", "jax": "jax.numpy", "torch.compile": "torch"}


def w8_source(np_module: str, n_lines: int = 50) -> str:
    """A module with `chain(x, y)`: 4 ops per line after constant folding, 200 ops for 50 lines."""
    lines = [f"import {np_module} as np", "", "", "def chain(x, y):"]
    for i in range(n_lines):
        lines.append(f"    x = {W8_OPS[i % len(W8_OPS)]}")
        lines.append("    y = x * 0.5")
    lines.append("    return x + y")
    return "\n".join(lines) + "\n"


def w8_inputs(rng: np.random.Generator):
    return (rng.random(1024, dtype=np.float32) + 0.5, rng.random(1024, dtype=np.float32) + 0.5)


# --------------------------------------------------------------------------------------
# Issue 6: a training step (W5), a recurrent gradient (W6), a data-dependent while (W7).
#
# W5 and W6 return several arrays. The harness reads one array per call, so their
# functions return a `_Packed`: the framework's own outputs, untouched during the
# timing, which the harness syncs (block_until_ready / asnumpy / numpy) and reads
# back as ONE float64 vector built only when agreement is checked.


class _Packed:
    """Several outputs of one call, seen by the harness as one array (read back only
    after the timing). ``view(list of NumPy arrays) -> 1-D array``; ``keep`` are
    arrays the view needs besides the outputs (a step's old parameters)."""

    def __init__(self, outs, view, keep=()):
        self.outs, self.view, self.keep = tuple(outs), view, tuple(keep)

    @staticmethod
    def _np(o):
        if hasattr(o, "detach"):  # torch
            return o.detach().numpy()
        if hasattr(o, "asnumpy"):  # mindspore
            return o.asnumpy()
        return np.asarray(o)

    def block_until_ready(self):  # jax
        for o in self.outs:
            if hasattr(o, "block_until_ready"):
                o.block_until_ready()
        return self

    def __array__(self, dtype=None, copy=None):
        v = self.view([self._np(o) for o in self.outs], [self._np(o) for o in self.keep])
        return v if dtype is None else v.astype(dtype)

    def detach(self):  # torch readback: out.detach().numpy()
        return self

    def numpy(self):
        return np.asarray(self)

    def asnumpy(self):  # mindspore readback
        return np.asarray(self)


def _flat64(arrays):
    return np.concatenate([np.asarray(a, np.float64).ravel() for a in arrays]) if arrays else np.zeros(0)


# --------------------------------------------------------------------------------------
# W5: one SGD step of an MLP (ReLU hidden layers, softmax cross-entropy, mean over the
# batch, float32, lr 0.01). Inputs: w1, b1, ..., wL, bL, x, onehot. Output: the new
# parameters and the loss. Agreement is checked on the vector
#   [loss, new parameters..., (old - new) / lr ...]
# i.e. the loss, the updated state, and the gradient the update applied (so that a
# wrong gradient shows even though lr * grad is small next to the parameters).

W5_LR = 0.01


def _w5_view(n_params):
    def view(outs, old):
        new, loss = outs[:n_params], outs[n_params]
        return np.concatenate([np.asarray(loss, np.float64).reshape(1), _flat64(new),
                               _flat64([(np.float64(o) - n) / W5_LR for o, n in zip(old, new)])])

    return view


def _w5_inputs(sizes, batch, qsizes, qbatch):
    def make(quick, rng):
        sz, b = (qsizes, qbatch) if quick else (sizes, batch)
        params = []
        for n_in, n_out in zip(sz[:-1], sz[1:]):
            params.append((rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32))
            params.append((0.01 * rng.standard_normal(n_out)).astype(np.float32))
        x = rng.standard_normal((b, sz[0]), dtype=np.float32)
        onehot = np.eye(sz[-1], dtype=np.float32)[rng.integers(0, sz[-1], b)]
        return (*params, x, onehot)

    return make


def _w5_step_numpy(*args, dtype=np.float32):
    """One SGD step with a hand-written backward pass (the reference runs it in float64)."""
    *params, x, onehot = [np.asarray(a, dtype) for a in args]
    n = len(params) // 2
    acts, pre = [x], []
    for i in range(n):
        z = acts[-1] @ params[2 * i] + params[2 * i + 1]
        pre.append(z)
        if i < n - 1:
            acts.append(np.maximum(z, 0))
    z = pre[-1] - pre[-1].max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -np.mean(np.sum(onehot * log_p, axis=1))
    dz = (np.exp(log_p) - onehot) / dtype(x.shape[0])
    grads = [None] * len(params)
    for i in reversed(range(n)):
        grads[2 * i] = acts[i].T @ dz
        grads[2 * i + 1] = dz.sum(axis=0)
        if i > 0:
            dz = (dz @ params[2 * i].T) * (pre[i - 1] > 0)
    new = [p - dtype(W5_LR) * g for p, g in zip(params, grads)]
    return (*new, loss)


def _w5_reference(*args):
    n = len(args) - 2
    return _w5_view(n)(list(_w5_step_numpy(*args, dtype=np.float64)), list(args[:n]))


def _w5_numpy(m):
    def f(*args):
        n = len(args) - 2
        return _Packed(_w5_step_numpy(*args), _w5_view(n), args[:n])

    return f


# msir: the loss and the step are plain NumPy source; the step calls
# msir.value_and_grad inside the ONE jitted function.


def w5_loss3(w1, b1, w2, b2, w3, b3, x, onehot):
    h1 = np.maximum(x @ w1 + b1, 0.0)
    h2 = np.maximum(h1 @ w2 + b2, 0.0)
    logits = h2 @ w3 + b3
    z = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * log_probs, axis=1))


def w5_loss2(w1, b1, w2, b2, x, onehot):
    h1 = np.maximum(x @ w1 + b1, 0.0)
    logits = h1 @ w2 + b2
    z = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * log_probs, axis=1))


def _w5_msir(n_layers):
    def build(m):
        msir = m["msir"]

        if n_layers == 3:
            def step(w1, b1, w2, b2, w3, b3, x, onehot):
                loss, (g1, gb1, g2, gb2, g3, gb3) = msir.value_and_grad(w5_loss3, argnums=(0, 1, 2, 3, 4, 5))(
                    w1, b1, w2, b2, w3, b3, x, onehot)
                return (w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2,
                        w3 - 0.01 * g3, b3 - 0.01 * gb3, loss)
        else:
            def step(w1, b1, w2, b2, x, onehot):
                loss, (g1, gb1, g2, gb2) = msir.value_and_grad(w5_loss2, argnums=(0, 1, 2, 3))(
                    w1, b1, w2, b2, x, onehot)
                return w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2, loss

        jf = msir.jit(step)
        view = _w5_view(2 * n_layers)
        return lambda *a: _Packed(jf(*a), view, a[:2 * n_layers])

    return build


def _w5_jax(m):
    jax, jnp = m["jax"], m["jnp"]

    def loss(params, x, onehot):
        h = x
        n = len(params) // 2
        for i in range(n):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < n - 1:
                h = jnp.maximum(h, 0.0)
        return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(h, axis=1), axis=1))

    @jax.jit
    def step(*args):
        params, x, onehot = args[:-2], args[-2], args[-1]
        value, grads = jax.value_and_grad(loss)(params, x, onehot)
        return (*[p - W5_LR * g for p, g in zip(params, grads)], value)

    def f(*a):
        n = len(a) - 2
        return _Packed(step(*a), _w5_view(n), a[:n])

    return f


def _w5_torch_loss(torch, params, x, onehot):
    h = x
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = torch.relu(h)
    return -(onehot * torch.log_softmax(h, dim=1)).sum(dim=1).mean()


def _w5_torch(m):
    """PyTorch eager: parameters with requires_grad, autograd, manual SGD update."""
    torch = m["torch"]

    def f(*a):
        n = len(a) - 2
        ps = [p.detach().requires_grad_() for p in a[:n]]
        value = _w5_torch_loss(torch, ps, a[-2], a[-1])
        grads = torch.autograd.grad(value, ps)
        with torch.no_grad():
            new = [p - W5_LR * g for p, g in zip(ps, grads)]
        return _Packed((*new, value.detach()), _w5_view(n), a[:n])

    return f


def _w5_torch_compile(m):
    """torch.compile of a functional step (torch.func.grad_and_value: one graph)."""
    torch = m["torch"]

    def step(*a):
        n = len(a) - 2
        grads, value = torch.func.grad_and_value(lambda ps: _w5_torch_loss(torch, ps, a[-2], a[-1]))(tuple(a[:n]))
        new = [p - W5_LR * g for p, g in zip(a[:n], grads)]
        return _Packed((*new, value), _w5_view(n), a[:n])

    return step  # the harness wraps it in torch.compile


def _w5_ms(m):
    """MindSpore graph mode: nn.TrainOneStepCell + nn.SGD (updates its Parameters in
    place, the MindSpore way). The cell is built at the first call from that call's
    arrays; that call's new parameters are copied out for the agreement check."""
    ms, ops = m["ms"], m["ops"]
    nn = ms.nn

    class MLP(nn.Cell):
        def __init__(self, arrays):
            super().__init__()
            self.params = ms.ParameterTuple([ms.Parameter(ms.Tensor(np.array(a)), name=f"p{i}")
                                             for i, a in enumerate(arrays)])
            self.n = len(arrays) // 2

        def construct(self, x, onehot):
            h = x
            for i in range(self.n):
                h = ops.matmul(h, self.params[2 * i]) + self.params[2 * i + 1]
                if i < self.n - 1:
                    h = ops.relu(h)
            return -(onehot * ops.log_softmax(h, axis=1)).sum(axis=1).mean()

    state = {}

    def f(*a):
        n = len(a) - 2
        if "step" not in state:
            net = MLP([p.asnumpy() for p in a[:n]])
            cell = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=W5_LR))
            cell.set_train()
            state["step"], state["net"] = cell, net
            loss = cell(a[-2], a[-1])
            new = [p.asnumpy().copy() for p in net.params]
            return _Packed((*new, loss), _w5_view(n), [p.asnumpy() for p in a[:n]])
        return _Packed((state["step"](a[-2], a[-1]),), lambda outs, old: outs[0])

    return f


def _w5_register(name, sizes, batch, qsizes, qbatch, extra=""):
    n_layers = len(sizes) - 1
    register(
        Workload(
            name=name,
            desc=f"one SGD step (fwd+bwd+update, lr {W5_LR}) MLP {'-'.join(map(str, sizes))}, batch {batch}, "
                 f"ReLU, softmax CE, f32; checked: [loss, new params, (old-new)/lr]{extra}",
            make_inputs=_w5_inputs(sizes, batch, qsizes, qbatch),
            reference=_w5_reference,
            impls={"msir": _w5_msir(n_layers), "numpy": _w5_numpy, "jax": _w5_jax, "torch": _w5_torch,
                   "torch.compile": _w5_torch_compile, "mindspore": _w5_ms},
            # forward 2*B*sum(in*out); backward twice that (dX and dW), the first layer's dX skipped
            flops=lambda inp, n=2 * n_layers: 2.0 * inp[-2].shape[0] * (
                3 * sum(inp[i].shape[0] * inp[i].shape[1] for i in range(0, n, 2)) - inp[0].shape[0] * inp[0].shape[1]),
            tol=1e-4,
        )
    )


_w5_register("W5-b256", (784, 512, 512, 10), 256, (64, 32, 32, 10), 16)
_w5_register("W5-b128", (784, 256, 10), 128, (64, 32, 10), 16)


# --------------------------------------------------------------------------------------
# W6: gradient of a 100-step RNN written as a Python `for` loop over time.
# Column layout, as written in issue 6: h (hidden x batch) = tanh(W @ h + U @ x_t),
# W hidden x hidden, U hidden x input, x_t input x batch; h0 = 0; loss = sum(h_T);
# gradient with respect to W and U. Hidden 128, batch 32, input 32, T = 100, f32.


def w6_loss(W, U, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t])
    return np.sum(h)


def _w6_inputs(quick, rng):
    hid, batch, inp, T = (16, 4, 4, 5) if quick else (128, 32, 32, 100)
    W_ = (rng.standard_normal((hid, hid)) / np.sqrt(hid)).astype(np.float32)
    U_ = (rng.standard_normal((hid, inp)) / np.sqrt(inp)).astype(np.float32)
    xs = rng.standard_normal((T, inp, batch), dtype=np.float32)
    return W_, U_, xs, np.zeros((hid, batch), np.float32)


def _w6_view(outs, keep=()):
    return _flat64(outs)


def _w6_bptt(W, U, xs, h0, dtype=np.float32):
    """Hand-written backpropagation through time (the reference runs it in float64)."""
    W, U, xs, h0 = (np.asarray(a, dtype) for a in (W, U, xs, h0))
    hs = [h0]
    for t in range(xs.shape[0]):
        hs.append(np.tanh(W @ hs[-1] + U @ xs[t]))
    dh = np.ones_like(h0)
    gW, gU = np.zeros_like(W), np.zeros_like(U)
    for t in reversed(range(xs.shape[0])):
        da = dh * (1 - hs[t + 1] ** 2)
        gW += da @ hs[t].T
        gU += da @ xs[t].T
        dh = W.T @ da
    return gW, gU


def _w6_msir(m):
    msir = m["msir"]

    def rnn_grad(W, U, xs, h0):
        return msir.grad(w6_loss, argnums=(0, 1))(W, U, xs, h0)

    jf = msir.jit(rnn_grad)
    return lambda *a: _Packed(jf(*a), _w6_view)


def _w6_jax(unrolled):
    def build(m):
        jax, jnp = m["jax"], m["jnp"]

        if unrolled:
            def loss(W, U, xs, h0):
                h = h0
                for t in range(xs.shape[0]):
                    h = jnp.tanh(W @ h + U @ xs[t])
                return jnp.sum(h)
        else:
            def loss(W, U, xs, h0):
                h, _ = jax.lax.scan(lambda h, x: (jnp.tanh(W @ h + U @ x), None), h0, xs)
                return jnp.sum(h)

        g = jax.jit(jax.grad(loss, argnums=(0, 1)))
        return lambda *a: _Packed(g(*a), _w6_view)

    return build


def _w6_torch(m):
    torch = m["torch"]

    def f(W, U, xs, h0):
        W, U = W.detach().requires_grad_(), U.detach().requires_grad_()
        h = h0
        for t in range(xs.shape[0]):
            h = torch.tanh(W @ h + U @ xs[t])
        return _Packed(torch.autograd.grad(h.sum(), (W, U)), _w6_view)

    return f


def _w6_flops(inp):
    W_, U_, xs, _ = inp
    hid, (T, n_in, batch) = W_.shape[0], xs.shape
    return 3 * T * 2.0 * batch * hid * (hid + n_in)  # forward matmuls, then dW/dU and dh


for _name, _unrolled, _impls in (("W6", False, ("numpy", "torch")), ("W6-jax-unrolled", True, ())):
    register(
        Workload(
            name=_name,
            desc="grad wrt W,U of sum(h_T), h=tanh(W@h+U@x_t), Python for over T=100, hidden 128, batch 32, "
                 "input 32, f32; jax: " + ("Python loop unrolled under jit" if _unrolled else "lax.scan"),
            make_inputs=_w6_inputs,
            reference=lambda *a: _w6_view(_w6_bptt(*a, dtype=np.float64)),
            impls={"msir": _w6_msir, "jax": _w6_jax(_unrolled),
                   **({"numpy": lambda m: lambda *a: _Packed(_w6_bptt(*a), _w6_view),
                       "torch": _w6_torch} if "numpy" in _impls else {})},
            flops=_w6_flops,
            tol=1e-4,
        )
    )


# --------------------------------------------------------------------------------------
# W7: data-dependent while, forward only: Newton's iteration for sqrt(a), elementwise
# on 2^22 float64, a uniform in [0.01, 100), x0 = a, until max|x^2 - a| < 1e-10
# (the loop condition is a reduction over the whole array; 12 iterations here).


def w7_numpy(a):
    x = a
    while np.max(np.abs(x * x - a)) >= 1e-10:
        x = 0.5 * (x + a / x)
    return x


def _w7_jax(m):
    # float64 needs x64 mode, which is process-wide and must be on before the harness
    # converts the inputs; W7 is registered after every float32 workload, so in a worker
    # that runs several workloads in registry order it only affects W7. Without it, a
    # is cast to float32 and the loop never reaches 1e-10: refuse rather than hang.
    jax, jnp = m["jax"], m["jnp"]
    jax.config.update("jax_enable_x64", True)
    if jnp.asarray(np.float64(1.0)).dtype != np.float64:
        raise RuntimeError("JAX x64 mode could not be enabled; W7 needs float64")

    def f(a):
        return jax.lax.while_loop(lambda x: jnp.max(jnp.abs(x * x - a)) >= 1e-10,
                                  lambda x: 0.5 * (x + a / x), a)

    return jax.jit(f)


def _w7_torch(m):
    torch = m["torch"]

    def f(a):
        x = a
        while torch.max(torch.abs(x * x - a)) >= 1e-10:
            x = 0.5 * (x + a / x)
        return x

    return f


register(
    Workload(
        name="W7",
        desc="Newton sqrt while max|x^2-a| >= 1e-10, x0 = a, a ~ U[0.01,100), 2^22 f64 (forward)",
        make_inputs=lambda quick, rng: (rng.uniform(0.01, 100.0, 1 << (14 if quick else 22)),),
        reference=w7_numpy,
        impls={"msir": lambda m: m["msir"].jit(w7_numpy), "numpy": lambda m: w7_numpy, "jax": _w7_jax,
               "torch": _w7_torch},
        bytes_moved=lambda inp: 8.0 * inp[0].size * 2,  # one pass: read a, write x (lower bound)
        tol=1e-12,
    )
)
