"""`msir.verify`: xDSL's verifier plus SSA dominance, each error located at the
failing op; through `msir-opt` and `msir-run`, one diagnostic and exit status 1."""

from __future__ import annotations

import pytest

from msir.compiler import make_context
from msir.tools import msir_opt, msir_run
from msir.verify import IRVerificationError, parse_module, verify_module

USE_BEFORE_DEF = """func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = msir.neg %1 : tensor<4xf32>
  %1 = msir.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""

OUTSIDE_ITS_REGION = """func.func @f(%x: tensor<f64>, %n: tensor<i64>) -> tensor<f64> {
  %c0 = msir.constant dense<0> : tensor<i64>
  %c1 = msir.constant dense<1> : tensor<i64>
  %0 = msir.for %c0 to %n step %c1 (%x) : (tensor<f64>) {
  ^bb0(%i: tensor<i64>, %acc: tensor<f64>):
    %1 = msir.exp %acc : tensor<f64>
    msir.yield %1 : tensor<f64>
  }
  %2 = msir.neg %1 : tensor<f64>
  func.return %2 : tensor<f64>
}
"""

DANGLING_CLOSURE = """func.func @f(%x: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.closure @cube() : (tensor<3xf64>) -> tensor<f64>
  %1 = msir.apply %0(%x) : (tensor<3xf64>) -> tensor<f64>
  func.return %1 : tensor<f64>
}
"""

MISTYPED_CLOSURE = """func.func private @g(%x: tensor<3xf64>, %w: tensor<3xf64>) -> tensor<f64> {
  %0 = msir.mul %x, %w : tensor<3xf64>
  %1 = msir.reduce_sum %0 axes array<i64: 0> : tensor<3xf64> to tensor<f64>
  func.return %1 : tensor<f64>
}
func.func @f(%x: tensor<3xf64>, %w: tensor<3xf32>) -> tensor<f64> {
  %0 = msir.closure @g(%w) : (tensor<3xf64>) -> tensor<f64> captures tensor<3xf32>
  %1 = msir.apply %0(%x) : (tensor<3xf64>) -> tensor<f64>
  func.return %1 : tensor<f64>
}
"""

BAD_AXIS = """func.func @f(%x: tensor<4xf64>) -> tensor<f64> {
  %0 = msir.reduce_sum %x axes array<i64: 5> : tensor<4xf64> to tensor<f64>
  func.return %0 : tensor<f64>
}
"""

OUT_OF_RANGE_CONSTANT = """func.func @f() -> tensor<i64> {
  %0 = msir.constant dense<1180591620717411303424> : tensor<i64>
  func.return %0 : tensor<i64>
}
"""


def _verify(text: str) -> None:
    module, sources = parse_module(make_context(), text, "in.mlir")
    verify_module(module, sources)


@pytest.mark.parametrize("text, where, message", [
    (USE_BEFORE_DEF, "in.mlir:2:3", "operand 0 of 'msir.neg' is used before its definition"),
    (DANGLING_CLOSURE, "in.mlir:2:3", "'msir.closure' callee @cube is not defined in the module"),
    (MISTYPED_CLOSURE, "in.mlir:7:3", "'msir.closure' of @g has type (tensor<3xf64>) -> tensor<f64> with captures "
                                      "(tensor<3xf32>), so the callee must be (tensor<3xf64>, tensor<3xf32>) -> "
                                      "tensor<f64>, but it is (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>"),
    (BAD_AXIS, "in.mlir:2:3", "'msir.reduce_sum' axis 5 is out of bounds for array of dimension 1"),
])
def test_each_error_is_located_at_its_op(text, where, message):
    with pytest.raises(IRVerificationError) as info:
        _verify(text)
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"{where}: error: {message}"), first
    assert str(info.value).splitlines()[1] == text.splitlines()[int(where.split(":")[1]) - 1]


def test_valid_ir_verifies():
    _verify(OUTSIDE_ITS_REGION.replace("%2 = msir.neg %1", "%2 = msir.neg %0"))


@pytest.mark.parametrize("tool", ["msir-opt", "msir-run"])
@pytest.mark.parametrize("text, message", [
    (USE_BEFORE_DEF, "operand 0 of 'msir.neg' is used before its definition"),
    (DANGLING_CLOSURE, "'msir.closure' callee @cube is not defined"),
    (OUT_OF_RANGE_CONSTANT, "Integer value 1180591620717411303424 is out of range for type i64"),
])
def test_the_tools_print_one_located_error(tool, text, message, tmp_path, capsys):
    path = tmp_path / "in.mlir"
    path.write_text(text)
    argv = [str(path)] if tool == "msir-opt" else [str(path), "--entry", "f"]
    with pytest.raises(SystemExit) as info:
        (msir_opt.main if tool == "msir-opt" else msir_run.main)(argv)
    err = capsys.readouterr().err
    assert info.value.code == 1
    assert err.startswith(f"{path}:") and f": error: {message}" in err.splitlines()[0], err
    assert "Traceback" not in err


def test_a_value_moved_out_of_its_region_or_below_its_use_is_refused_after_the_stage():
    """What only a pass can produce (the parser scopes names): the errors name the stage."""
    valid = OUTSIDE_ITS_REGION.replace("%2 = msir.neg %1", "%2 = msir.neg %0")
    module, sources = parse_module(make_context(), valid, "in.mlir")
    fn = list(module.body.block.ops)[0]
    loop = next(op for op in fn.body.block.ops if op.name == "msir.for")
    neg = loop.next_op
    exp = loop.body.block.first_op
    neg.operands = [exp.results[0]]  # a loop body's value used after the loop
    with pytest.raises(IRVerificationError, match=r"in.mlir:9:3: error: operand 0 of 'msir.neg' is defined in a "
                                                  r"region that does not enclose its use \(after msir-test\)"):
        verify_module(module, sources, stage="after msir-test")
    neg.operands = [loop.results[0]]
    neg.detach()
    fn.body.block.insert_op_before(neg, loop)  # above the loop whose result it reads
    with pytest.raises(IRVerificationError, match=r"operand 0 of 'msir.neg' is used before its definition"):
        verify_module(module, sources)
