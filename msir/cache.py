"""The persistent compile cache: native code of compiled modules, across processes.

`msir.compiler.compile_module` looks a traced module up here before running
differentiation, fusion, the lowerings and LLVM; on a hit it loads the cached
object code into a fresh MCJIT engine (no xDSL pass, no LLVM optimisation or
code generation), so a second process pays only for tracing its function; the
trace level above it (`msir.trace_cache`) skips the tracing too, and loads the
object code through `load`, which does not import xDSL.

Key
===
A BLAKE2b hash of

* the traced `msir` module: a structural fingerprint (`fingerprint`) equivalent
  to its printed text (op names, operands, result and block argument types,
  properties, attributes, regions and successors), several times cheaper than
  printing it. Source locations enter as their *pattern* (which ops share a
  location), not as file names and lines, so the same function in another
  file or moved down its file still hits; the runtime error sites are stored as
  indices into the module's table of locations and mapped back to the caller's
  current locations on a hit (errors point at the right lines);
* the entry point and the other public functions requested, and the pipeline
  options (`msir.compiler.pipeline_options`: the target compiled for, its
  pipeline text and its own options);
* a hash of msir's own source (path, size and mtime of every `.py` under the
  package directories of `msir`, `msir.dialects`, `msir.passes`,
  `msir.lowering`, `msir.tools`, like CPython's .pyc check; once per process);
* the host: process triple, CPU name and CPU features (llvmlite), the LLVM
  version, llvmlite's, xDSL's and NumPy's versions, and the format version below.

Value
=====
One file `<key>.msirc` per module::

    b"MSIRC\\x02\\n"  BLAKE2b-160 digest of everything after it
    u32 header length (little endian)  header (JSON)
    object code (the ELF object MCJIT generated)  zlib(optimised LLVM IR)

The header holds the key, the entry metadata `NativeModule.function` needs
(loops-level argument and result types as MLIR text, the number of DPS
outputs), the error sites, the external symbols the object references (checked
to resolve before the object is loaded: an unresolved symbol would abort the
process inside LLVM). The digest covers the header as well as the payload: a
damaged header (a symbol list, a function's metadata) is a corrupt entry, not
a valid-looking one every later process loads. The optimised IR
comes back as `NativeModule.llvm_ir` (and `asm`).

Object code rather than optimised IR: reloading an object takes a few ms,
re-parsing the optimised IR and generating code again ~80-100 ms for the
200-op benchmark function (bench/compile_time.py).

Location, switches, bound
=========================
`MSIR_CACHE_DIR` if set, else `$XDG_CACHE_HOME/msir`, else `~/.cache/msir`.
`MSIR_CACHE=0` (or `off`, `false`, `no`) disables it: nothing is read or
written. Entries are written to a temporary file in the same directory and
renamed over the final name (`os.replace`), so concurrent writers never expose
a partial entry; a corrupt or truncated entry (bad magic, header, key or
digest) is removed and counts as a miss. The directory is bounded to
`MSIR_CACHE_MAX_BYTES` (default 256 MiB) and `MSIR_CACHE_MAX_ENTRIES` (default
2000, of each kind: object code and trace entries): after each write, the least recently used entries (by mtime; a hit
touches its entry) are removed until both are at most 90% of the bound. Only
`*.msirc` files, the trace level's `*.msirt` (`msir.trace_cache`), and stale
temporaries are ever removed.

`MSIR_LOG=cache` logs hits, misses and writes on stderr; `stats` counts them
per process (tests read it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from msir.errors import SourceLoc
from msir.lowering.cache_location import cache_dir, enabled

FORMAT_VERSION = 2
MAGIC = b"MSIRC\x02\n"
DIGEST_BYTES = 20
SUFFIX = ".msirc"
_SUFFIXES = (SUFFIX, ".msirt")  # the object code, and the trace level's entries (msir.trace_cache)
DEFAULT_MAX_BYTES = 256 << 20
DEFAULT_MAX_ENTRIES = 2000
_STALE_TEMP_SECONDS = 3600.0

stats: dict[str, int] = {
    "hits": 0, "misses": 0, "writes": 0, "corrupt": 0, "evicted": 0, "errors": 0,
    "trace_hits": 0, "trace_misses": 0, "trace_stale": 0, "trace_writes": 0,
}
"""Per-process counters: hits, misses, writes, corrupt entries removed, entries
evicted, I/O errors, and those of the trace level (`msir.trace_cache`)."""

_stats_lock = threading.Lock()
_env_lock = threading.Lock()
_environment: str | None = None


def _count(name: str, n: int = 1) -> None:
    with _stats_lock:
        stats[name] += n


def reset_stats() -> None:
    with _stats_lock:
        for k in stats:
            stats[k] = 0


def _log(message: str) -> None:
    if "cache" in os.environ.get("MSIR_LOG", ""):
        print(f"msir cache: {message}", file=sys.stderr)


# ---------------------------------------------------------------------------
# Switches and location
# ---------------------------------------------------------------------------


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


def clear() -> None:
    """Remove every entry of the cache directory."""
    d = cache_dir()
    if not d.is_dir():
        return
    for p in d.iterdir():
        if p.suffix in _SUFFIXES or p.name.startswith(".tmp-"):
            try:
                p.unlink()
            except OSError:
                pass


# ---------------------------------------------------------------------------
# The key
# ---------------------------------------------------------------------------


def _source_dirs() -> list[str]:
    import importlib.util

    dirs = []
    for name in ("msir", "msir.dialects", "msir.passes", "msir.lowering", "msir.tools"):
        package = sys.modules.get(name)
        if package is not None and getattr(package, "__path__", None):
            dirs.extend(package.__path__)
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(spec.submodule_search_locations)
    return sorted(set(os.path.realpath(d) for d in dirs))


def source_hash() -> str:
    """A hash of every .py file of msir's package directories: path, size and
    modification time (the test CPython's own .pyc files use; reading the
    ~0.5 MB of source costs ~3 ms per process, stat ~0.3 ms)."""
    h = hashlib.blake2b(digest_size=20)
    for d in _source_dirs():
        h.update(d.encode() + b"\0")
        for root, subdirs, files in os.walk(d):
            subdirs[:] = sorted(s for s in subdirs if s != "__pycache__" and not s.startswith("."))
            prefix = root[len(d) :].lstrip(os.sep)  # os.path.relpath costs ~40 us a file
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                try:
                    st = os.stat(os.path.join(root, f))
                except OSError:
                    continue
                rel = os.path.join(prefix, f) if prefix else f
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def _distribution_version(package: str) -> str:
    """An installed package's version from its dist-info directory's name,
    found without importing the package (importing xDSL takes ~0.5 s;
    importlib.metadata 30-200 ms here), else from importlib.metadata."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            site = os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))
            found = [n for n in os.listdir(site) if n.startswith(package + "-") and n.endswith(".dist-info")]
            if len(found) == 1:
                return found[0][len(package) + 1 : -len(".dist-info")]
    except (OSError, ImportError, ValueError):
        pass
    try:
        import importlib.metadata

        return importlib.metadata.version(package)
    except Exception:
        return "?"


def environment() -> str:
    """msir's source, the host CPU and the versions of the toolchain (once per process)."""
    global _environment
    if _environment is None:
        with _env_lock:
            if _environment is None:
                import llvmlite
                import llvmlite.binding as llvm
                import numpy

                from msir.lowering.jit import host

                triple, cpu, features = host()
                parts = [
                    f"format={FORMAT_VERSION}",
                    f"msir-source={source_hash()}",
                    f"triple={triple}",
                    f"cpu={cpu}",
                    f"features={features}",
                    f"llvm={'.'.join(map(str, llvm.llvm_version_info))}",
                    f"llvmlite={llvmlite.__version__}",
                    f"xdsl={_distribution_version('xdsl')}",
                    f"numpy={numpy.__version__}",
                ]
                _environment = "\n".join(parts)
    return _environment


def fingerprint(module) -> tuple[str, list[tuple[str, int, int]]]:
    """A hash of `module` equivalent to its printed text, with source locations
    replaced by their index in the table of distinct locations (returned too,
    in order of first appearance)."""
    from xdsl.dialects.builtin import FileLineColLoc

    out: list[str] = []
    ap = out.append
    ids: dict[int, int] = {}
    texts: dict[Any, str] = {}
    locs: dict[tuple[str, int, int], int] = {}

    def text(a) -> str:
        try:
            r = texts.get(a)
        except TypeError:  # an unhashable attribute
            return str(a)
        if r is None:
            r = texts[a] = str(a)
        return r

    def number(obj) -> int:
        return ids.setdefault(id(obj), len(ids))

    def visit(op) -> None:
        ap(op.name)
        ap(",".join([str(number(v)) for v in op.operands]))
        for r in op.results:
            ap("%" + str(number(r)))
            ap(text(r.type))
        props = op.properties
        if props:
            for k in sorted(props):
                ap("<" + k)
                ap(text(props[k]))
        attrs = op.attributes
        if attrs:
            for k in sorted(attrs):
                ap("@" + k)
                ap(text(attrs[k]))
        if op.successors:
            ap("^" + ",".join([str(number(b)) for b in op.successors]))
        loc = op.location
        if isinstance(loc, FileLineColLoc):
            k = (loc.filename.data, loc.line.data, loc.column.data)
            i = locs.get(k)
            if i is None:
                i = locs[k] = len(locs)
            ap("L" + str(i))
        elif loc is not None:
            ap("L" + text(loc))
        for region in op.regions:
            ap("{")
            for block in region.blocks:
                ap("^" + str(number(block)))
                for a in block.args:
                    ap("%" + str(number(a)))
                    ap(text(a.type))
                ap(":")
                for o in block.ops:
                    visit(o)
            ap("}")

    visit(module)
    digest = hashlib.blake2b("\x00".join(out).encode(), digest_size=20).hexdigest()
    return digest, list(locs)


def module_key(module, entry: str, also: tuple[str, ...], options: dict) -> tuple[str, list]:
    """The cache key of compiling `module` (call before any pass mutates it),
    and its table of source locations (for `load`/`store`)."""
    digest, locs = fingerprint(module)
    h = hashlib.blake2b(digest_size=20)
    h.update(environment().encode())
    h.update(b"\0" + json.dumps([entry, list(also), options], sort_keys=True, default=str).encode())
    h.update(b"\0" + digest.encode())
    return h.hexdigest(), locs


# ---------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------

_DECLARE = re.compile(r"^declare\b[^@\n]*@(\"[^\"]+\"|[-\w.$]+)\(", re.MULTILINE)


def _external_symbols(llvm_ir: str) -> list[str]:
    names = []
    for m in _DECLARE.finditer(llvm_ir):
        name = m.group(1).strip('"')
        if not name.startswith("llvm."):
            names.append(name)
    return sorted(set(names))


def _entry_path(key: str) -> Path:
    return cache_dir() / (key + SUFFIX)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def store(
    key: str,
    locs: list[tuple[str, int, int]],
    obj: bytes,
    llvm_ir: str,
    metadata: dict,
    sites: list[SourceLoc | None],
) -> bool:
    """Write an entry (atomically). False, with nothing written, when the module
    cannot be cached or the directory is not writable."""
    if "llvm.global_ctors" in llvm_ir:
        _log(f"not caching {key[:12]}: the module has static constructors")
        return False
    from msir.lowering.jit import abi_type

    functions = {}
    for name, info in metadata.items():
        arg_text = [str(t) for t in info.arg_types]
        result_text = [str(t) for t in info.result_types]
        try:
            for t in arg_text + result_text:
                abi_type(t)
        except Exception:
            _log(f"not caching {key[:12]}: a type of '{name}' has no calling convention as text")
            return False
        functions[name] = [
            arg_text, result_text, int(info.num_outputs), [int(i) for i in info.output_aliases],
            [str(r) for r in info.donation_refused],
        ]
    index = {loc: i for i, loc in enumerate(locs)}
    site_table: list[Any] = []
    for s in sites:
        if s is None:
            site_table.append(None)
        else:
            i = index.get((s.file, s.line, s.col))
            site_table.append(i if i is not None else [s.file, s.line, s.col])
    ir_z = zlib.compress(llvm_ir.encode(), 1)
    payload = obj + ir_z
    header = json.dumps(
        {
            "key": key,
            "functions": functions,
            "sites": site_table,
            "symbols": _external_symbols(llvm_ir),
            "obj": len(obj),
            "ir": len(ir_z),
        },
        separators=(",", ":"),
    ).encode()
    d = cache_dir()
    tmp = None
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=d)
        with os.fdopen(fd, "wb") as f:
            f.write(pack_entry(header, payload))
        os.replace(tmp, _entry_path(key))
        tmp = None
    except OSError as e:
        _count("errors")
        _log(f"cannot write {key[:12]} to {d}: {e}")
        if tmp is not None:
            _remove(Path(tmp))
        return False
    _count("writes")
    _log(f"wrote {key[:12]} ({len(obj)} bytes of object code)")
    evict()
    return True


def pack_entry(header: bytes, payload: bytes) -> bytes:
    """An entry file's bytes: the magic, the digest of the rest, the header and the payload."""
    body = struct.pack("<I", len(header)) + header + payload
    return MAGIC + hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest() + body


def _read(key: str) -> tuple[dict, bytes, bytes] | None:
    path = _entry_path(key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        if not data.startswith(MAGIC):
            raise ValueError("bad magic")
        digest, body = data[len(MAGIC) : len(MAGIC) + DIGEST_BYTES], data[len(MAGIC) + DIGEST_BYTES :]
        if hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest() != digest:
            raise ValueError("digest mismatch")
        n = struct.unpack_from("<I", body, 0)[0]
        header = json.loads(body[4 : 4 + n])
        payload = body[4 + n :]
        if header.get("key") != key:
            raise ValueError("key mismatch")
        n_obj, n_ir = header["obj"], header["ir"]
        if len(payload) != n_obj + n_ir:
            raise ValueError("truncated")
        return header, payload[:n_obj], payload[n_obj:]
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as e:
        _count("corrupt")
        _log(f"removing corrupt entry {path.name}: {e}")
        _remove(path)
        return None


def load(key: str, locs: list[tuple[str, int, int]]):
    """`(NativeModule, sites)` of a cached entry, or None (a miss)."""
    found = _read(key)
    if found is None:
        _count("misses")
        _log(f"miss {key[:12]}")
        return None
    header, obj, ir_z = found
    try:
        from msir.lowering.jit import EntryInfo

        metadata = {
            name: EntryInfo([str(s) for s in a], [str(s) for s in r], int(n), [int(i) for i in al],
                            [str(x) for x in refused])
            for name, (a, r, n, al, refused) in header["functions"].items()
        }
        sites: list[SourceLoc | None] = []
        for s in header["sites"]:
            if s is None:
                sites.append(None)
            elif isinstance(s, int):
                sites.append(SourceLoc(*locs[s]) if 0 <= s < len(locs) else None)
            else:
                sites.append(SourceLoc(str(s[0]), int(s[1]), int(s[2])))
        llvm_ir = zlib.decompress(ir_z).decode()
        symbols = list(header.get("symbols", []))
    except Exception as e:  # a well-formed file with a bad header: treat as corrupt
        _count("corrupt")
        _log(f"removing corrupt entry {key[:12]}: {e}")
        _remove(_entry_path(key))
        _count("misses")
        return None
    from msir.errors import CompileError
    from msir.lowering.jit import load_native_module

    if any(s.startswith("__msir_gemm_") for s in symbols):
        try:
            from msir.lowering import blas

            blas.load()
        except Exception:
            pass
    try:
        native_module = load_native_module(obj, llvm_ir, metadata, sites, required_symbols=symbols)
    except CompileError as e:  # e.g. a symbol of a library this process has not loaded
        _count("misses")
        _log(f"miss {key[:12]}: cannot load the cached object: {e}")
        return None
    try:
        os.utime(_entry_path(key))  # least recently used = oldest mtime
    except OSError:
        pass
    _count("hits")
    _log(f"hit {key[:12]}")
    return native_module, sites


def evict(max_bytes: int | None = None, max_entries: int | None = None) -> int:
    """Remove the least recently used entries until the directory holds at most
    90% of both bounds (when it exceeds either; the entry bound counts object
    code and trace entries apart, the byte bound both); returns how many were
    removed."""
    max_bytes = _env_int("MSIR_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES) if max_bytes is None else max_bytes
    max_entries = _env_int("MSIR_CACHE_MAX_ENTRIES", DEFAULT_MAX_ENTRIES) if max_entries is None else max_entries
    d = cache_dir()
    entries = []
    now = time.time()
    try:
        with os.scandir(d) as it:
            for e in it:
                try:
                    st = e.stat()
                except OSError:
                    continue
                if e.name.endswith(_SUFFIXES):
                    entries.append((st.st_mtime, st.st_size, e.path))
                elif e.name.startswith(".tmp-") and now - st.st_mtime > _STALE_TEMP_SECONDS:
                    _remove(Path(e.path))  # left by a process that died while writing
    except OSError:
        return 0
    total = sum(size for _, size, _ in entries)
    counts: dict[str, int] = {}
    for _, _, path in entries:
        kind = os.path.splitext(path)[1]
        counts[kind] = counts.get(kind, 0) + 1
    if total <= max_bytes and max(counts.values(), default=0) <= max_entries:
        return 0
    entries.sort()
    removed = 0
    target_bytes, target_entries = int(max_bytes * 0.9), int(max_entries * 0.9)
    for _, size, path in entries:
        kind = os.path.splitext(path)[1]
        if total <= target_bytes and counts[kind] <= target_entries:
            continue
        _remove(Path(path))
        total -= size
        counts[kind] -= 1
        removed += 1
    _count("evicted", removed)
    if removed:
        _log(f"evicted {removed} entries")
    return removed
