"""LayerNorm over the last axis on the vector unit; the contract is
`convert_msir_to_ascend`'s docstring.

`match_layer_norm` recognises the ops `msir.ops.layer_norm` (and the
`nn.LayerNorm` Cell, which calls it) writes for a rank-2 tensor normalised
over its last axis, with or without the scale (gamma) and shift (beta)
rows; `lower_layer_norm` makes them one kernel whose rows fit UB
(`lower_long_rows` streams rows that do not)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.ir import Operation, SSAValue

from msir.ascend.kernel_builder import (
    REDUCE_REPEATS,
    VECTOR_CLASSES,
    Kernel,
    copy,
    dtype_of,
    repeated,
)
from msir.ascend.lower_rows import (
    F32_REPEAT,
    double_buffered_row_tiles,
    on_row_scalars,
    partial_levels,
    plan_double_buffering,
    reduce_chunk,
    reduce_partials,
    round_up,
    row_blocks,
    row_tiles_over_cores,
    rows_per_tile,
    with_row_operand,
    zero_padding,
)
from msir.dialects import ascend as A


@dataclass(frozen=True)
class LayerNorm:
    """A matched layer norm: input x (M, N), optional gamma / beta (N,)
    arguments, eps, and the first reduce_mean (where errors point)."""

    x: SSAValue
    gamma: SSAValue | None
    beta: SSAValue | None
    eps: float
    anchor: Operation


def _splat(value: SSAValue, used: list) -> float | None:
    """The value of a splat msir.constant (through a broadcast_to, added
    to `used`), else None."""
    owner = value.owner
    if getattr(owner, "name", None) == "msir.broadcast_to":
        used.append(owner)
        owner = owner.operands[0].owner
    if getattr(owner, "name", None) != "msir.constant" or not isinstance(owner.value, DenseIntOrFPElementsAttr):
        return None
    values = set(owner.value.get_values())
    return float(values.pop()) if len(values) == 1 else None


def match_layer_norm(fn: func.FuncOp) -> LayerNorm | None:
    """The layer norm `fn` computes if its body is exactly `layer_norm_body`
    over the last axis of its rank-2 argument x (centred = x - mean(x),
    centred * (1 / sqrt(mean(centred^2) + eps)), then times gamma and plus
    beta if given, each a (N,) argument broadcast over the rows), else None."""
    block = fn.body.block
    ret = block.last_op
    if len(ret.operands) != 1:
        return None
    used: list[Operation] = []

    def op(value: SSAValue, name: str) -> Operation | None:
        owner = value.owner
        if getattr(owner, "name", None) != name:
            return None
        used.append(owner)
        return owner

    def row_of(value: SSAValue) -> SSAValue | None:
        """The argument whose broadcast over the rows `value` is."""
        b = value.owner
        if getattr(b, "name", None) != "msir.broadcast_to" or b.operands[0] not in block.args:
            return None
        if tuple(b.operands[0].type.get_shape()) != tuple(value.type.get_shape())[1:]:
            return None
        used.append(b)
        return b.operands[0]

    def mean_of_last_axis(value: SSAValue) -> SSAValue | None:
        b = op(value, "msir.broadcast_to")
        m = op(b.operands[0], "msir.reduce_mean") if b else None
        if m is None or m.axes_list not in ((1,), (-1,)) or len(m.result.type.get_shape()) != 2:
            return None
        return m.input

    y, params = ret.operands[0], {}
    for name, role in (("msir.add", "beta"), ("msir.mul", "gamma")):
        o = y.owner
        if getattr(o, "name", None) == name and (p := row_of(o.operands[1])) is not None:
            used.append(o)
            params[role], y = p, o.operands[0]
    scaled = op(y, "msir.mul")
    if scaled is None:
        return None
    centred, rstd = scaled.operands
    sub = op(centred, "msir.sub")
    rstd_b = op(rstd, "msir.broadcast_to")
    div = op(rstd_b.operands[0], "msir.div") if rstd_b else None
    sqrt = op(div.operands[1], "msir.sqrt") if div else None
    add = op(sqrt.operands[0], "msir.add") if sqrt else None
    if sub is None or add is None or _splat(div.operands[0], used) != 1.0:
        return None
    x = sub.operands[0]
    if mean_of_last_axis(sub.operands[1]) != x or x not in block.args or len(x.type.get_shape()) != 2:
        return None
    var_mean = op(add.operands[0], "msir.reduce_mean")
    square = op(var_mean.input, "msir.mul") if var_mean else None
    eps = _splat(add.operands[1], used)
    if (square is None or list(square.operands) != [centred, centred] or var_mean.axes_list not in ((1,), (-1,))
            or eps is None):
        return None
    compute = {o for o in block.ops if o.name not in ("func.return", "msir.constant")}
    if compute != set(used) or set(block.args) != {x, *params.values()} or len(block.args) != 1 + len(params):
        return None
    anchor = sub.operands[1].owner.operands[0].owner
    return LayerNorm(x, params.get("gamma"), params.get("beta"), eps, anchor)


def ub_columns(dtype: str, params: int) -> tuple[int, int]:
    """Bytes per column of a row of the tile (input, f32 copy, squares,
    f16 output) and of the resident gamma / beta rows (f32, f16 staged)."""
    db = A.DTYPE_BYTES[dtype]
    convert = dtype != "f32"
    return db + 4 + 4 + (db if convert else 0), params * (4 + (db if convert else 0))


def fits_ub(spec: A.TargetSpec, N: int, dtype: str, params: int, tile_elements: int) -> bool:
    """Whether one row of N (and the parameter rows) fits UB in one pass,
    in one instruction's repeats and in a tile of `tile_elements` if given."""
    C = round_up(N, 128)
    if tile_elements and C > tile_elements:
        return False
    tile, fixed = ub_columns(dtype, params)
    levels = partial_levels(C // F32_REPEAT, F32_REPEAT, 8)
    row = C * tile + sum(s for _, s in levels) * 4 + 4 + 32
    return C // F32_REPEAT <= REDUCE_REPEATS and row + C * fixed <= spec.capacity["ub"] - 32 * 10


def load_params(k: Kernel, ln: LayerNorm, dtype: str, C: int, N: int, args: dict) -> dict:
    """gamma / beta once to UB as f32 rows of C (padding zero): loaded
    before the tile loop and read by every tile."""
    out = {}
    for role in ("gamma", "beta"):
        p = getattr(ln, role)
        if p is None:
            continue
        row = k.alloc("ub", (C,), "f32", "nd", f"{role}_ub")
        c0 = k.index(0)
        if dtype == "f32":
            copy(k, k.body, "mte2", args[p], [c0], row, [c0], (N,))
        else:
            staged = k.alloc("ub", (C,), dtype, "nd", f"{role}_{dtype}_ub")
            copy(k, k.body, "mte2", args[p], [c0], staged, [c0], (N,))
            halves = A.BLOCKS_PER_REPEAT * A.DTYPE_BYTES[dtype] // 4
            repeated(k, k.body, VECTOR_CLASSES["vconv"], [(row, 0, F32_REPEAT), (staged, 0, F32_REPEAT)],
                     C // F32_REPEAT, rep_stride=[A.BLOCKS_PER_REPEAT, halves])
        out[role] = row
    return out


def kernel_for(name: str, spec: A.TargetSpec, fn: func.FuncOp, ln: LayerNorm) -> tuple[Kernel, dict]:
    """The kernel's GM arguments: the function's, in its order, and the result."""
    t = ln.x.type
    args = list(fn.body.block.args)
    k = Kernel(name, spec, [A.BufferType("gm", tuple(a.type.get_shape()), a.type.element_type) for a in args],
               [A.BufferType("gm", tuple(t.get_shape()), t.element_type)],
               [a.name_hint or f"arg{i}" for i, a in enumerate(args)] + ["result"])
    return k, dict(zip(args, k.block.args))


def lower_layer_norm(name: str, spec: A.TargetSpec, fn: func.FuncOp, ln: LayerNorm, tile_elements: int,
                     buffers: int = 2) -> A.KernelOp:
    """One kernel, in f32: per tile of rows, GM -> UB, (f16: to f32), the
    rows' sums (vcadd levels) times 1 / N, x - mean (vbrcb, block stride
    0), the padding zeroed, the squares' sums times 1 / N, + eps, vsqrt,
    vrec, times that (vbrcb), times gamma and plus beta (resident rows read
    with repeat stride 0), (f16: back), UB -> GM. Rows are padded with 0.
    Several tiles per core go double-buffered, as softmax's."""
    t = ln.x.type
    M, N = t.get_shape()
    dtype = dtype_of(ln.anchor, t)
    convert = dtype != "f32"
    C = round_up(N, 128)
    levels = partial_levels(C // F32_REPEAT, F32_REPEAT, 8)
    params = (ln.gamma is not None) + (ln.beta is not None)
    tile, fixed = ub_columns(dtype, params)
    row_bytes = C * tile + sum(s for _, s in levels) * 4 + 4 + 32
    ub = spec.capacity["ub"] - 32 * 10 - C * fixed
    most = min(M, ub // row_bytes, max(1, tile_elements // C) if tile_elements else M)
    per_row = C // F32_REPEAT
    passes = 7 + (2 if convert else 0)
    pingpong = row_bytes + C * (A.DTYPE_BYTES[dtype] * (2 if convert else 1) + 4)  # what a second set adds
    plan = buffers == 2 and plan_double_buffering(
        spec, M, N * A.DTYPE_BYTES[dtype], min(M, ub // pingpong, most),
        lambda rows: rows * per_row * passes + (24 + 4 * rows) * spec.vector_latency)
    R = plan.rows if plan else rows_per_tile(spec, M, N * A.DTYPE_BYTES[dtype], most)
    k, args = kernel_for(name, spec, fn, ln)
    hint = ln.x.name_hint or "arg0"
    sets = []
    for suffix in ("", "_pong")[: 2 if plan else 1]:
        x_ub = k.alloc("ub", (R, C), dtype, "nd", f"{hint}_ub{suffix}")
        e_ub = k.alloc("ub", (R, C), "f32", "nd", f"centred_ub{suffix}")
        sets.append((x_ub, e_ub, k.alloc("ub", (R, C), dtype, "nd", f"out_ub{suffix}") if convert else e_ub))
    sq_ub = k.alloc("ub", (R, C), "f32", "nd", "squares_ub")
    partials = [k.alloc("ub", (R * stride,), "f32", "nd", f"partial{i}_ub") for i, (_, stride) in enumerate(levels)]
    acc = k.alloc("ub", (round_up(R, 16),), "f32", "nd", "acc_ub")
    blocks = k.alloc("ub", (round_up(R, 16) * 8,), "f32", "nd", "row_blocks_ub")
    rows_params = load_params(k, ln, dtype, C, N, args)
    cls = VECTOR_CLASSES
    in_repeat = A.REPEAT_BYTES // A.DTYPE_BYTES[dtype]
    halves = A.BLOCKS_PER_REPEAT * A.DTYPE_BYTES[dtype] // 4
    if N < C:
        for x_ub, _, _ in sets:
            repeated(k, k.body, cls["vdup"], [(x_ub, 0, in_repeat)], R * C // in_repeat, scalar=k.scalar(0.0, dtype))
    gm_in, gm_out = args[ln.x], k.block.args[-1]
    c0 = k.index(0)
    inv_n = k.scalar(1.0 / N, "f32")

    def row_sums(body: list, src, rows: int) -> None:
        reduce_chunk(k, body, cls["vcadd"], src, partials[0], levels[0][1], rows, C, 0, 1, F32_REPEAT)
        reduce_partials(k, body, cls["vcadd"], partials, levels, acc, rows, F32_REPEAT, "f32")

    def load(body: list, buffers: tuple, row, rows: int) -> None:
        copy(k, body, "mte2", gm_in, [row, c0], buffers[0], [c0, c0], (rows, N))

    def compute(body: list, buffers: tuple, row, rows: int) -> None:
        x_ub, e_ub, out = buffers
        src = x_ub
        if convert:
            repeated(k, body, cls["vconv"], [(e_ub, 0, F32_REPEAT), (x_ub, 0, F32_REPEAT)], rows * per_row,
                     rep_stride=[A.BLOCKS_PER_REPEAT, halves])
            src = e_ub
        row_sums(body, src, rows)
        on_row_scalars(k, body, "vmuls", acc, rows, inv_n)
        row_blocks(k, body, blocks, acc, rows)
        with_row_operand(k, body, "vsub", e_ub, src, blocks, "block", rows, C)
        if N < C:
            zero_padding(k, body, e_ub, rows, N, C)
        repeated(k, body, cls["vmul"], [(sq_ub, 0, F32_REPEAT), (e_ub, 0, F32_REPEAT), (e_ub, 0, F32_REPEAT)],
                 rows * per_row)
        row_sums(body, sq_ub, rows)
        on_row_scalars(k, body, "vmuls", acc, rows, inv_n)
        on_row_scalars(k, body, "vadds", acc, rows, k.scalar(ln.eps, "f32"))
        on_row_scalars(k, body, "vsqrt", acc, rows)
        on_row_scalars(k, body, "vrec", acc, rows)
        row_blocks(k, body, blocks, acc, rows)
        with_row_operand(k, body, "vmul", e_ub, e_ub, blocks, "block", rows, C)
        if "gamma" in rows_params:
            with_row_operand(k, body, "vmul", e_ub, e_ub, rows_params["gamma"], "vector", rows, C)
        if "beta" in rows_params:
            with_row_operand(k, body, "vadd", e_ub, e_ub, rows_params["beta"], "vector", rows, C)
        if convert:
            repeated(k, body, cls["vconv"], [(out, 0, F32_REPEAT), (e_ub, 0, F32_REPEAT)], rows * per_row,
                     rep_stride=[halves, A.BLOCKS_PER_REPEAT])
        copy(k, body, "mte3", out, [c0, c0], gm_out, [row, c0], (rows, N))

    if plan:
        return double_buffered_row_tiles(k, spec, M, plan, sets, load, compute)
    return row_tiles_over_cores(k, spec, M, R, lambda body, row, rows: (load(body, sets[0], row, rows),
                                                                         compute(body, sets[0], row, rows)))
