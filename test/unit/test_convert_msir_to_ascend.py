"""convert-msir-to-ascend: values on the emulator against NumPy at f16 / f32
precision on 910A and 910B, the sync it inserts is all needed (each flag or
barrier removed in turn makes the emulator report a race), the `ascend`
target from Python, and ops without a lowering refused at the user's line."""

from __future__ import annotations

import re

import numpy as np
import pytest

import msir
from msir.errors import CompileError

CHIPS = ("910A", "910B")


def lower(text: str, chip: str, **options) -> str:
    """The msir module `text` through convert-msir-to-ascend, as text."""
    import io

    from xdsl.parser import Parser
    from xdsl.printer import Printer

    from msir.ascend.convert_msir_to_ascend import ConvertMsirToAscend
    from msir.compiler import make_context

    ctx = make_context()
    module = Parser(ctx, text, "model.mlir").parse_module()
    ConvertMsirToAscend(chip=chip, **options).apply(ctx, module)
    module.verify()
    out = io.StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()


def run(kernel_text: str, entry: str, inputs: list[np.ndarray]):
    from xdsl.parser import Parser

    from msir.ascend import emulator
    from msir.ascend.cli import make_context

    module = Parser(make_context(), kernel_text, "kernel.mlir").parse_module()
    return emulator.run(module, entry, inputs)


def matmul_ir(M: int, K: int, N: int, dtype: str = "f32") -> str:
    return f"""
func.func @mm(%a: tensor<{M}x{K}x{dtype}>, %b: tensor<{K}x{N}x{dtype}>) -> tensor<{M}x{N}x{dtype}> {{
  %0 = msir.matmul %a, %b : tensor<{M}x{K}x{dtype}>, tensor<{K}x{N}x{dtype}> to tensor<{M}x{N}x{dtype}>
  func.return %0 : tensor<{M}x{N}x{dtype}>
}}"""


def chain_ir(n: int, dtype: str) -> str:
    t = f"tensor<{n}x{dtype}>"
    return f"""
func.func @chain(%x: {t}, %y: {t}) -> {t} {{
  %0 = msir.exp %x : {t}
  %1 = msir.mul %0, %y : {t}
  %2 = msir.constant dense<2.5> : tensor<{dtype}>
  %3 = msir.broadcast_to %2 : tensor<{dtype}> to {t}
  %4 = msir.sub %3, %1 : {t}
  %5 = msir.maximum %4, %x : {t}
  func.return %5 : {t}
}}"""


def chain_ref(x, y):
    return np.maximum(x.dtype.type(2.5) - np.exp(x) * y, x)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("shape", [(128, 64, 128), (100, 80, 50), (300, 96, 520), (17, 16, 33)])
def test_matmul_matches_numpy_at_f16(chip, shape):
    M, K, N = shape
    r = np.random.default_rng(M + N)
    a, b = r.uniform(-1, 1, (M, K)), r.uniform(-1, 1, (K, N))
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    result = run(lower(matmul_ir(M, K, N), chip), "mm", [a16, b16])
    (c,) = result.outputs
    assert c.dtype == np.float32 and c.shape == (M, N)
    np.testing.assert_allclose(c, a16.astype(np.float32) @ b16.astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chip", CHIPS)
def test_matmul_k_loop_and_tile_loop_with_f16_result(chip):
    # K = 1024 needs 4 K steps of at most 256 (L0A holds 128 x 256 f16);
    # 2 cores for 6 output tiles (the last column a 32-wide tail)
    M, K, N = 256, 1024, 288
    r = np.random.default_rng(1)
    a, b = r.uniform(-1, 1, (M, K)).astype(np.float16), r.uniform(-1, 1, (K, N)).astype(np.float16)
    text = lower(matmul_ir(M, K, N, "f16"), chip, max_block_dim=2)
    assert "scf.for" in text and "block_dim 2" in text
    (c,) = run(text, "mm", [a, b]).outputs
    assert c.dtype == np.float16
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(c.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("shape", [(64, 400, 48), (48, 1040, 80)])
def test_double_buffered_matmul_matches_numpy(chip, shape):
    # one core, K in 32-deep steps on ping-pong buffers: 13 steps (the peeled
    # first two, five loop trips of two, a 16-deep last one) and 33
    M, K, N = shape
    r = np.random.default_rng(K)
    a, b = r.uniform(-1, 1, (M, K)).astype(np.float16), r.uniform(-1, 1, (K, N)).astype(np.float16)
    text = lower(matmul_ir(M, K, N, "f16"), chip, max_block_dim=1)
    assert "%a_l1_pong" in text and "%b_l0_pong" in text and f"k {K % 32}" in text
    (c,) = run(text, "mm", [a, b]).outputs
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(c.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("chip", CHIPS)
def test_double_buffering_lets_mte2_stream(chip):
    # 128 x 1024 x 128 on one core: the tiler's best single-buffered kernel
    # (K in 128-deep steps) waits for each step's hand-overs; the ping-pong
    # one (32-deep steps) keeps MTE2 busy from its first load to its last.
    # Both load A in 256-deep L1 tiles, whose bursts are 512 B aligned: the
    # same MTE2 cycles
    M = K = N = 128
    K = 1024
    a, b = np.ones((M, K), np.float16), np.ones((K, N), np.float16)
    single, double = (run(lower(matmul_ir(M, K, N, "f16"), chip, max_block_dim=1, matmul_buffers=buffers), "mm",
                          [a, b]).profile for buffers in (1, 2))
    assert double.cycles < 0.9 * single.cycles
    assert double.busy["mte2"] == single.busy["mte2"] == (128 + 128) * 1024 * 2 // 64
    loads = [(start, end) for pipe, start, end, _ in double.intervals if pipe == "mte2"]
    idle = sum(max(0, start - end) for (_, end), (start, _) in zip(loads, loads[1:]))
    # (what idles: a load waiting for the copy out of its buffer, 14 cycles
    # after each of its tile of A's first three steps)
    assert idle < 0.03 * double.busy["mte2"]


def test_matmul_buffers_is_one_or_two():
    with pytest.raises(CompileError, match="matmul_buffers is 1 or 2, not 3"):
        lower(matmul_ir(32, 64, 32), "910A", matmul_buffers=3)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.parametrize("n,tile", [(1000, 0), (100_003, 0), (64 * 7 + 5, 64)])
def test_elementwise_chain_matches_numpy(chip, dtype, n, tile):
    r = np.random.default_rng(n)
    np_dtype = np.float16 if dtype == "f16" else np.float32
    x, y = r.uniform(-2, 2, n).astype(np_dtype), r.uniform(-1, 1, n).astype(np_dtype)
    result = run(lower(chain_ir(n, dtype), chip, tile_elements=tile, max_block_dim=3), "chain", [x, y])
    (z,) = result.outputs
    tol = 2e-3 if dtype == "f16" else 1e-6
    np.testing.assert_allclose(z.astype(np.float32), chain_ref(x, y).astype(np.float32), rtol=tol, atol=tol)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.parametrize("n,tile,cores", [(100_003, 0, 4), (128 * 13 + 40, 128, 2), (1 << 16, 1024, 3),
                                           (2048 * 7, 2048, 1)])
def test_double_buffered_elementwise_chain_matches_numpy(chip, dtype, n, tile, cores):
    # tiles pipelined on ping-pong UB sets: a loop of several trips, the
    # peeled first and last groups, left-over tiles and a masked tail
    r = np.random.default_rng(n + 1)
    np_dtype = np.float16 if dtype == "f16" else np.float32
    x, y = r.uniform(-2, 2, n).astype(np_dtype), r.uniform(-1, 1, n).astype(np_dtype)
    text = lower(chain_ir(n, dtype), chip, tile_elements=tile, max_block_dim=cores)
    assert "%x_ub_pong" in text
    (z,) = run(text, "chain", [x, y]).outputs
    tol = 2e-3 if dtype == "f16" else 1e-6
    np.testing.assert_allclose(z.astype(np.float32), chain_ref(x, y).astype(np.float32), rtol=tol, atol=tol)


def exp_ir(n: int, dtype: str) -> str:
    t = f"tensor<{n}x{dtype}>"
    return f"""
func.func @e(%x: {t}) -> {t} {{
  %0 = msir.exp %x : {t}
  func.return %0 : {t}
}}"""


@pytest.mark.parametrize("chip", CHIPS)
def test_double_buffering_a_balanced_elementwise_kernel(chip):
    # exp of f32 on one core: per tile, MTE2 (64 B/cycle), V (4 cycles per
    # 256 B repeat) and MTE3 (64 B/cycle) take the same time, so the
    # single-buffered kernel keeps each pipe a third busy; ping-pong sets
    # overlap them (issue 13: <= 0.6x)
    n = 1 << 18
    x = np.random.default_rng(5).uniform(-3, 3, n).astype(np.float32)
    single, double = (run(lower(exp_ir(n, "f32"), chip, max_block_dim=1, elementwise_buffers=buffers), "e", [x])
                      for buffers in (1, 2))
    for result in (single, double):
        np.testing.assert_allclose(result.outputs[0], np.exp(x), rtol=1e-6)
    assert single.profile.busy == double.profile.busy == {"mte2": n // 16, "v": n // 16, "mte3": n // 16}
    assert double.profile.cycles <= 0.6 * single.profile.cycles


def test_elementwise_buffers_is_one_or_two():
    with pytest.raises(CompileError, match="elementwise_buffers is 1 or 2, not 0"):
        lower(chain_ir(1000, "f16"), "910A", elementwise_buffers=0)


# -- every inserted sync is needed ------------------------------------------

_FLAG = re.compile(r"ascend\.(set_flag|wait_flag) (\w+) to (\w+) event (\d+)")


def _without(lines: list[str], drop: set[int]) -> str:
    return "\n".join(line for i, line in enumerate(lines) if i not in drop)


def _depth(lines: list[str]) -> list[int]:
    depth, out = 0, []
    for line in lines:
        out.append(depth)
        depth += line.count("{") - line.count("}")
    return out


def _block_end(depth: list[int], i: int) -> int:
    """The line closing the block line `i` is in."""
    return next(j for j in range(i + 1, len(depth)) if depth[j + 1] < depth[i])


def sync_removals(text: str):
    """(description, kernel text without one sync) for each pipe_barrier
    and each flag: a forward pair (a wait and the last set of its pipes and
    event before it in the same block, not necessarily the line before)
    or a back-edge flag (its set before the loop, wait in the body, set
    later in the body, wait after the loop) loses all its ops."""
    lines = text.splitlines()
    depth = _depth(lines)
    flags = {i: _FLAG.search(line).groups() for i, line in enumerate(lines) if _FLAG.search(line)}
    posts = set()
    for i, line in enumerate(lines):
        if "ascend.pipe_barrier" in line:
            yield f"line {i}: {line.strip()}", _without(lines, {i})
        if i not in flags or flags[i][0] != "wait_flag" or i in posts:
            continue
        key = flags[i][1:]
        before = [j for j in range(i - 1, -1, -1) if depth[j] < depth[i] or (j in flags and depth[j] == depth[i]
                                                                               and flags[j][1:] == key)]
        j = before[0] if before else None
        if j is not None and depth[j] == depth[i] and flags[j][0] == "set_flag":
            yield f"line {i}: {line.strip()} (pair)", _without(lines, {j, i})
            continue
        # a back edge: the wait opens the body's use of the flag
        close = _block_end(depth, i)
        pre = max(j for j in flags if j < i and depth[j] == depth[i] - 1 and flags[j] == ("set_flag", *key))
        end = min(j for j in flags if i < j < close and depth[j] == depth[i] and flags[j] == ("set_flag", *key))
        post = min(j for j in flags if j > close and depth[j] == depth[i] - 1 and flags[j] == ("wait_flag", *key))
        posts.add(post)
        yield f"line {i}: {line.strip()} (back edge)", _without(lines, {pre, i, end, post})


def check_every_sync_needed(text: str, entry: str, inputs: list[np.ndarray]) -> int:
    """Each removal gives a race, or (a pipe let run ahead setting a
    back-edge flag again before its wait) a flag set twice."""
    from msir.ascend.errors import RaceError, SyncError

    run(text, entry, inputs)  # the kernel as lowered runs clean
    removals = list(sync_removals(text))
    assert removals
    for what, broken in removals:
        with pytest.raises((RaceError, SyncError), match="race|still set"):
            run(broken, entry, inputs)
            pytest.fail(f"no error without {what}")
    return len(removals)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("shape", [(320, 512, 48), (128, 1040, 64), (128, 2048, 32)])
def test_every_sync_of_a_matmul_is_needed(chip, shape):
    # on one core: 320 x 512 x 48 runs the tile loop more than once (back
    # edges: the next tile's loads wait for the last one's reads);
    # 128 x 1040 x 64 is one tile whose K loop is double-buffered: each
    # iteration's loads into the ping buffers wait, over the back edge, for
    # the last iteration's L1 -> L0 copies out of them, and those copies for
    # the cube's reads of L0 (early sets: right after the producer);
    # 128 x 2048 x 32 loads A in L1 tiles 256 deep (512 B bursts) that the
    # copies to L0A read in two 128-deep slices, in a K loop of three trips
    M, K, N = shape
    r = np.random.default_rng(2)
    a, b = r.uniform(-1, 1, (M, K)).astype(np.float16), r.uniform(-1, 1, (K, N)).astype(np.float16)
    text = lower(matmul_ir(M, K, N, "f16"), chip, max_block_dim=1)
    removals = " ".join(w for w, _ in sync_removals(text))
    assert "(back edge)" in removals
    if K > 1000:
        assert "%a_l1_pong" in text and "wait_flag mte1 to mte2" in removals and "wait_flag m to mte1" in removals
    if K == 2048:
        assert "!ascend.buf<l1, 128x256xf16, zN>" in text and "scf.for" in text
    assert check_every_sync_needed(text, "mm", [a, b]) >= 6


@pytest.mark.parametrize("chip", CHIPS)
def test_every_sync_of_an_elementwise_chain_is_needed(chip):
    n = 64 * 9 + 40
    r = np.random.default_rng(3)
    x, y = r.uniform(-2, 2, n).astype(np.float32), r.uniform(-1, 1, n).astype(np.float32)
    text = lower(chain_ir(n, "f32"), chip, tile_elements=128, max_block_dim=2, elementwise_buffers=1)
    assert "_pong" not in text
    assert "(back edge)" in " ".join(w for w, _ in sync_removals(text))
    assert check_every_sync_needed(text, "chain", [x, y]) >= 6


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("n", [128 * 13 + 40, 128 * 4])
def test_every_sync_of_a_double_buffered_elementwise_chain_is_needed(chip, n):
    # 13 tiles of 128 and a tail of 40 on 2 cores: 6 tiles each pipelined on
    # ping-pong sets (a loop of two trips of two groups: back edges), then
    # the left-over tile on core 0, then the tail; 4 tiles: all peeled
    r = np.random.default_rng(4)
    x, y = r.uniform(-2, 2, n).astype(np.float32), r.uniform(-1, 1, n).astype(np.float32)
    text = lower(chain_ir(n, "f32"), chip, tile_elements=128, max_block_dim=2)
    assert "%x_ub_pong" in text and "%t3_ub_pong" in text
    removals = " ".join(w for w, _ in sync_removals(text))
    assert ("(back edge)" in removals) == (n > 1000)
    assert check_every_sync_needed(text, "chain", [x, y]) >= 10


# -- the ascend target from Python ------------------------------------------


def _mlp_layer(x, w):
    return x @ w


def _gelu_ish(x, y):
    return np.maximum(x * 0.5 + y, 0.0) / 4.0


@pytest.mark.parametrize("chip", CHIPS)
def test_jit_on_the_ascend_target_runs_the_emulator(chip, monkeypatch):
    monkeypatch.setenv("MSIR_ASCEND_CHIP", chip)
    r = np.random.default_rng(4)
    x, w = r.uniform(-1, 1, (48, 64)).astype(np.float32), r.uniform(-1, 1, (64, 40)).astype(np.float32)
    out = msir.jit(_mlp_layer, target="ascend")(x, w)
    # f32 operands are cast to f16 (allow_fp32_to_fp16), accumulated in f32
    assert out.dtype == np.float32 and out.shape == (48, 40)
    ref = x.astype(np.float16).astype(np.float32) @ w.astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert np.abs(out - x @ w).max() > 1e-5  # the target's precision, not the CPU's

    a, b = r.uniform(-1, 1, (33, 70)).astype(np.float16), r.uniform(-1, 1, (33, 70)).astype(np.float16)
    z = msir.jit(_gelu_ish, target="ascend")(a, b)
    assert z.dtype == np.float16 and z.shape == (33, 70)
    np.testing.assert_allclose(z.astype(np.float32), _gelu_ish(a, b).astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("chip", CHIPS)
def test_device_target_ascend_compiles_for_the_emulator(chip, monkeypatch):
    monkeypatch.setenv("MSIR_ASCEND_CHIP", chip)
    x, y = np.linspace(-1, 1, 300, dtype=np.float32), np.full(300, 0.25, np.float32)
    f = msir.jit(_gelu_ish)
    msir.set_context(device_target="Ascend")
    try:
        assert msir.get_context("device_target") == "Ascend"
        np.testing.assert_allclose(f(x, y), _gelu_ish(x, y), rtol=1e-6)
    finally:
        msir.set_context(device_target="CPU")


def _tanh_chain(x):
    return np.tanh(x) + 1.0


def test_an_op_without_ascend_lowering_is_refused_at_its_line():
    with pytest.raises(CompileError) as e:
        msir.jit(_tanh_chain, target="ascend")(np.ones(8, np.float32))
    assert "msir.tanh: has no Ascend lowering" in e.value.message
    assert e.value.loc is not None and e.value.loc.file == __file__
    assert e.value.loc.line == _tanh_chain.__code__.co_firstlineno + 1


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("shape,cores", [((32, 70, 32), 0), ((100, 70, 50), 0), ((40, 8, 24), 0),
                                         ((17, 333, 40), 1), ((64, 1000, 48), 1)])
def test_a_k_no_fractal_divides_is_zero_padded(chip, shape, cores):
    # the last K step's L1 tiles get their last fractal of K zeroed
    # (init_const) before the load; the cube then multiplies whole fractals.
    # M and N are not multiples of 16 either; one core double-buffers K
    M, K, N = shape
    r = np.random.default_rng(K)
    a, b = r.uniform(-1, 1, (M, K)), r.uniform(-1, 1, (K, N))
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    text = lower(matmul_ir(M, K, N), chip, max_block_dim=cores)
    assert text.count("ascend.init_const") >= 2  # A's and B's tails, per class of tiles
    (c,) = run(text, "mm", [a16, b16]).outputs
    np.testing.assert_allclose(c, a16.astype(np.float32) @ b16.astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chip", CHIPS)
def test_every_sync_of_a_zero_padded_matmul_is_needed(chip):
    M, K, N = 40, 200, 24
    r = np.random.default_rng(5)
    a, b = r.uniform(-1, 1, (M, K)).astype(np.float16), r.uniform(-1, 1, (K, N)).astype(np.float16)
    text = lower(matmul_ir(M, K, N, "f16"), chip, max_block_dim=1)
    assert "ascend.init_const" in text
    assert check_every_sync_needed(text, "mm", [a, b]) >= 4


def test_profile_of_the_last_call(monkeypatch):
    monkeypatch.setenv("MSIR_ASCEND_CHIP", "910B")
    f = msir.jit(_mlp_layer, target="ascend")
    assert f.profile is None
    x = np.ones((32, 32), np.float32)
    f(x, x)
    small = f.profile
    f(np.ones((256, 256), np.float32), np.ones((256, 256), np.float32))
    large = f.profile
    assert large is not small and large.cycles > small.cycles > 0
    text = str(large)
    assert text.startswith(f"cycles: {large.cycles} (910B, block_dim ")
    assert "pipe m " in text and "critical pipe: mte2" in text
    assert msir.jit(_mlp_layer).profile is None  # the CPU target has none


def test_switching_the_chip_compiles_again(monkeypatch):
    f = msir.jit(_mlp_layer, target="ascend")
    x = np.ones((64, 64), np.float32)
    for chip in ("910A", "910B", "910A"):
        monkeypatch.setenv("MSIR_ASCEND_CHIP", chip)
        np.testing.assert_allclose(f(x, x), x @ x)
        assert f.profile.target == chip


def test_the_timeline_shows_each_pipe_busy_intervals(monkeypatch):
    monkeypatch.setenv("MSIR_ASCEND_CHIP", "910B")
    f = msir.jit(_mlp_layer, target="ascend")
    f(np.ones((64, 256), np.float32), np.ones((256, 64), np.float32))
    profile = f.profile
    for pipe, busy in profile.busy.items():
        assert sum(end - start for p, start, end, _ in profile.intervals if p == pipe) == busy
    text = profile.timeline(width=40)
    lines = text.splitlines()
    assert lines[0] == f"timeline of the slowest core: {profile.cycles} cycles, {profile.cycles / 40:.0f} per column"
    rows = {line.split("|")[0].strip(): line.split("|")[1] for line in lines[1:] if "|" in line}
    assert set(rows) == set(profile.busy) and all(len(row) == 40 for row in rows.values())
    # one 64 x 64 tile per core, K in one step: load, L1 -> L0, cube, FixPipe
    first = {pipe: min(start for p, start, _, _ in profile.intervals if p == pipe) for pipe in profile.busy}
    assert first["mte2"] < first["mte1"] < first["m"] < first["fix"]
    column = profile.cycles / 40
    for pipe, row in rows.items():
        assert set(row[: int(first[pipe] / column)]) <= {"."}
        start, end = next((a, b) for p, a, b, _ in profile.intervals if p == pipe)
        if end - start >= 2 * column:
            assert row[int((start + end) / 2 / column)] == "#"
    assert any(line.strip().startswith(f"fix   busy {first['fix']}-") for line in lines)


def test_a_fused_chain_lowers_as_the_unfused_one():
    from xdsl.parser import Parser
    from xdsl.printer import Printer
    import io

    from msir.compiler import make_context
    from msir.passes.fuse import MsirFuse

    ctx = make_context()
    module = Parser(ctx, chain_ir(1000, "f16"), "model.mlir").parse_module()
    MsirFuse().apply(ctx, module)
    fused = io.StringIO()
    Printer(stream=fused).print_op(module)
    assert "msir.fusion" in fused.getvalue()
    assert lower(fused.getvalue(), "910B") == lower(chain_ir(1000, "f16"), "910B")


def _bias(x, b):
    return x + b


def test_a_broadcast_of_a_tensor_is_refused_at_its_line():
    with pytest.raises(CompileError) as e:
        msir.jit(_bias, target="ascend")(np.ones((4, 8), np.float32), np.ones(8, np.float32))
    assert "msir.broadcast_to: broadcasting a tensor has no Ascend lowering yet" in e.value.message
    assert e.value.loc.line == _bias.__code__.co_firstlineno + 1


def _energy(x):
    return np.sum(np.exp(x) * 0.5)


@pytest.mark.parametrize("chip", CHIPS)
def test_a_gradient_runs_on_the_emulator(chip, monkeypatch):
    # differentiation happens before the target: d/dx sum(exp(x) / 2) is
    # the elementwise exp(x) * 0.5, which the vector unit computes
    monkeypatch.setenv("MSIR_ASCEND_CHIP", chip)
    x = np.linspace(-1, 1, 500, dtype=np.float32)
    g = msir.jit(msir.grad(_energy), target="ascend")
    np.testing.assert_allclose(g(x), np.exp(x) * 0.5, rtol=1e-6)
    assert g.profile is not None and g.profile.busy["v"] > 0 and g.profile.target == chip


def test_a_function_that_computes_no_tensor_is_refused():
    # found by the IR fuzzer: a function with no results made the elementwise
    # lowering read the shape of a chain that has none
    text = """func.func @constants() {
  %0 = msir.constant dense<[1.5, -2.0]> : tensor<2xf32>
  func.return
}"""
    with pytest.raises(CompileError, match="@constants computes no tensor: nothing for the vector unit to compute"):
        lower(text, "910B")


# -- row reductions -------------------------------------------------------------


def row_reduction_ir(op: str, M: int, N: int, dtype: str, keepdims: bool = False) -> str:
    out = f"tensor<{M}x1x{dtype}>" if keepdims else f"tensor<{M}x{dtype}>"
    return f"""
func.func @rows(%x: tensor<{M}x{N}x{dtype}>) -> {out} {{
  %0 = msir.{op} %x axes array<i64: 1> : tensor<{M}x{N}x{dtype}> to {out}
  func.return %0 : {out}
}}"""


def row_reduction_ref(op: str, x: np.ndarray) -> np.ndarray:
    """The row sums in f32 (the vector unit's accumulator) rounded once to
    the input's type; the row maxima exactly."""
    if op == "reduce_sum":
        return x.astype(np.float64).sum(axis=1).astype(np.float32).astype(x.dtype)
    return x.max(axis=1)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max"])
@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.parametrize("M,N,tile", [(64, 1000, 0), (33, 77, 0), (300, 10, 0), (5, 3000, 1024), (3, 20000, 0)])
def test_row_reduction_matches_numpy(chip, op, dtype, M, N, tile):
    # (64, 1000): ascend.md's case; 77 and 10 columns: rows padded with the
    # identity to whole repeats; 300 rows: more rows than one instruction's
    # repeats; 3000 with 1024-element tiles and 20000 (over 240 repeats): a
    # row in chunks, 20000 also with a third level of partials
    np_dtype = np.float16 if dtype == "f16" else np.float32
    x = np.random.default_rng(M * N).uniform(-1, 1, (M, N)).astype(np_dtype)
    (y,) = run(lower(row_reduction_ir(op, M, N, dtype), chip, tile_elements=tile), "rows", [x]).outputs
    assert y.dtype == np_dtype and y.shape == (M,)
    ref = row_reduction_ref(op, x)
    if op == "reduce_max":
        np.testing.assert_array_equal(y, ref)
    elif dtype == "f32":
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.sqrt(N))
    else:  # f32 sums in another order, rounded to f16: at most one f16 ulp apart
        np.testing.assert_array_less(np.abs(y.astype(np.float32) - ref.astype(np.float32)),
                                     np.spacing(np.abs(ref)).astype(np.float32) * 1.01)


def _row_max_keepdims(x):
    return x.max(axis=-1, keepdims=True)


@pytest.mark.parametrize("chip", CHIPS)
def test_row_reduction_from_python_keepdims_and_a_row_of_minus_infinities(chip, monkeypatch):
    monkeypatch.setenv("MSIR_ASCEND_CHIP", chip)
    x = np.random.default_rng(7).uniform(-5, 5, (20, 130)).astype(np.float32)
    x[3] = -np.inf
    y = msir.jit(_row_max_keepdims, target="ascend")(x)
    assert y.shape == (20, 1) and y.dtype == np.float32
    np.testing.assert_array_equal(y, x.max(axis=1, keepdims=True))


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("op,dtype,M,N,tile", [("reduce_sum", "f16", 40, 200, 1024),
                                                ("reduce_max", "f32", 2, 3000, 1024)])
def test_every_sync_of_a_row_reduction_is_needed(chip, op, dtype, M, N, tile):
    # one core: several row tiles (back edges) and, for 3000 columns, chunks
    np_dtype = np.float16 if dtype == "f16" else np.float32
    x = np.random.default_rng(5).uniform(-1, 1, (M, N)).astype(np_dtype)
    text = lower(row_reduction_ir(op, M, N, dtype), chip, tile_elements=tile, max_block_dim=1)
    assert "(back edge)" in " ".join(w for w, _ in sync_removals(text))
    assert check_every_sync_needed(text, "rows", [x]) >= 4


def test_row_reduction_of_another_axis_is_refused():
    text = """
func.func @cols(%x: tensor<8x16xf32>) -> tensor<16xf32> {
  %0 = msir.reduce_sum %x axes array<i64: 0> : tensor<8x16xf32> to tensor<16xf32>
  func.return %0 : tensor<16xf32>
}"""
    with pytest.raises(CompileError, match=r"msir.reduce_sum: the Ascend target reduces the last axis of a rank-2 "
                                           r"tensor, not axes \[0\] of tensor<8x16xf32>"):
        lower(text, "910A")


def _sum_of_exp(x):
    return np.sum(np.exp(x), axis=1)


def test_a_reduction_with_other_ops_is_refused_at_their_line():
    with pytest.raises(CompileError) as e:
        msir.jit(_sum_of_exp, target="ascend")(np.ones((4, 8), np.float32))
    assert "lowers a row reduction as a kernel of its own" in e.value.message
    assert e.value.loc is not None and e.value.loc.line == _sum_of_exp.__code__.co_firstlineno + 1


# -- softmax ----------------------------------------------------------------------


def _softmax(x):
    return msir.ops.softmax(x)


def softmax_ref(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_kernel(shape: tuple[int, int], dtype: str, chip: str, **options) -> str:
    """ops.softmax as the frontend writes it, through convert-msir-to-ascend."""

    M, N = shape
    t = f"tensor<{M}x{N}x{dtype}>"
    k = f"tensor<{M}x1x{dtype}>"
    return lower(f"""
func.func @softmax(%x: {t}) -> {t} {{
  %0 = msir.reduce_max %x axes array<i64: 1> : {t} to {k}
  %1 = msir.stop_gradient %0 : {k}
  %2 = msir.broadcast_to %1 : {k} to {t}
  %3 = msir.sub %x, %2 : {t}
  %4 = msir.exp %3 : {t}
  %5 = msir.reduce_sum %4 axes array<i64: 1> : {t} to {k}
  %6 = msir.broadcast_to %5 : {k} to {t}
  %7 = msir.div %4, %6 : {t}
  func.return %7 : {t}
}}""", chip, **options)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("shape", [(128, 1024), (33, 77), (300, 10)])
def test_softmax_from_python_matches_numpy(chip, dtype, shape, monkeypatch):
    # 128 x 1024: ascend.md's case, its tiles in UB on both chips; 77 and 10
    # columns padded with -inf to whole repeats; 300 rows over the cores
    monkeypatch.setenv("MSIR_ASCEND_CHIP", chip)
    x = np.random.default_rng(shape[1]).uniform(-3, 3, shape).astype(dtype)
    f = msir.jit(_softmax, target="ascend")
    y = f(x)
    assert y.dtype == dtype and y.shape == shape
    tol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(y.astype(np.float64), softmax_ref(x), rtol=tol, atol=tol)
    assert f.profile.cycles > 0


@pytest.mark.parametrize("chip", CHIPS)
def test_every_sync_of_a_softmax_is_needed(chip):
    x = np.random.default_rng(9).uniform(-3, 3, (12, 200)).astype(np.float16)
    # one core, tiles of 2 rows: the tile loop's back edges
    text = softmax_kernel((12, 200), "f16", chip, max_block_dim=1, tile_elements=512)
    assert "ascend.vbrcb" in text and "(back edge)" in " ".join(w for w, _ in sync_removals(text))
    assert check_every_sync_needed(text, "softmax", [x]) >= 4


@pytest.mark.parametrize("chip", CHIPS)
def test_a_softmax_row_longer_than_one_pass_is_streamed(chip):
    # 20000 f32 fit UB but not one reduction instruction's 240 repeats:
    # online softmax (test_ascend_row_kernels.py has the long rows)
    x = np.random.default_rng(8).uniform(-3, 3, (2, 20000)).astype(np.float32)
    text = softmax_kernel((2, 20000), "f32", chip)
    assert "state_ub" in text
    (y,) = run(text, "softmax", [x]).outputs
    np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-12)


def test_a_scalar_argument_is_refused():
    # found by the IR fuzzer: a scalar f32 argument made the elementwise
    # lowering ask it for an element type
    text = """func.func @scale(%x: f32, %y: tensor<8xf32>) -> tensor<8xf32> {
  %0 = msir.exp %y : tensor<8xf32>
  func.return %0 : tensor<8xf32>
}"""
    with pytest.raises(CompileError, match="the Ascend target computes f16 and f32 tensors, not f32"):
        lower(text, "910A")
