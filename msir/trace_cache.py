"""The persistent trace cache: a jitted function's native code found before the frontend runs.

`msir.cache` keys object code by the traced IR, so a second process still
parses, translates and fingerprints the function before it can look up its
code. This cache is keyed by what decides the trace *before* tracing:

* the function's identity: module, qualname, file and first line (of the
  function, or of what a `grad`/`jit`/`custom_vjp` wraps);
* the abstract arguments: `msir.frontend.driver.spec_of` without the values of
  Python ints and bools, plus the values of those that the trace specialised
  on (`Traced.static_positions`: an index entry under the first key names the
  positions, the entry itself lives under a key that adds their values);
* `msir.cache.environment()` (msir's source hash, host CPU and features, LLVM,
  llvmlite, xDSL and NumPy versions) and `msir.compiler.pipeline_options()`
  of the target compiled for (its name, pipeline text and options).

Dependency manifest
===================
While translating, the frontend reports every name it resolves outside the
traced code (`Recorder.resolved`: a global, a closure cell or a builtin, in
`Translator.lookup`; `Recorder.module_attribute`: `mod.name`). Each becomes a
*reference* — how to reach the value again from the jitted function:

    ["root"]                 the jitted function
    ["g", fn_ref, name]      fn.__globals__[name] (absent: a builtin)
    ["c", fn_ref, name]      the closure cell `name` of fn
    ["a", ref, attr]         getattr(value, attr): module attributes, the
                             function a jit/grad/custom_vjp wraps
    ["i", ref, k]            value[k] of a tuple, list or dict
    ["t", ref, attr]         getattr(type(value), attr): the `__call__` a call
                             of an object runs
    ["class", ref]           the module and qualname of value's class
    ["len", ref]             the type name and length of a tuple or list
    ["bool", ref]            the truth value of value

with a *fingerprint* of the value: user functions by module, qualname, file,
first line, a hash of their code object, a hash of their source file and their
defaults (so the functions they call are recorded in turn, when the frontend
translates them); NumPy and msir functions, builtins and modules by identity
(NumPy's version is in the key); Python and NumPy scalars, dtypes and
tuples/lists of them by value; arrays by dtype and shape (they are hidden
runtime arguments, read at every call). Values without a fingerprint of
their own are recorded through their parts (`Recorder._note`): an instance of
a user class or a dict by its class (["class", ref]; what the frontend reads
of it, `Recorder.read`, is recorded in turn), a method by its function, a
tuple or list holding them by its length and its items. A value of any other
kind makes the trace uncacheable (it is compiled through the frontend every
process, the IR level cache still applies).

On a lookup every reference is resolved again and fingerprinted; one
difference (a helper's source edited and re-imported, a global constant
changed, a captured array of another dtype or shape, a name that now shadows
a builtin) is a miss: the function is traced again and the entry rewritten.
Source files are checked like CPython's .pyc files: by size and mtime, read
and hashed again only when they changed (any edit of a function's file, even
elsewhere in it, then traces again: the frontend reads the file from disk).

Guards
======
What a trace reads through an object (an attribute, a dict or list item) can
change between two calls of the same compiled function, so the in-memory
entries check it too: every such read is a `Guard` (a getter and what the
trace depended on: the value of a constant, the class of an object, the
length of a list, the function of a method...), checked by
`msir.api._Entry.call` before each native call; one that fails makes the
entry stale and the function is traced again. An entry lists its guards as
references, rebuilt on a hit (after the manifest check, which covers what
they read: `Recorder.guard`). A trace that compares objects by identity
(`is`) is not cached: identities do not carry over to another process.

Entries
=======
`<key>.msirt` in the cache directory: JSON with the manifest, the IR key of
the object code in `msir.cache` (`<ir key>.msirc`, shared with the IR level),
the entry point, source locations of runtime errors, the argument specs, the
captured arrays and the guards (as references) and the output structure. A
hit loads the object code with `msir.cache.load` without importing xDSL or
running the frontend. Written by atomic rename, bounded and evicted with the `.msirc`
entries, removed when corrupt (a miss). `MSIR_CACHE=0` disables both levels,
`MSIR_TRACE_CACHE=0` this one only; `MSIR_DUMP` bypasses it (the stages run).
`msir.cache.stats` counts trace_hits, trace_misses (no entry), trace_stale
(manifest changed) and trace_writes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from msir import cache, targets
from msir.common.tensor import Tensor as UserTensor
from msir.transforms import CustomVjp, Jitted, JvpEntry, Transform, checkpoint, compiled_call_name

FORMAT_VERSION = 2
SUFFIX = ".msirt"


class Uncacheable(Exception):
    """A value the manifest cannot fingerprint: the trace is not cached."""


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()
"""What a reference to a missing global resolves to (the name was a builtin)."""

_API_OBJECTS = (Jitted, Transform, CustomVjp, checkpoint, JvpEntry)
"""msir's own function objects: fingerprinted by what they wrap."""


def enabled() -> bool:
    return cache.enabled() and os.environ.get("MSIR_TRACE_CACHE", "1").strip().lower() not in (
        "0", "off", "false", "no",
    )


# ---------------------------------------------------------------------------
# Fingerprints
# ---------------------------------------------------------------------------

_code_hashes: dict[types.CodeType, str] = {}


def _hash_code(code: types.CodeType, h) -> None:
    h.update(code.co_code)
    h.update(code.co_linetable)
    h.update(getattr(code, "co_exceptiontable", b""))
    h.update(
        repr(
            (
                code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                code.co_flags, code.co_firstlineno, getattr(code, "co_qualname", code.co_name),
                code.co_filename,
            )
        ).encode()
    )
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            h.update(b"code{")
            _hash_code(c, h)
            h.update(b"}")
        elif isinstance(c, frozenset):  # iteration order varies with string hashing
            h.update(repr(sorted(repr(x) for x in c)).encode())
        else:
            h.update(f"{type(c).__name__}:{c!r}\0".encode())


def code_hash(code: types.CodeType) -> str:
    """A hash of what a code object executes, stable across processes
    (marshal's output is not: it depends on reference counts)."""
    found = _code_hashes.get(code)
    if found is None:
        h = hashlib.blake2b(digest_size=16)
        _hash_code(code, h)
        found = _code_hashes[code] = h.hexdigest()
    return found


def file_hash(path: str) -> str:
    """A hash of a source file's bytes (what the frontend reads a function from)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return "unreadable"
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _file_stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _is_library(module: str | None) -> bool:
    m = module or ""
    return m in ("numpy", "msir", "builtins", "math") or m.startswith(("numpy.", "msir.", "_operator"))


def is_plain_object(v: Any) -> bool:
    """Is `v` an instance of a user-defined class (not a function, class or
    module, not a tuple, list or dict, nothing of NumPy's, msir's or the
    builtins', no `functools.partial`: those are callables compiled code
    refuses by name)? The frontend reads such objects' attributes at compile
    time. msir's own classes whose instances compiled code reads the same way
    (`msir.nn.Cell`) say so with a class attribute `__msir_plain_object__`."""
    if isinstance(v, (type, types.ModuleType, types.FunctionType, types.MethodType, tuple, list, dict)):
        return False
    if getattr(type(v), "__msir_plain_object__", False):
        return True
    return not _is_library(type(v).__module__) and type(v).__module__ != "functools"


_GUARD_OBSERVE: dict[str, Callable[[Any], Any]] = {
    "value": lambda v: (type(v), repr(v)),
    "truth": bool,
    "len": lambda v: (type(v), len(v)),
    "type": type,
    "method": lambda v: v.__func__,
    "identity": lambda v: v,
}
"""What of a value read through an object a trace depends on, per guard mode."""
_BY_IDENTITY = frozenset({"type", "method", "identity"})


@dataclass
class Guard:
    """A read through an object that a compiled function depends on: it stands
    while `get()` gives a value whose `mode` observation (`_GUARD_OBSERVE`) is
    `expected` (by identity for classes, functions and other compile-time
    objects, by equality for the rest)."""

    get: Callable[[], Any]
    mode: str
    expected: Any

    @classmethod
    def of(cls, mode: str, get: Callable[[], Any], value: Any) -> "Guard":
        return cls(get, mode, _GUARD_OBSERVE[mode](value))

    def holds(self) -> bool:
        try:
            now = _GUARD_OBSERVE[self.mode](self.get())
        except Exception:  # the object changed so that the read fails: trace again, and report it there
            return False
        return now is self.expected if self.mode in _BY_IDENTITY else now == self.expected


class Fingerprinter:
    """Fingerprints values. `files` maps the source file of every user function
    met to [size, mtime_ns, hash of its bytes]: filled while recording; when
    validating, the recorded one, whose hash stands while size and mtime do
    (else the file is read and hashed again)."""

    def __init__(self, files: dict[str, list] | None = None):
        self.recording = files is None
        self.files: dict[str, list] = {} if files is None else files
        self._hashes: dict[str, str] = {}

    def source_hash(self, fn) -> str:
        path = fn.__code__.co_filename
        h = self._hashes.get(path)
        if h is None:
            st = _file_stat(path)
            recorded = None if self.recording else self.files.get(path)
            if st is not None and isinstance(recorded, list) and recorded[:2] == st:
                h = recorded[2]
            else:
                h = file_hash(path)
                if self.recording:
                    self.files[path] = (st or [-1, -1]) + [h]
            self._hashes[path] = h
        return h

    def __call__(self, v: Any) -> Any:
        t = type(v)
        if v is None or v is ABSENT or t in (bool, int, float, complex, str, bytes):
            return [t.__name__, repr(v)]
        if t is tuple or t is list:
            return [t.__name__, [self(x) for x in v]]
        if t is np.ndarray:
            return ["array", v.dtype.name, list(v.shape)]
        if isinstance(v, UserTensor):  # its array is a runtime argument, as an array's is
            return [t.__name__, v._data.dtype.name, list(v._data.shape)]
        if isinstance(v, np.generic):
            return ["npscalar", _dtype_key(v.dtype), repr(v.item())]
        if isinstance(v, np.dtype):
            return ["dtype", _dtype_key(v)]
        if t is types.ModuleType:
            return ["module", v.__name__]
        if t is types.FunctionType:
            if _is_library(v.__module__):
                return ["libfn", v.__module__, v.__qualname__]
            code = v.__code__
            return [
                "function", v.__module__, v.__qualname__, code.co_filename, code.co_firstlineno,
                code_hash(code), self.source_hash(v), self(v.__defaults__), self(sorted((v.__kwdefaults__ or {}).items())),
            ]
        if isinstance(v, _API_OBJECTS):
            if isinstance(v, Jitted):
                return ["jit", self(v.__wrapped__)]
            if isinstance(v, Transform) and v.tangents is None:
                return ["transformed", v.kind, repr(v.argnums), _aux_form(v), self(v.fn)]
            if isinstance(v, CustomVjp):
                return ["custom_vjp", self(v.fn), self(v.fwd), self(v.bwd)]
            raise Uncacheable(f"a {t.__name__}")
        if isinstance(v, type):
            if _is_library(v.__module__):
                return ["type", v.__module__, v.__qualname__]
            raise Uncacheable(f"class {v.__qualname__}")
        if isinstance(v, (types.BuiltinFunctionType, np.ufunc)) or _is_library(t.__module__):
            name = getattr(v, "__qualname__", None) or getattr(v, "__name__", None)
            if name is None:
                raise Uncacheable(f"a value of type {t.__qualname__}")
            return ["builtin", t.__module__, t.__qualname__, getattr(v, "__module__", None), name]
        raise Uncacheable(f"a value of type {t.__qualname__}")


# ---------------------------------------------------------------------------
# Recording (during translation)
# ---------------------------------------------------------------------------


class Recorder:
    """The names the frontend resolves outside the traced code, as references
    and fingerprints (see the module docstring). `failed` says why the trace
    cannot be cached, if it cannot."""

    def __init__(self, root: Any):
        self.fingerprint = Fingerprinter()
        self.deps: dict[str, tuple[list, Any]] = {}
        self.failed: str | None = None
        self._owners: dict[int, list] = {}  # id of a globals dict -> the ref of a function owning it
        self._cells: dict[int, list] = {}  # id of a closure cell -> its ref
        self._modules: dict[int, list] = {}
        self.arrays: dict[int, list] = {}  # id of a captured array -> a ref
        self.guards: list[list] = []  # [ref, mode] of every `Guard` of the trace
        self._keep: list[Any] = []  # keeps the ids above valid
        try:
            self._note(["root"], root)
        except Uncacheable as e:
            self.failed = f"the jitted function: {e}"

    def _register(self, ref: list, v: Any) -> None:
        """Remember how to reach what the frontend may read through `v` later."""
        self._keep.append(v)
        t = type(v)
        if t is types.FunctionType:
            self._owners.setdefault(id(v.__globals__), ref)
            for name, cell in zip(v.__code__.co_freevars, v.__closure__ or ()):
                self._cells.setdefault(id(cell), ["c", ref, name])
        elif t is types.ModuleType:
            self._modules.setdefault(id(v), ref)
        elif t is np.ndarray:
            self.arrays.setdefault(id(v), ref)
        elif isinstance(v, UserTensor):
            self.arrays.setdefault(id(v._data), ["a", ref, "_data"])
        elif t is tuple or t is list:
            for i, x in enumerate(v):
                self._register(["i", ref, i], x)
        elif isinstance(v, _API_OBJECTS):
            for attr in ("__wrapped__", "fn", "fwd", "bwd"):
                inner = getattr(v, attr, None)
                if inner is not None and inner is not v:
                    self._register(["a", ref, attr], inner)

    def _note(self, ref: list, value: Any) -> None:
        """Record a dependency on `value` at `ref`: its fingerprint, or for what
        has none (objects, dicts, methods, sequences holding them), what the
        trace can depend on: the class of an object or dict (what it reads of
        them is recorded in turn), a method's function, a sequence's length and
        its items."""
        if isinstance(value, dict) or is_plain_object(value):
            return self._note(["class", ref], _class_name(value))
        if _is_method(value):
            return self._note(["a", ref, "__func__"], value.__func__)
        if type(value) in (tuple, list) and any(_has_no_fingerprint(x) for x in value):
            self._note(["len", ref], _length(value))
            for i, x in enumerate(value):
                self._note(["i", ref, i], x)
            return
        k = repr(ref)  # refs nest lists of str, int and bool only (`read`): an exact key, cheaper than json.dumps
        if k in self.deps:
            return
        self.deps[k] = (ref, self.fingerprint(value))
        self._register(ref, value)

    def _fail(self, why: str) -> None:
        """Mark the trace uncacheable (the first reason is kept)."""
        if self.failed is None:
            self.failed = why

    def resolved(self, closure: dict, globals_: dict, name: str) -> list | None:
        """`name` looked up in a function's closure, then its globals (absent
        from both: a builtin, which a later global would shadow). Closure
        entries that are not cells are values of the traced code itself.
        Returns the reference noted (None if none was)."""
        if self.failed is not None:
            return None
        try:
            if name in closure:
                cell = closure[name]
                if not isinstance(cell, types.CellType):
                    return None  # a value of the traced code's own scope (a nested def's environment)
                ref = self._cells.get(id(cell))
                if ref is None:
                    return self._fail(f"closure variable '{name}' of an untracked function")
                try:
                    value = cell.cell_contents
                except ValueError:
                    return self._fail(f"closure variable '{name}' is empty")
                self._note(ref, value)
                return ref
            owner = self._owners.get(id(globals_))
            if owner is None:
                return self._fail(f"global '{name}' of an untracked function")
            ref = ["g", owner, name]
            self._note(ref, globals_.get(name, ABSENT))
            return ref
        except Uncacheable as e:
            return self._fail(f"'{name}' is {e}")

    def module_attribute(self, module: types.ModuleType, attr: str) -> list | None:
        """`module.attr` read; returns its reference (None if none was noted)."""
        if self.failed is not None:
            return None
        ref = self._modules.get(id(module))
        if ref is None:
            return self._fail(f"module {module.__name__} reached without a name")
        try:
            self._note(["a", ref, attr], getattr(module, attr))
        except Uncacheable as e:
            return self._fail(f"'{module.__name__}.{attr}' is {e}")
        return ["a", ref, attr]

    def read(self, parent: list | None, kind: str, key: Any, value: Any) -> list | None:
        """Attribute (`kind` "a"), item ("i") or class attribute ("t") `key` of
        the value at reference `parent`, read while tracing: noted like a name.
        Returns its reference (None if none was noted: then the trace is not
        cached)."""
        if self.failed is not None:
            return None
        if parent is None:
            return self._fail(f"'{key}' read from an object reached without a reference")
        if kind == "i" and type(key) not in (int, bool, str):
            return self._fail(f"item {key!r}: only str and int keys have references")
        ref = [kind, parent, key]
        try:
            self._note(ref, value)
        except Uncacheable as e:
            return self._fail(f"'{key}' is {e}")
        return ref

    def guard(self, ref: list | None, mode: str, value: Any) -> None:
        """A `Guard` of mode `mode` on `value`, at `ref` (rebuilt on a hit from
        the values the checked manifest vouches for: so what the guard
        observes is a dependency too). The identity of an object or dict has
        no fingerprint another process could check: a trace that depends on
        it is not cached."""
        if ref is None:
            return self._fail(f"a {mode} guard on an object reached without a reference")
        if mode == "identity" and (isinstance(value, dict) or is_plain_object(value)):
            return self._fail(f"the identity of a {type(value).__qualname__} object ('is')")
        if self.failed is not None:
            return None
        try:
            if mode in _GUARD_DEPENDENCIES:
                kind, observe = _GUARD_DEPENDENCIES[mode]
                self._note([kind, ref], observe(value))
            else:
                self._note(ref, value)
        except Uncacheable as e:
            return self._fail(f"a {mode} guard on {e}")
        self.guards.append([ref, mode])


def _class_name(v: Any) -> list[str]:
    return [type(v).__module__, type(v).__qualname__]


def _length(v: Any) -> list:
    return [type(v).__name__, len(v)]


def _is_method(v: Any) -> bool:
    return type(v) is types.MethodType and type(v.__func__) is types.FunctionType


_GUARD_DEPENDENCIES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "type": ("class", _class_name),
    "truth": ("bool", bool),
    "len": ("len", _length),
}
"""The reference kind that records what a guard of each mode observes (the
other modes observe the value itself, or its function)."""


def _has_no_fingerprint(v: Any) -> bool:
    """Is `v` recorded through its parts (`Recorder._note`)?"""
    if type(v) in (tuple, list):
        return any(_has_no_fingerprint(x) for x in v)
    return isinstance(v, dict) or is_plain_object(v) or _is_method(v)


# ---------------------------------------------------------------------------
# Resolving references again
# ---------------------------------------------------------------------------


def resolve(ref: list, root: Any, memo: dict[str, Any] | None = None) -> Any:
    """The value `ref` reaches from `root` now (exceptions when it reaches nothing)."""
    if memo is not None:
        k = json.dumps(ref)
        if k in memo:
            return memo[k]
    kind = ref[0]
    if kind == "root":
        value = root
    elif kind == "g":
        value = resolve(ref[1], root, memo).__globals__.get(ref[2], ABSENT)
    elif kind == "c":
        fn = resolve(ref[1], root, memo)
        value = fn.__closure__[fn.__code__.co_freevars.index(ref[2])].cell_contents
    elif kind == "a":
        value = getattr(resolve(ref[1], root, memo), ref[2], ABSENT)
    elif kind == "i":
        value = resolve(ref[1], root, memo)[ref[2]]
    elif kind == "t":
        value = getattr(type(resolve(ref[1], root, memo)), ref[2], ABSENT)
    elif kind == "class":
        value = _class_name(resolve(ref[1], root, memo))
    elif kind == "len":
        value = _length(resolve(ref[1], root, memo))
    elif kind == "bool":
        value = bool(resolve(ref[1], root, memo))
    else:
        raise ValueError(f"unknown reference {ref!r}")
    if memo is not None:
        memo[k] = value
    return value


def item_or_absent(container: Any, key: Any) -> Any:
    """`container[key]`, or ABSENT when there is no such item (any more)."""
    try:
        return container[key]
    except (LookupError, TypeError):
        return ABSENT


def getter(ref: list, root: Any) -> Callable[[], Any]:
    """A function reading `ref` now (for a captured array, at every call)."""
    if ref == ["root"]:
        return lambda: root
    inner = getter(ref[1], root)
    kind, key = ref[0], ref[2]
    if kind == "g":
        return lambda: inner().__globals__.get(key, ABSENT)
    if kind == "c":
        def cell():
            fn = inner()
            return fn.__closure__[fn.__code__.co_freevars.index(key)].cell_contents
        return cell
    if kind == "a":
        return lambda: getattr(inner(), key, ABSENT)
    if kind == "i":
        return lambda: item_or_absent(inner(), key)
    if kind == "t":
        return lambda: getattr(type(inner()), key, ABSENT)
    raise ValueError(f"unknown reference {ref!r}")


def manifest_changes(manifest: dict, root: Any) -> str | None:
    """None when every recorded dependency resolves to the same fingerprint,
    else the first difference (for MSIR_LOG=cache)."""
    fp = Fingerprinter(manifest.get("files", {}))
    memo: dict[str, Any] = {}
    for ref, recorded in manifest["deps"]:
        try:
            now = fp(resolve(ref, root, memo))
        except Uncacheable as e:
            return f"{ref}: now {e}"
        except Exception as e:  # the reference reaches nothing any more
            return f"{ref}: {type(e).__name__}: {e}"
        if now != recorded:
            return f"{ref}: changed"
    return None


# ---------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------


def identity(fn: Any) -> Any:
    """Where `fn` is defined (not what it contains: the manifest checks that)."""
    t = type(fn)
    if t is types.FunctionType:
        code = fn.__code__
        return ["function", fn.__module__, fn.__qualname__, code.co_filename, code.co_firstlineno]
    if isinstance(fn, Transform) and fn.tangents is None:
        return ["transformed", fn.kind, repr(fn.argnums), _aux_form(fn), identity(fn.fn)]
    if isinstance(fn, Jitted):
        return identity(fn.__wrapped__)
    if t is types.MethodType and is_plain_object(fn.__self__):
        owner = type(fn.__self__)
        return ["method", owner.__module__, owner.__qualname__, identity(fn.__func__)]
    if is_plain_object(fn):  # a callable object (a Cell): the method its call runs
        cls = type(fn)
        return ["object", cls.__module__, cls.__qualname__, identity(getattr(cls, compiled_call_name(fn), None))]
    return None


def _aux_form(t: Transform) -> Any:
    """What of a transform's `has_aux` decides its trace: whether, and in which form (`Transform.aux_tuple`)."""
    return "tuple" if t.has_aux and t.aux_tuple else bool(t.has_aux)


def describe(value: Any) -> Any:
    """`spec_of(value)` without the values of ints and bools; None if unsupported."""
    if isinstance(value, np.ndarray):
        return ["array", value.dtype.name, list(value.shape)]
    if isinstance(value, np.generic):
        return ["array", value.dtype.name, []]
    if isinstance(value, bool):
        return ["bool"]
    if isinstance(value, int):
        return ["int"]
    if isinstance(value, float):
        return ["float"]
    if isinstance(value, (tuple, list)):
        items = [describe(v) for v in value]
        return None if any(i is None for i in items) else [type(value).__name__, items]
    if value is None or isinstance(value, str):
        return ["const", value]
    return None


def _digest(*parts: Any) -> str:
    h = hashlib.blake2b(digest_size=20)
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode() + b"\0")
    return h.hexdigest()


def _pipeline_options(target: str) -> dict:
    from msir.compiler import pipeline_options

    return pipeline_options(target)


def _path(key: str) -> Path:
    return cache.cache_dir() / (key + SUFFIX)


def _read(key: str) -> dict | None:
    path = _path(key)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        entry = json.loads(data)
        if not isinstance(entry, dict) or entry.get("format") != FORMAT_VERSION or entry.get("key") != key:
            raise ValueError("bad header")
        return entry
    except (ValueError, UnicodeDecodeError) as e:
        cache._count("corrupt")
        cache._log(f"removing corrupt trace entry {path.name}: {e}")
        cache._remove(path)
        return None


def _write(key: str, entry: dict) -> bool:
    d = cache.cache_dir()
    tmp = None
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=d)
        with os.fdopen(fd, "w") as f:
            json.dump({"format": FORMAT_VERSION, "key": key, **entry}, f, separators=(",", ":"))
        os.replace(tmp, _path(key))
        return True
    except (OSError, TypeError, ValueError) as e:
        cache._count("errors")
        cache._log(f"cannot write trace entry {key[:12]}: {e}")
        if tmp is not None:
            cache._remove(Path(tmp))
        return False


# ---------------------------------------------------------------------------
# Lookup and store
# ---------------------------------------------------------------------------


@dataclass
class CachedCapture:
    """A captured array of a cache hit: `msir.frontend.translate.Capture`'s fields."""

    get: Callable[[], Any]
    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass
class CachedTrace:
    """What `msir.api._Entry` reads of a `Traced`, restored from an entry."""

    arg_specs: list
    captures: list[CachedCapture]
    out_structure: Any
    out_weak: list[bool]
    guards: list[Guard]
    writes: list[int]


@dataclass
class Hit:
    native: Any
    traced: CachedTrace
    static_positions: frozenset[int]


def _dtype_key(d: np.dtype) -> str:
    """A dtype in a fingerprint: its array-protocol string, which spells ml_dtypes'
    (bfloat16) as raw bytes (`<V2`), so those by name."""
    return d.name if d.kind == "V" else d.str


def _leaves(a: Any, out: list) -> list:
    if isinstance(a, (tuple, list)):
        for x in a:
            _leaves(x, out)
    elif not (a is None or isinstance(a, str)):
        out.append(a)
    return out


def _static_values(args: tuple, positions) -> list:
    leaves = _leaves(args, [])
    return [leaves[i] if isinstance(leaves[i], (bool, int)) else None for i in sorted(positions)]


def _encode_structure(s: Any) -> Any:
    kind, payload = s
    if kind in ("tuple", "list"):
        return [kind, [_encode_structure(x) for x in payload]]
    if kind == "leaf":
        return ["leaf", int(payload)]
    if isinstance(payload, np.dtype):
        return ["dtype", payload.str]
    if payload is None or type(payload) in (bool, int, float, str):
        return ["const", payload]
    raise Uncacheable(f"an output constant of type {type(payload).__name__}")


def _decode_structure(s: Any) -> Any:
    kind, payload = s
    if kind in ("tuple", "list"):
        return (kind, [_decode_structure(x) for x in payload])
    if kind == "dtype":
        return ("const", np.dtype(payload))
    return (kind, payload)


class Probe:
    """One lookup of a function and its arguments; `hit` if found, else
    `store` records the entry after the frontend and compiler ran."""

    def __init__(self, fn: Any, args: tuple, ident: Any, desc: Any, target: str):
        self.fn = fn
        self.args = args
        self.base = _digest("msir-trace", FORMAT_VERSION, cache.environment(), _pipeline_options(target), ident, desc)
        self.hit: Hit | None = None
        self.failed_ir_key: str | None = None
        """An IR key whose object code could not be loaded (a known miss)."""

    def lookup(self) -> None:
        entry = _read(self.base)
        key = self.base
        if entry is not None and "ir_key" not in entry:  # an index: the key adds the static values
            positions = entry.get("static")
            try:
                key = _digest(self.base, _static_values(self.args, positions))
            except (TypeError, IndexError):
                entry = None
            else:
                entry = _read(key)
        if entry is None:
            cache._count("trace_misses")
            cache._log(f"trace miss {key[:12]}")
            return
        try:
            changed = manifest_changes(entry["manifest"], self.fn)
            if changed is None:
                self.hit = self._load(entry)
                if self.hit is not None:
                    cache._count("trace_hits")
                    cache._log(f"trace hit {key[:12]}")
                    try:
                        os.utime(_path(key))
                    except OSError:
                        pass
                    return
            else:
                cache._count("trace_stale")
                cache._log(f"trace stale {key[:12]}: {changed}")
                return
        except (KeyError, TypeError, ValueError, IndexError) as e:
            cache._count("corrupt")
            cache._log(f"removing corrupt trace entry {key[:12]}: {type(e).__name__}: {e}")
            cache._remove(_path(key))
        cache._count("trace_misses")

    def _load(self, entry: dict) -> Hit | None:
        from msir.errors import CompileError

        locs = [tuple(loc) for loc in entry["locs"]]
        found = cache.load(entry["ir_key"], locs)
        if found is None:
            self.failed_ir_key = entry["ir_key"]
            return None
        native_module, sites = found
        try:
            native = native_module.function(entry["symbol"], sites=sites)
        except CompileError as e:
            cache._log(f"unusable trace entry: {e}")
            self.failed_ir_key = entry["ir_key"]
            return None
        captures = [
            CachedCapture(getter(ref, self.fn), name, dtype, tuple(shape)) for ref, name, dtype, shape in entry["captures"]
        ]
        # The manifest was checked just now: what the guards read is what the trace read.
        guards = [Guard.of(mode, getter(ref, self.fn), resolve(ref, self.fn)) for ref, mode in entry["guards"]]
        traced = CachedTrace(entry["specs"], captures, _decode_structure(entry["out"]), list(entry["weak"]), guards,
                             list(entry["writes"]))
        return Hit(native, traced, frozenset(entry["static"]))

    def store(self, traced: Any, symbol: str, ir_key: str | None, locs: list) -> bool:
        """Write the entry of a trace (`msir.frontend.driver.Traced` with its
        recorder) whose object code is in `msir.cache` under `ir_key`; never
        raises (a failure is logged, and the next process traces again)."""
        try:
            return self._store(traced, symbol, ir_key, locs)
        except Exception as e:
            cache._log(f"not caching the trace: {type(e).__name__}: {e}")
            return False

    def _store(self, traced: Any, symbol: str, ir_key: str | None, locs: list) -> bool:
        recorder = traced.recorder
        if ir_key is None or recorder is None:
            return False
        if recorder.failed is not None:
            cache._log(f"not caching the trace of {getattr(self.fn, '__qualname__', self.fn)}: {recorder.failed}")
            return False
        try:
            captures = []
            for c in traced.captures:
                ref = recorder.arrays.get(id(c.get()))
                if ref is None:
                    raise Uncacheable(f"captured array '{c.name}' has no reference")
                captures.append([ref, c.name, c.dtype, list(c.shape)])
            fp = recorder.fingerprint
            manifest = {
                "deps": [[ref, value] for ref, value in recorder.deps.values()],
                "files": fp.files,
            }
            static = sorted(traced.static_positions)
            entry = {
                "ir_key": ir_key,
                "symbol": symbol,
                "locs": [list(loc) for loc in locs],
                "specs": traced.arg_specs,
                "static": static,
                "captures": captures,
                "guards": recorder.guards,
                "out": _encode_structure(traced.out_structure),
                "weak": [bool(w) for w in traced.out_weak],
                "writes": list(traced.writes),
                "manifest": manifest,
            }
            json.dumps(entry)  # everything must be JSON (specs hold only names, shapes and ints)
        except (Uncacheable, TypeError, ValueError) as e:
            cache._log(f"not caching the trace of {getattr(self.fn, '__qualname__', self.fn)}: {e}")
            return False
        key = self.base
        if static:
            if not _write(self.base, {"static": static}):
                return False
            key = _digest(self.base, _static_values(self.args, static))
        if not _write(key, entry):
            return False
        cache._count("trace_writes")
        cache._log(f"wrote trace entry {key[:12]}")
        cache.evict()
        return True


def probe(fn: Any, args: tuple, variant: Any = None, target: str = targets.DEFAULT) -> Probe | None:
    """Look `fn` called on `args` and compiled for `target` up; None when the
    trace cache does not apply (disabled, MSIR_DUMP set, a target whose code
    the caches cannot keep, or a function or arguments it cannot key).
    `variant` (JSON-able) keys options of the compilation, e.g. donation."""
    if not enabled() or os.environ.get("MSIR_DUMP") or not targets.get(target).object_code:
        return None
    ident = identity(fn)
    desc = describe(list(args))
    if desc is not None and variant is not None:
        desc = [desc, variant]
    if ident is None or desc is None:
        return None
    try:
        p = Probe(fn, args, ident, desc, target)
    except Exception as e:  # never fail a call because of the cache
        cache._log(f"no trace key: {type(e).__name__}: {e}")
        return None
    try:
        p.lookup()
    except Exception as e:
        cache._log(f"trace lookup failed: {type(e).__name__}: {e}")
        p.hit = None
    return p
