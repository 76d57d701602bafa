"""Emulated devices: a sharded function run on every device of a mesh inside
one process (`../shared/parallel.md` §7).

`EmulatedProgram(module, entry)` takes a module after `msir-shard` (one
per-device function `entry` with `msir_shard.layout`s on its arguments and
results) and cuts the function at its collectives into *segments*, each made
a function of its own (the values it reads from before it in, the values
read after it out). The cut is by dependence, not by program order: segment
k holds the ops k collectives deep (a collective's result is one deeper than
its input), so the segments are as few as the longest chain of collectives
allows, and the collectives of one depth run together between two segments.
A data-parallel training step is then two segments per device (forward and
backward; the optimizer's update) around its gradients' all_reduces, where
program order cut it at every all_reduce. Each op is then sunk to the last
segment before its first reader, so what only a later segment reads (the
update's constants) is computed there instead of carried across. The
segments are compiled natively once, together, through the cpu target
(`msir.compiler`); the collectives run here, in NumPy, between segments.

Why segments rather than calls from native code into the runtime: a
collective needs every device's piece at once, so with callbacks each
device's native code would have to stop inside a call and wait for the
others (threads or coroutines around native frames). Cut at the
collectives, the devices simply run one segment after another, and every
collective sees all its inputs at hand: no threads, no locks, a fixed order,
and in-process collectives that cost what their NumPy copies and sums cost.

`run(*global_args)` splits each argument by its layout (device r of a mesh
axis holds the r-th block of the dimensions that axis splits, major to
minor), runs the segments device by device in row-major device order and
the collectives in program order, each summing its devices' values in
ascending device order (so results are the same on every run), and
reassembles each result from its layout. What depends only on the program
and its shapes (each value's slot, each argument's blocks, each collective's
device groups, each result's assembly) is planned on the first run
(`_PlannedRun`), so a call costs the native segments, the collectives' NumPy
work and a few microseconds per step: the runtime's own work is what the
issue's target (an emulated data-parallel step <= 1.3x the single-device
step, `bench/parallel_step.py`) measures against the native code.

Every run records where its time went: `program.last_profile` (also
`plan.last_profile`, and `msir.parallel.last_profile()` for the latest run
in this process, e.g. of a `msir.jit` function under the auto-parallel
context) is a `RunProfile` of wall-clock seconds: `total_s` (the whole
`run`), `segments_s` (the native segments, of every device here),
`collectives_s` (the program's `msir_shard` collectives) with their
`collective_calls` and `collective_bytes` (the inputs' bytes on one device),
and `other_s`, the rest (splitting arguments, assembling results, dispatch).
The parts are non-negative and sum to at most `total_s`; taking them costs
two `perf_counter` calls per segment and per collective.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from msir.errors import CompileError, ShapeError
from msir.parallel.mesh_layout import Layout, Mesh


@dataclass
class _Segment:
    """A run of msir ops between collectives, compiled as function `name`."""

    name: str
    ops: list
    inputs: list  # SSA values of the per-device function it reads from before it
    outputs: list  # those it defines that are read after it


@dataclass
class RunProfile:
    """Where one run of a per-device program spent its wall-clock time, in seconds (module docstring)."""

    total_s: float = 0.0
    segments_s: float = 0.0
    """The native segments: of every device on emulated devices, of this rank's under MPI."""
    collectives_s: float = 0.0
    """The program's collectives; under MPI this includes waiting for the other ranks to reach them."""
    collective_calls: int = 0
    collective_bytes: int = 0
    """The bytes of the collectives' inputs on one device."""

    @property
    def other_s(self) -> float:
        """The rest of the run: splitting the arguments, assembling the results, dispatch."""
        return max(0.0, self.total_s - self.segments_s - self.collectives_s)


_latest: list[RunProfile] = []


def last_profile() -> RunProfile | None:
    """The profile of the latest run of a per-device program in this process (None before the first)."""
    return _latest[0] if _latest else None


def _record(profile: RunProfile) -> None:
    _latest[:] = [profile]


class EmulatedProgram:
    """A per-device function compiled once, run on emulated devices."""

    def __init__(self, module, entry: str):
        from xdsl.dialects import func

        import msir.dialects.msir as M
        import msir.dialects.msir_shard as S

        self.module = module
        self.function = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == entry)
        mesh_ref = self.function.attributes.get(S.MESH_ATTR)
        if mesh_ref is None:
            raise CompileError(f"function @{entry} is not a per-device function (no {S.MESH_ATTR}): run msir-shard "
                               f"first")
        mesh_op = next(op for op in module.ops if isinstance(op, S.MeshOp)
                       and op.sym_name.data == mesh_ref.root_reference.data)
        self.mesh = Mesh(mesh_op.mesh_shape)
        self.devices = list(np.ndindex(*self.mesh.shape))
        self.arg_layouts = [_layout(a) for a in self.function.arg_attrs.data]
        self.result_layouts = [_layout(a) for a in self.function.res_attrs.data]
        self.global_shapes = [_global_shape(a.type, layout, self.mesh)
                              for a, layout in zip(self.function.body.block.args, self.arg_layouts)]
        self.arg_dtypes = [np.dtype(M.dtype_of(a.type)) for a in self.function.body.block.args]
        self.steps = self._cut(entry)
        self._compile()
        self._run = None  # planned on the first run
        self.last_profile: RunProfile | None = None

    # -- building ----------------------------------------------------------------

    def _cut(self, entry: str) -> list:
        """The segments and the collective ops of the function, in program order."""
        from xdsl.dialects import func

        import msir.dialects.msir_shard as S

        block = self.function.body.block
        ops = [op for op in block.ops if not isinstance(op, func.ReturnOp)]
        if any(isinstance(op, S.ProcessIndexOp) for op in ops):
            raise CompileError("the emulated runtime does not run msir_shard.process_index yet")
        self.returned = list(block.last_op.operands)
        stage = _stages(ops, self.returned)
        groups: list = []
        for k in range(max(stage.values(), default=0) + 1):
            groups.append([op for op in ops if stage[op] == k and not isinstance(op, S.COLLECTIVES)])
            groups.extend(op for op in ops if stage[op] == k and isinstance(op, S.COLLECTIVES))
        later_uses: list[set] = []
        needed = set(self.returned)
        for g in reversed(groups):  # the values read at or after each step
            later_uses.append(set(needed))
            ops = [g] if not isinstance(g, list) else g
            for op in ops:
                needed.update(op.operands)
        later_uses.reverse()
        steps = []
        for k, g in enumerate(groups):
            if not isinstance(g, list):
                steps.append(g)
                continue
            if not g:
                continue
            defined = {r for op in g for r in op.results}
            inputs = list(dict.fromkeys(v for op in g for v in op.operands if v not in defined))
            after = later_uses[k]
            outputs = [r for op in g for r in op.results if r in after]
            if outputs:
                steps.append(_Segment(f"{entry}__segment{len(steps)}", g, inputs, outputs))
        return steps

    def _compile(self) -> None:
        from xdsl.dialects import func
        from xdsl.dialects.builtin import ModuleOp
        from xdsl.ir import Block, Region

        from msir.compiler import compile_module

        segments = [s for s in self.steps if isinstance(s, _Segment)]
        self.native = {}
        if not segments:
            return
        functions = []
        for seg in segments:
            block = Block(arg_types=[v.type for v in seg.inputs])
            mapping = dict(zip(seg.inputs, block.args))
            for op in seg.ops:
                block.add_op(op.clone(value_mapper=mapping))
            block.add_op(func.ReturnOp(*[mapping[v] for v in seg.outputs]))
            functions.append(func.FuncOp(seg.name, ([v.type for v in seg.inputs], [v.type for v in seg.outputs]),
                                         Region(block)))
        compiled = compile_module(ModuleOp(functions), segments[0].name, also=tuple(s.name for s in segments[1:]))
        self.native[segments[0].name] = compiled.native
        self.native.update(compiled.functions)

    # -- running -------------------------------------------------------------------

    def run(self, *global_args) -> list[np.ndarray]:
        start = time.perf_counter()
        args = self.global_arrays(global_args)
        if self._run is None:
            self._run = _PlannedRun(self)
        profile = RunProfile()
        results = self._run(args, profile)
        profile.total_s = time.perf_counter() - start
        self.last_profile = profile
        _record(profile)
        return results

    def global_arrays(self, global_args: Sequence) -> list[np.ndarray]:
        """The global arguments as arrays, checked against the shapes the function was sharded for."""
        import msir.dialects.msir as M

        # Python scalars take the type the trace gave them; arrays pass as they are (a wrong dtype is refused
        # by the native call)
        args = [np.asarray(a, M.dtype_of(arg.type)) if isinstance(a, (bool, int, float)) else np.asarray(a)
                for a, arg in zip(global_args, self.function.body.block.args)]
        args += [np.asarray(a) for a in global_args[len(args):]]
        if len(args) != len(self.global_shapes):
            raise ShapeError(f"{self.function.sym_name.data} takes {len(self.global_shapes)} arguments, got "
                             f"{len(args)}")
        for i, (a, shape) in enumerate(zip(args, self.global_shapes)):
            if a.shape != shape:
                raise ShapeError(f"argument {i} of {self.function.sym_name.data} has shape {a.shape}; the sharded "
                                 f"function was built for {shape}")
        return args

    def local_arguments(self, args: Sequence[np.ndarray], coord: tuple[int, ...]) -> dict:
        """The block of each global argument that device `coord` holds, keyed by the function's arguments."""
        # a view where the block is contiguous (replicated, or split by rows): native code does not write its
        # inputs, so the devices share the caller's memory
        return {arg: a if a.ndim == 0 else np.ascontiguousarray(a[_block(layout, a.shape, coord, self.mesh)])
                for arg, layout, a in zip(self.function.body.block.args, self.arg_layouts, args)}

    def run_segment(self, segment: _Segment, env: dict) -> None:
        """Segment `segment` natively on one device's values `env`, which get its outputs."""
        for v, out in zip(segment.outputs, self.native[segment.name](*[env[v] for v in segment.inputs])):
            env[v] = out

    def _groups(self, axis: int) -> list[list[int]]:
        """Device indices along mesh axis `axis`, one list per position on the other axes, in axis order."""
        groups: dict[tuple, list[int]] = {}
        for d, coord in enumerate(self.devices):
            groups.setdefault(coord[:axis] + coord[axis + 1:], []).append(d)
        return list(groups.values())

    def collective(self, op, combine, groups: list[list[int]], envs: list[list], src: int, dst: int) -> None:
        """Collective `op` on every group of devices along its axis: `combine` maps the group's pieces (slot
        `src` of each device's values `envs`) to their outputs (slot `dst`), in the group's order."""
        for group in groups:
            for d, out in zip(group, combine([envs[d][src] for d in group])):
                envs[d][dst] = out

    def _assemble(self, pieces: Sequence[np.ndarray], layout: Layout, value) -> np.ndarray:
        """The global value of a result from the devices' pieces (replicas agree; the first is taken)."""
        local = pieces[0]
        shape = tuple(n * math.prod(self.mesh.shape[a] for a in axes) for n, axes in zip(local.shape, layout.dims))
        out = np.empty(shape, local.dtype)
        split = {a for axes in layout.dims for a in axes}
        for coord, piece in zip(self.devices, pieces):
            if all(c == 0 for a, c in enumerate(coord) if a not in split):
                out[_block(layout, shape, coord, self.mesh)] = piece
        return out


class _PlannedRun:
    """`EmulatedProgram.run` after its global arguments are checked, planned
    once: everything that depends only on the program and its shapes (which
    slot of a device's value list each SSA value takes, each argument's block
    per device, each collective's device groups, how each result is
    assembled) is worked out here, so a call only slices, calls the native
    segments and combines arrays.

    Arrays are not copied on the way in where a device's block is contiguous
    (a replicated or row-split argument: a view of the caller's array), nor on
    the way out when a result is a segment's own output (fresh on every call,
    so the caller may keep it); a result read from the caller's arguments or
    from a collective (whose output may be shared by the devices of a group,
    or be a view of a device's value) is copied, as is a value returned
    twice."""

    def __init__(self, program: EmulatedProgram):
        self.program = program
        self.slots: dict = {}
        devices, mesh = program.devices, program.mesh
        self.arguments = []  # (slot, None for the whole array, or each device's block)
        for arg, layout, shape in zip(program.function.body.block.args, program.arg_layouts, program.global_shapes):
            split = any(layout.dims) and len(shape) > 0
            self.arguments.append((self._slot(arg), [_block(layout, shape, c, mesh) for c in devices]
                                   if split else None))
        self.steps = [self._segment(s) if isinstance(s, _Segment) else self._collective(s) for s in program.steps]
        fresh = {self.slots[v] for s in program.steps if isinstance(s, _Segment) for v in s.outputs}
        self.results = []
        for v, layout in zip(program.returned, program.result_layouts):
            s = self._slot(v)
            self.results.append(self._assembler(s, layout, v, copy=s not in fresh))
            fresh.discard(s)  # returned again: a copy
        self.n_slots = len(self.slots)

    def __call__(self, args: list[np.ndarray], profile: RunProfile) -> list[np.ndarray]:
        envs = [[None] * self.n_slots for _ in self.program.devices]  # per device: slot -> its array
        for (s, blocks), a in zip(self.arguments, args):
            if blocks is None:
                for env in envs:
                    env[s] = a
            else:
                for env, b in zip(envs, blocks):
                    env[s] = np.ascontiguousarray(a[b])
        for step in self.steps:
            step(envs, profile)
        return [assemble(envs) for assemble in self.results]

    def _slot(self, value) -> int:
        return self.slots.setdefault(value, len(self.slots))

    def _segment(self, segment: _Segment):
        ins, outs = [self._slot(v) for v in segment.inputs], [self._slot(v) for v in segment.outputs]
        program, name = self.program, segment.name

        def run(envs, profile):
            start = time.perf_counter()
            fn = program.native[name]  # looked up per call, so that a profiler may wrap it
            for env in envs:
                for s, value in zip(outs, fn(*[env[i] for i in ins])):
                    env[s] = value
            profile.segments_s += time.perf_counter() - start

        return run

    def _collective(self, op):
        src, dst = self._slot(op.input), self._slot(op.result)
        groups = self.program._groups(op.axis.value.data)
        combine = _combiner(op, self.program.mesh.shape[op.axis.value.data])
        program = self.program
        nbytes = _nbytes(op.input.type)

        def run(envs, profile):
            start = time.perf_counter()
            program.collective(op, combine, groups, envs, src, dst)
            profile.collectives_s += time.perf_counter() - start
            profile.collective_calls += 1
            profile.collective_bytes += nbytes

        return run

    def _assembler(self, s: int, layout: Layout, value, copy: bool):
        """The global value of result slot `s` from the devices' pieces (replicas agree; the first is taken)."""
        import msir.dialects.msir as M

        program = self.program
        local = M.shape_of(value.type)
        if not any(layout.dims) or not local:
            return (lambda envs: np.array(envs[0][s], copy=True)) if copy else (lambda envs: envs[0][s])
        shape = tuple(n * math.prod(program.mesh.shape[a] for a in axes) for n, axes in zip(local, layout.dims))
        dtype = np.dtype(M.dtype_of(value.type))
        split = {a for axes in layout.dims for a in axes}
        blocks = [(d, _block(layout, shape, coord, program.mesh)) for d, coord in enumerate(program.devices)
                  if all(c == 0 for a, c in enumerate(coord) if a not in split)]

        def assemble(envs):
            out = np.empty(shape, dtype)
            for d, b in blocks:
                out[b] = envs[d][s]
            return out

        return assemble


def _combiner(op, n: int):
    """`pieces -> outputs` of collective `op` over a group of `n` devices, the pieces and outputs in the
    group's order."""
    import msir.dialects.msir_shard as S

    if isinstance(op, S.AllReduceOp):
        kind = op.kind.data
        return lambda pieces: [_reduce(pieces, kind)] * n
    dim = op.dim.value.data
    if isinstance(op, S.ReduceScatterOp):
        return lambda pieces: _chunks(_reduce(pieces, "sum"), n, dim)
    if isinstance(op, S.AllGatherOp):
        return lambda pieces: [np.concatenate(pieces, axis=dim)] * n
    if isinstance(op, S.AllSliceOp):
        return lambda pieces: [_chunks(p, n, dim)[r] for r, p in enumerate(pieces)]
    to_dim = op.to_dim.value.data

    def all_to_all(pieces):
        cut = [_chunks(p, n, to_dim) for p in pieces]
        return [np.ascontiguousarray(np.concatenate([cut[q][r] for q in range(n)], axis=dim)) for r in range(n)]

    return all_to_all


MESH_NAME = "mesh"
"""The symbol of the mesh in the modules a plan makes."""


def sharded_module(graph, mesh: Mesh, strategies: dict, layouts: Sequence[Layout]):
    """`graph`'s traced module with each op's strategy (`strategies`: node name
    -> strategy in the node's letters, translated to the op's own letters),
    the arguments' `layouts` and `mesh`, rewritten by `msir-shard`."""
    from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr
    from xdsl.dialects.func import FuncOp

    import msir.dialects.msir_shard as S
    from msir.compiler import make_context
    from msir.passes.shard import MsirShard

    module = annotated_module(graph, mesh, strategies)
    entry = next(op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == graph.entry)
    entry.arg_attrs = ArrayAttr([DictionaryAttr({S.LAYOUT_ATTR: S.LayoutAttr(MESH_NAME, layout.dims)})
                                 for layout in layouts])
    MsirShard().apply(make_context(), module)
    module.verify()
    return module


def annotated_module(graph, mesh: Mesh, strategies: dict):
    """A copy of `graph`'s traced module declaring `mesh` (as `@mesh`), each
    of the graph's ops carrying its node's strategy in the op's own letters."""
    import msir.dialects.msir as M
    import msir.dialects.msir_shard as S
    from msir.parallel.mesh_layout import format_strategy
    from msir.passes.shard import letter_terms

    module = graph.module.clone()
    originals = list(graph.module.walk())
    copy_of = dict(zip(originals, module.walk()))
    for node in graph.nodes:
        s = strategies[node.name]
        for op in node.ops:
            if isinstance(op, (M.BroadcastToOp, M.TransposeOp, M.ReshapeOp)):
                continue  # views take their consumer's layout (msir-shard)
            terms, out_term = letter_terms(op)
            op_letter = {}
            for ssa, term in zip((*op.operands, *op.results), (*terms, out_term)):
                for c, letter in zip(term, node.dim_letters[id(ssa)]):
                    if letter is not None and c != "1":
                        op_letter[letter] = c
            text = format_strategy(tuple(op_letter.get(c) if c else None for c in s))
            copy_of[op].attributes[S.STRATEGY_ATTR] = S.StrategyAttr(MESH_NAME, text)
    module.body.block.insert_op_before(S.MeshOp(MESH_NAME, mesh.shape), module.body.block.first_op)
    return module


def _stages(ops: list, returned: list) -> dict:
    """The segment each op runs in (a collective: the segment after which it runs), from 0: the fewest the
    chains of collectives allow, each op in the last one before its first reader (module docstring)."""
    import msir.dialects.msir_shard as S

    stage: dict = {}
    ready: dict = {}  # value -> the first segment that can read it
    readers: dict = {}
    for op in ops:  # as early as the operands allow
        stage[op] = max((ready.get(v, 0) for v in op.operands), default=0)
        for v in op.operands:
            readers.setdefault(v, []).append(op)
        for r in op.results:
            ready[r] = stage[op] + 1 if isinstance(op, S.COLLECTIVES) else stage[op]
    last = max(ready.values(), default=0)
    kept = set(returned)
    for op in reversed(ops):  # then as late as the readers, whose segments are final, allow
        if isinstance(op, S.COLLECTIVES):
            continue  # its readers are already as early as it makes them ready
        # a reader in segment k, or a collective after segment k, needs the value by segment k
        bounds = [stage[u] for r in op.results for u in readers.get(r, ())]
        bounds += [last for r in op.results if r in kept]
        if bounds:
            stage[op] = min(bounds)
    return stage


def _nbytes(t) -> int:
    """The bytes of a value of (tensor or scalar) type `t`."""
    import msir.dialects.msir as M

    return math.prod(M.shape_of(t)) * np.dtype(M.dtype_of(t)).itemsize


def _layout(attrs) -> Layout:
    import msir.dialects.msir_shard as S

    attr = attrs.data[S.LAYOUT_ATTR]
    return Layout(attr.dims_tuple, attr.partial_tuple)


def _global_shape(t, layout: Layout, mesh: Mesh) -> tuple[int, ...]:
    import msir.dialects.msir as M

    return tuple(n * math.prod(mesh.shape[a] for a in axes) for n, axes in zip(M.shape_of(t), layout.dims))


def _block(layout: Layout, shape: Sequence[int], coord: tuple[int, ...], mesh: Mesh) -> tuple[slice, ...]:
    """The index of the block of a value of global `shape` that device `coord` holds."""
    index = []
    for n, axes in zip(shape, layout.dims):
        k, count = 0, 1
        for a in axes:  # major to minor: a mixed-radix block number
            k = k * mesh.shape[a] + coord[a]
            count *= mesh.shape[a]
        size = n // count
        index.append(slice(k * size, (k + 1) * size))
    return tuple(index)


def _chunks(x: np.ndarray, n: int, dim: int) -> list[np.ndarray]:
    return [np.ascontiguousarray(c) for c in np.split(x, n, axis=dim)]


def _reduce(pieces: Sequence[np.ndarray], kind: str) -> np.ndarray:
    """The sum (or max) of `pieces`, accumulated in their order into a new array."""
    ufunc = np.add if kind == "sum" else np.maximum
    first = pieces[0]
    if len(pieces) == 1:
        return np.array(first, copy=True)
    acc = ufunc(first, pieces[1], out=np.empty(first.shape, first.dtype))
    for p in pieces[2:]:
        ufunc(acc, p, out=acc)
    return acc
