"""The `llvm` dialect modules `msir-lower-to-llvm` builds, as LLVM IR text for
`llvmlite.binding.parse_assembly`.

`module_text(module, triple, data_layout)` prints in one walk what
xDSL's `convert_module` builds as llvmlite IR objects and then prints, plus
what it drops and `msir.lowering.llvm_abi` needs (see its docstring): each
function's `passthrough` attributes (a string is a keyword attribute,
`["memory", "none"]` is `memory(none)`, any other pair `"key"="value"`), a
`noalias` result of `llvm_abi.ALLOC`, `@llvm.compiler.used` holding the
vector variants named by `vector-function-abi-variant` (else global DCE drops
the declarations before the loop vectoriser looks for them) and the loop
hint of each latch marked `llvm_abi.FOLD_TAIL_ATTR`. A function with an
entry wrapper gets `noinline` (inlining it into its wrapper would compile its
body twice and trade `noalias` parameters for scoped metadata). Printing
directly costs ~1-2 ms where building and printing llvmlite's objects cost
6-10 ms of a 200-op function's first compile.

Like `convert_module`: constants, addresses of globals, `undef` and zero
values are printed where they are used (they are not instructions); block
arguments become `phi` nodes fed by the branches to the block; functions keep
the default (external) linkage, globals their own. An op this printer does
not know raises `NotImplementedError` (the JIT reports a CompileError).
"""

from __future__ import annotations

import struct
from collections.abc import Collection

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from msir.lowering import allocator
from msir.lowering.llvm_abi import ENTRY_SUFFIX, FOLD_TAIL_ATTR
from msir.lowering.vector_abi import VFABI_ATTR

_BINARY = {
    llvm.AddOp: "add", llvm.SubOp: "sub", llvm.MulOp: "mul", llvm.UDivOp: "udiv", llvm.SDivOp: "sdiv",
    llvm.URemOp: "urem", llvm.SRemOp: "srem", llvm.ShlOp: "shl", llvm.LShrOp: "lshr", llvm.AShrOp: "ashr",
    llvm.AndOp: "and", llvm.OrOp: "or", llvm.XOrOp: "xor",
    llvm.FAddOp: "fadd", llvm.FSubOp: "fsub", llvm.FMulOp: "fmul", llvm.FDivOp: "fdiv", llvm.FRemOp: "frem",
}
_CASTS = {
    llvm.TruncOp: "trunc", llvm.ZExtOp: "zext", llvm.SExtOp: "sext", llvm.PtrToIntOp: "ptrtoint",
    llvm.IntToPtrOp: "inttoptr", llvm.BitcastOp: "bitcast", llvm.FPExtOp: "fpext", llvm.FPTruncOp: "fptrunc",
    llvm.SIToFPOp: "sitofp",
}
_ICMP = {f.to_int(): f.value for f in llvm.ICmpPredicateFlag}
_FCMP = {f.to_int(): f.value.lstrip("_") for f in llvm.FCmpPredicateFlag}
_ARG_FLAGS = {
    "llvm.inreg": "inreg", "llvm.nest": "nest", "llvm.noalias": "noalias", "llvm.nocapture": "captures(none)",
    "llvm.nofree": "nofree", "llvm.nonnull": "nonnull", "llvm.noundef": "noundef", "llvm.returned": "returned",
    "llvm.signext": "signext", "llvm.zeroext": "zeroext", "llvm.readonly": "readonly",
    "llvm.writeonly": "writeonly",
}
_ARG_INTS = {"llvm.align": "align", "llvm.dereferenceable": "dereferenceable",
             "llvm.dereferenceable_or_null": "dereferenceable_or_null"}
_LOOP_HINT = '!{!"llvm.loop.vectorize.predicate.enable", i1 true}'
_INLINE = (llvm.ConstantOp, llvm.AddressOfOp, llvm.UndefOp, llvm.ZeroOp)
"""Ops whose value is printed where it is used."""


def module_text(module: ModuleOp, triple: str, data_layout: str = "", vector_bits: int = 0) -> str:
    """The LLVM IR of `module` (globals and `llvm.func`s only); with `vector_bits`, each latch whose
    `FOLD_TAIL_ATTR` is its elements' width asks for vector_bits / width lanes (`llvm_abi`, "Loop hints")."""
    wrapped = {
        op.sym_name.data[: -len(ENTRY_SUFFIX)]
        for op in module.ops
        if isinstance(op, llvm.FuncOp) and op.sym_name.data.endswith(ENTRY_SUFFIX) and "msir.arg_types" in op.attributes
    }
    return _Printer(wrapped, vector_bits).module(module, triple, data_layout)


class _Printer:
    def __init__(self, noinline: Collection[str], vector_bits: int = 0) -> None:
        self.noinline = noinline
        self.vector_bits = vector_bits
        self.types: dict[Attribute, str] = {}
        self.names: dict[SSAValue, str] = {}
        self.intrinsics: dict[str, str] = {}  # name -> declaration
        self.declared: set[str] = set()
        self.used: list[str] = []
        self.loop_widths: list[int] = []  # per marked latch: the lanes it asks for, 0 for LLVM's choice
        self.out: list[str] = []

    # -- module -------------------------------------------------------------

    def module(self, module: ModuleOp, triple: str, data_layout: str) -> str:
        out = self.out
        out.append(f'target triple = "{triple}"\n')
        if data_layout:
            out.append(f'target datalayout = "{data_layout}"\n')
        funcs = []
        for op in module.ops:
            if isinstance(op, llvm.GlobalOp):
                self.global_(op)
            elif isinstance(op, llvm.FuncOp):
                funcs.append(op)
                self.declared.add(op.sym_name.data)
            else:
                raise NotImplementedError(f"no LLVM IR for a module-level {op.name}")
        for f in funcs:
            self.function(f)
        out.extend(d for name, d in self.intrinsics.items() if name not in self.declared)
        if self.used:
            items = ", ".join(f"ptr {_global(n)}" for n in self.used)
            out.append(f'@llvm.compiler.used = appending global [{len(self.used)} x ptr] [{items}], '
                       'section "llvm.metadata"\n')
        if self.loop_widths:
            out.append(f"!0 = {_LOOP_HINT}\n")
            widths = sorted({w for w in self.loop_widths if w})
            ids = {w: len(self.loop_widths) + 1 + i for i, w in enumerate(widths)}
            out.extend(f"!{k} = distinct !{{!{k}, !0{f', !{ids[w]}' if w else ''}}}\n"
                       for k, w in enumerate(self.loop_widths, 1))
            out.extend(f'!{ids[w]} = !{{!"llvm.loop.vectorize.width", i32 {w}}}\n' for w in widths)
        return "".join(out)

    def global_(self, op: llvm.GlobalOp) -> None:
        t = self.type(op.global_type)
        linkage = op.linkage.linkage.data if op.linkage is not None else ""
        kind = "constant" if op.constant is not None else "global"
        space = op.addr_space.value.data if op.addr_space is not None else 0
        value = op.value
        if value is None:
            init = ""
            if linkage in ("", "external"):
                linkage = "external"
        elif isinstance(value, StringAttr):
            init = " c" + _string(value.data.encode())
        else:
            init = " " + self.constant(op.global_type, value)
        words = [w for w in (linkage, f"addrspace({space})" if space else "", kind) if w]
        line = f"{_global(op.sym_name.data)} = {' '.join(words)} {t}{init}"
        if op.section is not None:
            line += f', section "{op.section.data}"'
        if op.alignment is not None:
            line += f", align {op.alignment.value.data}"
        self.out.append(line + "\n")

    # -- functions ----------------------------------------------------------

    def function(self, op: llvm.FuncOp) -> None:
        name = op.sym_name.data
        ftype = op.function_type
        ret = self.type(ftype.output)
        arg_attrs = op.arg_attrs.data if op.arg_attrs is not None else ()
        words = self.function_attributes(op)
        ret_attrs = "noalias " if name == allocator.ALLOC else ""
        blocks = op.body.blocks
        params = []
        entry_args = blocks[0].args if blocks else ()
        for i, t in enumerate(ftype.inputs):
            p = self.type(t)
            if i < len(arg_attrs):
                p += _arg_attributes(arg_attrs[i])
            if blocks:
                v = f"%a{i}"
                self.names[entry_args[i]] = v
                p += " " + v
            params.append(p)
        if ftype.is_variadic:
            params.append("...")
        head = f"{ret_attrs}{ret} {_global(name)}({', '.join(params)}){words}"
        if not blocks:
            self.out.append(f"declare {head}\n")
            return
        self.out.append(f"\ndefine {head} {{\n")
        self.body(blocks)
        self.out.append("}\n")

    def function_attributes(self, op: llvm.FuncOp) -> str:
        words = ["noinline"] if op.sym_name.data in self.noinline else []
        if op.passthrough is not None:
            for a in op.passthrough.data:
                if isinstance(a, StringAttr):
                    if a.data not in words:
                        words.append(a.data)
                elif isinstance(a, ArrayAttr) and len(a.data) == 2:
                    key, value = (x.data for x in a.data)  # type: ignore[attr-defined]
                    words.append(f"{key}({value})" if key == "memory" else f'"{key}"="{value}"')
                    if key == VFABI_ATTR:
                        self.used += [m[m.index("(") + 1 : -1] for m in value.split(",")]
        return "".join(" " + w for w in words)

    def body(self, blocks) -> None:
        labels = {b: f"b{i}" for i, b in enumerate(blocks)}
        incoming: dict[Block, list[tuple[Block, tuple[SSAValue, ...]]]] = {}
        names = self.names
        n = 0
        for b in blocks:
            for a in b.args if b is not blocks[0] else ():
                names[a] = f"%p{n}"
                n += 1
            for o in b.ops:
                if type(o) in _INLINE:
                    continue
                for r in o.results:
                    names[r] = f"%v{n}"
                    n += 1
            term = b.last_op
            if isinstance(term, llvm.BrOp):
                incoming.setdefault(term.successor, []).append((b, tuple(term.arguments)))
            elif isinstance(term, llvm.CondBrOp):
                incoming.setdefault(term.then_block, []).append((b, tuple(term.then_arguments)))
                incoming.setdefault(term.else_block, []).append((b, tuple(term.else_arguments)))
        out = self.out
        for b in blocks:
            out.append(f"{labels[b]}:\n")
            for j, a in enumerate(b.args if b is not blocks[0] else ()):
                pairs = ", ".join(f"[ {self.value(args[j])}, %{labels[pred]} ]" for pred, args in incoming.get(b, ()))
                out.append(f"  {names[a]} = phi {self.type(a.type)} {pairs}\n")
            for o in b.ops:
                line = self.instruction(o, labels)
                if line:
                    out.append(f"  {line}\n")

    # -- instructions -------------------------------------------------------

    def instruction(self, op: Operation, labels: dict[Block, str]) -> str | None:
        t = type(op)
        p = op.properties
        if t in _BINARY:
            a, b = op.operands
            return f"{self.names[op.results[0]]} = {_BINARY[t]}{_flags(p)} {self.type(a.type)} {self.value(a)}, {self.value(b)}"
        if t in _CASTS:
            (a,) = op.operands
            r = op.results[0]
            return f"{self.names[r]} = {_CASTS[t]}{_flags(p)} {self.typed(a)} to {self.type(r.type)}"
        if t in _INLINE:
            return None
        if t is llvm.LoadOp:
            r = op.results[0]
            return f"{self.names[r]} = load {self.type(r.type)}, {self.typed(op.operands[0])}{_align(p)}"
        if t is llvm.StoreOp:
            return f"store {self.typed(op.operands[0])}, {self.typed(op.operands[1])}{_align(p)}"
        if t is llvm.GEPOp:
            return self.gep(op)
        if t is llvm.ICmpOp:
            a, b = op.operands
            pred = _ICMP[p["predicate"].value.data]  # type: ignore[attr-defined]
            return f"{self.names[op.results[0]]} = icmp {pred} {self.typed(a)}, {self.value(b)}"
        if t is llvm.FCmpOp:
            a, b = op.operands
            pred = _FCMP[p["predicate"].value.data]  # type: ignore[attr-defined]
            return f"{self.names[op.results[0]]} = fcmp{_flags(p)} {pred} {self.typed(a)}, {self.value(b)}"
        if t is llvm.SelectOp:
            c, a, b = op.operands
            return f"{self.names[op.results[0]]} = select {self.typed(c)}, {self.typed(a)}, {self.typed(b)}"
        if t is llvm.FNegOp:
            (a,) = op.operands
            return f"{self.names[op.results[0]]} = fneg{_flags(p)} {self.typed(a)}"
        if t is llvm.CallOp:
            return self.call(op)
        if t is llvm.CallIntrinsicOp:
            return self.call_intrinsic(op)
        if t is llvm.BrOp:
            line = f"br label %{labels[op.successors[0]]}"
            hint = op.attributes.get(FOLD_TAIL_ATTR)
            if hint is not None:
                bits = hint.value.data if isinstance(hint, IntegerAttr) else 0
                lanes = self.vector_bits // bits if bits else 0
                self.loop_widths.append(lanes if lanes >= 2 else 0)
                line += f", !llvm.loop !{len(self.loop_widths)}"
            return line
        if t is llvm.CondBrOp:
            return (f"br {self.typed(op.operands[0])}, label %{labels[op.successors[0]]}, "
                    f"label %{labels[op.successors[1]]}")
        if t is llvm.ReturnOp:
            return f"ret {self.typed(op.operands[0])}" if op.operands else "ret void"
        if t is llvm.AllocaOp:
            align = p.get("alignment")
            tail = f", align {align.value.data}" if align is not None else ""  # type: ignore[attr-defined]
            return f"{self.names[op.results[0]]} = alloca {self.type(p['elem_type'])}, {self.typed(op.operands[0])}{tail}"
        if t is llvm.ExtractValueOp:
            pos = ", ".join(str(i) for i in p["position"].get_values())  # type: ignore[attr-defined]
            return f"{self.names[op.results[0]]} = extractvalue {self.typed(op.operands[0])}, {pos}"
        if t is llvm.InsertValueOp:
            pos = ", ".join(str(i) for i in p["position"].get_values())  # type: ignore[attr-defined]
            c, v = op.operands
            return f"{self.names[op.results[0]]} = insertvalue {self.typed(c)}, {self.typed(v)}, {pos}"
        if t is llvm.UnreachableOp:
            return "unreachable"
        raise NotImplementedError(f"no LLVM IR for {op.name}")

    def gep(self, op: Operation) -> str:
        p = op.properties
        ptr, *dynamic = op.operands
        rest = iter(dynamic)
        indices = [self.typed(next(rest)) if i == llvm.GEP_USE_SSA_VAL else f"i32 {i}"
                   for i in p["rawConstantIndices"].get_values()]  # type: ignore[attr-defined]
        inbounds = " inbounds" if p.get("inbounds") is not None else ""
        return (f"{self.names[op.results[0]]} = getelementptr{inbounds} {self.type(p['elem_type'])}, "
                f"{self.typed(ptr)}, {', '.join(indices)}")

    def call(self, op: Operation) -> str:
        p = op.properties
        callee = p["callee"].string_value()  # type: ignore[attr-defined]
        args = ", ".join(self.typed(a) for a in op.operands)
        result = op.results[0] if op.results else None
        fmf = _flags(p) if result is not None and _is_float(result.type) else ""
        tail = p.get("TailCallKind")
        prefix = "tail " if tail is not None and tail.data != "none" else ""  # type: ignore[attr-defined]
        cconv = p.get("CConv")
        cc = cconv.cconv_name if cconv is not None else "ccc"  # type: ignore[attr-defined]
        cc = "" if cc == "ccc" else f" {cc}"
        if result is None:
            return f"{prefix}call{fmf}{cc} void {_global(callee)}({args})"
        return f"{self.names[result]} = {prefix}call{fmf}{cc} {self.type(result.type)} {_global(callee)}({args})"

    def call_intrinsic(self, op: Operation) -> str:
        name = op.properties["intrin"].data  # type: ignore[attr-defined]
        result = op.results[0] if op.results else None
        ret = self.type(result.type) if result is not None else "void"
        if name not in self.intrinsics:
            arg_types = ", ".join(self.type(a.type) for a in op.operands)
            self.intrinsics[name] = f"declare {ret} {_global(name)}({arg_types})\n"
        args = ", ".join(self.typed(a) for a in op.operands)
        if result is None:
            return f"call void {_global(name)}({args})"
        return f"{self.names[result]} = call {ret} {_global(name)}({args})"

    # -- values and types ---------------------------------------------------

    def typed(self, v: SSAValue) -> str:
        return f"{self.type(v.type)} {self.value(v)}"

    def value(self, v: SSAValue) -> str:
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = self.inline(v)
        return name

    def inline(self, v: SSAValue) -> str:
        owner = v.owner
        if isinstance(owner, llvm.ConstantOp):
            return self.constant(v.type, owner.value)
        if isinstance(owner, llvm.AddressOfOp):
            return _global(owner.global_name.root_reference.data)
        if isinstance(owner, llvm.UndefOp):
            return "undef"
        if isinstance(owner, llvm.ZeroOp):
            t = v.type
            if isinstance(t, llvm.LLVMPointerType):
                return "null"
            if isinstance(t, IntegerType | IndexType):
                return "0"
            if _is_float(t) and not isinstance(t, VectorType):
                return _float(t, 0.0)
            return "zeroinitializer"
        raise NotImplementedError(f"no LLVM IR for a use of {v}")

    def constant(self, t: Attribute, value: Attribute) -> str:
        if isinstance(value, IntegerAttr):
            return _int(t, value.value.data)
        if isinstance(value, FloatAttr):
            return _float(t, value.value.data)
        if isinstance(value, DenseIntOrFPElementsAttr):
            element = t.element_type if isinstance(t, VectorType) else value.get_element_type()
            et = self.type(element)
            values = value.get_values()
            if isinstance(element, IntegerType | IndexType):
                items = [f"{et} {_int(element, int(x))}" for x in values]
            else:
                items = [f"{et} {_float(element, float(x))}" for x in values]
            return f"<{', '.join(items)}>" if isinstance(t, VectorType) else f"[{', '.join(items)}]"
        raise NotImplementedError(f"no LLVM IR for the constant {value}")

    def type(self, t: Attribute) -> str:
        s = self.types.get(t)
        if s is None:
            s = self.types[t] = self._type(t)
        return s

    def _type(self, t: Attribute) -> str:
        if isinstance(t, IntegerType):
            return f"i{t.width.data}"
        if isinstance(t, IndexType):
            return "i64"
        if isinstance(t, Float32Type):
            return "float"
        if isinstance(t, Float64Type):
            return "double"
        if isinstance(t, Float16Type):
            return "half"
        if isinstance(t, BFloat16Type):
            return "bfloat"
        if isinstance(t, llvm.LLVMPointerType):
            space = t.addr_space
            return f"ptr addrspace({space.data})" if isinstance(space, IntAttr) and space.data else "ptr"
        if isinstance(t, llvm.LLVMVoidType):
            return "void"
        if isinstance(t, VectorType):
            (n,) = t.get_shape()
            return f"<{n} x {self.type(t.element_type)}>"
        if isinstance(t, llvm.LLVMArrayType):
            return f"[{t.size.data} x {self.type(t.type)}]"
        if isinstance(t, llvm.LLVMStructType):
            body = ", ".join(self.type(x) for x in t.types.data)
            return f"<{{{body}}}>" if getattr(t, "packed", None) else f"{{{body}}}"
        raise NotImplementedError(f"no LLVM IR for the type {t}")


def _global(name: str) -> str:
    return f'@"{name}"'


def _flags(p: dict) -> str:
    """Fast-math, overflow, exact or non-negative flags of an op's properties."""
    words = []
    fmf = p.get("fastmathFlags")
    if fmf is not None and fmf.data:  # type: ignore[attr-defined]
        words += [f.value for f in fmf.data]  # type: ignore[attr-defined]
    ovf = p.get("overflowFlags")
    if ovf is not None:
        bits = ovf.value.data if isinstance(ovf, IntegerAttr) else None
        flags = llvm.OverflowAttr.from_int(bits).data if bits is not None else ovf.data  # type: ignore[attr-defined]
        words += [f.value for f in flags]
    for key, word in _UNIT_FLAGS:
        if p.get(key) is not None:
            words.append(word)
    return "".join(" " + w for w in words)


_UNIT_FLAGS = (("isExact", "exact"), ("isDisjoint", "disjoint"), ("nonNeg", "nneg"))


def _align(p: dict) -> str:
    a = p.get("alignment")
    return f", align {a.value.data}" if a is not None else ""  # type: ignore[attr-defined]


def _arg_attributes(attrs: Attribute) -> str:
    words = []
    for key, value in attrs.data.items():  # type: ignore[attr-defined]
        if key in _ARG_FLAGS:
            words.append(_ARG_FLAGS[key])
        elif key in _ARG_INTS:
            words.append(f"{_ARG_INTS[key]}({value.value.data})" if key != "llvm.align"
                         else f"align {value.value.data}")
    return "".join(" " + w for w in words)


def _is_float(t: Attribute) -> bool:
    if isinstance(t, VectorType):
        t = t.element_type
    return isinstance(t, Float16Type | BFloat16Type | Float32Type | Float64Type)


def _int(t: Attribute, value: int) -> str:
    if isinstance(t, IntegerType) and t.width.data == 1:
        return "true" if value & 1 else "false"
    return str(value)


def _float(t: Attribute, value: float) -> str:
    """LLVM's exact hexadecimal form (the value as a double), rounded to `t` first."""
    if isinstance(t, Float32Type):
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    elif isinstance(t, Float16Type):
        value = struct.unpack("<e", struct.pack("<e", value))[0]
    elif isinstance(t, BFloat16Type):
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        return f"0xR{(bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 & 0xFFFF:04X}"
    return f"0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X}"


def _string(data: bytes) -> str:
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data) + '"'
