"""Ctrl-C in compiled loops: a native SIGINT flag that `while` loops poll.

A jitted function is one native call; Python runs its SIGINT handler only
between bytecodes, so a compiled `while` that never ends could not be
stopped. `convert-msir-to-loops` makes every `scf.while` it lowers from
`msir.while` call `i32 @__msir_interrupted()` before each test of the
condition: nonzero ends the loop and reports runtime error 6 (at the loop's
source line), which `NativeFunction` raises as `KeyboardInterrupt` once the
native call has returned. One call per iteration of a user's `while` (a
load behind an opaque call, so LLVM cannot hoist it out of the loop); inner
element loops and `for` loops over a known range do not poll.

The flag is set by a native signal handler (`__msir_on_sigint`) installed
with `sigaction` in front of Python's own: it stores 1 and calls the
handler it replaced, so Python still sees the signal (its handler runs when
the native call returns, and `KeyboardInterrupt` is raised as without
msir). `arm()`, called before each native call of a module that polls,
clears the flag (a Ctrl-C answered in Python earlier must not end the next
call) and installs the handler again if Python's was replaced since
(`signal.signal` re-installs Python's C handler over msir's). Where Python's
SIGINT disposition is not a plain handler function (SIG_IGN, SIG_DFL, or
SA_SIGINFO), nothing is installed and loops never see the flag. The flag is
process-wide: a Ctrl-C stops the polling loops of every thread's native
call, each raising KeyboardInterrupt.

The runtime is a small LLVM IR module compiled once per process with
llvmlite, like the thread pool's (`msir.lowering.threads`); its entry
points are registered with `llvmlite.binding.add_symbol`.
"""

from __future__ import annotations

import ctypes
import signal
import threading

from msir.lowering.load_once import load_once
from msir.lowering.loops_abi import INTERRUPT_FUNC

_RUNTIME = r"""
@flag = internal global i32 0
@previous = internal global ptr null

define i32 @__msir_interrupted() {
  %v = load atomic i32, ptr @flag monotonic, align 4
  ret i32 %v
}

define void @__msir_on_sigint(i32 %sig) {
  store atomic i32 1, ptr @flag monotonic, align 4
  %p = load ptr, ptr @previous
  %n = ptrtoint ptr %p to i64
  %chain = icmp ugt i64 %n, 1
  br i1 %chain, label %call, label %done
call:
  call void %p(i32 %sig)
  br label %done
done:
  ret void
}

define void @__msir_interrupt_reset(ptr %prev) {
  store atomic i32 0, ptr @flag monotonic, align 4
  %keep = icmp eq ptr %prev, inttoptr (i64 -1 to ptr)
  br i1 %keep, label %done, label %set
set:
  store ptr %prev, ptr @previous
  br label %done
done:
  ret void
}
"""

SA_SIGINFO = 4  # Linux, every architecture msir runs on


class _Sigaction(ctypes.Structure):
    """glibc's `struct sigaction` (x86_64 and aarch64 share the layout)."""

    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_uint64 * 16),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


_state: dict = {}
_lock = threading.Lock()
_KEEP = ctypes.c_void_p(-1 & (2**64 - 1))


def load() -> bool:
    """Compile the runtime and register `__msir_interrupted` (once per
    process; thread-safe). False if it could not be built."""
    return load_once(_state, _lock, _load)


def _load() -> None:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(_RUNTIME, llvm.create_context())  # its own context: see msir.lowering.runtime_object
    mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    address = engine.get_function_address
    llvm.add_symbol(INTERRUPT_FUNC, address(INTERRUPT_FUNC))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sigaction.argtypes = [ctypes.c_int, ctypes.POINTER(_Sigaction), ctypes.POINTER(_Sigaction)]
    _state.update(
        engine=engine,
        handler=address("__msir_on_sigint"),
        reset=ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address("__msir_interrupt_reset")),
        sigaction=libc.sigaction,
        armed_for=None,
    )


def load_error() -> str | None:
    """Why `load()` failed, if it did."""
    return _state.get("error")


def arm() -> None:
    """Before a native call that polls: clear the flag; (re)install the
    handler if Python's SIGINT handler changed since it was installed."""
    python_handler = signal.getsignal(signal.SIGINT)
    if python_handler is _state["armed_for"]:
        _state["reset"](_KEEP)
        return
    with _lock:
        _install(python_handler)


def _install(python_handler) -> None:
    current = _Sigaction()
    if _state["sigaction"](signal.SIGINT, None, ctypes.byref(current)) != 0:
        return
    previous = current.handler or 0
    if previous == _state["handler"]:  # ours already, in front of Python's
        _state["armed_for"] = python_handler
        _state["reset"](_KEEP)
        return
    if previous <= 1 or current.flags & SA_SIGINFO:  # SIG_DFL, SIG_IGN, or a 3-argument handler
        _state["armed_for"] = python_handler
        _state["reset"](_KEEP)
        return
    ours = _Sigaction()
    ours.handler = _state["handler"]
    ours.mask = current.mask
    ours.flags = current.flags
    ours.restorer = current.restorer
    _state["reset"](ctypes.c_void_p(previous))
    if _state["sigaction"](signal.SIGINT, ctypes.byref(ours), None) == 0:
        _state["armed_for"] = python_handler
