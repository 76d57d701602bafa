"""Small runtimes that msir compiles from LLVM IR once per machine: the thread
pool (`msir.lowering.threads`), the buffer allocator (`msir.lowering.allocator`)
and the BLAS trampolines (`msir.lowering.blas`).

`compile_cached(name, ir, target_options, probe, optimise=None)` returns an
MCJIT engine holding the IR's code; `optimise(module, target_machine)`, when
given, runs LLVM passes on the parsed IR before code generation (its name is
part of the cache key). Generating that code costs ~30-100 ms per runtime,
which a second process must not pay again, so the object code is kept beside
the persistent compile cache's entries (`msir.lowering.cache_location`;
`<name>-<hash>.o`, keyed by all the object depends on: the IR, the target
machine's options, the LLVM version and the default triple, the target
machine being generic). Without that cache, or when a file is unreadable or
lacks `probe` (a function the IR defines), the IR is compiled in the process.
External symbols the code calls must be resolvable before the call (loaded
libraries, `llvmlite.binding.add_symbol`): they are bound when the engine is
finalised.

Each runtime is parsed into an LLVM context of its own (kept alive by its
module, which its engine keeps): runtimes build in a background thread
(`jit.start_runtimes`) or on first use, while another thread may be compiling
in LLVM's global context under the JIT's lock, and one LLVMContext must not be
used by two threads at once.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from msir.lowering import cache_location


def compile_cached(name: str, ir: str, target_options: dict, probe: str, optimise=None):
    """An engine with `ir`'s code, from the cached object when there is one."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine(**target_options)
    key_options = target_options if optimise is None else {**target_options, "passes": optimise.__qualname__}
    path = object_path(name, ir, key_options)
    context = llvm.create_context()
    engine = _load_cached_object(llvm, tm, path, probe, context)
    if engine is None:
        mod = llvm.parse_assembly(ir, context)
        mod.verify()
        if optimise is not None:
            optimise(mod, tm)
        engine = llvm.create_mcjit_compiler(mod, tm)
        objects: list[bytes] = []
        engine.set_object_cache(lambda _module, obj: objects.append(obj))
        engine.finalize_object()
        if len(objects) == 1:
            _store_object(path, objects[0])
    return engine


def object_path(name: str, ir: str, target_options: dict) -> Path | None:
    """Where the object code of `ir` is kept (None when the cache is disabled)."""
    import llvmlite.binding as llvm

    if not cache_location.enabled():
        return None
    version = ".".join(map(str, llvm.llvm_version_info))
    key = f"llvm={version}\ntriple={llvm.get_default_triple()}\ntarget={target_options}\n{ir}"
    digest = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    return cache_location.cache_dir() / f"{name}-{digest}.o"


def _load_cached_object(llvm, tm, path: Path | None, probe: str, context):
    try:
        if path is None or not path.exists():
            return None
        obj = path.read_bytes()
    except OSError:
        return None
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly("", context), tm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    return engine if engine.get_function_address(probe) else None


def _store_object(path: Path | None, obj: bytes) -> None:
    """Written to a temporary file and renamed, so readers never see half."""
    try:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(obj)
        os.replace(tmp, path)
    except OSError:
        pass  # the runtime works without the cache
