"""The llvmlite JIT: `llvm`-dialect modules to callable native functions.

`compile_llvm_module` takes the output of `msir-lower-to-llvm`, prints it as
LLVM IR (`msir.lowering.llvm_text`), optimises it at O3 for the host CPU (loop and SLP
vectorisation on) and loads it into an MCJIT engine. `NativeModule.function`
wraps the entry wrapper `@<name>__entry` of a public function (ABI in
`msir.lowering.llvm_abi`) as a `NativeFunction`, which checks NumPy inputs,
allocates the DPS outputs, calls native code once through ctypes (the GIL is
released during the call) and turns the error status into msir exceptions.

Compilation is serialised by a process-wide lock. Calls are thread-safe except
for error attribution: `@__msir_status`/`@__msir_site` are per-module globals,
so two threads failing in the same module at once may see each other's error.

The calling convention is read from the entry wrappers' loops-level types,
given as xDSL attributes or as their printed text (`memref<4x?xf32>`, `f64`,
`index`, `i1`): a module loaded from the persistent cache (`load_native_module`)
is called without importing xDSL, which only `compile_llvm_module` needs.

Threads: the one native call may split its large loops across msir's native
thread pool (`msir.lowering.threads`, entry point `__msir_parallel_for`); it
returns after every worker finished, and a runtime error a worker records in
`@__msir_status` is raised here as from a serial loop. Two Python threads may
call compiled functions at once: the pool serves one of them at a time and
the other runs its loops serially, so neither waits for the other.

Calls into a module with recursive functions (which has `@__msir_stack_base`,
see `msir.lowering.llvm_abi`) are serialised by a per-module lock.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import re
import struct
import sys
import threading
import warnings
from collections.abc import Sequence
from functools import cached_property
from typing import Any, NamedTuple

import llvmlite.binding as llvm
import numpy as np

from msir.errors import (
    CompileError,
    DonationWarning,
    DTypeError,
    MsirError,
    MsirIndexError,
    MsirMemoryError,
    MsirRecursionError,
    MsirValueError,
    MsirZeroDivisionError,
    ShapeError,
    USER_ERRORS,
    SourceLoc,
)
from msir.lowering import allocator, interrupt, threads
from msir.lowering.loops_abi import ERR_INTERRUPTED, INTERRUPT_FUNC

# The entry-wrapper ABI of msir.lowering.llvm_abi (its ENTRY_SUFFIX, SITE and
# STACK_BASE; test_trace_cache checks they agree), restated so that calling
# does not import xDSL.
ENTRY_SUFFIX = "__entry"
SITE = "__msir_site"
STACK_BASE = "__msir_stack_base"
MESSAGE = "__msir_message"
VALUE_SLOTS = tuple(f"__msir_value{k}" for k in range(4))
ERR_USER = 6

_LOCK = threading.Lock()
_initialised = False


_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def _initialise() -> None:
    """Once per process, under `_LOCK`: native target, libm and libmvec, and
    msir's allocator runtime (`lowering.allocator`)."""
    global _initialised
    if _initialised:
        return
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # Each vectorised loop gets one vector body and a scalar remainder, not
    # also a narrower vectorised epilogue between them: that third copy of
    # the loop cost ~12 ms of a 200-op function's ~60 ms in LLVM (W8: code
    # generation is proportional to the code) and no benchmark row measurably
    # (the remainder is under one vector step per chunk). An LLVM option is
    # per process: numba, if it shares this llvmlite, vectorises the same way.
    llvm.set_option("", "-enable-epilogue-vectorization=false")
    for lib in ("libm.so.6", "libmvec.so.1"):
        try:
            llvm.load_library_permanently(lib)
        except RuntimeError:
            pass  # libmvec is optional; libm symbols are in the process anyway
    allocator.install()
    _initialised = True


_runtimes: threading.Thread | None = None
_runtimes_lock = threading.Lock()


def start_runtimes() -> None:
    """Start building, in a background thread, what every native module of
    this process needs: the native target and libraries and the allocator
    (`_initialise`) and the thread pool (`threads.load`). Once per process; a
    first compilation calls it before tracing, so the ~20-30 ms of code
    generation overlap the frontend and the passes (llvmlite releases the
    GIL while LLVM works). A failure is not reported here: whoever needs the
    runtime next builds it again and raises. A fork waits for the thread."""
    global _runtimes
    if _runtimes is not None or _initialised:
        return
    with _runtimes_lock:
        if _runtimes is None:
            _runtimes = threading.Thread(target=_build_runtimes, name="msir-runtimes", daemon=True)
            # a fork while it builds would leave the child llvmlite's lock held by no thread
            os.register_at_fork(before=wait_for_runtimes)
            _runtimes.start()


_BUILD_SWITCH_INTERVAL = 2e-4
"""The interpreter's switch interval (s) while `start_runtimes`' thread builds:
each of its Python steps between LLVM calls (which release the GIL) waits for
the compiling thread to yield it, up to the default 5 ms each, which stretched
its ~16 ms of work to ~60 ms and held a first compile ~8 ms at
msir-lower-to-llvm (`parallel_outline.parallel_plan` needs the pool)."""


def _build_runtimes() -> None:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(_BUILD_SWITCH_INTERVAL)
    ours = sys.getswitchinterval()  # as stored (whole microseconds)
    try:
        with _LOCK:
            _initialise()
            vector_bits()
        threads.load()
    except Exception:  # noqa: BLE001, S110 - rebuilt, and raised, by the caller that needs it
        pass
    finally:
        if sys.getswitchinterval() == ours:  # unless someone else changed it since
            sys.setswitchinterval(previous)


def wait_for_runtimes() -> None:
    """Wait until `start_runtimes`'s thread, if one was started, is done (a
    first compilation returns only after it, so no thread of msir's is left
    building when the caller goes on, e.g. to fork)."""
    thread = _runtimes
    if thread is not None and thread.is_alive():
        thread.join()


_host: tuple[str, str, str] | None = None


def host() -> tuple[str, str, str]:
    """(process triple, CPU name, CPU features) of this machine, once per
    process (flattening the features costs ~2 ms)."""
    global _host
    if _host is None:
        _host = (llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    return _host


def _target_machine() -> llvm.TargetMachine:
    target = llvm.Target.from_default_triple()
    _, cpu, features = host()
    return target.create_target_machine(cpu=cpu, features=features, opt=3, codemodel="jitdefault")


_PROBE_LOOP = """
define void @probe(ptr noalias %a, ptr noalias %b, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %j, %loop ]
  %p = getelementptr inbounds float, ptr %a, i64 %i
  %x = load float, ptr %p
  %y = fmul float %x, %x
  %q = getelementptr inbounds float, ptr %b, i64 %i
  store float %y, ptr %q
  %j = add i64 %i, 1
  %more = icmp slt i64 %j, %n
  br i1 %more, label %loop, label %exit
exit:
  ret void
}
"""

_vector_bits: int | None = None


def vector_bits() -> int:
    """The vector width in bits LLVM's loop vectoriser uses on this CPU (0: none), under `_LOCK` after
    `_initialise`: the lanes it gives a float32 loop times 32 (its tuning, not only the widest registers: 512 on
    Zen 4, 256 on cores that prefer ymm to zmm), found once per process by vectorising `_PROBE_LOOP` (~1-2 ms, in
    `start_runtimes`' thread). The loop hints use it (`llvm_abi`, "Loop hints")."""
    global _vector_bits
    if _vector_bits is None:
        try:
            mod = llvm.parse_assembly(_PROBE_LOOP)
            optimise(mod, _target_machine())
            _vector_bits = 32 * max((int(n) for n in re.findall(r"<(\d+) x float>", str(mod))), default=0)
        except RuntimeError:  # the hints are optional: without them LLVM searches the widths itself
            _vector_bits = 0
    return _vector_bits


def optimise(mod: llvm.ModuleRef, tm: llvm.TargetMachine, speed_level: int = 3, loop_unrolling: bool = True) -> None:
    """LLVM's module pipeline at `speed_level` with the loop and SLP vectorisers (jitted modules; the GEMM
    runtime, `msir.lowering.gemm_kernel`, at O2 without unrolling)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = loop_unrolling
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


class EntryInfo(NamedTuple):
    """What msir-lower-to-llvm records on a public function's entry wrapper."""

    arg_types: list
    """Loops-level argument types: inputs, then the DPS output buffers."""
    result_types: list
    num_outputs: int
    output_aliases: list[int] = []
    """Per output: the donated input whose buffer it may be, else -1."""
    donation_refused: list[str] = []
    """Why each donated input that no output may reuse was refused."""


def _entry_metadata(module) -> dict[str, EntryInfo]:
    """Per public function: its `EntryInfo`, as recorded by msir-lower-to-llvm
    on the entry wrappers."""
    from xdsl.dialects import llvm as llvm_dialect
    from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr

    found = {}
    for op in module.ops:
        if not isinstance(op, llvm_dialect.FuncOp):
            continue
        name = op.sym_name.data
        args = op.attributes.get("msir.arg_types")
        if not name.endswith(ENTRY_SUFFIX) or not isinstance(args, ArrayAttr):
            continue
        results = op.attributes["msir.result_types"]
        n_out = op.attributes.get("msir.num_outputs")
        aliases = op.attributes.get("msir.output_aliases")
        refused = op.attributes.get("msir.donation_refused")
        found[name[: -len(ENTRY_SUFFIX)]] = EntryInfo(
            list(args.data),
            list(results.data),
            n_out.value.data if isinstance(n_out, IntegerAttr) else 0,
            list(aliases.get_values()) if isinstance(aliases, DenseArrayBase) else [],
            [r.data for r in refused.data] if isinstance(refused, ArrayAttr) else [],
        )
    return found


def compile_llvm_module(
    module, sites: Sequence[SourceLoc] | None = None, object_sink=None
) -> NativeModule:
    """Compile a module of the `llvm` dialect to native code for this machine.

    `sites` maps the site numbers passed to `@__msir_error` to source
    locations; it is the default for every function of the module.
    `object_sink(obj: bytes)`, if given, receives the object code MCJIT
    generates (for the persistent cache: see `load_native_module`).
    """
    from xdsl.dialects import llvm as xllvm

    from msir.lowering.llvm_text import module_text

    metadata = _entry_metadata(module)
    polls = _load_interrupt_runtime(
        [op.sym_name.data for op in module.body.block.ops if isinstance(op, xllvm.FuncOp)]
    )
    with _LOCK:
        _initialise()
        tm = _target_machine()
        try:
            text = module_text(module, llvm.get_process_triple(), str(tm.target_data), vector_bits())
            _check_half_support(text)
            mod = llvm.parse_assembly(text)
            mod.verify()
        except (NotImplementedError, RuntimeError, KeyError) as e:
            raise CompileError(f"LLVM export failed: {e}") from e
        optimise(mod, tm)
        optimised = str(mod)
        engine = llvm.create_mcjit_compiler(mod, tm)
        if object_sink is not None:
            engine.set_object_cache(lambda _module, obj: object_sink(obj))
        engine.finalize_object()
        engine.run_static_constructors()
    wait_for_runtimes()
    return NativeModule(engine, optimised, metadata, list(sites or []), polls)


def _load_interrupt_runtime(symbols: Sequence[str]) -> bool:
    """Whether a module with these symbols polls for Ctrl-C
    (`msir.lowering.interrupt`); if so its runtime is loaded first, so that
    MCJIT resolves `__msir_interrupted` (an unresolved symbol would abort)."""
    if INTERRUPT_FUNC not in symbols:
        return False
    if not interrupt.load():
        raise CompileError(f"the Ctrl-C runtime could not be built: {interrupt.load_error()}")
    return True


def _check_half_support(llvm_ir: str) -> None:
    """x86-64 converts float16 in one instruction with F16C (every CPU with AVX2);
    without it LLVM would call compiler-rt, which a JIT-loaded module cannot
    resolve (MCJIT aborts the process): a CompileError instead."""
    triple, _, features = host()
    if triple.startswith("x86_64") and "+f16c" not in features.split(",") and " half" in llvm_ir:
        raise CompileError("float16 needs a CPU with F16C (x86-64 with AVX2); this one has none: "
                           "compute in float32 (x.astype(np.float32))")


def load_native_module(
    obj: bytes,
    llvm_ir: str,
    metadata: dict[str, EntryInfo],
    sites: Sequence[SourceLoc] | None = None,
    required_symbols: Sequence[str] = (),
) -> NativeModule:
    """A NativeModule from object code given to `compile_llvm_module`'s
    `object_sink` (in this or another process: `msir.cache`), without LLVM
    optimisation or code generation. `metadata` is `_entry_metadata` of the
    module; `required_symbols` are the external symbols the object calls: a
    CompileError if one does not resolve (MCJIT would abort the process).
    The object must have no static constructors (they are not run)."""
    if any(s in threads.ENTRY_POINTS for s in required_symbols):
        threads.load()  # registers the pool's entry points (a CompileError below if it failed)
    polls = _load_interrupt_runtime(required_symbols)
    with _LOCK:
        _initialise()
        missing = [s for s in required_symbols if not llvm.address_of_symbol(s)]
        if missing:
            raise CompileError(f"unresolved symbols in cached object code: {', '.join(missing)}")
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
    wait_for_runtimes()
    return NativeModule(engine, llvm_ir, metadata, list(sites or []), polls)


class NativeModule:
    """A compiled module; keeps its execution engine (and code) alive."""

    def __init__(self, engine, llvm_ir: str, metadata, sites: list[SourceLoc], polls_interrupt: bool = False):
        self._engine = engine
        self.polls_interrupt = polls_interrupt
        """Its `while` loops poll for Ctrl-C: each call arms `msir.lowering.interrupt` first."""
        self._llvm_ir = llvm_ir
        self._metadata = metadata
        self._sites = sites
        site_address = engine.get_global_value_address(SITE)
        self._site = ctypes.c_int64.from_address(site_address) if site_address else None
        # A module with msir.check ops records a failed check's message and values there.
        message_address = engine.get_global_value_address(MESSAGE)
        self._message = ctypes.c_int64.from_address(message_address) if message_address else None
        self._values = [ctypes.c_int64.from_address(engine.get_global_value_address(name))
                        for name in VALUE_SLOTS] if message_address else []
        # A module with recursion keeps the stack base of the running call in a
        # global: its calls run one at a time.
        self._call_lock = threading.Lock() if engine.get_global_value_address(STACK_BASE) else None

    @property
    def llvm_ir(self) -> str:
        """The optimised LLVM IR."""
        return self._llvm_ir

    @cached_property
    def asm(self) -> str:
        """The host assembly of the optimised module."""
        with _LOCK:
            return _target_machine().emit_assembly(llvm.parse_assembly(self._llvm_ir))

    def function(
        self,
        name: str,
        arg_types: Sequence[Any] | None = None,
        result_types: Sequence[Any] | None = None,
        num_outputs: int | None = None,
        sites: Sequence[SourceLoc] | None = None,
    ) -> NativeFunction:
        """The public function `name`, callable on NumPy arrays.

        `arg_types` are the loops-level argument types (inputs, then the
        `num_outputs` DPS output buffers), `result_types` the types it returns
        (xDSL attributes or their text, see `abi_type`). Omitted ones are taken
        from what msir-lower-to-llvm recorded.
        """
        recorded = self._metadata.get(name)
        if recorded is None and (arg_types is None or result_types is None):
            raise CompileError(f"no public function '{name}' in the compiled module")
        aliases: list[int] = []
        refused: list[str] = []
        if recorded is not None:
            if arg_types is None and num_outputs is None:  # the recorded signature
                aliases, refused = list(recorded.output_aliases), list(recorded.donation_refused)
            arg_types = recorded.arg_types if arg_types is None else arg_types
            result_types = recorded.result_types if result_types is None else result_types
            num_outputs = recorded.num_outputs if num_outputs is None else num_outputs
        address = self._engine.get_function_address(name + ENTRY_SUFFIX)
        if not address:
            raise CompileError(f"no entry wrapper '{name}{ENTRY_SUFFIX}' in the compiled module")
        return NativeFunction(
            self,
            name,
            _ENTRY_TYPE(address),
            list(arg_types),
            list(result_types),
            num_outputs or 0,
            list(self._sites if sites is None else sites),
            aliases,
            refused,
        )

    def _read_site(self) -> int:
        return self._site.value if self._site is not None else -1

    def _read_user_error(self) -> tuple[type[MsirError], str]:
        """The exception class and formatted message of the failed `msir.check`."""
        if self._message is None or not self._message.value:
            return MsirError, "a check failed in compiled code (its message was not recorded)"
        check = json.loads(ctypes.string_at(self._message.value).decode())
        numbers = set(check["python_numbers"])
        values = [_slot_value(slot.value, dtype, k in numbers)
                  for k, (slot, dtype) in enumerate(zip(self._values, check["dtypes"]))]
        return USER_ERRORS[check["error"]], check["message"].format(*values)


# ---------------------------------------------------------------------------
# Argument conversion
# ---------------------------------------------------------------------------


_ELEMENT_DTYPES = {
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "index": np.dtype(np.int64),
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
}
_MEMREF_TEXT = re.compile(r"memref<((?:(?:\d+|\?)x)*)(\w+)>")


def abi_type(t: Any) -> tuple[np.dtype, tuple[int, ...] | None]:
    """A loops-level type as (element dtype, shape), shape None for a scalar and
    -1 for a dynamic dim. `t` is an xDSL attribute or its printed text; a
    CompileError for anything else (e.g. a strided memref)."""
    text = t if isinstance(t, str) else str(t)
    if "bf16" in text and "bf16" not in _ELEMENT_DTYPES:
        from msir.dialects.primitives import numpy_dtype

        _ELEMENT_DTYPES["bf16"] = numpy_dtype("bfloat16")  # ml_dtypes: imported only when used
    dtype = _ELEMENT_DTYPES.get(text)
    if dtype is not None:
        return dtype, None
    m = _MEMREF_TEXT.fullmatch(text)
    if m and m.group(2) in _ELEMENT_DTYPES:
        dims = tuple(-1 if d == "?" else int(d) for d in m.group(1).split("x")[:-1])
        return _ELEMENT_DTYPES[m.group(2)], dims
    raise CompileError(f"no NumPy calling convention for type {text}")


# struct formats of a scalar in its 8-byte slot (low bytes, little endian)
_SLOT_FORMAT = {
    np.dtype(np.float16): "<e",
    np.dtype(np.float32): "<f",
    np.dtype(np.float64): "<d",
    np.dtype(np.bool_): "<?",
    np.dtype(np.int8): "<b",
    np.dtype(np.int16): "<h",
    np.dtype(np.int32): "<i",
    np.dtype(np.int64): "<q",
}

_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _data_pointer(a: np.ndarray) -> int:
    try:
        return _addressof(_from_buffer(a))
    except (TypeError, ValueError):  # read-only or empty arrays
        return a.__array_interface__["data"][0]


class _MemrefArg:
    """How one memref argument is checked and passed."""

    def __init__(self, position: int, dtype: np.dtype, shape: tuple[int, ...], first_dim_slot: int):
        self.position = position
        self.dtype = dtype
        self.shape = shape
        self.rank = len(self.shape)
        self.dynamic = [k for k, d in enumerate(self.shape) if d < 0]
        self.dim_slots = tuple(
            (first_dim_slot + j, k) for j, k in enumerate(self.dynamic)
        )
        self.static_dims = tuple((k, d) for k, d in enumerate(self.shape) if d >= 0)
        # computed once: np.prod on every call costs microseconds, more than a small kernel
        self.nbytes = None if self.dynamic else self.dtype.itemsize * math.prod(self.shape)

    def prepare(self, x) -> np.ndarray:
        """`x` as a C-contiguous, aligned, native-order array of the right type."""
        if type(x) is not np.ndarray:
            x = np.asarray(x)
        if x.dtype is not self.dtype and x.dtype != self.dtype:
            if x.dtype.newbyteorder("=") != self.dtype:
                raise DTypeError(
                    f"argument {self.position} has dtype {x.dtype}, expected {self.dtype}"
                )
            x = x.astype(self.dtype)
        shape = x.shape
        if self.dynamic:
            bad = len(shape) != self.rank or any(shape[k] != d for k, d in self.static_dims)
        else:
            bad = shape != self.shape
        if bad:
            expected = "x".join("?" if d < 0 else str(d) for d in self.shape)
            raise ShapeError(
                f"argument {self.position} has shape {shape}, expected ({expected})"
            )
        flags = x.flags
        if not (flags.c_contiguous and flags.aligned):
            x = np.ascontiguousarray(x)
            if not x.flags.aligned:
                x = x.copy()
        return x

    def store(self, buf, a: np.ndarray) -> None:
        buf[self.position] = _data_pointer(a)
        if self.dim_slots:
            shape = a.shape
            for slot, k in self.dim_slots:
                buf[slot] = shape[k]

    def pass_input(self, buf, x) -> np.ndarray:
        a = self.prepare(x)
        self.store(buf, a)
        return a

    def fresh(self) -> np.ndarray:
        if self.dynamic:
            raise ShapeError(
                f"argument {self.position} is an output with a dynamic shape: "
                "pass its buffer with out="
            )
        nbytes = self.nbytes
        if nbytes < allocator.CACHED_FROM:
            return np.empty(self.shape, self.dtype)
        # large: a recycled block of msir's allocator, returned when the array dies
        block = np.asarray(_NativeBuffer(allocator.alloc(nbytes), self.shape, self.dtype))
        # the array interface spells an ml_dtypes dtype (bfloat16) as raw bytes: view it as itself
        return block if block.dtype == self.dtype else block.view(self.dtype)

    def check_output(self, x) -> np.ndarray:
        """A caller's output buffer: written in place, so never copied."""
        if not isinstance(x, np.ndarray):
            raise DTypeError(f"output argument {self.position} must be a NumPy array")
        prepared = self.prepare(x)
        if prepared is not x or not x.flags.writeable:
            raise ShapeError(
                f"output argument {self.position} must be a writeable, aligned, "
                f"C-contiguous {self.dtype} array"
            )
        return x


class _ScalarArg:
    def __init__(self, position: int, dtype: np.dtype):
        self.position = position
        self.dtype = dtype
        self.format = _SLOT_FORMAT[self.dtype]

    def pass_input(self, buf, x) -> None:
        try:
            value = self.dtype.type(x).item()
            struct.pack_into(self.format, buf, 8 * self.position, value)
        except (TypeError, ValueError, OverflowError, struct.error) as e:
            raise DTypeError(
                f"argument {self.position}: cannot pass {x!r} as {self.dtype}"
            ) from e


class _NativeBuffer:
    """Owns a block of msir's allocator (`lowering.allocator`); NumPy arrays
    keep it as base, and the block goes back to the allocator with the last."""

    __slots__ = ("__array_interface__", "_ptr")

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype):
        self._ptr = ptr
        self.__array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "data": (ptr, False),
            "version": 3,
        }

    def __del__(self):
        allocator.free(self._ptr)


def _slot_value(bits: int, dtype: str, python_number: bool) -> Any:
    """A runtime value of a failed check from its 64 recorded bits (floats were
    widened to float64, integers sign-extended): a Python number, or a NumPy
    scalar of `dtype`, so that formatting it prints what Python prints."""
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        value: Any = struct.unpack("<d", struct.pack("<q", bits))[0]
    else:
        value = bool(bits) if dtype == "bool" else bits
    if python_number:
        return value
    return np.dtype("float32" if dtype == "bfloat16" else dtype).type(value)


_ERRORS = {
    1: (MsirIndexError, "index out of range"),
    2: (MsirZeroDivisionError, "integer division or modulo by zero"),
    3: (MsirMemoryError, "out of memory: an allocation in compiled code failed"),
    4: (MsirRecursionError, "recursion too deep: this call would overflow the native stack "
        "(a compiled recursion may use 4 MiB of it)"),
    5: (MsirValueError, "range() arg 3 must not be zero"),
}


class NativeFunction:
    """A compiled public function: `f(*inputs) -> list[np.ndarray]`.

    Returns the DPS output buffers (allocated here) followed by the values the
    function returns (memrefs it allocated, adopted without a copy, and
    scalars as 0-d arrays).

    Donation: an output that may alias a donated input (`output_aliases`) is
    written into that input's array, which is returned as the output, unless
    the array is read-only or overlaps another input (then it gets a fresh
    buffer, with a `DonationWarning`). After the call a donated array holds
    whatever the function wrote there; it must not be used as an input again.
    """

    def __init__(
        self,
        module: NativeModule,
        name: str,
        entry,
        arg_types: list[Any],
        result_types: list[Any],
        num_outputs: int,
        sites: list[SourceLoc],
        output_aliases: Sequence[int] = (),
        donation_refused: Sequence[str] = (),
    ):
        self.module = module
        self.name = name
        self._entry = entry
        self._sites = sites
        n_args = len(arg_types)
        self.num_inputs = n_args - num_outputs
        self._inputs: list[_MemrefArg | _ScalarArg] = []
        self._outputs: list[_MemrefArg] = []
        n_dims = 0
        for i, t in enumerate(arg_types):
            dtype, shape = abi_type(t)
            if shape is not None:
                spec = _MemrefArg(i, dtype, shape, n_args + n_dims)
                n_dims += len(spec.dynamic)
                if i >= self.num_inputs:
                    self._outputs.append(spec)
                    continue
            elif i >= self.num_inputs:
                raise CompileError(f"output {i - self.num_inputs} of '{name}' is not a memref")
            else:
                spec = _ScalarArg(i, dtype)
            self._inputs.append(spec)
        self._n_args = n_args
        self._results_offset = n_args + n_dims
        self._results: list[tuple[int, int, np.dtype, tuple[int, ...] | None]] = []
        slot = 0
        for t in result_types:
            dtype, shape = abi_type(t)
            if shape is not None:
                n_dyn = sum(1 for d in shape if d < 0)
                self._results.append((slot, n_dyn, dtype, shape))
                slot += 1 + n_dyn
            else:
                self._results.append((slot, 0, dtype, None))
                slot += 1
        self._buffer_type = ctypes.c_int64 * max(1, self._results_offset + slot)
        self.donation_refused = list(donation_refused)
        self._donated = [(j, i) for j, i in enumerate(output_aliases) if i >= 0]
        donated_inputs = {i for _, i in self._donated}
        self._others = {  # per donated input: the memref inputs it must not overlap
            i: [spec.position for spec in self._inputs if isinstance(spec, _MemrefArg) and spec.position != i]
            for i in donated_inputs
        }

    def __call__(self, *inputs, out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """Run on `inputs`; `out` optionally gives the DPS output buffers
        (required for outputs with dynamic dims), which are filled in place."""
        if len(inputs) != self.num_inputs:
            raise TypeError(
                f"{self.name}() takes {self.num_inputs} arguments, got {len(inputs)}"
            )
        if out is not None and len(out) != len(self._outputs):
            raise TypeError(f"{self.name}() has {len(self._outputs)} outputs, got {len(out)}")
        buf = self._buffer_type()
        # the prepared inputs (possibly copies) must live until the call returns
        prepared = [spec.pass_input(buf, x) for spec, x in zip(self._inputs, inputs)]
        if out is None:
            if self._donated:
                outputs = self._donated_outputs(prepared, buf)
            else:
                outputs = [spec.fresh() for spec in self._outputs]
        else:
            outputs = [spec.check_output(a) for spec, a in zip(self._outputs, out)]
        for spec, a in zip(self._outputs, outputs):
            spec.store(buf, a)
        base = _addressof(buf)
        args = (base, base + 8 * self._n_args, base + 8 * self._results_offset)
        if self.module.polls_interrupt:
            interrupt.arm()
        if self.module._call_lock is None:
            status = self._entry(*args)
        else:
            with self.module._call_lock:
                status = self._entry(*args)
        del prepared
        if status:
            self._free_results(buf)
            self._raise(status)
        if self._results:
            outputs += self._collect_results(buf)
        return outputs

    def _donated_outputs(self, prepared: list, buf) -> list[np.ndarray]:
        """The output buffers, donated inputs' arrays where they may be reused
        (`buf`: the argument slots, holding the inputs' data pointers)."""
        outputs: list[np.ndarray | None] = [None] * len(self._outputs)
        for j, i in self._donated:
            a = prepared[i]
            problem = None
            if not a.flags.writeable:
                problem = "it is read-only"
            elif a.nbytes:
                lo = buf[i]
                hi = lo + a.nbytes
                for k in self._others[i]:
                    p = buf[k]
                    if p < hi and lo < p + prepared[k].nbytes:
                        problem = f"it overlaps input {k}"
                        break
            if problem is None:
                outputs[j] = a
            else:
                warnings.warn(
                    f"{self.name}: donated input {i} is not reused ({problem}); "
                    f"output {j} gets a new buffer",
                    DonationWarning,
                    stacklevel=5,  # the caller of the jitted function
                )
        return [spec.fresh() if a is None else a for spec, a in zip(self._outputs, outputs)]

    def _free_results(self, buf) -> None:
        """After an error: release the buffers the function still returned."""
        for slot, _, _, shape in self._results:
            if shape is not None and buf[self._results_offset + slot]:
                allocator.free(buf[self._results_offset + slot])

    def _collect_results(self, buf) -> list[np.ndarray]:
        values = []
        offset = self._results_offset
        for slot, n_dyn, dtype, shape in self._results:
            if shape is None:
                fmt = _SLOT_FORMAT[dtype]
                value = struct.unpack_from(fmt, buf, 8 * (offset + slot))[0]
                values.append(np.array(value, dtype))
                continue
            ptr = buf[offset + slot]
            dims = iter(buf[offset + slot + 1 : offset + slot + 1 + n_dyn])
            full = tuple(next(dims) if d < 0 else d for d in shape)
            values.append(np.asarray(_NativeBuffer(ptr, full, dtype)))
        return values

    def _raise(self, status: int):
        site = self.module._read_site()
        loc = self._sites[site] if 0 <= site < len(self._sites) else None
        if status == ERR_INTERRUPTED:  # Ctrl-C: as Python's own, with where the loop was
            where = f" in the while loop at {loc.file}:{loc.line}" if loc is not None else ""
            raise KeyboardInterrupt(f"{self.name}: interrupted{where}")
        if status == ERR_USER:
            error, message = self.module._read_user_error()
        else:
            error, message = _ERRORS.get(status, (MsirError, f"native error code {status}"))
        raise error(message, loc)
