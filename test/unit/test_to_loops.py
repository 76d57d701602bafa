"""convert-msir-to-loops against NumPy.

The native pipeline is not needed: a small reference interpreter below executes
loops-level IR (func/scf/arith/math/memref) with NumPy scalars, and checks on the
way that every load and store is in bounds, that no buffer is read after its
dealloc, that input buffers are never written and that nothing leaks.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, func, math, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, Builtin, FloatAttr, IndexType, IntegerAttr, IntegerType, MemRefType, ModuleOp
from xdsl.parser import Parser

from msir.dialects.msir import Msir
from msir.errors import CompileError
from msir.lowering.to_loops import ConvertMsirToLoops

ALLOWED_DIALECTS = {"builtin", "func", "scf", "arith", "math", "memref"}
DTYPE = {"f32": np.float32, "f64": np.float64, "i1": np.bool_, "i32": np.int32, "i64": np.int64}


def _ctx() -> Context:
    ctx = Context()
    for d in (Builtin, func.Func, scf.Scf, arith.Arith, math.Math, memref.MemRef, Msir):
        ctx.load_dialect(d)
    return ctx


def lower(src: str) -> ModuleOp:
    ctx = _ctx()
    module = Parser(ctx, src).parse_module()
    ConvertMsirToLoops().apply(ctx, module)
    module.verify()
    assert {op.dialect_name() for op in module.walk()} <= ALLOWED_DIALECTS
    return module


# ---------------------------------------------------------------------------
# Reference interpreter of the loops level
# ---------------------------------------------------------------------------


def _np_type(t):
    if isinstance(t, IndexType):
        return int
    if isinstance(t, IntegerType):
        return DTYPE[f"i{t.width.data}"]
    return DTYPE["f32" if t.bitwidth == 32 else "f64"]


def _trunc_div(a, b):
    q = abs(int(a)) // abs(int(b))
    return q if (a < 0) == (b < 0) else -q


def _wrap(x, t):
    """Two's-complement wrap of a Python int into the numpy type t."""
    if t is int or t is np.bool_:
        return t(x)
    bits = np.iinfo(t).bits
    x &= (1 << bits) - 1
    return t(x - (1 << bits) if x >> (bits - 1) else x)


CMP = {
    "oeq": lambda a, b: a == b, "one": lambda a, b: a < b or a > b, "ogt": lambda a, b: a > b,
    "oge": lambda a, b: a >= b, "olt": lambda a, b: a < b, "ole": lambda a, b: a <= b,
    "une": lambda a, b: not a == b, "ord": lambda a, b: not (np.isnan(a) or np.isnan(b)),
    "uno": lambda a, b: bool(np.isnan(a) or np.isnan(b)),
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
    "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
}
for _p in ("ult", "ule", "ugt", "uge"):  # only used on i1 (and on non-negative i64)
    CMP[_p] = (lambda s: lambda a, b: CMP[s](int(a) % 2**64, int(b) % 2**64))("s" + _p[1:])

BINARY = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply, "arith.divf": np.divide,
    "arith.maximumf": np.maximum, "arith.minimumf": np.minimum, "math.powf": np.power,
    "math.copysign": np.copysign, "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b, "arith.maxsi": max, "arith.minsi": min,
}
INT_BINARY = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
    "arith.divsi": _trunc_div, "arith.remsi": lambda a, b: a - b * _trunc_div(a, b),
    "arith.floordivsi": lambda a, b: a // b,
}
UNARY = {
    "math.exp": np.exp, "math.log": np.log, "math.log1p": np.log1p, "math.expm1": np.expm1,
    "math.sin": np.sin, "math.cos": np.cos, "math.tanh": np.tanh, "math.sqrt": np.sqrt,
    "math.floor": np.floor, "math.ceil": np.ceil, "math.absf": np.abs, "arith.negf": np.negative,
}


class Interpreter:
    def __init__(self, module: ModuleOp):
        self.funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, func.FuncOp)}
        self.sites = [s.data for s in module.attributes["msir.sites"]]
        self.errors: list[tuple[int, str]] = []
        self.live: dict[int, np.ndarray] = {}
        self.readonly: set[int] = set()
        # memref.reinterpret_cast results: id -> (the view, the id of its allocation)
        self.views: dict[int, tuple[np.ndarray, int]] = {}

    def base(self, m) -> int:
        return self.views[id(m)][1] if id(m) in self.views else id(m)

    def call(self, name: str, args: list):
        f = self.funcs[name]
        env = dict(zip(f.body.block.args, args))
        return self.block(f.body.block, env)

    def block(self, block, env):
        for op in block.ops:
            name = op.name
            vals = [env[v] for v in op.operands]
            if name in ("func.return", "scf.yield", "scf.condition"):
                return vals
            out = self.op(op, name, vals, env)
            if op.results:
                for r, v in zip(op.results, out if len(op.results) > 1 or isinstance(out, list) else [out]):
                    env[r] = v
        return []

    def region(self, region, env, args):
        blk = region.block
        env = dict(env)
        env.update(zip(blk.args, args))
        return self.block(blk, env)

    def buffer(self, m):
        assert self.base(m) in self.live, "access to a deallocated buffer"
        return m

    def op(self, op, name, v, env):
        rt = _np_type(op.results[0].type) if op.results and not isinstance(op.results[0].type, MemRefType) else None
        with np.errstate(all="ignore"):
            if name == "arith.constant":
                a = op.value
                return rt(a.value.data)
            if name in BINARY:
                return rt(BINARY[name](v[0], v[1]))
            if name in INT_BINARY:
                return _wrap(INT_BINARY[name](int(v[0]), int(v[1])), rt)
            if name in UNARY:
                return rt(UNARY[name](v[0]))
            if name == "math.absi":
                return _wrap(abs(int(v[0])), rt)
            if name in ("arith.cmpf", "arith.cmpi"):
                table = arith.CMPF_COMPARISON_OPERATIONS if name == "arith.cmpf" else arith.CMPI_COMPARISON_OPERATIONS
                return np.bool_(CMP[table[op.predicate.value.data]](v[0], v[1]))
            if name == "arith.select":
                return v[1] if v[0] else v[2]
            if name in ("arith.index_cast", "arith.extsi", "arith.trunci"):
                return _wrap(int(v[0]), rt)
            if name == "arith.extui":
                return rt(int(bool(v[0])) if isinstance(v[0], np.bool_) else int(v[0]) % 2**32)
            if name in ("arith.sitofp", "arith.uitofp", "arith.extf", "arith.truncf"):
                return rt(v[0])
            if name == "arith.fptosi":
                return _wrap(int(np.trunc(v[0])), rt)
            if name == "memref.alloc":
                t = op.memref.type
                dyn = iter(v)
                shape = [next(dyn) if s < 0 else s for s in t.get_shape()]
                fill = np.nan if t.element_type.name.startswith("f") else 0x5A
                m = np.full(shape, fill, dtype=_np_type(t.element_type))
                self.live[id(m)] = m
                return m
            if name == "memref.dealloc":
                assert id(v[0]) in self.live and id(v[0]) not in self.readonly, "bad dealloc"
                del self.live[id(v[0])]
                return None
            if name == "memref.load":
                m, idx = self.buffer(v[0]), tuple(v[1:])
                assert all(0 <= i < d for i, d in zip(idx, m.shape)), f"load out of bounds {idx} {m.shape}"
                return m[idx]
            if name == "memref.store":
                m, idx = self.buffer(v[1]), tuple(v[2:])
                assert self.base(m) not in self.readonly, "store into an input buffer"
                assert all(0 <= i < d for i, d in zip(idx, m.shape)), f"store out of bounds {idx} {m.shape}"
                m[idx] = v[0]
                return None
            if name == "memref.dim":
                return v[0].shape[v[1]]
            if name == "memref.reinterpret_cast":
                src = self.buffer(v[0])
                dyn = iter(v[1:])
                offset, sizes, strides = ([next(dyn) if x == DYNAMIC_INDEX else x for x in attr.get_values()]
                                          for attr in (op.static_offsets, op.static_sizes, op.static_strides))
                row_major = [int(np.prod(sizes[k + 1:], dtype=np.int64)) for k in range(len(sizes))]
                assert strides == row_major, f"strides {strides} are not row-major for {sizes}"
                n = int(np.prod(sizes, dtype=np.int64))
                flat = src.reshape(-1)
                assert 0 <= offset[0] and offset[0] + n <= flat.size, "view out of bounds"
                view = flat[offset[0]:offset[0] + n].reshape(sizes)
                self.views[id(view)] = (view, self.base(src))
                return view
        if name == "scf.for":
            lb, ub, step, *carried = v
            for i in range(lb, ub, step):
                carried = self.region(op.body, env, [i, *carried])
            return list(carried)
        if name == "scf.if":
            region = op.true_region if v[0] else op.false_region
            return self.region(region, env, []) if region.blocks else []
        if name == "scf.while":
            state = v
            while True:
                cond, *state = self.region(op.before_region, env, state)
                if not cond:
                    return state
                state = self.region(op.after_region, env, state)
        if name == "func.call":
            callee = op.callee.root_reference.data
            if callee == "__msir_error":
                self.errors.append((int(v[0]), self.sites[int(v[1])]))
                return []
            if callee == "__msir_interrupted":  # the Ctrl-C poll of every while: no SIGINT here
                return np.int32(0)
            return self.call(callee, v)
        raise NotImplementedError(name)


def run(src: str, *inputs, entry: str = "f", expect_errors: bool = False):
    """Lower `src`, run `entry` on `inputs`; return its results (a list) and the interpreter."""
    module = lower(src)
    interp = Interpreter(module)
    f = interp.funcs[entry]
    n_out = f.attributes["msir.num_outputs"].value.data
    n_in = len(f.function_type.inputs) - n_out
    args = [np.array(x) for x in inputs]
    assert len(args) == n_in
    saved = [a.copy() for a in args]
    for a in args:
        interp.live[id(a)] = a
        interp.readonly.add(id(a))
    outs = []
    for t in f.function_type.inputs.data[n_in:]:
        o = np.empty(t.get_shape(), dtype=_np_type(t.element_type))
        interp.live[id(o)] = o
        outs.append(o)
    rets = interp.call(entry, [*args, *outs])
    for a, s in zip(args, saved):
        np.testing.assert_array_equal(a, s)
    leaked = set(interp.live) - {interp.base(a) for a in (*args, *outs, *rets)}
    assert not leaked, "leaked buffers"
    if not expect_errors:
        assert not interp.errors, interp.errors
    # Results in their original order: static ones from the output buffers.
    results, outs_it, rets_it = [], iter(outs), iter(rets)
    orig = _original_result_types(src, entry)
    for t in orig:
        static = "?" not in t and t.startswith("tensor")
        results.append(next(outs_it) if static else next(rets_it))
    return results, interp


def _original_result_types(src: str, entry: str) -> list[str]:
    module = Parser(_ctx(), src).parse_module()
    f = next(f for f in module.body.block.ops if isinstance(f, func.FuncOp) and f.sym_name.data == entry)
    return [str(t) for t in f.function_type.outputs]


def run1(src, *inputs, **kw):
    results, _ = run(src, *inputs, **kw)
    return results[0]


def ttype(shape, dt):
    return "tensor<" + "".join(f"{d}x" for d in shape) + dt + ">"


def check(actual, expected, exact=False):
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if exact or expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
        if expected.dtype.kind == "f":  # signed zeros too (the sign of a NaN means nothing)
            num = ~np.isnan(expected)
            np.testing.assert_array_equal(np.signbit(actual[num]), np.signbit(expected[num]))
    else:
        rtol = 2e-6 if expected.dtype == np.float32 else 1e-13
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------
# Elementwise ops
# ---------------------------------------------------------------------------

FLOAT_A = [-7.5, -3.0, -0.0, 0.0, 2.5, 7.0, 1e30, -1e-30, np.nan, np.inf, -np.inf, 5.0, 3.0, -2.0, 1.0, 0.5]
FLOAT_B = [2.0, -2.0, 3.0, -3.0, -0.75, 0.0, 3e-7, 7.0, 1.0, 2.0, 3.0, np.inf, -np.inf, np.nan, -0.0, 1e-30]
INT_A = [-7, -6, 7, 6, 0, 5, -1, 3, -2147483648, 9, -9, 2, 1, -1, 0, 4]
INT_B = [2, -2, -2, 4, 3, 0, 1, -1, -1, -4, 4, 3, 5, 5, 0, 1]

BINARY_NP = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "floordiv": np.floor_divide,
    "rem": np.remainder, "pow": np.power, "maximum": np.maximum, "minimum": np.minimum,
}


def binary_src(op, shape, dt):
    t = ttype(shape, dt)
    return f"""func.func @f(%a: {t}, %b: {t}) -> {t} {{
  %r = msir.{op} %a, %b : {t}
  func.return %r : {t}
}}"""


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("op", list(BINARY_NP))
def test_binary_float(op, dt):
    a = np.array(FLOAT_A, dtype=DTYPE[dt]).reshape(4, 4)
    b = np.array(FLOAT_B, dtype=DTYPE[dt]).reshape(4, 4)
    with np.errstate(all="ignore"):
        expected = BINARY_NP[op](a, b)
    check(run1(binary_src(op, (4, 4), dt), a, b), expected, exact=op not in ("pow",))


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_float_divmod_many(dt):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(64) * 10.0 ** rng.integers(-3, 8, 64)).astype(DTYPE[dt])
    b = (rng.standard_normal(64) * 10.0 ** rng.integers(-3, 4, 64)).astype(DTYPE[dt])
    for op in ("floordiv", "rem"):
        check(run1(binary_src(op, (64,), dt), a, b), BINARY_NP[op](a, b), exact=True)


@pytest.mark.parametrize("dt", ["i32", "i64"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "floordiv", "rem", "pow", "maximum", "minimum"])
def test_binary_int(op, dt):
    a = np.array(INT_A, dtype=DTYPE[dt])
    b = np.array(INT_B, dtype=DTYPE[dt])
    if op == "pow":
        b = np.abs(b)
    results, interp = run(binary_src(op, (16,), dt), a, b, expect_errors=True)
    with np.errstate(all="ignore"):
        expected = BINARY_NP[op](a, b)
    ok = b != 0 if op in ("floordiv", "rem") else slice(None)
    check(results[0][ok], expected[ok])
    n_zero = int(np.sum(b == 0)) if op in ("floordiv", "rem") else 0
    assert [e[0] for e in interp.errors] == [2] * n_zero


def test_int_pow_negative_exponent():
    a = np.array([1, -1, -1, 2, 0, 5], dtype=np.int64)
    b = np.array([-3, -3, -2, -1, 3, 0], dtype=np.int64)
    check(run1(binary_src("pow", (6,), "i64"), a, b), np.array([1, -1, 1, 0, 0, 1]))


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_binary_bool_and_int(op):
    fn = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op]
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    check(run1(binary_src(op, (4,), "i1"), a, b), fn(a, b))
    x, y = np.array(INT_A, dtype=np.int32), np.array(INT_B, dtype=np.int32)
    bit = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    check(run1(binary_src(op, (16,), "i32"), x, y), bit(x, y))


UNARY_NP = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "exp": np.exp, "log": np.log, "log1p": np.log1p,
    "expm1": np.expm1, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "sqrt": np.sqrt,
    "floor": np.floor, "ceil": np.ceil,
}


def unary_src(op, shape, dt, out_dt=None):
    t = ttype(shape, dt)
    return f"""func.func @f(%a: {t}) -> {t} {{
  %r = msir.{op} %a : {t}
  func.return %r : {t}
}}"""


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("op", list(UNARY_NP))
def test_unary_float(op, dt):
    a = np.array(FLOAT_A, dtype=DTYPE[dt])
    with np.errstate(all="ignore"):
        expected = UNARY_NP[op](a)
    check(run1(unary_src(op, (16,), dt), a), expected, exact=op in ("neg", "abs", "sign", "floor", "ceil"))


@pytest.mark.parametrize("dt", ["i32", "i64"])
@pytest.mark.parametrize("op", ["neg", "abs", "sign"])
def test_unary_int(op, dt):
    a = np.array(INT_A, dtype=DTYPE[dt])
    with np.errstate(all="ignore"):
        check(run1(unary_src(op, (16,), dt), a), UNARY_NP[op](a))


def test_not():
    a = np.array([True, False])
    check(run1(unary_src("not", (2,), "i1"), a), ~a)


@pytest.mark.parametrize("dt", ["f32", "i32", "i1"])
@pytest.mark.parametrize("pred", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_compare(pred, dt):
    t = ttype((16,), dt)
    b_t = ttype((16,), "i1")
    src = f"""func.func @f(%a: {t}, %b: {t}) -> {b_t} {{
  %r = msir.compare {pred}, %a, %b : {t}
  func.return %r : {b_t}
}}"""
    if dt == "i1":
        a, b = np.array(INT_A) > 0, np.array(INT_B) > 0
    else:
        a = np.array(FLOAT_A if dt == "f32" else INT_A, dtype=DTYPE[dt])
        b = np.array(FLOAT_B if dt == "f32" else INT_B, dtype=DTYPE[dt])
    fn = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
          "eq": np.equal, "ne": np.not_equal}[pred]
    check(run1(src, a, b), fn(a, b))


def test_select():
    src = """func.func @f(%c: tensor<4xi1>, %a: tensor<4xf64>, %b: tensor<4xf64>) -> tensor<4xf64> {
  %r = msir.select %c, %a, %b : tensor<4xi1>, tensor<4xf64>
  func.return %r : tensor<4xf64>
}"""
    c = np.array([True, False, False, True])
    a, b = np.arange(4.0), -np.arange(4.0)
    check(run1(src, c, a, b), np.where(c, a, b))


@pytest.mark.parametrize("src_dt,dst_dt", itertools.product(DTYPE, DTYPE))
def test_cast(src_dt, dst_dt):
    t, u = ttype((8,), src_dt), ttype((8,), dst_dt)
    src = f"""func.func @f(%a: {t}) -> {u} {{
  %r = msir.cast %a : {t} to {u}
  func.return %r : {u}
}}"""
    if src_dt == "i1":
        a = np.array([True, False] * 4)
    elif src_dt.startswith("f"):
        a = np.array([-2.7, -0.5, 0.0, -0.0, 0.5, 3.9, 100.25, np.nan if dst_dt == "i1" else 7.0], DTYPE[src_dt])
    else:
        a = np.array([-2, -1, 0, 1, 2, 300, -70000, 2**31 - 1], DTYPE[src_dt])
    with np.errstate(all="ignore"):
        check(run1(src, a), a.astype(DTYPE[dst_dt]), exact=True)


# ---------------------------------------------------------------------------
# Shape ops
# ---------------------------------------------------------------------------


def shape_src(body: str, in_types: list[str], out_type: str) -> str:
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(in_types))
    return f"func.func @f({args}) -> {out_type} {{\n  %r = {body}\n  func.return %r : {out_type}\n}}"


@pytest.mark.parametrize("src_shape,dst_shape", [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((), (2, 2)), ((1, 1), (1, 5))])
def test_broadcast_to(src_shape, dst_shape):
    t, u = ttype(src_shape, "f32"), ttype(dst_shape, "f32")
    a = np.arange(np.prod(src_shape), dtype=np.float32).reshape(src_shape)
    check(run1(shape_src(f"msir.broadcast_to %a0 : {t} to {u}", [t], u), a), np.broadcast_to(a, dst_shape))


@pytest.mark.parametrize(
    "src_shape,dst_shape",
    [((2, 3), (3, 2)), ((2, 3, 4), (6, 4)), ((24,), (2, 3, 4)), ((2, 3), (6,)), ((1, 6), (2, 3, 1)),
     ((4, 6), (2, 12)), ((), (1, 1)), ((2, 3, 4), (4, 3, 2))],
)
def test_reshape(src_shape, dst_shape):
    t, u = ttype(src_shape, "i64"), ttype(dst_shape, "i64")
    a = np.arange(np.prod(src_shape), dtype=np.int64).reshape(src_shape)
    check(run1(shape_src(f"msir.reshape %a0 : {t} to {u}", [t], u), a), a.reshape(dst_shape))


def test_reshape_dynamic():
    src = """func.func @f(%a: tensor<?x3xf32>) -> tensor<?xf32> {
  %r = msir.reshape %a : tensor<?x3xf32> to tensor<?xf32>
  func.return %r : tensor<?xf32>
}"""
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    check(run1(src, a), a.reshape(-1))


def test_transpose():
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    t, u = ttype((2, 3, 4), "f64"), ttype((4, 2, 3), "f64")
    src = shape_src(f"msir.transpose %a0, array<i64: 2, 0, 1> : {t} to {u}", [t], u)
    check(run1(src, a), a.transpose(2, 0, 1))


@pytest.mark.parametrize(
    "starts,steps,index",
    [((1, 2), (1, -1), np.s_[1:2, 2::-1]), ((4, 0), (-2, 2), np.s_[4::-2, 0::2]), ((0, 3), (3, -3), np.s_[0::3, 3::-3])],
)
def test_slice(starts, steps, index):
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    expected = a[index]
    t, u = ttype(a.shape, "f32"), ttype(expected.shape, "f32")
    body = f"msir.slice %a0 starts array<i64: {starts[0]}, {starts[1]}> steps array<i64: {steps[0]}, {steps[1]}> : {t} to {u}"
    check(run1(shape_src(body, [t], u), a), expected)


@pytest.mark.parametrize("idx_dt", ["i32", "i64"])
def test_take(idx_dt):
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    idx = np.array([[0, -1], [4, -5], [2, 2]], dtype=DTYPE[idx_dt])
    t, it, u = ttype((4, 5), "f32"), ttype((3, 2), idx_dt), ttype((4, 3, 2), "f32")
    body = f"msir.take %a0[%a1] axis 1 : {t}, {it} to {u}"
    check(run1(shape_src(body, [t, it], u), a, idx), np.take(a, idx, axis=1))


def test_take_out_of_range_reports_site():
    src = """func.func @f(%a: tensor<4xf64>, %i: tensor<3xi64>) -> tensor<3xf64> {
  %r = msir.take %a[%i] axis 0 : tensor<4xf64>, tensor<3xi64> to tensor<3xf64> loc("model.py":7:12)
  func.return %r : tensor<3xf64>
}"""
    results, interp = run(src, np.arange(4.0), np.array([1, 4, -5]), expect_errors=True)
    assert interp.errors == [(1, "model.py:7:12"), (1, "model.py:7:12")]
    assert results[0][0] == 1.0


def test_take_dynamic_axis_empty_is_safe():
    src = """func.func @f(%a: tensor<?xf64>, %i: tensor<2xi64>) -> tensor<2xf64> {
  %r = msir.take %a[%i] axis 0 : tensor<?xf64>, tensor<2xi64> to tensor<2xf64>
  func.return %r : tensor<2xf64>
}"""
    _, interp = run(src, np.zeros(0), np.array([0, -1]), expect_errors=True)
    assert [e[0] for e in interp.errors] == [1, 1]
    check(run1(src, np.array([5.0, 6.0, 7.0]), np.array([0, -1])), np.array([5.0, 7.0]))


def test_concatenate_and_stack():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.arange(100, 104, dtype=np.int32).reshape(2, 2)
    src = shape_src(
        "msir.concatenate %a0, %a1, %a0 axis 1 : tensor<2x3xi32>, tensor<2x2xi32>, tensor<2x3xi32> to tensor<2x8xi32>",
        ["tensor<2x3xi32>", "tensor<2x2xi32>"], "tensor<2x8xi32>")
    check(run1(src, a, b), np.concatenate([a, b, a], axis=1))
    src = shape_src(
        "msir.stack %a0, %a1, %a0 axis 1 : tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32> to tensor<2x3x3xi32>",
        ["tensor<2x3xi32>", "tensor<2x3xi32>"], "tensor<2x3x3xi32>")
    check(run1(src, a, a + 10), np.stack([a, a + 10, a], axis=1))


@pytest.mark.parametrize("dt", ["f32", "i32", "i64", "f64"])
def test_iota(dt):
    src = f"func.func @f() -> {ttype((2, 3), dt)} {{\n  %r = msir.iota 1 : {ttype((2, 3), dt)}\n" \
          f"  func.return %r : {ttype((2, 3), dt)}\n}}"
    check(run1(src), np.broadcast_to(np.arange(3, dtype=DTYPE[dt]), (2, 3)))


def test_constants():
    src = """func.func @f() -> (tensor<2x2xf32>, tensor<3xi1>, tensor<i64>) {
  %a = msir.constant dense<[[1.5, -0.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = msir.constant dense<[true, false, true]> : tensor<3xi1>
  %c = msir.constant dense<7> : tensor<i64>
  func.return %a, %b, %c : tensor<2x2xf32>, tensor<3xi1>, tensor<i64>
}"""
    a, b, c = run(src)[0]
    check(a, np.array([[1.5, -0.0], [3.0, 4.0]], np.float32), exact=True)
    check(b, np.array([True, False, True]))
    check(c, np.array(7))


# ---------------------------------------------------------------------------
# Reductions and matmul
# ---------------------------------------------------------------------------

REDUCE_NP = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean}


@pytest.mark.parametrize("dt", ["f32", "f64", "i32"])
@pytest.mark.parametrize("kind", list(REDUCE_NP))
@pytest.mark.parametrize("axes,keep", [((1,), False), ((0, 2), False), ((0, 1, 2), False), ((2,), True), ((0,), True)])
def test_reduce(kind, dt, axes, keep):
    if kind == "mean" and dt == "i32":
        return
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (2, 3, 4)).astype(DTYPE[dt])
    if dt.startswith("f"):
        a = a * np.float32(0.75)
        a = a.astype(DTYPE[dt])
    expected = REDUCE_NP[kind](a, axis=axes, keepdims=keep).astype(a.dtype)  # msir keeps the dtype
    t, u = ttype(a.shape, dt), ttype(expected.shape, dt)
    axes_s = ", ".join(map(str, axes))
    src = shape_src(f"msir.reduce_{kind} %a0 axes array<i64: {axes_s}> : {t} to {u}", [t], u)
    check(run1(src, a), expected)


def test_reduce_nan_and_bool():
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], np.float32)
    for kind in ("max", "min"):
        src = shape_src(f"msir.reduce_{kind} %a0 axes array<i64: 1> : tensor<2x3xf32> to tensor<2xf32>",
                        ["tensor<2x3xf32>"], "tensor<2xf32>")
        check(run1(src, a), REDUCE_NP[kind](a, axis=1))
    b = np.array([[True, False], [True, True]])
    for kind in ("max", "min"):
        src = shape_src(f"msir.reduce_{kind} %a0 axes array<i64: 0> : tensor<2x2xi1> to tensor<2xi1>",
                        ["tensor<2x2xi1>"], "tensor<2xi1>")
        check(run1(src, b), REDUCE_NP[kind](b, axis=0))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("axis,keep", [(None, False), (0, False), (1, False), (1, True), (None, True)])
@pytest.mark.parametrize("case", ["ties", "nan", "int", "bool"])
def test_argreduce(kind, axis, keep, case):
    a = {
        "ties": np.array([[3.0, 1.0, 3.0, 1.0], [2.0, 2.0, -5.0, 7.0], [0.0, 7.0, 7.0, -5.0]], np.float64),
        "nan": np.array([[3.0, np.nan, 9.0, np.nan], [2.0, 2.0, -5.0, 7.0], [np.nan, 7.0, 7.0, -5.0]], np.float32),
        "int": np.array([[3, 1, 3, 1], [2, 2, -5, 7], [0, 7, 7, -5]], np.int32),
        "bool": np.array([[True, False, True, True], [False, False, False, False], [False, True, True, False]]),
    }[case]
    dt = {np.float64: "f64", np.float32: "f32", np.int32: "i32", np.bool_: "i1"}[a.dtype.type]
    fn = np.argmax if kind == "argmax" else np.argmin
    expected = fn(a, axis=axis, keepdims=keep)
    t, u = ttype(a.shape, dt), ttype(expected.shape, "i64")
    axis_s = "" if axis is None else f" axis {axis}"
    check(run1(shape_src(f"msir.{kind} %a0{axis_s} : {t} to {u}", [t], u), a), expected)


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)), ((3,), (3,)), ((2, 1, 3, 4), (5, 4, 2)), ((4, 3), (2, 3, 2))],
)
@pytest.mark.parametrize("dt", ["f32", "i64"])
def test_matmul(a_shape, b_shape, dt):
    rng = np.random.default_rng(2)
    a = rng.integers(-4, 5, a_shape).astype(DTYPE[dt])
    b = rng.integers(-4, 5, b_shape).astype(DTYPE[dt])
    expected = np.matmul(a, b)
    t, s, u = ttype(a_shape, dt), ttype(b_shape, dt), ttype(expected.shape, dt)
    check(run1(shape_src(f"msir.matmul %a0, %a1 : {t}, {s} to {u}", [t, s], u), a, b), expected)


# ---------------------------------------------------------------------------
# Functions, buffers, tuples, errors
# ---------------------------------------------------------------------------

CALLS = """
func.func @g(%x: tensor<?xf64>, %y: tensor<3xf64>) -> (tensor<3xf64>, tensor<?xf64>, tensor<3xf64>) {
  %s = msir.mul %y, %y : tensor<3xf64>
  %d = msir.neg %x : tensor<?xf64>
  func.return %s, %d, %y : tensor<3xf64>, tensor<?xf64>, tensor<3xf64>
}
func.func @f(%x: tensor<?xf64>, %y: tensor<3xf64>) -> (tensor<3xf64>, tensor<?xf64>, tensor<3xf64>, tensor<?xf64>) {
  %a, %b, %c = func.call @g(%x, %y) : (tensor<?xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<?xf64>, tensor<3xf64>)
  %e = msir.add %a, %c : tensor<3xf64>
  %t = msir.make_tuple %e, %b : tensor<3xf64>, tensor<?xf64>
  %e2 = msir.get_tuple %t[0] : tuple<tensor<3xf64>, tensor<?xf64>> to tensor<3xf64>
  %b2 = msir.get_tuple %t[1] : tuple<tensor<3xf64>, tensor<?xf64>> to tensor<?xf64>
  func.return %e2, %b2, %e2, %x : tensor<3xf64>, tensor<?xf64>, tensor<3xf64>, tensor<?xf64>
}
"""


def test_calls_dynamic_results_tuples_and_copies():
    x, y = np.array([1.0, -2.0, 3.0, 4.0, 5.0]), np.array([1.0, 2.0, 3.0])
    e, b, e2, x2 = run(CALLS, x, y)[0]
    check(e, y * y + y)
    check(b, -x)
    check(e2, y * y + y)
    check(x2, x)
    module = lower(CALLS)
    f = next(op for op in module.body.block.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "f")
    assert f.attributes["msir.num_outputs"] == IntegerAttr(2, 64)
    assert [str(t) for t in f.function_type.outputs] == ["memref<?xf64>", "memref<?xf64>"]


def test_surviving_tuple_is_an_error():
    src = """func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  %t = msir.make_tuple %a : tensor<2xf32>
  %u = msir.make_tuple %t : tuple<tensor<2xf32>>
  %v = msir.get_tuple %u[0] : tuple<tuple<tensor<2xf32>>> to tuple<tensor<2xf32>>
  func.return %a : tensor<2xf32>
}"""
    with pytest.raises(CompileError, match="tuple"):
        lower(src)


def test_unsupported_op_names_op_and_location():
    src = """func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = arith.addf %a, %a : tensor<2xf32> loc("m.py":3:4)
  func.return %r : tensor<2xf32>
}"""
    with pytest.raises(CompileError) as info:
        lower(src)
    assert "arith.addf" in str(info.value) and "m.py:3:4" in str(info.value)


def test_locations_are_copied():
    src = """func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = msir.exp %a : tensor<2xf32> loc("m.py":5:6)
  func.return %r : tensor<2xf32>
}"""
    module = lower(src)
    exp = next(op for op in module.walk() if op.name == "math.exp")
    assert str(exp.location) == 'loc("m.py":5:6)'
    loop = next(op for op in module.walk() if op.name == "scf.for")
    assert loop.location == exp.location


# ---------------------------------------------------------------------------
# Loop buffers and tapes
# ---------------------------------------------------------------------------

LOOP_KINDS = """
func.func @f(%a0: tensor<2x3xf64>, %b0: tensor<2x3xf64>, %c0: tensor<2x3xf64>, %d0: tensor<3x2xf64>,
             %w: tensor<3x3xf64>, %n: tensor<i64>) -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<3x2xf64>) {
  %zero = msir.constant dense<0> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %a, %b, %c, %d = msir.for %zero to %n step %one (%a0, %b0, %c0, %d0)
      : (tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<3x2xf64>) {
  ^bb0(%i: tensor<i64>, %x: tensor<2x3xf64>, %y: tensor<2x3xf64>, %z: tensor<2x3xf64>, %u: tensor<3x2xf64>):
    %z1 = msir.exp %z : tensor<2x3xf64>
    %z2 = msir.sin %z1 : tensor<2x3xf64>
    %s = msir.add %z2, %y : tensor<2x3xf64>
    %u1 = msir.matmul %w, %u : tensor<3x3xf64>, tensor<3x2xf64> to tensor<3x2xf64>
    msir.yield %y, %x, %s, %u1 : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<3x2xf64>
  }
  func.return %a, %b, %c, %d : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<3x2xf64>
}
"""


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_loop_carried_values_swap_in_place_and_ping_pong(n):
    """A swap of two carried values (copied into the spare buffers), a value
    updated elementwise over its own buffer, one computed by a matmul into the
    other of two buffers; an odd or even count, and none."""
    rng = np.random.default_rng(n)
    a, b, c = (rng.standard_normal((2, 3)) for _ in range(3))
    d, w = rng.standard_normal((3, 2)), rng.standard_normal((3, 3)) * 0.5
    ea, eb, ec, ed = a, b, c, d
    for _ in range(n):
        ea, eb, ec, ed = eb, ea, np.sin(np.exp(ec)) + eb, w @ ed
    results, _ = run(LOOP_KINDS, a, b, c, d, w, np.int64(n))
    for got, want in zip(results, (ea, eb, ec, ed)):
        check(got, want)
    loop = next(op for op in lower(LOOP_KINDS).walk() if isinstance(op, scf.ForOp) and len(op.results) > 0)
    assert not [op for op in loop.walk() if isinstance(op, memref.AllocOp | memref.DeallocOp)]


RECORD = """
func.func @f(%x0: tensor<3xf64>, %limit: tensor<f64>) -> (tensor<i64>, tensor<?x3xf64>, tensor<3xf64>) {
  %zero = msir.constant dense<0> : tensor<i64>
  %t0 = msir.tape_alloc %zero : tensor<i64> to tensor<?x3xf64>
  %x, %n, %t = msir.while (%x0, %zero, %t0) : (tensor<3xf64>, tensor<i64>, tensor<?x3xf64>) {
  ^bb0(%xa: tensor<3xf64>, %k: tensor<i64>, %ta: tensor<?x3xf64>):
    %s = msir.reduce_sum %xa axes array<i64: 0> : tensor<3xf64> to tensor<f64>
    %c = msir.compare lt, %s, %limit : tensor<f64>
    msir.condition %c : tensor<i1>
  } do {
  ^bb0(%xa: tensor<3xf64>, %k: tensor<i64>, %ta: tensor<?x3xf64>):
    %one = msir.constant dense<1> : tensor<i64>
    %k1 = msir.add %k, %one : tensor<i64>
    %t1 = msir.tape_push %ta, %xa : tensor<?x3xf64>, tensor<3xf64>
    %two = msir.constant dense<2.0> : tensor<3xf64>
    %x1 = msir.mul %xa, %two : tensor<3xf64>
    msir.yield %x1, %k1, %t1 : tensor<3xf64>, tensor<i64>, tensor<?x3xf64>
  }
  func.return %n, %t, %x : tensor<i64>, tensor<?x3xf64>, tensor<3xf64>
}
"""


@pytest.mark.parametrize("computed", [False, True])
@pytest.mark.parametrize("rows", [0, 1, 4, 5, 9])
def test_tape_push_grows_by_doubling(rows, computed):
    """Rows pushed in a while (across the growth from 0 to 4, 8 and 16 rows of
    capacity); the returned tape has exactly the pushed rows. A row computed
    only to be pushed is written by its op straight into the tape."""
    src = RECORD
    if computed:
        src = src.replace("%t1 = msir.tape_push %ta, %xa", "%sq = msir.mul %xa, %xa : tensor<3xf64>\n"
                          "    %t1 = msir.tape_push %ta, %sq")
        f = next(op for op in lower(src).body.block.ops if isinstance(op, func.FuncOp))
        views = [op for op in f.walk() if op.name == "memref.reinterpret_cast"]
        assert len(views) == 2  # the row the multiplication writes, and the returned tape
    x0 = np.array([1.0, 2.0, 4.0]) / 7.0
    n, tape, x = run(src, x0, np.float64(2.0 ** rows - 0.5))[0]
    assert int(n) == rows
    check(tape, np.array([x0 * 2.0**k for k in range(rows)]).reshape(rows, 3) ** (2 if computed else 1))
    check(x, x0 * 2.0**rows)


def test_tape_push_copies_a_tape_it_does_not_own_or_that_is_read_later():
    src = """func.func @f(%t: tensor<?x2xf32>, %v: tensor<2xf32>, %k: tensor<i64>) -> (tensor<?x2xf32>, tensor<2xf32>) {
  %t1 = msir.tape_push %t, %v : tensor<?x2xf32>, tensor<2xf32>
  %zero = msir.constant dense<0> : tensor<i64>
  %u = msir.tape_alloc %zero : tensor<i64> to tensor<?x2xf32>
  %u1 = msir.tape_push %u, %v : tensor<?x2xf32>, tensor<2xf32>
  %u2 = msir.tape_push %u1, %v : tensor<?x2xf32>, tensor<2xf32>
  %r = msir.tape_get %u1[%zero] : tensor<?x2xf32>, tensor<i64> to tensor<2xf32>
  %s = msir.tape_get %u2[%k] : tensor<?x2xf32>, tensor<i64> to tensor<2xf32>
  %w = msir.add %r, %s : tensor<2xf32>
  func.return %t1, %w : tensor<?x2xf32>, tensor<2xf32>
}"""
    t = np.arange(6, dtype=np.float32).reshape(3, 2)
    v = np.array([10.0, 20.0], np.float32)
    t1, w = run(src, t, v, np.int64(1))[0]
    check(t1, np.concatenate([t, v[None]]))
    check(w, 2 * v)


def test_tape_get_of_an_argument_is_a_view():
    """An adjoint reading its forward's tape: rows are views, not copies."""
    src = """func.func @f(%t: tensor<?x2xf64>, %n: tensor<i64>) -> tensor<2xf64> {
  %zero = msir.constant dense<0.0> : tensor<2xf64>
  %last = msir.constant dense<-1> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %start = msir.sub %n, %one : tensor<i64>
  %r = msir.for %start to %last step %last (%zero) : (tensor<2xf64>) {
  ^bb0(%k: tensor<i64>, %acc: tensor<2xf64>):
    %row = msir.tape_get %t[%k] : tensor<?x2xf64>, tensor<i64> to tensor<2xf64>
    %e = msir.exp %row : tensor<2xf64>
    %a = msir.add %acc, %e : tensor<2xf64>
    msir.yield %a : tensor<2xf64>
  }
  func.return %r : tensor<2xf64>
}"""
    t = np.linspace(-1.0, 1.0, 10).reshape(5, 2)
    check(run1(src, t, np.int64(4)), np.exp(t[:4]).sum(axis=0))
    f = next(op for op in lower(src).body.block.ops if isinstance(op, func.FuncOp))
    tape = f.body.block.args[0]
    assert [op.name for op in f.walk() if tape in op.operands] == ["memref.dim", "memref.reinterpret_cast"]


# ---------------------------------------------------------------------------
# End to end through msir-lower-to-llvm and the JIT
# ---------------------------------------------------------------------------

E2E = """
func.func @f(%a: tensor<5x4xf32>, %b: tensor<5x4xf32>, %m: tensor<4x3xf32>, %i: tensor<2xi64>)
    -> (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x3xf32>, tensor<5xi64>, tensor<2x4xf32>) {
  %q = msir.floordiv %a, %b : tensor<5x4xf32>
  %r = msir.rem %a, %b : tensor<5x4xf32>
  %p = msir.matmul %a, %m : tensor<5x4xf32>, tensor<4x3xf32> to tensor<5x3xf32>
  %x = msir.argmax %a axis 1 : tensor<5x4xf32> to tensor<5xi64>
  %t = msir.take %a[%i] axis 0 : tensor<5x4xf32>, tensor<2xi64> to tensor<2x4xf32> loc("model.py":9:3)
  func.return %q, %r, %p, %x, %t : tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x3xf32>, tensor<5xi64>, tensor<2x4xf32>
}
"""


def test_end_to_end_native():
    jit = pytest.importorskip("msir.lowering.jit")
    to_llvm = pytest.importorskip("msir.lowering.to_llvm")
    from msir.errors import MsirIndexError, SourceLoc

    module = lower(E2E)
    sites = [SourceLoc(*s.data.rsplit(":", 2)[:1], *map(int, s.data.rsplit(":", 2)[1:]))
             if s.data != "unknown" else None for s in module.attributes["msir.sites"]]
    to_llvm.MsirLowerToLlvm().apply(_ctx(), module)
    fn = jit.compile_llvm_module(module, sites).function("f")
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((5, 4)) * 10).astype(np.float32)
    a[1, 2] = np.nan
    b = rng.standard_normal((5, 4)).astype(np.float32)
    m = rng.standard_normal((4, 3)).astype(np.float32)
    q, r, p, x, t = fn(a, b, m, np.array([-1, 2]))
    check(q, np.floor_divide(a, b), exact=True)
    check(r, np.remainder(a, b), exact=True)
    np.testing.assert_allclose(p, a @ m, rtol=1e-5, atol=1e-5, equal_nan=True)
    check(x, np.argmax(a, axis=1))
    check(t, a[[-1, 2]])
    with pytest.raises(MsirIndexError) as info:
        fn(a, b, m, np.array([0, 5]))
    assert info.value.loc == SourceLoc("model.py", 9, 3)


FUSED_REDUCTIONS = """
func.func @f(%x: tensor<4x6xf64>, %a: tensor<4x6xf64>) -> (tensor<f64>, tensor<6xf64>, tensor<4xf64>) {
  %e = msir.fusion (%x, %a) : (tensor<4x6xf64>, tensor<4x6xf64>) -> tensor<4x6xf64> {
  ^bb0(%xa: tensor<4x6xf64>, %aa: tensor<4x6xf64>):
    %0 = msir.mul %xa, %xa : tensor<4x6xf64>
    %1 = msir.sub %0, %aa : tensor<4x6xf64>
    %2 = msir.abs %1 : tensor<4x6xf64>
    msir.yield %2 : tensor<4x6xf64>
  }
  %m = msir.reduce_max %e axes array<i64: 0, 1> : tensor<4x6xf64> to tensor<f64>
  %g = msir.fusion (%x) : (tensor<4x6xf64>) -> tensor<4x6xf64> {
  ^bb0(%xa: tensor<4x6xf64>):
    %0 = msir.neg %xa : tensor<4x6xf64>
    %1 = msir.exp %0 : tensor<4x6xf64>
    msir.yield %1 : tensor<4x6xf64>
  }
  %s = msir.reduce_sum %g axes array<i64: 0> : tensor<4x6xf64> to tensor<6xf64>
  %h = msir.fusion (%x, %a) : (tensor<4x6xf64>, tensor<4x6xf64>) -> tensor<4x6xf64> {
  ^bb0(%xa: tensor<4x6xf64>, %aa: tensor<4x6xf64>):
    %0 = msir.mul %xa, %aa : tensor<4x6xf64>
    msir.yield %0 : tensor<4x6xf64>
  }
  %r = msir.reduce_mean %h axes array<i64: 1> : tensor<4x6xf64> to tensor<4xf64>
  func.return %m, %s, %r : tensor<f64>, tensor<6xf64>, tensor<4xf64>
}
"""


def test_a_fusion_that_only_feeds_the_next_reduction_is_computed_in_its_loop():
    """A fusion whose one result only the next op, a reduction, reads becomes
    part of the reduction's loop nest (`to_loops._reduction_of`): no buffer for
    it, the reduction's values (a full max, a sum over the leading axis, a mean
    over the last)."""
    rng = np.random.default_rng(3)
    x, a = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    (m, s, r), _ = run(FUSED_REDUCTIONS, x, a)
    check(m, np.max(np.abs(x * x - a)), exact=True)
    check(s, np.sum(np.exp(-x), axis=0))
    check(r, np.mean(x * a, axis=1))
    allocs = [op for op in lower(FUSED_REDUCTIONS).walk() if isinstance(op, memref.AllocOp)]
    assert not [op for op in allocs if op.memref.type.get_shape() == (4, 6)]


def test_a_fusion_read_again_after_its_reduction_is_stored():
    src = FUSED_REDUCTIONS.replace(
        "func.return %m, %s, %r : tensor<f64>, tensor<6xf64>, tensor<4xf64>",
        "%e2 = msir.add %e, %e : tensor<4x6xf64>\n"
        "  func.return %m, %s, %e2 : tensor<f64>, tensor<6xf64>, tensor<4x6xf64>").replace(
        "-> (tensor<f64>, tensor<6xf64>, tensor<4xf64>) {", "-> (tensor<f64>, tensor<6xf64>, tensor<4x6xf64>) {", 1)
    rng = np.random.default_rng(4)
    x, a = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    (m, s, e2), _ = run(src, x, a)
    check(m, np.max(np.abs(x * x - a)), exact=True)
    check(e2, 2 * np.abs(x * x - a))
    allocs = [op for op in lower(src).walk() if isinstance(op, memref.AllocOp)]
    assert [op for op in allocs if op.memref.type.get_shape() == (4, 6)]
