"""msir-shard's refusals: each a CompileError naming the problem at the op's location."""

import pytest
from xdsl.parser import Parser

from msir.compiler import make_context
from msir.errors import CompileError, SourceLoc
from msir.passes.shard import MsirShard

MATMUL = ('%y = msir.matmul %x, %w {{msir_shard.strategy = #msir_shard.strategy<@mesh, "{s}">}} : '
          'tensor<{m}x4xf32>, tensor<4x6xf32> to tensor<{m}x6xf32> loc("model.py":3:5)')


def _function(body: str, args: str, result: str, mesh: str = "msir_shard.mesh @mesh(shape = {})", shape="2") -> str:
    head = mesh.format(shape) + "\n" if mesh else ""
    return (f"{head}func.func @f({args}) -> {result} {{\n  {body}\n  func.return %y : {result}\n}}\n")


CASES = {
    "entries": (_function(MATMUL.format(s="m", m=8), "%x: tensor<8x4xf32>, %w: tensor<4x6xf32>", "tensor<8x6xf32>",
                          shape="2x2"),
                "strategy #msir_shard.strategy<@mesh, \"m\"> of 'msir.matmul' has 1 entries; the mesh @mesh has 2 axes"),
    "letter": (_function(MATMUL.format(s="z", m=8), "%x: tensor<8x4xf32>, %w: tensor<4x6xf32>", "tensor<8x6xf32>"),
               "strategy #msir_shard.strategy<@mesh, \"z\"> of 'msir.matmul' puts mesh axis 0 (size 2) on loop 'z', "
               "which is not one of the op's loops m, n, k"),
    "divides": (_function(MATMUL.format(s="m", m=6), "%x: tensor<6x4xf32>, %w: tensor<4x6xf32>", "tensor<6x6xf32>",
                          shape="4"),
                "strategy #msir_shard.strategy<@mesh, \"m\"> of 'msir.matmul' splits loop 'm' (size 6) 4 ways, which "
                "does not divide it"),
    "min": (_function('%y = msir.reduce_min %x axes array<i64: 1> {msir_shard.strategy = '
                       '#msir_shard.strategy<@mesh, "n">} : tensor<4x6xf32> to tensor<4xf32> loc("model.py":3:5)',
                       "%x: tensor<4x6xf32>", "tensor<4xf32>"),
             "strategy #msir_shard.strategy<@mesh, \"n\"> splits a reduced loop of 'msir.reduce_min', which only a "
             "reduce_sum, reduce_mean or reduce_max can combine across devices"),
    "view": (_function('%y = msir.broadcast_to %b {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : '
                       'tensor<6xf32> to tensor<4x6xf32> loc("model.py":3:5)', "%b: tensor<6xf32>", "tensor<4x6xf32>"),
             "'msir.broadcast_to' is a view, which takes its consumer's layout; put the strategy on the op that "
             "reads it"),
    "no mesh": (_function('%y = msir.neg %x {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : '
                          'tensor<4xf32> loc("model.py":3:5)', "%x: tensor<4xf32>", "tensor<4xf32>", mesh=""),
                "function @f names mesh @mesh, which is not a msir_shard.mesh of the module"),
    "unsplittable operand": (
        _function('%y = msir.matmul %x, %w {msir_shard.strategy = #msir_shard.strategy<@mesh, "n">} : '
                  'tensor<8x4xf32>, tensor<4x6xf32> to tensor<8x6xf32> loc("model.py":3:5)',
                  "%x: tensor<8x4xf32>, %w: tensor<4x6xf32>", "tensor<8x6xf32>", shape="4"),
        "strategy #msir_shard.strategy<@mesh, \"n\"> of 'msir.matmul' splits loop 'n' (size 6) 4 ways, which does "
        "not divide it"),
}


@pytest.mark.parametrize("case", CASES)
def test_refusal_names_the_problem_at_the_op(case):
    text, message = CASES[case]
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(CompileError) as e:
        MsirShard().apply(make_context(), module)
    assert e.value.message == "msir-shard: " + message
    assert e.value.loc == SourceLoc("model.py", 3, 5)


def test_argument_layout_that_does_not_divide():
    text = ('msir_shard.mesh @mesh(shape = 2)\n'
            'func.func @f(%x: tensor<3x4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[0],[]]>}) '
            '-> tensor<3x4xf32> {\n  %y = msir.neg %x : tensor<3x4xf32>\n  func.return %y : tensor<3x4xf32>\n}'
            ' loc("model.py":1:1)\n')
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(CompileError) as e:
        MsirShard().apply(make_context(), module)
    assert e.value.message == ("msir-shard: argument 0 of @f: layout #msir_shard.layout<@mesh, dims=[[0],[]]> splits "
                               "dimension 0 (size 3) 2 ways, which does not divide it")
    assert e.value.loc == SourceLoc("model.py", 1, 1)


def test_two_meshes_in_one_function():
    text = ('msir_shard.mesh @a(shape = 2)\nmsir_shard.mesh @b(shape = 2)\n'
            'func.func @f(%x: tensor<4xf32> {msir_shard.layout = #msir_shard.layout<@b, dims=[[0]]>}) -> tensor<4xf32> {\n'
            '  %y = msir.neg %x {msir_shard.strategy = #msir_shard.strategy<@a, "n">} : tensor<4xf32> loc("model.py":3:5)\n'
            '  func.return %y : tensor<4xf32>\n} loc("model.py":2:1)\n')
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(CompileError) as e:
        MsirShard().apply(make_context(), module)
    assert e.value.message == "msir-shard: function @f uses two meshes, @a and @b"
    assert e.value.loc == SourceLoc("model.py", 2, 1)  # where the second mesh is named: an argument of @f


def test_partial_argument_layout():
    text = ('msir_shard.mesh @mesh(shape = 2)\n'
            'func.func @f(%x: tensor<4xf32> {msir_shard.layout = #msir_shard.layout<@mesh, dims=[[]], partial=[0]>}) '
            '-> tensor<4xf32> {\n  %y = msir.neg %x : tensor<4xf32>\n  func.return %y : tensor<4xf32>\n}'
            ' loc("model.py":1:1)\n')
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(CompileError) as e:
        MsirShard().apply(make_context(), module)
    assert e.value.message == ("msir-shard: argument 0 of @f cannot be partial "
                               "(#msir_shard.layout<@mesh, dims=[[]], partial=[0]>)")
    assert e.value.loc == SourceLoc("model.py", 1, 1)
