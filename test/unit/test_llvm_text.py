"""`msir.lowering.llvm_text`: the llvm-dialect module as LLVM IR text."""

from __future__ import annotations

import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import msir
from heavy_chain import heavy_chain
from msir.compiler import make_context
from msir.errors import CompileError
from msir.frontend.driver import spec_of, trace
from msir.lowering import jit
from msir.lowering.llvm_text import module_text
from xdsl.dialects import llvm as xllvm
from xdsl.dialects.builtin import Float16Type, Float32Type, Float64Type, FloatAttr, IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Block, Region


def _lowered(fn, *args) -> ModuleOp:
    """`fn` traced and run through the CPU pipeline up to the llvm dialect."""
    from msir import pipeline, targets

    module = trace(fn, [spec_of(a) for a in args]).module
    pipeline.run(targets.get(targets.DEFAULT).pipeline, make_context(), module, lambda *_: None)
    return module


def _heavy(x, y):
    return np.sqrt(heavy_chain(x, y) ** 2 + 1.0)


def test_a_lowered_module_prints_as_ir_llvm_parses_and_verifies():
    x = np.linspace(-1, 1, 100_003, dtype=np.float32)
    module = _lowered(_heavy, x, x)
    text = module_text(module, llvm.get_process_triple())
    parsed = llvm.parse_assembly(text)
    parsed.verify()
    assert f'target triple = "{llvm.get_process_triple()}"' in text
    # what xDSL's convert_module drops: libm attributes, vector variants kept
    # alive, the allocator's noalias result, the loop hint, noinline
    assert "memory(none)" in text and "vector-function-abi-variant" in text
    assert "@llvm.compiler.used = appending global" in text
    assert "!llvm.loop !1" in text and '"llvm.loop.vectorize.predicate.enable", i1 true' in text
    assert 'define void @"msir._heavy"(' in text and ") noinline" in text
    assert 'declare float @"llvm.sqrt.f32"(float)' in text


def _optimised(text: str) -> str:
    """`text` through the JIT's LLVM pipeline, without its metadata (loop ids and hints)."""
    mod = llvm.parse_assembly(text)
    jit.optimise(mod, jit._target_machine())
    return re.sub(r", !llvm.loop !\d+|^!.*$", "", str(mod), flags=re.M)


def _heavy_int(x, y):
    return heavy_chain(x.astype(np.float32), y.astype(np.float32)).astype(np.int32) * x + y


@pytest.mark.parametrize("fn,dtype,lanes_per_512", [(_heavy, np.float32, 16), (_heavy, np.float64, 8),
                                                      (_heavy_int, np.int32, 16)])
def test_a_loop_of_one_element_width_asks_for_the_lanes_llvm_would_choose(fn, dtype, lanes_per_512):
    x = np.linspace(-1, 1, 1003).astype(dtype) if dtype != np.int32 else np.arange(1003, dtype=dtype) % 7
    module = _lowered(fn, x, x)
    plain = module_text(module, llvm.get_process_triple())
    assert "vectorize.width" not in plain  # msir-opt -t llvm: the same text on every machine
    with jit._LOCK:
        jit._initialise()
        bits = jit.vector_bits()
    assert bits in (128, 256, 512)
    hinted = module_text(module, llvm.get_process_triple(), "", bits)
    lanes = lanes_per_512 * bits // 512
    assert f'!"llvm.loop.vectorize.width", i32 {lanes}}}' in hinted
    assert re.search(r"!1 = distinct !\{!1, !0, !\d+\}", hinted)
    # the hint only spares LLVM the search: the same optimised code as without it
    assert _optimised(hinted) == _optimised(plain)


def test_the_jit_runs_the_printed_ir():
    x = np.linspace(-1, 1, 1003, dtype=np.float32)
    y = np.full(1003, 0.75, np.float32)
    expected = _heavy(x.astype(np.float64), y.astype(np.float64))  # heavy_chain's body: 8 tanh, 8 exp
    np.testing.assert_allclose(msir.jit(_heavy)(x, y), expected, rtol=1e-5)


def _constant_module(t, value) -> ModuleOp:
    """`@c() -> t { return value }`."""
    block = Block()
    const = xllvm.ConstantOp(value, t)
    block.add_ops([const, xllvm.ReturnOp(const.result)])
    f = xllvm.FuncOp("c", xllvm.LLVMFunctionType([], t), body=Region(block))
    return ModuleOp([f])


@pytest.mark.parametrize(
    "t, value, printed",
    [
        (Float64Type(), 0.1, "double 0x3FB999999999999A"),
        (Float32Type(), 0.1, "float 0x3FB99999A0000000"),  # rounded to float first
        (Float16Type(), 0.1, "half 0x3FB9980000000000"),  # 0.0999755859375
        (Float64Type(), float("inf"), "double 0x7FF0000000000000"),
        (Float32Type(), -0.0, "float 0x8000000000000000"),
        (IntegerType(1), 1, "i1 true"),
        (IntegerType(64), -7, "i64 -7"),
    ],
)
def test_constants_print_exactly(t, value, printed):
    attr = FloatAttr(value, t) if not isinstance(t, IntegerType) else IntegerAttr(value, t)
    text = module_text(_constant_module(t, attr), llvm.get_process_triple())
    assert f"ret {printed}" in text
    llvm.parse_assembly(text).verify()


def test_an_op_it_cannot_print_is_a_compile_error():
    block = Block()
    block.add_ops([xllvm.UnreachableOp()])
    module = ModuleOp([xllvm.FuncOp("u", xllvm.LLVMFunctionType([]), body=Region(block))])
    assert "unreachable" in module_text(module, llvm.get_process_triple())
    block = Block()
    asm = xllvm.InlineAsmOp("nop", "", [], [], has_side_effects=True)
    block.add_ops([asm, xllvm.ReturnOp()])
    module = ModuleOp([xllvm.FuncOp("a", xllvm.LLVMFunctionType([]), body=Region(block))])
    with pytest.raises(CompileError, match="LLVM export failed: no LLVM IR for llvm.inline_asm"):
        jit.compile_llvm_module(module)
