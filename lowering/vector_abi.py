"""Vector math through libmvec: which vector variants of a libm function the
target has, and how LLVM's loop vectoriser is told about them.

`msir-lower-to-llvm` lowers a transcendental math op (exp, log, sin, cos, pow,
tanh, log1p, expm1, ...) that it does not inline (`msir.lowering.vector_math`)
to a libm call (`expf`). Where glibc's libmvec has vector variants of that
function for the target ISA (pass option `vector_abi`: `host` probes this
machine, AVX-512 -> `e`, AVX2 -> `d`, also the narrower `c`/`b` ones; or one
of `VECTOR_ABIS` by name, taken at its word: glibc >= 2.35), the libm
declaration carries (`libm_function`)

    passthrough = ["nounwind", "willreturn", ["memory", "none"],
                   ["vector-function-abi-variant",
                    "_ZGV_LLVM_N8v_expf(_ZGVdN8v_expf),..."]]

(LLVM's VFABI mapping) next to declarations of the vector functions, so the
loop vectoriser calls `_ZGVdN8v_expf` on `<8 x float>` where it vectorises the
loop. Every libm declaration is `memory(none)`: msir never reads errno, so LLVM
may vectorise, hoist and drop the calls. `msir.lowering.llvm_text` prints these
attributes and keeps the vector functions alive in `@llvm.compiler.used`; the
JIT loads `libmvec.so.1` before linking.
"""

from __future__ import annotations

from functools import cache

from xdsl.dialects.builtin import ArrayAttr, Float32Type, Float64Type, StringAttr, VectorType
from xdsl.ir import Attribute

from msir.errors import CompileError

VFABI_ATTR = "vector-function-abi-variant"

PURE = ArrayAttr(
    [StringAttr("nounwind"), StringAttr("willreturn"), ArrayAttr([StringAttr("memory"), StringAttr("none")])]
)
"""The attributes of a pure libm function (and of its vector variants)."""

# glibc's x86_64 vector ABI: ISA letter and vector register bits, widest first.
VECTOR_ABIS: dict[str, list[tuple[str, int]]] = {
    "none": [],
    "sse": [("b", 128)],
    "avx": [("c", 256), ("b", 128)],
    "avx2": [("d", 256), ("b", 128)],
    "avx512": [("e", 512), ("d", 256), ("b", 128)],
}

# The functions glibc (>= 2.35) has in libmvec, by f64 name (f32 adds 'f').
LIBMVEC_FUNCTIONS = frozenset(
    "acos acosh asin asinh atan atanh cbrt cos cosh erf erfc exp exp10 exp2 expm1 "
    "log log10 log1p log2 sin sinh tan tanh atan2 hypot pow".split()
)


@cache
def host_vector_abi() -> str:
    """The widest vector ABI of this machine with libmvec present, or 'none'."""
    try:
        import llvmlite.binding as llvm_binding

        if not llvm_binding.get_process_triple().startswith("x86_64"):
            return "none"
        features = set(llvm_binding.get_host_cpu_features().flatten().split(","))
    except Exception:  # pragma: no cover - no llvmlite or no host information
        return "none"
    if _libmvec() is None:
        return "none"
    if "+avx512f" in features:
        return "avx512"
    if "+avx2" in features:
        return "avx2"
    if "+avx" in features:
        return "avx"
    return "sse"


@cache
def _libmvec():
    import ctypes

    try:
        return ctypes.CDLL("libmvec.so.1")
    except OSError:
        return None


@cache
def _in_libmvec(name: str) -> bool:
    lib = _libmvec()
    return lib is not None and hasattr(lib, name)


def vector_isas(abi: str) -> tuple[list[tuple[str, int]], bool]:
    """The ISAs of `abi`, and whether to check each variant is in libmvec
    (for `host`; a named ABI is taken at its word: glibc >= 2.35). A
    CompileError for an unknown `abi`."""
    if abi == "host":
        return VECTOR_ABIS[host_vector_abi()], True
    if abi not in VECTOR_ABIS:
        raise CompileError(
            f"msir-lower-to-llvm: unknown vector_abi '{abi}' "
            f"(expected host or one of {', '.join(VECTOR_ABIS)})"
        )
    return VECTOR_ABIS[abi], False


@cache
def vector_variants(
    symbol: str, n_args: int, t: Attribute, abi: str
) -> list[tuple[str, int, str]]:
    """(ISA letter, lanes, name) of libmvec's variants of libm's `symbol`,
    one per vector width."""
    is_f32 = isinstance(t, Float32Type)
    if not (is_f32 or isinstance(t, Float64Type)):
        return []
    base = symbol[:-1] if is_f32 else symbol
    if base not in LIBMVEC_FUNCTIONS:
        return []
    isas, check = vector_isas(abi)
    found, widths = [], set()
    for letter, bits in isas:
        lanes = bits // (32 if is_f32 else 64)
        name = f"_ZGV{letter}N{lanes}{'v' * n_args}_{symbol}"
        if lanes in widths or (check and not _in_libmvec(name)):
            continue
        widths.add(lanes)
        found.append((letter, lanes, name))
    return found


def libm_function(symbol: str, n_args: int, t: Attribute, abi: str) -> tuple[ArrayAttr, list[tuple[str, VectorType]]]:
    """How to declare libm's `symbol` (of `n_args` arguments of type `t`) for
    the vector ABI `abi`: its `passthrough` (pure, and the VFABI mapping to each
    vector variant), and the vector variants to declare (name, vector type)."""
    variants = []
    mappings = []
    for _, width, vector_name in vector_variants(symbol, n_args, t, abi):
        variants.append((vector_name, VectorType(t, [width])))
        mappings.append(f"_ZGV_LLVM_N{width}{'v' * n_args}_{symbol}({vector_name})")
    attrs = list(PURE.data)
    if mappings:
        attrs.append(ArrayAttr([StringAttr(VFABI_ATTR), StringAttr(",".join(mappings))]))
    return ArrayAttr(attrs), variants
