"""Inline vector math: exp, tanh and log as range-reduced polynomials in LLVM IR.

`msir-lower-to-llvm` calls `emit(fl, name, args, t)` for a transcendental math op
that `choose(...)` routes here instead of to libm/libmvec. The emitted code is
straight-line and branch-free (special cases by `select`), uses only IEEE
operations without fast-math flags, `llvm.fmuladd` (an FMA where the target has
one, else a multiply and an add), `llvm.fabs` and integer operations on the bit
pattern, so LLVM's loop vectoriser vectorises it inline for the host's vector
ISA (AVX2 here, SSE2 on any x86-64, AVX-512 where present), with no call. No
float-to-int conversion appears (the "shifter" 1.5*2**mbits rounds x*log2(e) and
yields its integer bits), so no input, NaN and infinities included, can produce
poison.

Functions, and accuracy measured by test/unit/test_vector_math.py against the
correctly rounded result (NumPy in x87 long double, rounded once) on 10**6
points per function and dtype (half spread over every float of the whole
range, half uniform in the core range), with FMA and with fmuladd emulated as
a multiply and an add (a target without FMA):

* exp  f32, f64: x = k*ln2 + r (Cody-Waite split ln2, |r| <= ln2/2),
  e**r = 1 + r + r**2*P(r), times 2**(k>>1) by an integer add to the exponent
  field, times 2**(k - (k>>1)) by one multiply, so that overflow (to inf) and
  gradual underflow (denormals, then 0) round once. Within 1 ulp.
* tanh f32, f64: tanh|x| = e/(e+2) with e = expm1(2|x|) = 2**k*(e**r-1) +
  (2**k-1) (one rounding: the product is exact), the sign of x by and/or;
  2|x| is clamped where tanh rounds to 1 (|x| > 9.5 f32, 22 f64). Within 2 ulp
  (3 without FMA, f64).
* log  f32: x = 2**k*m, m in [sqrt(1/2), sqrt(2)), f = m-1,
  log1p(f) = f - f**2/2 + f**3*P(f); f64: s = f/(2+f),
  log1p(f) = f - (f**2/2 - s*(f**2/2 + s**2*P(s**2))) (fdlibm's form), then
  + k*ln2 (split). Denormal inputs are scaled by 2**25 (2**54) first. Within
  1 ulp.

Special values, exactly: exp(+-0) = 1, exp(+inf) = inf, exp(-inf) = 0,
exp(nan) = nan, overflow to inf, underflow to denormals and 0; tanh(+-0) = +-0,
tanh(+-inf) = +-1, tanh(nan) = nan, tanh saturates to +-1, tanh of a denormal
is itself; log(+-0) = -inf, log(x<0) = nan, log(-inf) = nan, log(+inf) = inf,
log(nan) = nan (a canonical quiet NaN).

The polynomial coefficients come from scripts/fit_vector_math.py (near-minimax,
Chebyshev interpolation in mpmath, rounded to the float type).

Which route each (function, dtype) takes by default (`math_impl=auto`) is
`INLINE_BY_DEFAULT`, chosen by measuring both (bench/vector_math.py) on this
project's machine, within a per-function compile-time budget
(`MAX_INLINE_PER_FUNCTION`); where libmvec has no vector variant for the target
(no glibc, `vector_abi=none`), the polynomials are always used, since the
alternative is a scalar libm call per element.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import llvm, math
from xdsl.dialects.builtin import DenseArrayBase, Float32Type, Float64Type, IntegerAttr, IntegerType, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue

I1 = IntegerType(1)
I32 = IntegerType(32)
I64 = IntegerType(64)

# Polynomial coefficients, highest degree first (scripts/fit_vector_math.py).
COEFFS: dict[tuple[str, str], tuple[float, ...]] = {
    # e**r = 1 + r + r**2*P(r), |r| <= 1.02*ln2/2; kernel error 0.094 eps (f32), 0.11 eps (f64)
    ("exp", "f32"): (
        float.fromhex("0x1.6d1b1c0000000p-10"),
        float.fromhex("0x1.1215820000000p-7"),
        float.fromhex("0x1.5555140000000p-5"),
        float.fromhex("0x1.5554d40000000p-3"),
        float.fromhex("0x1.0000000000000p-1"),
    ),
    ("exp", "f64"): (
        float.fromhex("0x1.af4134720f354p-26"),
        float.fromhex("0x1.289876a2dbdc0p-22"),
        float.fromhex("0x1.71de0a0471800p-19"),
        float.fromhex("0x1.a019b31890abfp-16"),
        float.fromhex("0x1.a01a01a8ba744p-13"),
        float.fromhex("0x1.6c16c17a1c437p-10"),
        float.fromhex("0x1.1111111110871p-7"),
        float.fromhex("0x1.555555555394cp-5"),
        float.fromhex("0x1.5555555555556p-3"),
        float.fromhex("0x1.0000000000001p-1"),
    ),
    # log1p(f) = f - f**2/2 + f**3*P(f), f in [sqrt(1/2)-1, sqrt(2)-1]; 0.165 eps
    ("log", "f32"): (
        float.fromhex("-0x1.43b2460000000p-4"),
        float.fromhex("0x1.02814e0000000p-3"),
        float.fromhex("-0x1.0a33ea0000000p-3"),
        float.fromhex("0x1.231ce60000000p-3"),
        float.fromhex("-0x1.54d03e0000000p-3"),
        float.fromhex("0x1.999f140000000p-3"),
        float.fromhex("-0x1.0000ce0000000p-2"),
        float.fromhex("0x1.5555540000000p-2"),
    ),
    # log((1+s)/(1-s)) = 2s + s*z*P(z), z = s**2 <= 1.02*((sqrt2-1)/(sqrt2+1))**2; 0.027 eps
    ("log", "f64"): (
        float.fromhex("0x1.2be6c99b32a48p-3"),
        float.fromhex("0x1.39f2bba043e06p-3"),
        float.fromhex("0x1.74630f3e18fa7p-3"),
        float.fromhex("0x1.c71c61a40ddfbp-3"),
        float.fromhex("0x1.2492492eefe17p-2"),
        float.fromhex("0x1.99999999949d0p-2"),
        float.fromhex("0x1.5555555555558p-1"),
    ),
}


class _Format:
    """The constants of one IEEE binary format."""

    def __init__(self, t: Attribute):
        self.t = t
        if isinstance(t, Float32Type):
            self.tag, self.it, self.mbits, self.bias = "f32", I32, 23, 127
            self.shifter = 1.5 * 2.0**23 # bits: 2**22 + k in the low mantissa bits
            # ln2 = LN2_HI + LN2_LO; LN2_HI has 9 significant bits: k*LN2_HI is exact
            self.ln2_hi, self.ln2_lo = 0.693359375, float.fromhex("-0x1.bd0106p-13")
            self.log2e = float.fromhex("0x1.715476p+0")
            self.exp_lo, self.exp_hi = -104.0, 89.0  # exp rounds to 0 below, overflows above
            self.tanh_y_max = 19.0  # 2|x| where tanh(x) rounds to 1 (|x| > 9.01)
            self.sqrt_half_bits = 0x3F3504F3
        else:
            self.tag, self.it, self.mbits, self.bias = "f64", I64, 52, 1023
            self.shifter = 1.5 * 2.0**52
            # fdlibm's split: LN2_HI has 32 significant bits
            self.ln2_hi = float.fromhex("0x1.62e42fee00000p-1")
            self.ln2_lo = float.fromhex("0x1.a39ef35793c76p-33")
            self.log2e = float.fromhex("0x1.71547652b82fep+0")
            self.exp_lo, self.exp_hi = -746.0, 710.0
            self.tanh_y_max = 44.0  # |x| > 19.06
            self.sqrt_half_bits = 0x3FE6A09E667F3BCD
        self.width = self.it.width.data
        self.one_bits = self.bias << self.mbits
        self.mant_mask = (1 << self.mbits) - 1
        self.shifter_bits = _bits_of(self.shifter, self.width)


def _bits_of(value: float, width: int) -> int:
    import struct

    if width == 32:
        return struct.unpack("<i", struct.pack("<f", value))[0]
    return struct.unpack("<q", struct.pack("<d", value))[0]


_NO_FASTMATH = {"fastmathFlags": llvm.FastMathAttr(None)}
_NO_PROPERTIES: dict = {}
_INT_PROPERTIES = {"overflowFlags": IntegerAttr(0, IntegerType(32))}
_EMPTY_BUNDLES = DenseArrayBase.from_list(I32, ())
_FCMP_PROPERTIES = {
    pred: {"predicate": IntegerAttr(index, I64), "fastmathFlags": llvm.FastMathAttr(None)}
    for index, pred in enumerate(("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une", "uno"))
}
_INTRINSIC_PROPERTIES: dict[tuple[str, int], dict] = {}


def _intrinsic_properties(name: str, n_args: int) -> dict:
    found = _INTRINSIC_PROPERTIES.get((name, n_args))
    if found is None:
        found = {
            "intrin": StringAttr(name),
            "op_bundle_sizes": _EMPTY_BUNDLES,
            "operandSegmentSizes": DenseArrayBase.from_list(I32, (n_args, 0)),
            "fastmathFlags": llvm.FastMathAttr(None),
        }
        _INTRINSIC_PROPERTIES[(name, n_args)] = found
    return found


class _Builder:
    """Scalar LLVM-dialect ops of one float type, added to a FunctionLowering.

    Ops are made by `create` with shared, pre-built properties: IRDL's
    generic constructors cost several times more, and one exp is ~30 ops."""

    def __init__(self, fl, fmt: _Format):
        self.fl = fl
        self.f = fmt
        self.t = fmt.t

    # constants (hoisted to the function's prologue by `fl.const`)
    def c(self, value: float) -> SSAValue:
        return self.fl.const(value, self.t)

    def ci(self, value: int) -> SSAValue:
        return self.fl.const(value, self.f.it)

    # float arithmetic, strict IEEE
    def _fbin(self, op_type, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.fl.add(op_type.create(operands=[a, b], result_types=[self.t], properties=_NO_FASTMATH))

    def add(self, a, b):
        return self._fbin(llvm.FAddOp, a, b)

    def sub(self, a, b):
        return self._fbin(llvm.FSubOp, a, b)

    def mul(self, a, b):
        return self._fbin(llvm.FMulOp, a, b)

    def div(self, a, b):
        return self._fbin(llvm.FDivOp, a, b)

    def _op(self, op_type, operands, result_type, properties) -> SSAValue:
        return self.fl.add(op_type.create(operands=operands, result_types=[result_type], properties=properties))

    def fma(self, a, b, c):
        """a*b + c, fused where the target has FMA."""
        return self.intrinsic("fmuladd", [a, b, c])

    def intrinsic(self, name: str, args: Sequence[SSAValue]) -> SSAValue:
        props = _intrinsic_properties(f"llvm.{name}.{self.f.tag}", len(args))
        return self._op(llvm.CallIntrinsicOp, list(args), self.t, props)

    def horner(self, x: SSAValue, coeffs: Sequence[float]) -> SSAValue:
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    def estrin(self, x: SSAValue, x2: SSAValue, coeffs: Sequence[float]) -> SSAValue:
        """The polynomial (highest degree first) in pairs c*x + d combined in
        x**2 (Estrin's scheme): as many operations as Horner's rule, a shorter
        dependency chain (neutral in W1's loop, whose bound is the FMA pipes,
        by llvm-mca; it helps a loop with less independent work)."""
        pairs = []
        cs = list(coeffs)
        if len(cs) % 2:
            pairs.append(self.c(cs.pop(0)))
        while cs:
            c, d = cs.pop(0), cs.pop(0)
            pairs.append(self.fma(self.c(c), x, self.c(d)))
        # the pairs are the coefficients of a polynomial in x2
        acc = pairs[0]
        for q in pairs[1:]:
            acc = self.fma(acc, x2, q)
        return acc

    # comparisons and selection
    def cmp(self, pred: str, a, b) -> SSAValue:
        return self._op(llvm.FCmpOp, [a, b], I1, _FCMP_PROPERTIES[pred])

    def select(self, cond, a, b) -> SSAValue:
        return self._op(llvm.SelectOp, [cond, a, b], a.type, _NO_FASTMATH)

    # the bit pattern
    def bits(self, x) -> SSAValue:
        return self._op(llvm.BitcastOp, [x], self.f.it, _NO_PROPERTIES)

    def from_bits(self, i) -> SSAValue:
        return self._op(llvm.BitcastOp, [i], self.t, _NO_PROPERTIES)

    def iadd(self, a, b):
        return self._op(llvm.AddOp, [a, b], self.f.it, _INT_PROPERTIES)

    def isub(self, a, b):
        return self._op(llvm.SubOp, [a, b], self.f.it, _INT_PROPERTIES)

    def iand(self, a, b):
        return self._op(llvm.AndOp, [a, b], self.f.it, _NO_PROPERTIES)

    def ior(self, a, b):
        return self._op(llvm.OrOp, [a, b], self.f.it, _NO_PROPERTIES)

    def shl(self, a, n: int):
        return self._op(llvm.ShlOp, [a, self.ci(n)], self.f.it, _INT_PROPERTIES)

    def ashr(self, a, n: int):
        return self._op(llvm.AShrOp, [a, self.ci(n)], self.f.it, _NO_PROPERTIES)

    def pow2(self, k) -> SSAValue:
        """2**k for an integer k with a normal result."""
        return self.from_bits(self.shl(self.iadd(k, self.ci(self.f.bias)), self.f.mbits))

    def int_to_float(self, k) -> SSAValue:
        """float(k) for |k| < 2**(mbits-1), without a conversion instruction
        (AVX2 has none for int64)."""
        return self.sub(self.from_bits(self.iadd(k, self.ci(self.f.shifter_bits))), self.c(self.f.shifter))

    # -- shared pieces ---------------------------------------------------------

    def reduce_exp(self, x) -> tuple[SSAValue, SSAValue]:
        """(k, r) with x = k*ln2 + r, |r| <= ln2/2 (k an integer value of the
        integer type), for |x| < 2**(mbits-2)."""
        f = self.f
        shifter = self.c(f.shifter)
        t = self.fma(x, self.c(f.log2e), shifter)
        kf = self.sub(t, shifter)  # exact: round(x*log2e)
        k = self.isub(self.bits(t), self.ci(f.shifter_bits))
        r = self.fma(kf, self.c(-f.ln2_hi), x)  # exact (Sterbenz)
        r = self.fma(kf, self.c(-f.ln2_lo), r)
        return k, r

    def expm1_reduced(self, r) -> SSAValue:
        """e**r - 1 for |r| <= ln2/2: r + r**2*P(r)."""
        r2 = self.mul(r, r)
        p = self.estrin(r, r2, COEFFS[("exp", self.f.tag)])
        return self.fma(r2, p, r)

    def clamp_above(self, x, hi: float):
        """min(x, hi), NaN kept."""
        c = self.c(hi)
        return self.select(self.cmp("ogt", x, c), c, x)

    def clamp_below(self, x, lo: float):
        c = self.c(lo)
        return self.select(self.cmp("olt", x, c), c, x)


# -- the functions ------------------------------------------------------------------


def _exp(b: _Builder, x: SSAValue) -> SSAValue:
    f = b.f
    xc = b.clamp_below(b.clamp_above(x, f.exp_hi), f.exp_lo)
    k, r = b.reduce_exp(xc)
    p = b.add(b.expm1_reduced(r), b.c(1.0))  # in [0.7, 1.42]
    # times 2**k in two factors, as k in [-1076, 1024] needs exponents beyond
    # the normal range: p*2**k1 (k1 = k >> 1) is normal, so exactly an integer
    # add to the exponent field (no multiply: the FMA pipes are the loop's
    # bottleneck); *2**(k-k1) is exact unless the result is a denormal, 0 or
    # inf, where it rounds once
    k1 = b.ashr(k, 1)
    p1 = b.from_bits(b.iadd(b.bits(p), b.shl(k1, f.mbits)))
    return b.mul(p1, b.pow2(b.isub(k, k1)))


def _tanh(b: _Builder, x: SSAValue) -> SSAValue:
    f = b.f
    a = b.intrinsic("fabs", [x])
    y = b.clamp_above(b.add(a, a), f.tanh_y_max)  # NaN kept
    k, r = b.reduce_exp(y)
    s = b.pow2(k)  # k in [0, 64]
    e = b.fma(s, b.expm1_reduced(r), b.sub(s, b.c(1.0)))  # expm1(y); s*q is exact
    t = b.div(e, b.add(e, b.c(2.0)))  # >= 0 or NaN
    # copysign(t, x) knowing t's sign bit is clear: one `and` and one `or`
    sign = b.iand(b.bits(x), b.ci(-(1 << (f.width - 1))))
    return b.from_bits(b.ior(b.bits(t), sign))


def _log(b: _Builder, x: SSAValue) -> SSAValue:
    f = b.f
    # denormals: scale into the normal range first
    scale = 25 if f.tag == "f32" else 54
    tiny = b.cmp("olt", x, b.c(2.0 ** (1 - f.bias)))
    xs = b.select(tiny, b.mul(x, b.c(2.0**scale)), x)
    k_adjust = b.select(tiny, b.ci(-scale), b.ci(0))
    # x = 2**k * m, m in [sqrt(1/2), sqrt(2))
    ix = b.iadd(b.bits(xs), b.ci(f.one_bits - f.sqrt_half_bits))
    k = b.iadd(b.isub(b.ashr(ix, f.mbits), b.ci(f.bias)), k_adjust)
    m = b.from_bits(b.iadd(b.iand(ix, b.ci(f.mant_mask)), b.ci(f.sqrt_half_bits)))
    fr = b.sub(m, b.c(1.0))
    kf = b.int_to_float(k)
    if f.tag == "f32":
        z = b.mul(fr, fr)
        y = b.mul(b.mul(fr, z), b.horner(fr, COEFFS[("log", "f32")]))
        y = b.fma(kf, b.c(f.ln2_lo), y)
        y = b.fma(z, b.c(-0.5), y)
        res = b.fma(kf, b.c(f.ln2_hi), b.add(fr, y))
    else:
        s = b.div(fr, b.add(fr, b.c(2.0)))
        z = b.mul(s, s)
        rr = b.mul(z, b.horner(z, COEFFS[("log", "f64")]))
        hfsq = b.mul(b.mul(fr, fr), b.c(0.5))
        inner = b.fma(s, b.add(hfsq, rr), b.mul(kf, b.c(f.ln2_lo)))
        res = b.fma(kf, b.c(f.ln2_hi), b.sub(fr, b.sub(hfsq, inner)))
    inf = float("inf")
    res = b.select(b.cmp("ult", x, b.c(0.0)), b.c(float("nan")), res)  # x < 0, NaN
    res = b.select(b.cmp("oeq", x, b.c(0.0)), b.c(-inf), res)
    return b.select(b.cmp("oeq", x, b.c(inf)), b.c(inf), res)


EMITTERS = {"exp": _exp, "tanh": _tanh, "log": _log}

# The default route per (function, dtype) where libmvec has a vector variant,
# from `taskset -c 1 python bench/vector_math.py` on this project's machine (AMD
# EPYC Zen 3, AVX2 + FMA, 2 shared cores; glibc's libmvec AVX2 variants). Ratio
# = libmvec time / inline time per element, n = 65536 (in L2), minimum of
# alternated runs, three runs on a loaded machine (load average 3 to 10):
#   exp  f32 1.47 0.88 1.08   inline (and W1, which has exp and tanh: all
#                             inline 2.34 ns/element, exp via libmvec 2.65,
#                             both via libmvec 4.34, same run)
#   exp  f64 1.76 1.05 2.00   inline
#   tanh f32 2.17 3.11        inline
#   tanh f64 2.29 3.28        inline
#   log  f32 0.93 0.68 0.56   libmvec (glibc's vector logf is faster)
#   log  f64 1.05 0.72 0.76   libmvec
INLINE_BY_DEFAULT: dict[tuple[str, str], bool] = {
    ("exp", "f32"): True,
    ("exp", "f64"): True,
    ("tanh", "f32"): True,
    ("tanh", "f64"): True,
    ("log", "f32"): False,
    ("log", "f64"): False,
}

MATH_IMPLS = ("auto", "inline", "libm")

# Compile-time budget of `auto`: a function with more inline candidates than
# this (exp/tanh/log ops whose default is inline) takes the libm/libmvec route
# for all of them. Each inline op costs ~5 ms of compile time here (LLVM O3 and
# code generation of ~35 vector and ~35 scalar-remainder instructions, plus
# export), a libmvec call almost none: bench/compile_time.py's 200-op function
# (25 exp, 25 tanh) compiled in 0.49 s inline against 0.13 s through libm.
MAX_INLINE_PER_FUNCTION = 8

_OP_NAMES = {math.ExpOp: "exp", math.TanhOp: "tanh", math.LogOp: "log"}


def inline_candidates(f: Operation) -> int:
    """How many math ops of function `f` `auto` would emit inline (before the
    budget)."""
    n = 0
    for op in f.walk():
        name = _OP_NAMES.get(type(op))
        if name is not None and INLINE_BY_DEFAULT.get((name, _tag(op.results[0].type)), False):
            n += 1
    return n


def _tag(t: Attribute) -> str | None:
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float64Type):
        return "f64"
    return None


def choose(
    name: str, t: Attribute, math_impl: str, has_vector_variant: bool, candidates: int = 0
) -> bool:
    """Whether math function `name` (exp, log, ...) on scalar type `t` is
    emitted inline. `math_impl`: inline (wherever an emitter exists), libm
    (never), auto (inline wherever libmvec has no vector variant for the
    target, since the alternative is a scalar call; else the measured
    default `INLINE_BY_DEFAULT`, within the per-function budget:
    `candidates` is `inline_candidates` of the function)."""
    tag = _tag(t)
    if tag is None or name not in EMITTERS or math_impl == "libm":
        return False
    if math_impl == "inline" or not has_vector_variant:
        return True
    return INLINE_BY_DEFAULT.get((name, tag), False) and candidates <= MAX_INLINE_PER_FUNCTION


def emit(fl, name: str, args: Sequence[SSAValue], t: Attribute) -> SSAValue:
    """Emit math function `name` of `args` (scalars of type `t`) into `fl`'s
    current block; return the result."""
    return EMITTERS[name](_Builder(fl, _Format(t)), *args)
