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
