"""`msir-fuse`: group producer→consumer chains of elementwise ops into `msir.fusion`.

Contract
--------
Expects: `msir` functions (value semantics), in any order of passes before
`convert-msir-to-loops`.

Rewrites: within each function body (and the regions of control flow in it),
maximal groups of ops that all compute a
tensor of one shape S elementwise (the ops of `msir.FUSIBLE_ELEMENTWISE`, and
`msir.broadcast_to` to S of a value computed outside the group) become one
`msir.fusion` whose body holds them; splat and rank-0 constants they use, and
broadcasts of them, are copied into the body (a broadcast constant is never a
result of a fusion: each consumer recomputes it for free). A group needs at
least two ops, or one that reads such a constant of its shape (so that
`x * 2.0` does not fill an array of 2.0s first).

Guarantees:
* no work is duplicated (only constants are copied);
* every op in a fusion body keeps its attributes (its `msir.name`);
* a value computed in a group and used outside it becomes a result of the
  fusion (it stays materialised); others live only inside the loop body;
* no cycle: an op joins a group only if every use of the group's values
  outside the group comes after the op, so the fusion can take its place;
* the module verifies after the pass.

Reductions and matmuls are not fused yet (prologue/epilogue fusion comes with
the native-performance work).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from msir.dialects import msir as M


def _fusible(op: Operation) -> bool:
    if isinstance(op, M.BroadcastToOp):
        # an identity broadcast is not a broadcast; a broadcast constant is
        # copied into each fusion that reads it, never a member or a result
        return op.input.type != op.result.type and not _is_splat(op.input)
    return isinstance(op, M.FUSIBLE_ELEMENTWISE)


def _is_splat(v: SSAValue) -> bool:
    op = v.owner
    return isinstance(op, M.ConstantOp) and op.is_splat()


def _pullable_constant(v: SSAValue, shape: tuple[int, ...]) -> bool:
    """A constant, or a broadcast of one, cheap enough to copy into a fusion body."""
    op = v.owner
    if isinstance(op, M.BroadcastToOp):
        return _is_splat(op.input) and M.shape_of(op.result.type) == shape
    return _is_splat(v) and M.shape_of(v.type) in (shape, ())


def _reads_constant_tensor(group: _Group) -> bool:
    """A one-op group worth a fusion: it reads a splat constant, or a broadcast
    of one, of its shape (not rank 0), which unfused would be filled in memory
    at full size (`x * 2.0` would read a second array of 2.0s)."""
    return group.shape != () and any(
        _pullable_constant(v, group.shape) for op in group.ops for v in op.operands)


def _rank0_constant(v: SSAValue) -> Operation:
    """The rank-0 value of the splat constant `v`: a splat of another shape
    broadcast to the iteration shape (e.g. tensor<3x1xf64> to 3x4) enters a
    fusion body as it (body constants are rank 0 or of the iteration shape)."""
    value = v.owner.values()[0]  # type: ignore[attr-defined]
    scalar = M.ConstantOp(DenseIntOrFPElementsAttr.from_list(M.tensor_type((), M.dtype_of(v.type)), [value]))
    scalar.attributes.update(v.owner.attributes)  # its msir.name, if any
    return scalar


def _copy_chain(v: SSAValue) -> list[SSAValue]:
    """The values to clone, in order, to copy the pullable constant `v` in."""
    op = v.owner
    return [op.input, v] if isinstance(op, M.BroadcastToOp) else [v]


@dataclass(eq=False)
class _Group:
    shape: tuple[int, ...]
    ops: list[Operation]
    users: set[Operation] = field(default_factory=set)
    """The ops of the block outside the group that use its values (kept
    incrementally: checking a group then costs its outside users, not its size)."""


class _BlockFuser:
    def __init__(self, block: Block):
        self.block = block
        self.pos = {op: i for i, op in enumerate(block.ops)}
        self.group_of: dict[Operation, _Group] = {}

    def users_of(self, op: Operation) -> set[Operation]:
        found = set()
        for r in op.results:
            for use in r.uses:
                user = self.block.find_ancestor_op_in_block(use.operation)
                if user is not None:
                    found.add(user)
        return found

    def outside_users_after(self, group: _Group, accepted: list[_Group], anchor: Operation) -> bool:
        """Every use of `group`'s values outside the `accepted` groups and
        `anchor` comes after `anchor`."""
        at = self.pos[anchor]
        for user in group.users:
            if user is anchor or self.group_of.get(user) in accepted:
                continue
            if self.pos[user] <= at:
                return False
        return True

    def form_groups(self) -> list[_Group]:
        groups: list[_Group] = []
        for op in list(self.block.ops):
            if not _fusible(op):
                continue
            shape = M.shape_of(op.results[0].type)
            candidates: list[_Group] = []
            if not isinstance(op, M.BroadcastToOp):
                for v in op.operands:
                    g = self.group_of.get(v.owner)  # type: ignore[arg-type]  # a block argument's owner is in no group
                    if g is not None and g.shape == shape and g not in candidates:
                        candidates.append(g)
            accepted = list(candidates)
            while True:
                keep = [g for g in accepted if self.outside_users_after(g, accepted, op)]
                if len(keep) == len(accepted):
                    break
                accepted = keep
            users = self.users_of(op)
            for g in accepted:
                users |= g.users
            users = {u for u in users if u is not op and self.group_of.get(u) not in accepted}
            # The largest group absorbs the others (ops are put in block order at the end).
            merged = max(accepted, key=lambda g: len(g.ops)) if accepted else _Group(shape, [])
            for g in accepted:
                groups.remove(g)
                if g is not merged:
                    merged.ops.extend(g.ops)
                    for o in g.ops:
                        self.group_of[o] = merged
            merged.ops.append(op)
            merged.users = users
            groups.append(merged)
            self.group_of[op] = merged
        fused = [g for g in groups if len(g.ops) >= 2 or _reads_constant_tensor(g)]
        for g in fused:
            g.ops.sort(key=self.pos.__getitem__)
        return fused

    def build(self, group: _Group) -> None:
        """Replace the group's ops by one `msir.fusion` at the last one's place:
        the ops move into its body (moving costs a fraction of cloning and
        erasing them), with the constants they read copied in."""
        members = set(group.ops)
        inputs: list[SSAValue] = []
        for op in group.ops:
            for v in op.operands:
                if v.owner in members or v in inputs or _pullable_constant(v, group.shape):
                    continue
                inputs.append(v)
        outputs = [r for op in group.ops for r in op.results
                   if any(self.block.find_ancestor_op_in_block(u.operation) not in members for u in r.uses)]
        if not outputs:  # a dead chain: left for dce
            return
        body = Block(arg_types=[v.type for v in inputs])
        mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args))
        for arg, v in zip(body.args, inputs):
            if v.name_hint:
                arg.name_hint = v.name_hint
        anchor = group.ops[-1]
        after = anchor.next_op  # the block's terminator at the latest: never None
        for op in group.ops:
            for v in op.operands:
                if v not in mapping and v.owner not in members:  # a constant (or a broadcast of one) to copy in
                    chain = _copy_chain(v)
                    for src in chain:
                        if src not in mapping:
                            scalar = len(chain) == 2 and src is chain[0] and M.shape_of(src.type) != ()
                            c = _rank0_constant(src) if scalar else src.owner.clone(value_mapper=mapping)
                            body.add_op(c)
                            mapping[src] = c.results[0]
            op.detach()
            body.add_op(op)
            if any(v in mapping for v in op.operands):
                op.operands = [mapping.get(v, v) for v in op.operands]
        body.add_op(M.YieldOp(*outputs))
        fusion = M.FusionOp(inputs, [r.type for r in outputs], Region(body))
        fusion.location = anchor.location
        self.block.insert_op_before(fusion, after)
        for r, new in zip(outputs, fusion.results):
            r.replace_uses_with_if(new, lambda use: self.block.find_ancestor_op_in_block(use.operation) is not fusion)
        copied = [v.owner for v in mapping if isinstance(v.owner, (M.ConstantOp, M.BroadcastToOp))
                  and v.owner.parent is self.block]
        for c in reversed(copied):  # broadcasts before the constants they read
            if c.parent is self.block and not c.results[0].uses:
                self.block.erase_op(c)


def fuse_block(block: Block) -> int:
    """Fuse the elementwise chains of one block; returns the number of fusions made."""
    fuser = _BlockFuser(block)
    groups = fuser.form_groups()
    for g in groups:
        fuser.build(g)
    return len(groups)


@dataclass(frozen=True)
class MsirFuse(ModulePass):
    """Group elementwise chains into `msir.fusion` ops (see the module docstring)."""

    name = "msir-fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                # Innermost blocks first: the bodies of msir.if/for/while too.
                blocks = [b for inner in f.walk() for r in inner.regions for b in r.blocks
                          if not isinstance(inner, M.FusionOp)]
                for block in reversed(blocks):
                    fuse_block(block)
