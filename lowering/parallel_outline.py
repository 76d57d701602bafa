"""Parallel loops: large independent `scf.for` loops outlined for msir's
thread pool (`msir.lowering.threads`).

`msir-lower-to-llvm` (pass option `parallel`, default on) asks `parallel_plan`
about each `scf.for` it lowers outside an outlined body. A loop whose
iterations are independent (step 1, no calls but `__msir_error` and
`__msir_interrupted`, no heap allocation, every written buffer indexed by the induction variable as first
index or a row group's `msir.row_local` buffer, every carried value a
reduction `acc = op(acc, x)` of `_REDUCTIONS`, directly or through an inner
loop) and whose work (a static cost model: ~1 unit per scalar op, 8 per libm
call, inner loops times their trip count) may exceed two chunks of
`threads.MIN_CHUNK_WORK` is outlined (`outline`), outermost first, into::

    internal {partials} @f.par<k>(i64 begin, i64 end, captured...)  (noinline)
    internal void @f.par<k>.task(ptr ctx, i64 chunk, i64 begin, i64 end)

(a `.` cannot clash with msir's function names, which are identifiers).
`@f.par<k>` runs the loop over [begin, end) with each reduction started at
its identity (-0.0 for addf, -inf for maximumf, ...) and allocates its own
copy of each row-local buffer (stack up to 64 KiB, else heap); its pointer
parameters are `noalias` when the captured buffers are `noalias` arguments
or allocations of the parent. The parent stores the captured LLVM values in
8-byte slots of a stack `ctx`, followed by one pointer per reduction to a
stack array of `threads.MAX_CHUNKS` partials, calls
`i64 @__msir_parallel_for(@f.par<k>.task, ctx, lb, ub, min_iters)` (the
number of chunks run; `min_iters` = MIN_CHUNK_WORK / cost per iteration)
and combines `init (+) partial[0] (+) ... (+) partial[n-1]` in chunk order:
elementwise loops give bitwise the serial result; float sums and products
are reassociated (as the vectoriser already does), in a way fixed by the
trip count alone: the same bits for every thread count (the chunks do not
depend on it, see `msir.lowering.threads`). Loops inside an outlined body
stay inline.

A product's epilogue (`epilogue_plan`): a call of `__msir_gemm_f32`/`_f64`
followed by an `scf.for` marked `msir.gemm_epilogue` (convert-msir-to-loops'
matmul epilogues) whose iterations may run once each row of C is computed --
it is parallel as above (whatever its size), carries nothing, runs over
exactly C's m rows, reads C (a static 2-D buffer, offset 0, its row length the
gemm's ldc) only at row `iv` and writes neither A nor B -- is outlined the same
way, and the call and the dispatch become one call
`__msir_gemm_epilogue_<t>(gemm arguments..., task, ctx, min_iters)`: the
BLAS runs the task on each chunk of rows after that chunk's gemm
(`msir.lowering.blas`, "Epilogues"). Any other pair is lowered as written.

The loop body itself is lowered by the `to_llvm.FunctionLowering` of the
function (the `fl` argument of the functions below: `outlined_child` makes the
lowering of an outlined body, `loop` lowers a loop); this module decides and
builds the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, func, llvm, math, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from msir.lowering import allocator, blas, threads
from msir.lowering.llvm_abi import (
    ALLOC_ALIGN,
    ERR_MEMORY,
    STATUS,
    Mem,
    Signature,
    byte_size,
    is_public,
    memory_type,
    packed_type,
    scalar_type,
)
from msir.lowering.llvm_ops import I32, I64, PTR, REASSOC, icmp, intrinsic_suffix, llvm_gep, llvm_load, llvm_store
from msir.lowering.loops_abi import ERROR_FUNC, GEMM_EPILOGUE_ATTR, INTERRUPT_FUNC, ROW_LOCAL_ATTR

PARALLEL_FOR = "__msir_parallel_for"
PRIVATE_STACK_BYTES = 64 * 1024
"""A privatised row buffer up to this size lives on the chunk's stack."""
DYNAMIC_TRIPS = 64
"""Trip count the cost model assumes for an inner loop of unknown length."""

# The combining ops a parallel reduction may use, with their identity (the
# start of every chunk's partial) and how partials are combined.
_REDUCTIONS: dict[type[Operation], tuple[object, type[Operation] | str]] = {
    arith.AddfOp: (-0.0, llvm.FAddOp),
    arith.MulfOp: (1.0, llvm.FMulOp),
    arith.MaximumfOp: (float("-inf"), "llvm.maximum"),
    arith.MinimumfOp: (float("inf"), "llvm.minimum"),
    arith.MaxnumfOp: (float("nan"), "llvm.maxnum"),
    arith.MinnumfOp: (float("nan"), "llvm.minnum"),
    arith.AddiOp: (0, llvm.AddOp),
    arith.MuliOp: (1, llvm.MulOp),
    arith.AndIOp: (-1, llvm.AndOp),
    arith.OrIOp: (0, llvm.OrOp),
    arith.XOrIOp: (0, llvm.XOrOp),
    arith.MaxSIOp: ("min", "llvm.smax"),
    arith.MinSIOp: ("max", "llvm.smin"),
    arith.MaxUIOp: (0, "llvm.umax"),
    arith.MinUIOp: (-1, "llvm.umin"),
}

# math ops that are one instruction (or a cheap intrinsic) once vectorised;
# every other math op is a libm/libmvec call.
_CHEAP_MATH = (
    math.SqrtOp, math.AbsFOp, math.FloorOp, math.CeilOp, math.RoundOp, math.RoundEvenOp,
    math.TruncOp, math.CopySignOp, math.FmaOp, math.AbsIOp,
)


@dataclass
class ParallelPlan:
    """How one `scf.for` is split: see `parallel_plan`."""

    cost: int  # work units per iteration
    private: list[SSAValue]  # row buffers each chunk allocates for itself
    reductions: list[type[Operation]]  # the combining op of each carried value


def _static_trips(op: scf.ForOp) -> int | None:
    bounds = []
    for v in (op.lb, op.ub, op.step):
        owner = v.owner
        if not (isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr)):
            return None
        bounds.append(owner.value.value.data)
    lb, ub, step = bounds
    return max(0, -(-(ub - lb) // step)) if step > 0 else None


def block_cost(block: Block) -> int:
    """Work units of one run of `block`: ~1 per scalar op, 4 per division, 8
    per libm call; nested loops times their trip count."""
    total = 0
    for op in block.ops:
        if isinstance(op, (arith.ConstantOp, scf.YieldOp, scf.ConditionOp)):
            continue
        if isinstance(op, scf.ForOp):
            trips = _static_trips(op)
            body = block_cost(op.body.block) + 1
            total += (DYNAMIC_TRIPS if trips is None else trips) * body
        elif isinstance(op, scf.WhileOp):
            inner = sum(block_cost(r.block) for r in op.regions if r.blocks)
            total += DYNAMIC_TRIPS * (inner + 1)
        elif isinstance(op, scf.IfOp):
            total += 1 + max((block_cost(r.block) for r in op.regions if r.blocks), default=0)
        elif op.name.startswith("math.") and not isinstance(op, _CHEAP_MATH):
            total += 8
        elif isinstance(op, (arith.DivfOp, arith.DivSIOp, arith.DivUIOp, arith.RemSIOp, arith.RemUIOp)):
            total += 4
        else:
            total += 1
    return total


def _root(v: SSAValue) -> SSAValue:
    """The buffer a memref value is a view of (through memref.cast)."""
    while isinstance(v.owner, memref.CastOp):
        v = v.owner.source
    return v


def parallel_plan(fl, op: scf.ForOp, any_size: bool = False) -> ParallelPlan | None:
    """How to split `op` across threads, or None to keep it serial.

    Parallel when its step is 1, its body calls nothing but `__msir_error` / `__msir_interrupted`,
    allocates nothing on the heap, and every buffer it writes is either
    * indexed with the loop's induction variable as first index, in every
      load and store of the loop (iterations touch disjoint rows), or
    * a one-row buffer of a row group (`msir.row_local`, see
      `convert-msir-to-loops`), which each chunk replaces by its own;
    every buffer it touches is a function argument, an allocation or a call
    result (so distinct buffers never alias); and every loop-carried value is
    a reduction (`_reduction_kind`). Serial too when
    its size is known and below two chunks' worth of work (unless `any_size`)."""
    body = op.body.block
    iv = body.args[0]
    if fl.known(fl.get(op.step)) != 1:
        return None
    inside: set[Operation] = set(op.body.walk())
    accesses: dict[SSAValue, list[tuple[Sequence[SSAValue], bool]]] = {}
    for inner in inside:
        if isinstance(inner, func.CallOp) and inner.callee.string_value() not in (ERROR_FUNC, INTERRUPT_FUNC):
            return None
        if isinstance(inner, (memref.AllocOp, memref.DeallocOp)):
            return None
        if isinstance(inner, (memref.LoadOp, memref.StoreOp)):
            is_store = isinstance(inner, memref.StoreOp)
            accesses.setdefault(_root(inner.memref), []).append((inner.indices, is_store))
    entry = fl.f.body.blocks.first
    private = []
    for root, uses in accesses.items():
        owner = root.owner
        if isinstance(owner, memref.AllocaOp) and owner in inside:
            continue  # a buffer of one iteration
        if not (
            owner is entry
            or isinstance(owner, (memref.AllocOp, memref.AllocaOp, func.CallOp))
        ):
            return None
        if not any(is_store for _, is_store in uses):
            continue
        if isinstance(owner, memref.AllocOp) and ROW_LOCAL_ATTR in owner.attributes:
            private.append(root)
        elif any(not indices or indices[0] != iv for indices, _ in uses):
            return None
    reductions = []
    for j in range(len(body.args) - 1):
        kind = _reduction_kind(body, j)
        if kind is None:
            return None
        reductions.append(kind)
    cost = block_cost(body) + 1
    trips = _static_trips(op)
    if not any_size and trips is not None and trips * cost < 2 * threads.MIN_CHUNK_WORK:
        return None
    if not threads.load():
        return None
    return ParallelPlan(cost, private, reductions)


# operands of `__msir_gemm_<t>(ta, tb, m, n, k, a, ao, lda, b, bo, ldb, c, co, ldc)`
_GEMM_M, _GEMM_A, _GEMM_B, _GEMM_C, _GEMM_CO, _GEMM_LDC = 2, 5, 8, 11, 12, 13


def epilogue_plan(fl, call: func.CallOp) -> tuple[scf.ForOp, ParallelPlan, str] | None:
    """When `call` is a product whose next op is its epilogue loop that may run
    per chunk of C's rows (see the module docstring): that loop, its plan and
    the fused entry's symbol; else None."""
    kinds = {v: k for k, v in blas.GEMM_SYMBOLS.items()}
    kind = kinds.get(call.callee.string_value())
    loop = call.next_op
    if kind is None or not isinstance(loop, scf.ForOp) or GEMM_EPILOGUE_ATTR not in loop.attributes:
        return None
    if not fl.m.parallel or fl.outlined or loop.results:
        return None
    args = call.arguments
    c, a, b = _root(args[_GEMM_C]), _root(args[_GEMM_A]), _root(args[_GEMM_B])
    ct = c.type
    if not (isinstance(ct, MemRefType) and len(ct.get_shape()) == 2 and min(ct.get_shape()) >= 0):
        return None
    rows, row_length = ct.get_shape()
    known = [fl.known(fl.get(args[j])) for j in (_GEMM_M, _GEMM_CO, _GEMM_LDC)]
    trips = (fl.known(fl.get(loop.lb)), fl.known(fl.get(loop.ub)), fl.known(fl.get(loop.step)))
    if known != [rows, 0, row_length] or trips != (0, rows, 1) or c in (a, b):
        return None
    iv = loop.body.block.args[0]
    for inner in loop.body.walk():
        if isinstance(inner, (memref.LoadOp, memref.StoreOp)):
            root = _root(inner.memref)
            if root is c and (not inner.indices or inner.indices[0] != iv):
                return None
            if isinstance(inner, memref.StoreOp) and root in (a, b):
                return None
    plan = parallel_plan(fl, loop, any_size=True)
    if plan is None or plan.reductions:
        return None
    return loop, plan, blas.GEMM_EPILOGUE_SYMBOLS[kind]


def _reduction_kind(body: Block, j: int) -> type[Operation] | None:
    """The combining op if carried value `j` of the loop body `body` is a
    reduction: `yield op(acc, x)` with `acc` used once, or the result of an
    inner `scf.for` that receives `acc` as its only use and reduces it the
    same way (a full reduction of a 2-D nest)."""
    carried = body.args[1 + j]
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    value = terminator.operands[j]
    owner = value.owner
    # a running value used by anything but the yield (a prefix sum stored
    # per row) would depend on where its chunk starts
    if not (
        isinstance(owner, Operation)
        and owner.parent_block() is body
        and carried.has_one_use()
        and value.has_one_use()
    ):
        return None
    if type(owner) in _REDUCTIONS:
        return type(owner) if carried in owner.operands else None
    if isinstance(owner, scf.ForOp):
        inits = list(owner.iter_args)
        k = value.index  # type: ignore[attr-defined]
        if k < len(inits) and inits[k] is carried:
            return _reduction_kind(owner.body.block, k)
    return None


def _identity(kind: type[Operation], t: Attribute) -> int | float:
    value = _REDUCTIONS[kind][0]
    if isinstance(value, str):
        width = t.width.data  # type: ignore[attr-defined]
        return -(1 << (width - 1)) if value == "min" else (1 << (width - 1)) - 1
    return value  # type: ignore[return-value]


def _combine(fl, kind: type[Operation], a: SSAValue, b: SSAValue) -> SSAValue:
    how = _REDUCTIONS[kind][1]
    if isinstance(how, str):
        return fl.intrinsic(f"{how}.{intrinsic_suffix(a.type)}", [a, b], a.type)
    props = REASSOC if issubclass(how, llvm.AbstractFloatArithOp) else {}
    return fl.add(how.create(operands=[a, b], result_types=[a.type], properties=props))


def _captured(op: Operation) -> list[SSAValue]:
    """Values used inside `op`'s regions and defined outside `op`, in order."""
    inside: set[SSAValue] = set()
    for inner in op.walk():
        inside.update(inner.results)
        for region in inner.regions:
            for block in region.blocks:
                inside.update(block.args)
    found: dict[SSAValue, None] = {}
    for inner in op.walk():
        if inner is op:
            continue
        for v in inner.operands:
            if v not in inside:
                found.setdefault(v, None)
    return list(found)


def outline(fl, op: scf.ForOp, plan: ParallelPlan, gemm: tuple[str, list[SSAValue]] | None = None) -> None:
    """Outline `op` as `@<f>.par<k>(begin, end, captured...) -> partials`
    with a task `@<f>.par<k>.task(ctx, chunk, begin, end)` that unpacks the
    captured values from `ctx` and stores the partials of its chunk, and call
    `__msir_parallel_for`; then combine the partials in chunk order. With
    `gemm` (an epilogue: the fused entry's symbol and the product's LLVM
    arguments), call that entry with the task instead (`epilogue_plan`)."""
    m = fl.m
    private = set(plan.private)
    captured = _captured(op)
    leaves: dict[SSAValue, None] = {}  # the parent's LLVM values the body needs

    def need(x: int | SSAValue) -> None:
        if isinstance(x, SSAValue) and not isinstance(x.owner, llvm.ConstantOp):
            leaves.setdefault(x, None)

    for v in captured:
        if _root(v) in private:
            continue
        value = fl.vals[v]
        if isinstance(value, Mem):
            need(value.ptr)
            for size in value.sizes:
                need(size)
        else:
            need(value)
    params = list(leaves)
    acc_types = [scalar_type(r.type) for r in op.results]
    # '.' never occurs in a Python identifier: no clash with msir functions
    name = f"{fl.f.sym_name.data}.par{len(m.outlined) // 2}"
    body_fn, heap_private = _outlined_body(fl, op, plan, name, captured, params, acc_types)
    task = _task_function(name, params, acc_types)
    m.outlined += [body_fn, task]

    slots = fl.prologue
    ctx = llvm.AllocaOp(fl.const(max(1, len(params) + len(acc_types)), I64), I64, alignment=8)
    slots.add_op(ctx)
    partials = []
    for t in acc_types:
        array = llvm.AllocaOp(fl.const(threads.MAX_CHUNKS, I64), t, alignment=64)
        slots.add_op(array)
        partials.append(array.results[0])
    # llvmlite types an alloca's pointer by its element: the slots hold
    # values of several types, so address them through an untyped pointer
    ctx_ptr = fl.add(llvm.BitcastOp(ctx.results[0], PTR))
    for j, x in enumerate([*params, *partials]):
        slot = ctx_ptr if j == 0 else fl.add(llvm_gep(ctx_ptr, fl.const(j, I64), I64))
        fl.emit(llvm_store(x, slot))
    task_address = fl.add(llvm.AddressOfOp(task.sym_name.data, PTR))
    min_iters = fl.const(-(-threads.MIN_CHUNK_WORK // plan.cost), I64)
    lb, ub = fl.get(op.lb), fl.get(op.ub)
    if gemm is not None:
        symbol, gemm_args = gemm
        fl.call_external(symbol, [*gemm_args, task_address, ctx_ptr, min_iters], None)
        chunks = None
    else:
        chunks = fl.call_external(PARALLEL_FOR, [task_address, ctx_ptr, lb, ub, min_iters], I64)
    if heap_private:
        status = fl.add(llvm.LoadOp(fl.add(llvm.AddressOfOp(STATUS, PTR)), I32))
        fl.branch_unless(fl.add(icmp("ne", status, fl.const(0, I32))), fl.bail())
    if not acc_types or chunks is None:
        return
    # init (+) partial[0] (+) ... (+) partial[chunks - 1]
    header = Block(arg_types=[I64, *acc_types])
    combine, done = Block(), Block()
    fl.emit(llvm.BrOp(header, fl.const(0, I64), *fl.flatten_all(op.iter_args)))
    fl.start_block(header)
    k, *accs = header.args
    fl.emit(llvm.CondBrOp(fl.add(icmp("slt", k, chunks)), combine, [], done, []))
    fl.start_block(combine)
    combined = [
        _combine(fl, kind, acc, fl.add(llvm_load(fl.add(llvm_gep(array, k, t)), t)))
        for kind, acc, array, t in zip(plan.reductions, accs, partials, acc_types)
    ]
    fl.emit(llvm.BrOp(header, fl.add(llvm.AddOp(k, fl.const(1, I64))), *combined))
    fl.start_block(done)
    fl.bind(op.results, accs)


def _noalias_params(fl, params: Sequence[SSAValue]) -> bool:
    """Whether the body's pointer parameters may be `noalias`: each is a
    distinct buffer (a `noalias` argument of the parent, or an allocation)."""
    parent_noalias = is_public(fl.f) and fl.f.sym_name.data not in fl.m.callees
    for x in params:
        if x.type != PTR:
            continue
        owner = x.owner
        if owner is fl.prologue:
            if not parent_noalias or x.index in fl.shared_params:  # type: ignore[attr-defined]
                return False
        elif isinstance(owner, llvm.CallOp):
            if owner.callee.string_value() not in ("aligned_alloc", allocator.ALLOC):
                return False
        elif not isinstance(owner, llvm.AllocaOp):
            return False
    return True


def _outlined_body(
    fl,
    op: scf.ForOp,
    plan: ParallelPlan,
    name: str,
    captured: Sequence[SSAValue],
    params: Sequence[SSAValue],
    acc_types: Sequence[Attribute],
) -> tuple[llvm.FuncOp, bool]:
    """`@name(i64 begin, i64 end, params...)`: the loop over [begin, end)
    with the reductions started at their identity, returning the partials.
    Also whether it allocates a private buffer on the heap (it can fail)."""
    ret = packed_type(acc_types)
    sig = Signature([], [], [I64, I64, *(x.type for x in params)], ret, list(acc_types))
    child = fl.outlined_child(sig)
    start = child.block
    child.region.add_block(start)
    begin, end, *args = child.prologue.args
    remap = dict(zip(params, args))

    def rebuild(x: int | SSAValue) -> int | SSAValue:
        if isinstance(x, int) or x in remap:
            return remap.get(x, x)  # type: ignore[arg-type]
        constant = x.owner
        assert isinstance(constant, llvm.ConstantOp)
        return child.const(constant.value.value.data, x.type)  # type: ignore[attr-defined]

    private: dict[SSAValue, SSAValue] = {}
    frees: list[SSAValue] = []
    for v in captured:
        value = fl.vals[v]
        root = _root(v)
        if root in plan.private:
            if root not in private:
                private[root] = _private_buffer(child, root, frees)
            assert isinstance(value, Mem)
            child.vals[v] = Mem(private[root], value.sizes)
        elif isinstance(value, Mem):
            child.vals[v] = Mem(rebuild(value.ptr), tuple(rebuild(s) for s in value.sizes))  # type: ignore[arg-type]
        else:
            child.vals[v] = rebuild(value)
    inits = [child.const(_identity(kind, t), t) for kind, t in zip(plan.reductions, acc_types)]
    partials = child.loop(op, begin, end, child.const(1, I64), inits)
    for ptr in frees:
        child.call_external("free", [ptr], None)
    if not partials:
        child.emit(llvm.ReturnOp())
    elif len(partials) == 1:
        child.emit(llvm.ReturnOp(partials[0]))
    else:
        packed = child.add(llvm.UndefOp(ret))
        for j, value in enumerate(partials):
            packed = child.add(llvm.InsertValueOp(DenseArrayBase.from_list(i64, [j]), packed, value))
        child.emit(llvm.ReturnOp(packed))
    child.prologue.add_op(llvm.BrOp(start))
    # called from its task only: inlining would compile the loop twice
    props: dict[str, Attribute | None] = {"passthrough": ArrayAttr([StringAttr("noinline")])}
    if _noalias_params(fl, params):
        no_alias = DictionaryAttr({"llvm.noalias": UnitAttr()})
        props["arg_attrs"] = ArrayAttr(
            [no_alias if t == PTR else DictionaryAttr({}) for t in sig.flat_args]
        )
    body_fn = llvm.FuncOp(
        name,
        llvm.LLVMFunctionType(sig.flat_args, ret),
        linkage=llvm.LinkageAttr("internal"),
        body=child.region,
        other_props=props,
    )
    return body_fn, bool(frees)


def _private_buffer(child, root: SSAValue, frees: list[SSAValue]) -> SSAValue:
    """A chunk's own copy of the row buffer `root` (static shape): on the
    stack when small, else `aligned_alloc`ed (and freed at the end); a failed
    allocation reports error 3 and returns at once."""
    t = root.type
    assert isinstance(t, MemRefType)
    elem = memory_type(t.element_type)
    count = 1
    for d in t.get_shape():
        count *= d
    nbytes = count * byte_size(elem)
    if nbytes <= PRIVATE_STACK_BYTES:
        alloca = llvm.AllocaOp(child.const(max(1, count), I64), elem, alignment=ALLOC_ALIGN)
        child.prologue.add_op(alloca)
        return alloca.results[0]
    rounded = max(ALLOC_ALIGN, -(-nbytes // ALLOC_ALIGN) * ALLOC_ALIGN)
    args = [child.const(ALLOC_ALIGN, I64), child.const(rounded, I64)]
    ptr = child.call_external("aligned_alloc", args, PTR)
    failed = child.add(icmp("eq", child.add(llvm.PtrToIntOp(ptr, I64)), child.const(0, I64)))
    report = Block()
    child.branch_unless(failed, report)
    site = root.owner.attributes.get("msir.site")  # type: ignore[union-attr]
    code = child.const(ERR_MEMORY, I32)
    where = child.const(site.value.data if isinstance(site, IntegerAttr) else -1, I64)
    report.add_ops([llvm.CallOp(ERROR_FUNC, code, where), llvm.BrOp(child.bail())])
    child.region.add_block(report)
    frees.append(ptr)
    return ptr


def _task_function(name: str, params: Sequence[SSAValue], acc_types: Sequence[Attribute]) -> llvm.FuncOp:
    """`void @name.task(ptr ctx, i64 chunk, i64 begin, i64 end)`: loads the
    parameters of `@name` from the 8-byte slots of `ctx` (then one slot per
    reduction: its array of partials), calls it and stores the partials at
    index `chunk`."""
    block = Block(arg_types=[PTR, I64, I64, I64])
    ctx, chunk, begin, end = block.args
    ops: list[Operation] = []

    def add(o: Operation) -> SSAValue:
        ops.append(o)
        return o.results[0]

    def slot(j: int) -> SSAValue:
        return ctx if j == 0 else add(llvm.GEPOp(ctx, [j], I64, inbounds=True))

    values = [add(llvm_load(slot(j), x.type)) for j, x in enumerate(params)]
    arrays = [add(llvm_load(slot(len(params) + r), PTR)) for r in range(len(acc_types))]
    ret = None if not acc_types else packed_type(acc_types)
    call = llvm.CallOp(name, begin, end, *values, return_type=ret)
    ops.append(call)
    for r, (array, t) in enumerate(zip(arrays, acc_types)):
        if len(acc_types) == 1:
            value = call.results[0]
        else:
            value = add(llvm.ExtractValueOp(DenseArrayBase.from_list(i64, [r]), call.results[0], t))
        ops.append(llvm_store(value, add(llvm_gep(array, chunk, t))))
    ops.append(llvm.ReturnOp())
    block.add_ops(ops)
    return llvm.FuncOp(
        f"{name}.task",
        llvm.LLVMFunctionType([PTR, I64, I64, I64]),
        linkage=llvm.LinkageAttr("internal"),
        body=Region([block]),
    )
