"""The bufferiser on its own (lowering/bufferize.py): its plan for msir
functions, read without the loop emitter, as another target would read it;
and the import structure of the lowering (no cycle, no emitter below the
bufferiser)."""

from __future__ import annotations

import ast
import pathlib

import pytest
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser

from msir.dialects import msir
from msir.dialects.msir import Msir
from msir.errors import CompileError
from msir.lowering import bufferize
from msir.lowering.bufferize import FunctionPlanner, ModulePlan, PushMode, Schedule, SlotKind


def _module(src: str):
    ctx = Context()
    for d in (Builtin, func.Func, arith.Arith, Msir):
        ctx.load_dialect(d)
    return Parser(ctx, src).parse_module()


def _plan(src: str, name: str = "f", schedule=None):
    module = _module(src)
    f = next(op for op in module.ops if op.sym_name.data == name)
    planner = FunctionPlanner(ModulePlan(module, "test"), f)
    return f, planner.plan(schedule(planner) if schedule else None)


def _ops(f, cls):
    return [op for op in f.walk() if isinstance(op, cls)]


def test_outputs_views_and_frees():
    f, plan = _plan("""
    func.func @f(%a: tensor<4x2xf32>) -> (tensor<8xf32>, tensor<4x2xf32>) {
      %r = msir.reshape %a : tensor<4x2xf32> to tensor<4x2xf32>
      %e = msir.exp %r : tensor<4x2xf32>
      %s = msir.reshape %e : tensor<4x2xf32> to tensor<8xf32>
      %t = msir.neg %s : tensor<8xf32>
      func.return %t, %a : tensor<8xf32>, tensor<4x2xf32>
    }""")
    reshape_id, reshape = _ops(f, msir.ReshapeOp)
    (exp,), (neg,) = _ops(f, msir.ExpOp), _ops(f, msir.NegOp)
    assert plan.signature.out_positions == (0, 1) and plan.signature.ret_positions == ()
    assert reshape_id in plan.folded and plan.canon(reshape_id.result) is f.body.block.args[0]
    assert reshape not in plan.folded  # a real reshape gets a buffer of its own
    # neg writes output 0; the returned argument is copied into output 1 (it has no producer)
    assert plan.outputs == {neg.result: 0}
    assert plan.frees[reshape] == [exp.result]  # exp's buffer dies where the reshape read it
    assert plan.frees[neg] == [reshape.result]


_LOOP = """
func.func @f(%h0: tensor<8xf32>, %n: tensor<i64>) -> tensor<8xf32> {
  %zero = msir.constant dense<0> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %r = msir.for %zero to %n step %one (%h0) : (tensor<8xf32>) {
  ^bb0(%i: tensor<i64>, %h: tensor<8xf32>):
    BODY
  }
  func.return %r : tensor<8xf32>
}"""


@pytest.mark.parametrize("body, kind", [
    ("%t = msir.tanh %h : tensor<8xf32>\n msir.yield %t : tensor<8xf32>", SlotKind.INPLACE),
    ("%t = msir.tanh %h : tensor<8xf32>\n %u = msir.add %t, %h : tensor<8xf32>\n msir.yield %t : tensor<8xf32>",
     SlotKind.PINGPONG),
    ("msir.yield %h0 : tensor<8xf32>", SlotKind.COPY),
    ("msir.yield %h : tensor<8xf32>", SlotKind.SAME),
])
def test_loop_slot_kinds(body, kind):
    f, plan = _plan(_LOOP.replace("BODY", body))
    (loop,) = _ops(f, msir.ForOp)
    (slot,) = plan.loops[loop].slots
    assert slot.kind == kind
    assert not slot.movable  # h0 is an argument: the loop's result lives in the output buffer
    assert plan.outputs == {loop.results[0]: 0}


def test_tape_push_in_a_loop_appends_in_place():
    f, plan = _plan("""
    func.func @f(%x: tensor<3xf64>, %n: tensor<i64>) -> tensor<?x3xf64> {
      %zero = msir.constant dense<0> : tensor<i64>
      %one = msir.constant dense<1> : tensor<i64>
      %t0 = msir.tape_alloc %zero : tensor<i64> to tensor<?x3xf64>
      %r = msir.for %zero to %n step %one (%t0) : (tensor<?x3xf64>) {
      ^bb0(%i: tensor<i64>, %t: tensor<?x3xf64>):
        %s = msir.sin %x : tensor<3xf64>
        %t2 = msir.tape_push %t, %s : tensor<?x3xf64>, tensor<3xf64>
        msir.yield %t2 : tensor<?x3xf64>
      }
      func.return %r : tensor<?x3xf64>
    }""")
    (loop,), (push,), (sin,) = _ops(f, msir.ForOp), _ops(f, msir.TapePushOp), _ops(f, msir.SinOp)
    (slot,) = plan.loops[loop].slots
    assert slot.kind == SlotKind.MOVE and slot.movable  # the loop takes over the tape's buffer
    assert plan.reserves == {sin: [push]} and plan.pushes[push] == PushMode.WRITTEN  # sin writes the row
    assert plan.loops[loop].adopt == [True] and plan.loops[loop].consumed == [True]
    assert loop.results[0] in plan.resized and not plan.outputs  # a tape is returned, not an output


def test_donation_pairs_and_refusals():
    f, plan = _plan("""
    func.func @f(%w: tensor<4xf32> {msir.donate}, %b: tensor<4xf32> {msir.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
      %nw = msir.neg %w : tensor<4xf32>
      %nb = msir.add %b, %b : tensor<4xf32>
      %m = msir.mul %b, %b : tensor<4xf32>
      func.return %nw, %nb : tensor<4xf32>, tensor<4xf32>
    }""")
    assert plan.donation.pairs == {0: 0}
    assert plan.donation.refused == ["argument 1 ('b'): 'msir.mul' reads it after 'msir.add' writes output 1"]


def test_schedule_absorbed_producer_and_row_group():
    src = """
    func.func @f(%x: tensor<4x8xf32>, %y: tensor<8x8xf32>) -> tensor<4x1xf32> {
      %m = msir.matmul %x, %y : tensor<4x8xf32>, tensor<8x8xf32> to tensor<4x8xf32>
      %s = msir.add %x, %m : tensor<4x8xf32>
      %e = msir.exp %s : tensor<4x8xf32>
      %r = msir.reduce_sum %e axes array<i64: 1> : tensor<4x8xf32> to tensor<4x1xf32>
      %o = msir.neg %r : tensor<4x1xf32>
      func.return %o : tensor<4x1xf32>
    }"""

    def schedule(planner):
        mm, add, exp, red = planner.body_ops[:4]
        return Schedule(absorbed={add: mm}, row_groups={exp: [exp, red]})

    f, plan = _plan(src, schedule=schedule)
    (mm,), (add,), (exp,), (red,) = (_ops(f, c) for c in (msir.MatmulOp, msir.AddOp, msir.ExpOp, msir.ReduceSumOp))
    assert mm in plan.folded  # the add computes the product in its own code: no buffer
    group = plan.row_groups[exp]
    # exp's result is read only in the group's row loop: one row; the reduction's is read after it
    assert group.ops == [exp, red] and group.one_row == {exp.result: True, red.result: False}
    assert plan.frees[exp] == [add.result]


def test_errors_name_the_pass():
    with pytest.raises(CompileError, match="my-pass: 'func.func' @f: a tuple cannot cross a function boundary"):
        ModulePlan(_module("""
        func.func @f(%a: tuple<tensor<f32>>) {
          func.return
        }"""), "my-pass")


# -- the import structure --------------------------------------------------------

_ROOT = pathlib.Path(bufferize.__file__).resolve().parent.parent


def _imports() -> dict[str, set[str]]:
    """msir.lowering.* and msir.cache -> the msir modules they import (any import
    statement, at any level of the file)."""
    files = {f"msir.lowering.{p.stem}": p for p in (_ROOT / "lowering").glob("*.py") if p.stem != "__init__"}
    files["msir.cache"] = _ROOT / "msir" / "cache.py"
    graph = {}
    for name, path in files.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.update(f"{node.module}.{a.name}" for a in node.names)
                deps.add(node.module)
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def test_lowering_has_no_import_cycle():
    graph = _imports()
    seen: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for d in sorted(graph[m]):
            assert seen.get(d) != 1, " -> ".join([*path, m, d])
            if d not in seen:
                visit(d, [*path, m])
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m, [])


def test_bufferiser_knows_no_target():
    graph = _imports()
    assert graph["msir.lowering.bufferize"] <= {"msir.lowering.loops_abi"}
    assert "msir.lowering.to_llvm" not in graph["msir.lowering.parallel_outline"]
