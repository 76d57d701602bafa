"""convert-msir-to-ascend's layer norm (`lower_layernorm.py`): values on
the emulator against NumPy at the target's precision on 910A and 910B,
every inserted sync needed, from `ops.layer_norm` and the `nn.LayerNorm`
Cell."""

from __future__ import annotations

import numpy as np
import pytest
from test_convert_msir_to_ascend import CHIPS, check_every_sync_needed, lower, run, sync_removals

import msir
from msir import nn, ops

NP = {"f16": np.float16, "f32": np.float32}


def layer_norm_ir(M: int, N: int, dtype: str, params: tuple[str, ...] = ("gamma", "beta"), eps: float = 1e-5) -> str:
    """`ops.layer_norm` over the last axis as the frontend writes it."""
    t, k, r = f"tensor<{M}x{N}x{dtype}>", f"tensor<{M}x1x{dtype}>", f"tensor<{N}x{dtype}>"
    args = ", ".join([f"%x: {t}"] + [f"%{p}: {r}" for p in params])
    body = f"""
  %eps = msir.constant dense<{eps:e}> : tensor<{dtype}>
  %0 = msir.reduce_mean %x axes array<i64: 1> : {t} to {k}
  %1 = msir.broadcast_to %0 : {k} to {t}
  %2 = msir.sub %x, %1 : {t}
  %3 = msir.mul %2, %2 : {t}
  %4 = msir.reduce_mean %3 axes array<i64: 1> : {t} to {k}
  %5 = msir.broadcast_to %eps : tensor<{dtype}> to {k}
  %6 = msir.add %4, %5 : {k}
  %7 = msir.sqrt %6 : {k}
  %8 = msir.constant dense<1.000000e+00> : {k}
  %9 = msir.div %8, %7 : {k}
  %10 = msir.broadcast_to %9 : {k} to {t}
  %y = msir.mul %2, %10 : {t}
"""
    last = "%y"
    for p, op in (("gamma", "mul"), ("beta", "add")):
        if p in params:
            body += f"  %{p}_rows = msir.broadcast_to %{p} : {r} to {t}\n  %{p}_y = msir.{op} {last}, %{p}_rows : {t}\n"
            last = f"%{p}_y"
    return f"func.func @ln({args}) -> {t} {{{body}  func.return {last} : {t}\n}}"


def layer_norm_ref(x, gamma=None, beta=None, eps=1e-5):
    x = x.astype(np.float64)
    c = x - x.mean(axis=1, keepdims=True)
    y = c / np.sqrt((c * c).mean(axis=1, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma.astype(np.float64)
    if beta is not None:
        y = y + beta.astype(np.float64)
    return y


def inputs(M: int, N: int, dtype: str, params: tuple[str, ...], seed: int = 0) -> list[np.ndarray]:
    r = np.random.default_rng(seed)
    x = (r.uniform(-2, 2, (M, N)) + 3).astype(NP[dtype])  # a mean far from 0: the centring matters
    rows = {"gamma": r.uniform(0.5, 1.5, N).astype(NP[dtype]), "beta": r.uniform(-1, 1, N).astype(NP[dtype])}
    return [x] + [rows[p] for p in params]


def assert_at_precision(y: np.ndarray, ref: np.ndarray) -> None:
    """f32: within 1e-5 (f32 sums of a few thousand terms); f16: within
    one f16 ulp of the exact value (computed in f32, rounded once)."""
    if y.dtype == np.float32:
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    else:
        err = np.abs(y.astype(np.float64) - ref)
        np.testing.assert_array_less(err, np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64) + 1e-6)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.parametrize("M,N", [(300, 77), (33, 1000), (17, 3000)])
@pytest.mark.parametrize("params", [("gamma", "beta"), ()])
def test_layer_norm_matches_numpy(chip, dtype, M, N, params):
    # 77 and 1000 columns: rows padded to whole repeats (the padding is
    # zeroed after the centring); 300, 33 and 17 rows: no tile divides them
    xs = inputs(M, N, dtype, params)
    (y,) = run(lower(layer_norm_ir(M, N, dtype, params), chip), "ln", xs).outputs
    assert y.dtype == NP[dtype] and y.shape == (M, N)
    assert_at_precision(y, layer_norm_ref(*xs[:1], *(xs[1 + params.index(p)] if p in params else None
                                                    for p in ("gamma", "beta"))))


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("params", [("gamma",), ("beta",)])
def test_layer_norm_with_only_a_scale_or_a_shift(chip, params):
    xs = inputs(40, 130, "f32", params)
    (y,) = run(lower(layer_norm_ir(40, 130, "f32", params, eps=0.5), chip), "ln", xs).outputs
    given = dict(zip(params, xs[1:]))
    assert_at_precision(y, layer_norm_ref(xs[0], given.get("gamma"), given.get("beta"), eps=0.5))


def _layer_norm(x, g, b):
    return ops.layer_norm(x, (x.shape[-1],), g, b, 1e-5)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_ops_layer_norm_and_the_cell_run_on_the_emulator(chip, dtype, monkeypatch):
    monkeypatch.setenv("MSIR_ASCEND_CHIP", chip)
    x, g, b = inputs(50, 200, dtype, ("gamma", "beta"), seed=4)
    f = msir.jit(_layer_norm, target="ascend")
    assert_at_precision(f(x, g, b), layer_norm_ref(x, g, b))
    assert f.profile.cycles > 0
    from msir.ascend import emulator

    kernels, emulate = [], emulator.run
    monkeypatch.setattr(emulator, "run", lambda module, entry, xs: kernels.append(entry) or emulate(module, entry, xs))
    cell = nn.LayerNorm((200,), epsilon=1e-3)
    mode, target = msir.get_context("mode"), msir.get_context("device_target")
    msir.set_context(mode=msir.GRAPH_MODE, device_target="Ascend")
    try:
        y = cell(msir.Tensor(x.astype(np.float32)))
    finally:
        msir.set_context(mode=mode, device_target=target)
    assert kernels == ["LayerNorm"]  # the Cell ran on the emulator
    assert_at_precision(np.asarray(y.asnumpy()), layer_norm_ref(x, eps=1e-3))


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("buffers", [1, 2])
def test_every_sync_of_a_layer_norm_is_needed(chip, buffers):
    # one core, tiles of 2 rows (the tile loop's back edges; double-buffered
    # 5 tiles: pairs in a loop), f16 (the conversions), gamma and beta loaded
    # before the loop, 77 columns (the padding zeroed)
    xs = inputs(10, 77, "f16", ("gamma", "beta"), seed=5)
    text = lower(layer_norm_ir(10, 77, "f16"), chip, max_block_dim=1, tile_elements=256, row_buffers=buffers)
    assert "mask_bits" in text and "(back edge)" in " ".join(w for w, _ in sync_removals(text))
    assert ("_pong" in text) == (buffers == 2)
    assert check_every_sync_needed(text, "ln", xs) >= 6


# -- rows too long for UB: streamed twice in chunks (lower_long_rows.py) ------


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dtype,N", [("f32", 40000), ("f32", 100000), ("f16", 40000)])
def test_online_softmax_of_rows_longer_than_ub(chip, dtype, N):
    from test_convert_msir_to_ascend import softmax_kernel, softmax_ref

    x = np.random.default_rng(N).uniform(-3, 3, (3, N)).astype(NP[dtype])
    x[1, 7] = 20  # one large element: every other chunk's running sum is rescaled
    text = softmax_kernel((3, N), dtype, chip)
    assert "state_ub" in text
    (y,) = run(text, "softmax", [x]).outputs
    assert y.dtype == NP[dtype] and y.shape == (3, N)
    if dtype == "f32":
        np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-12)
    else:  # results of about 1 / N are f16 subnormals: one subnormal step apart
        np.testing.assert_allclose(y.astype(np.float64), softmax_ref(x), rtol=1e-3, atol=2.0 ** -24 * 1.01)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dtype,N", [("f32", 40000), ("f32", 100000), ("f16", 40000)])
@pytest.mark.parametrize("params", [("gamma", "beta"), ()])
def test_layer_norm_of_rows_longer_than_ub(chip, dtype, N, params):
    xs = inputs(3, N, dtype, params, seed=N)
    xs[0][2] += 500  # a mean far from 0: each chunk is centred on its own mean before squaring
    text = lower(layer_norm_ir(3, N, dtype, params), chip)
    assert "state_ub" in text
    (y,) = run(text, "ln", xs).outputs
    given = dict(zip(params, xs[1:]))
    ref = layer_norm_ref(xs[0], given.get("gamma"), given.get("beta"))
    assert_at_precision(y[:2], ref[:2])
    # row 2 at about 503: the input's own f32 / f16 rounding of x - mean
    # (half an ulp of 503: 1.5e-5 / 0.125, over the row's std 1.15)
    atol = 2e-5 if dtype == "f32" else 2e-3
    np.testing.assert_allclose(y[2].astype(np.float64), ref[2], rtol=0, atol=atol * (3 if params else 1))


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("kind", ["softmax", "layer_norm"])
def test_every_sync_of_a_streamed_row_is_needed(chip, kind):
    # one core, 2 rows (the row loop's back edges) of 3000 f16 in chunks of
    # 1024 (tile_elements): 3 chunks a pass, the last one padded
    from test_convert_msir_to_ascend import softmax_kernel

    if kind == "softmax":
        x = np.random.default_rng(6).uniform(-3, 3, (2, 3000)).astype(np.float16)
        text, xs, entry = softmax_kernel((2, 3000), "f16", chip, max_block_dim=1, tile_elements=1024), [x], "softmax"
    else:
        xs, entry = inputs(2, 3000, "f16", ("gamma", "beta"), seed=6), "ln"
        text = lower(layer_norm_ir(2, 3000, "f16"), chip, max_block_dim=1, tile_elements=1024)
    assert "state_ub" in text and "(back edge)" in " ".join(w for w, _ in sync_removals(text))
    assert check_every_sync_needed(text, entry, xs) >= 10


# -- double-buffered row tiles (lower_rows.plan_double_buffering) --------------


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dtype,shape,options", [("f32", (128, 1024), {}), ("f16", (1000, 300), {}),
                                                 ("f32", (700, 130), {}),
                                                 ("f32", (203, 77), {"max_block_dim": 4, "tile_elements": 128})])
def test_double_buffered_softmax_matches_numpy(chip, dtype, shape, options):
    # several tiles per core: ping-pong UB buffers; 203 rows in tiles of
    # one on 4 cores: 50 each in a loop, 3 left over for single-buffered tiles
    from test_convert_msir_to_ascend import softmax_kernel, softmax_ref

    x = np.random.default_rng(shape[0]).uniform(-3, 3, shape).astype(NP[dtype])
    text = softmax_kernel(shape, dtype, chip, **options)
    assert "_pong" in text
    (y,) = run(text, "softmax", [x]).outputs
    tol = 1e-3 if dtype == "f16" else 1e-6
    np.testing.assert_allclose(y.astype(np.float64), softmax_ref(x), rtol=tol, atol=tol)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("M,cores", [(7, 1), (7, 2)])
def test_every_sync_of_a_double_buffered_softmax_is_needed(chip, M, cores):
    # tiles of one row (tile_elements): on one core 7 tiles, pairs in an
    # scf.for (back edges) then peeled; on two, 3 tiles each and a row left
    # over for a single-buffered tile
    from test_convert_msir_to_ascend import softmax_kernel

    x = np.random.default_rng(M).uniform(-3, 3, (M, 200)).astype(np.float16)
    text = softmax_kernel((M, 200), "f16", chip, max_block_dim=cores, tile_elements=256)
    assert "_pong" in text and ("scf.for" in text)
    assert check_every_sync_needed(text, "softmax", [x]) >= 8


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max"])
@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.parametrize("M,N,options", [(128, 1024, {}), (1000, 77, {}),
                                         (203, 130, {"max_block_dim": 4, "tile_elements": 256})])
def test_double_buffered_row_reduction_matches_numpy(chip, op, dtype, M, N, options):
    # several tiles per core: ping-pong input and result buffers; 77 and 130
    # columns padded with the identity in both sets; 203 rows on 4 cores in
    # tiles of one: 50 each, 3 left over for single-buffered tiles
    from test_convert_msir_to_ascend import row_reduction_ir, row_reduction_ref

    x = np.random.default_rng(M + N).uniform(-1, 1, (M, N)).astype(NP[dtype])
    text = lower(row_reduction_ir(op, M, N, dtype), chip, **options)
    if M > 128:  # (128 rows: 4 a core, the timing model may keep single tiles)
        assert "_pong" in text
    (y,) = run(text, "rows", [x]).outputs
    ref = row_reduction_ref(op, x)
    if op == "reduce_max":
        np.testing.assert_array_equal(y, ref)
    elif dtype == "f32":
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.sqrt(N))
    else:  # f32 sums in another order, rounded to f16: at most one f16 ulp apart
        np.testing.assert_array_less(np.abs(y.astype(np.float32) - ref.astype(np.float32)),
                                     np.spacing(np.abs(ref)).astype(np.float32) * 1.01)
    if not options:  # row_buffers=1 keeps the single-buffered kernel, same values
        single = lower(row_reduction_ir(op, M, N, dtype), chip, row_buffers=1)
        assert "_pong" not in single
        np.testing.assert_array_equal(run(single, "rows", [x]).outputs[0], y)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("op,dtype", [("reduce_sum", "f16"), ("reduce_max", "f32")])
def test_every_sync_of_a_double_buffered_row_reduction_is_needed(chip, op, dtype):
    # 7 rows in tiles of one on one core: pairs in an scf.for, then peeled
    from test_convert_msir_to_ascend import row_reduction_ir

    x = np.random.default_rng(3).uniform(-1, 1, (7, 200)).astype(NP[dtype])
    text = lower(row_reduction_ir(op, 7, 200, dtype), chip, max_block_dim=1, tile_elements=256)
    assert "_pong" in text and "scf.for" in text
    assert check_every_sync_needed(text, "rows", [x]) >= 8
