"""The pass registry and the declared pipelines (msir.pipeline): every pass
imports under its name, registering imports nothing, the pipeline text
round-trips through xDSL's parser, and what MSIR_DUMP, MSIR_VERIFY and
MSIR_TIME_PASSES show follows the declared stages."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from msir import pipeline, targets
from msir.compiler import compile_module, make_context
from msir.errors import CompileError
from msir.frontend.driver import spec_of, trace
from msir.pipeline import Pass, Pipeline

CPU = targets.get("cpu")


def chain(x, y):
    a = np.tanh(x) * y + np.exp(-x)
    return np.sum(a * a, axis=0)


def loss(x):
    return np.sum(np.sin(x) * x)


def _traced(fn, *args):
    return trace(fn, [spec_of(a) for a in args])


def _labels(stderr: str, kind: str = "IR after") -> list[str]:
    return re.findall(rf"^// ----- {kind} (.*) -----$", stderr, re.MULTILINE)


@pytest.mark.parametrize("name", list(pipeline.PASSES))
def test_every_registered_pass_imports_under_its_name(name):
    from xdsl.passes import ModulePass

    cls = pipeline.pass_class(name)
    assert issubclass(cls, ModulePass)
    assert cls.name == name
    assert name.startswith("msir-") or "-msir-" in name  # never an xDSL pass's name (STYLE.md)
    assert pipeline.summary(name) and "docstring" not in pipeline.summary(name)


def test_names_that_are_not_msir_passes_are_xdsls():
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    assert pipeline.pass_class("dce") is DeadCodeElimination
    with pytest.raises(KeyError, match="no pass is registered as 'msir-nonexistent'"):
        pipeline.pass_class("msir-nonexistent")


def test_registry_and_targets_import_nothing_heavy():
    code = textwrap.dedent("""
        import sys
        from msir import compiler, targets
        targets.get("cpu")
        compiler.pipeline_options("cpu")
        print(sorted(m for m in sys.modules if m.startswith(("xdsl", "llvmlite", "msir.passes", "msir.lowering.jit",
                                                             "msir.lowering.to_", "msir.frontend"))))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_msir_opt_registers_the_same_passes():
    from msir.tools import msir_opt

    assert not hasattr(msir_opt, "MSIR_PASSES")
    main = msir_opt.MsirOptMain(args=["-p", ""])
    names = list(main.available_passes)
    assert names[: len(pipeline.PASSES)] == list(pipeline.PASSES)  # msir's first
    for name in pipeline.PASSES:
        assert main.available_passes[name]() is pipeline.pass_class(name)


def test_pipeline_text_round_trips_through_xdsl():
    from xdsl.passes import PassPipeline
    from xdsl.utils.arg_spec import parse_pipeline

    declared = Pipeline((
        Pass("dce"),
        Pass("convert-msir-to-loops"),
        Pass("msir-lower-to-llvm", {"math_impl": "libm", "parallel": False}),
    ))
    text = declared.text()
    assert text == 'dce,convert-msir-to-loops,msir-lower-to-llvm{math_impl="libm" parallel=false}'
    available = {name: (lambda name=name: pipeline.pass_class(name)) for name in ("dce", "cse", *pipeline.PASSES)}
    for p in (declared, CPU.pipeline):
        passes = PassPipeline.parse_spec(available, p.text()).passes
        assert [q.name for q in passes] == [s.name for s in p.passes()]
        assert ",".join(str(q.pipeline_pass_spec()) for q in passes) == p.text()
        assert [str(s) for s in parse_pipeline(p.text())] == [s.text() for s in p.passes()]
    lowered = PassPipeline.parse_spec(available, text).passes[-1]
    assert (lowered.math_impl, lowered.parallel) == ("libm", False)


def test_cpu_pipeline_is_the_driver_stages():
    assert CPU.pipeline.text() == (
        "msir-grad-jvp,msir-symbol-dce,msir-forward-arguments,msir-inline,msir-lower-einsum,msir-lower-windows,cse,dce,"
        "msir-fuse,"
        "convert-msir-to-loops,msir-lower-to-llvm"
    )
    assert CPU.pipeline.labels()[-3:] == ["convert-msir-to-loops", "mangle-symbols", "msir-lower-to-llvm"]
    assert [s.label for s in CPU.pipeline.stages if s.verify] == ["msir-inline", "msir-fuse", "convert-msir-to-loops"]


@pytest.mark.parametrize("fn", [chain, loss])
def test_dump_labels_are_the_declared_stages(fn, monkeypatch, capfd):
    import msir

    monkeypatch.setenv("MSIR_DUMP", "1")
    x = np.linspace(0.5, 1.5, 12).reshape(4, 3)
    if fn is loss:
        msir.grad(fn)(x)
    else:
        msir.jit(fn)(x, x)
    err = capfd.readouterr().err
    assert _labels(err) == ["the frontend", *CPU.pipeline.labels()]


def test_each_dumped_stage_parses_back(monkeypatch, capfd):
    from xdsl.parser import Parser

    x = np.ones((4, 3))
    traced = _traced(chain, x, x)
    monkeypatch.setenv("MSIR_DUMP", "1")
    compile_module(traced.module, traced.entry)
    stages = re.split(r"^// ----- IR after .* -----$", capfd.readouterr().err, flags=re.MULTILINE)[1:]
    assert len(stages) == 1 + len(CPU.pipeline.stages)
    for text in stages:
        Parser(make_context(), text).parse_module().verify()


def test_verify_names_the_stage_that_broke_the_module(monkeypatch):
    from xdsl.dialects import func

    from msir.passes.fuse import MsirFuse

    def breaks_the_module(self, ctx, op):
        f = next(o for o in op.ops if isinstance(o, func.FuncOp) and o.body.blocks)
        ret = f.body.blocks[-1].last_op
        f.body.blocks[-1].erase_op(ret)
        f.body.blocks[-1].add_op(func.ReturnOp())  # no result: the function's type says one

    monkeypatch.setattr(MsirFuse, "apply", breaks_the_module)
    x = np.ones(3)
    monkeypatch.setenv("MSIR_VERIFY", "1")
    traced = _traced(loss, x)
    with pytest.raises(CompileError, match="does not verify after msir-fuse"):
        compile_module(traced.module, traced.entry)


def test_time_passes_has_a_row_per_stage_and_the_native_step(monkeypatch, capfd):
    import msir

    monkeypatch.setenv("MSIR_TIME_PASSES", "1")
    monkeypatch.setenv("MSIR_CACHE", "0")
    msir.jit(chain)(np.ones((2, 3)), np.ones((2, 3)))
    err = capfd.readouterr().err
    assert "... msir.jit timing report: @chain for cpu ..." in err
    rows = re.findall(r"^ +[0-9.]+ \( *[0-9.]+%\)  (\S+)$", err, re.MULTILINE)
    assert rows == [*CPU.pipeline.labels(), CPU.native.label, "Total"]


def test_msir_opt_with_the_cpu_pipeline_text_lowers_as_jit(tmp_path, monkeypatch, capfd):
    from xdsl.printer import Printer

    x = np.ones((4, 3), np.float32)
    traced = _traced(chain, x, x)
    path = tmp_path / "chain.mlir"
    with open(path, "w") as f:  # with locations: they become the runtime error sites
        Printer(stream=f, print_debuginfo=True).print_op(traced.module)
    monkeypatch.setenv("MSIR_DUMP", "1")
    compile_module(traced.module, traced.entry)
    jit_ir = capfd.readouterr().err.split("// ----- IR after msir-lower-to-llvm -----\n")[1].strip()
    r = subprocess.run(["msir-opt", str(path), "-p", CPU.pipeline.text()], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    # the same, but for the cpu target's mangle-symbols step, which no pass does
    assert jit_ir.count("@msir.") >= 2
    assert jit_ir.replace("@msir.", "@") == r.stdout.strip()
