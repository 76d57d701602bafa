"""The module verifier every msir entry point runs: xDSL's, plus the SSA
dominance check xDSL omits, with each error located at the op that fails.

`verify_module(module, sources)` raises `IRVerificationError`, an msir error
whose text is one diagnostic in `mlir-opt`'s form:

    f.mlir:3:8: error: 'msir.reduce_sum' axis 5 is out of bounds for array of dimension 1
      %0 = msir.reduce_sum %x axes array<i64: 5> : tensor<4xf64> to tensor<f64>
           ^

The op's place comes from `sources` (the spans `parse_module` recorded, for
IR read from text), else from the op's own `FileLineColLoc` (IR the frontend
built from Python), else the error names the op and its function.

What xDSL's `Operation.verify` does not check and this does:

* **dominance**: an operand is defined before its use, in the same block or
  in a block enclosing it (between the blocks of one CFG region, as the llvm
  dialect's functions have, dominance is not checked; xDSL accepts `%0 = msir.neg %1` above `%1`'s
  definition, and a pass then fails inside with a KeyError);
* a verifier that raises something other than `VerifyException` (a bare
  `ValueError`, an `OverflowError`, an `AssertionError` of a constructor) is
  reported as the op's verification error, not as an internal traceback.

`parse_module(ctx, text, name)` is xDSL's parser recording where each op
starts (`SourceMap`), for `msir-opt` and `msir-run`; a value that an op's,
attribute's or type's constructor refuses while parsing (`dense<2**70> :
tensor<i64>`, `arith.addf ... : i1`) is a `ParseError` at the token reached,
not the constructor's bare `ValueError` or `VerifyException`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from xdsl.utils.exceptions import ParseError

from msir.errors import MsirError

if TYPE_CHECKING:
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Operation
    from xdsl.utils.lexer import Span


class IRVerificationError(MsirError):
    """A module that does not verify, located at the failing op: its text is
    the whole diagnostic (`located`)."""

    def __init__(self, diagnostic: str, problem: str):
        super().__init__(diagnostic)
        self.diagnostic = diagnostic
        self.problem = problem
        """The message alone, without its location."""

    def __str__(self) -> str:
        return self.diagnostic


class SourceMap:
    """Where each parsed op starts in its text (ops are held weakly: an op a
    pass erased is forgotten, and a new op at a recycled address is not found)."""

    def __init__(self) -> None:
        self._spans: dict[int, tuple[weakref.ref, Span]] = {}

    def record(self, op: Operation, span: Span) -> None:
        self._spans[id(op)] = (weakref.ref(op), span)

    def span(self, op: Operation) -> Span | None:
        entry = self._spans.get(id(op))
        if entry is None or entry[0]() is not op:
            return None
        return entry[1]


class RefusedWhileParsing(ParseError):
    """A constructor's refusal of a parsed value, at the token reached;
    `problem` is the message alone (`msir-opt --verify-diagnostics` prints it)."""

    def __init__(self, span: Span, problem: str):
        super().__init__(span, problem)
        self.problem = problem


def parse_module(ctx: Context, text: str, name: str) -> tuple[ModuleOp, SourceMap]:
    """Parse `text` (a module, or ops that become one) recording each op's start."""
    from xdsl.parser import Parser

    sources = SourceMap()

    class _LocatingParser(Parser):
        def pos_span(self) -> Span:
            """The token the parser stopped at: where a constructor's refusal is reported."""
            return self._current_token.span

        def parse_operation(self) -> Operation:
            start = self._current_token.span
            op = super().parse_operation()
            sources.record(op, start)
            return op

    parser = _LocatingParser(ctx, text, name)
    try:
        return parser.parse_module(), sources
    except ParseError:
        raise
    except Exception as e:  # an op's, attribute's or type's constructor refusing what was parsed
        raise RefusedWhileParsing(parser.pos_span(), _message(e)) from None


def located(op: Operation | None, message: str, sources: SourceMap | None = None) -> str:
    """`message` as a diagnostic at `op` (see the module docstring)."""
    from xdsl.dialects.builtin import FileLineColLoc

    if op is None:
        return f"error: {message}"
    span = sources.span(op) if sources is not None else None
    if span is not None:
        context = span.print_with_context("").rstrip().splitlines()[1:]
        return "\n".join([f"{span.get_location()}: error: {message}", *context])
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}: error: {message}"
    fn = op.parent_op()
    while fn is not None and getattr(fn, "sym_name", None) is None:
        fn = fn.parent_op()
    where = f" in @{fn.sym_name.data}" if fn is not None else ""
    return f"error: {message} ('{op.name}'{where})"


def _own_checks(op: Operation) -> None:
    """The checks of `op` itself, not of the ops nested in it."""
    from xdsl.traits import NoTerminator
    from xdsl.utils.exceptions import VerifyException

    op.verify(verify_nested_ops=False)
    for region in op.regions:
        for block in region.blocks:
            if block.parent is not region:
                raise VerifyException("a block's parent pointer does not refer to its region")
            if not block.ops and len(region.blocks) == 1 and not op.has_trait(NoTerminator):
                raise VerifyException(f"Operation {op.name} contains empty block in single-block region "
                                      "that expects at least a terminator")


def _message(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0] if "\n" in text and len(text) > 400 else text


def _first_failure(module: ModuleOp) -> tuple[Operation, Exception] | None:
    for op in module.walk():
        try:
            _own_checks(op)
        except Exception as e:  # any verifier's failure is the op's, whatever it raises
            return op, e
    return None


def _block_order(block: Block, cache: dict[int, dict[int, int]]) -> dict[int, int]:
    order = cache.get(id(block))
    if order is None:
        order = cache[id(block)] = {id(o): i for i, o in enumerate(block.ops)}
    return order


def _dominance_failure(module: ModuleOp) -> tuple[Operation, str] | None:
    """The first op with an operand its definition does not dominate."""
    from xdsl.ir import BlockArgument, OpResult

    orders: dict[int, dict[int, int]] = {}
    for op in module.walk():
        for index, value in enumerate(op.operands):
            if isinstance(value, OpResult):
                def_op = value.op
                def_block = def_op.parent
            elif isinstance(value, BlockArgument):
                def_op, def_block = None, value.block
            else:
                continue
            region = def_block.parent
            user = op  # climb to the ancestor of `op` that lives in `def_block`'s region
            while user is not None and (user.parent is None or user.parent.parent is not region):
                user = user.parent_op()
            if user is None:
                return op, f"operand {index} of '{op.name}' is defined in a region that does not enclose its use"
            if user.parent is not def_block:
                continue  # another block of a CFG region (the llvm dialect's): dominance there is the CFG's
            if def_op is not None:
                order = _block_order(def_block, orders)
                if order.get(id(def_op), -1) >= order.get(id(user), -1):
                    return op, f"operand {index} of '{op.name}' is used before its definition"
    return None


def verify_module(module: ModuleOp, sources: SourceMap | None = None, stage: str = "") -> None:
    """Verify `module`; raise `IRVerificationError` at the first op that fails.
    `stage` (e.g. "after msir-fuse") is added to the message."""
    suffix = f" ({stage})" if stage else ""
    try:
        module.verify()
    except Exception as e:  # xDSL verifiers raise more than VerifyException
        found = _first_failure(module)
        op, error = found if found is not None else (None, e)
        problem = _message(error) + suffix
        raise IRVerificationError(located(op, problem, sources), problem) from None
    bad = _dominance_failure(module)
    if bad is not None:
        problem = bad[1] + suffix
        raise IRVerificationError(located(bad[0], problem, sources), problem)
