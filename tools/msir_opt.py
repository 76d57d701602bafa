"""`msir-opt`: the msir pass driver, in the manner of `mlir-opt`/`xdsl-opt`.

It is xDSL's opt driver with the msir dialect and msir's passes registered
(`msir.pipeline.PASSES`, the registry the compile driver uses; `--help`
lists them with a summary each, before xDSL's), plus a Python frontend:
`msir-opt model.py --entry loss --args 'tensor<32x64xf32>,f64'` prints the
`msir` IR of function `loss` specialised to those argument types.

    msir-opt f.mlir -p convert-msir-to-loops,msir-lower-to-llvm -t llvm

`-t llvm` prints the LLVM IR the JIT compiles (`msir.lowering.llvm_text`).

A target's pipeline text (`msir.targets.get("cpu").pipeline.text()`) given to
`-p` lowers a module as `msir.jit` does, but for the target's steps (the CPU
JIT's symbol mangling). `--time-passes` prints a table of the passes' times
on stderr. `--emit-dot` prints the result as a Graphviz graph instead of
text (`msir.viz.ir_graph`).
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import re
import sys
import textwrap
import time
from typing import IO

from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Input, Span
from xdsl.xdsl_opt_main import xDSLOptMain

from msir import pipeline
from msir.errors import MsirError
from msir.verify import IRVerificationError, RefusedWhileParsing, parse_module, verify_module
from msir.viz.ir_graph import MAX_REGION_OPS


def fail(tool: str, message: str) -> SystemExit:
    """A command-line mistake: one line on stderr, exit status 1, no traceback."""
    return SystemExit(f"{tool}: error: {message}")


# A comment, or a string literal as xDSL's lexer accepts it but without the
# nested quantifier of its regex `"(?:[^"...]+|...)*"`: on a literal that does
# not close, that one backtracks through every split of the text (minutes for
# 30 characters); this one fails in linear time.
_QUOTE_OR_COMMENT = re.compile(r'"|//')
_STRING_OR_COMMENT = re.compile(r'//[^\n]*|"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')


def check_string_literals(text: str, name: str) -> None:
    """Reject a string literal that does not close before xDSL's lexer meets it,
    as a ParseError at its opening quote."""
    pos = 0
    while (start := _QUOTE_OR_COMMENT.search(text, pos)) is not None:
        m = _STRING_OR_COMMENT.match(text, start.start())
        if m is None:
            raise ParseError(Span(start.start(), start.start() + 1, Input(text, name)), "unterminated string literal")
        pos = m.end()


def format_parse_error(e: ParseError) -> str:
    """xDSL prints "loc\n  line\n  ^^^\n  msg": as "loc: error: msg" then the line."""
    context = e.span.print_with_context("").rstrip().splitlines()[1:]
    return "\n".join([f"{e.span.get_location()}: error: {e.msg}", *context])


class _PassListing:
    """The end of `--help`: msir's passes with a summary each, then xDSL's.
    Built only when help is printed: the summaries import every msir pass."""

    def __init__(self, xdsl_names: list[str]):
        self.xdsl_names = xdsl_names

    def __str__(self) -> str:
        width = max(len(name) for name in pipeline.PASSES) + 2
        lines = ["msir passes:"]
        lines += [f"  {name:<{width}}{pipeline.summary(name)}" for name in pipeline.PASSES]
        lines += ["", "xDSL passes:"]
        lines += textwrap.wrap(", ".join(sorted(self.xdsl_names)), 78, initial_indent="  ", subsequent_indent="  ",
                               break_on_hyphens=False)
        return "\n".join(lines)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    def add_text(self, text):
        super().add_text(str(text) if isinstance(text, _PassListing) else text)


def _ascend_dialect():
    from msir.dialects.ascend import Ascend

    return Ascend


def _shard_dialect():
    from msir.dialects.msir_shard import MsirShard

    return MsirShard


class MsirOptMain(xDSLOptMain):
    _sources = None
    """Where each op of the parsed input starts (`msir.verify.SourceMap`), for located errors."""

    def register_all_dialects(self):
        super().register_all_dialects()
        from msir.dialects.msir import Msir

        self.ctx.register_dialect("msir", lambda: Msir)
        self.ctx.register_dialect("ascend", _ascend_dialect)
        self.ctx.register_dialect("msir_shard", _shard_dialect)

    def register_all_passes(self):
        # msir's first: `-p`'s list in --help starts with them
        for name in pipeline.PASSES:
            self.register_pass(name, lambda name=name: pipeline.pass_class(name))
        super().register_all_passes()

    def setup_pipeline(self):
        """xDSL's pipeline, verifying and printing between passes as xDSL does;
        `--time-passes` reports on stderr, so that stdout stays the IR."""
        timings: list[tuple[str, float]] = []
        start = time.perf_counter()

        def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
            nonlocal start
            if following is not None and following.name in pipeline.PASSES:
                pipeline.refuse_target_ops(module, following.name)
            if previous is not None:
                timings.append((str(previous.pipeline_pass_spec()), time.perf_counter() - start))
            if not self.args.disable_verify and previous is not None:  # the input was verified when parsed
                try:
                    verify_module(module, self._sources)
                except IRVerificationError as e:  # a pass produced invalid IR: a bug of that pass
                    raise MsirError(f"internal error: the IR does not verify after {previous.name}:\n{e}") from None
            if previous is not None and following is not None and self.args.print_between_passes:
                print(f"IR after {previous.name}:")
                Printer(stream=sys.stdout).print_op(module)
                print("\n\n\n")
            if following is None and self.args.time_passes and timings:
                print(pipeline.timing_report(timings), file=sys.stderr)
                timings.clear()
            start = time.perf_counter()

        self._check_pass_names()
        self.pipeline = PassPipeline.parse_spec(self.available_passes, self.args.passes, callback)

    def _check_pass_names(self) -> None:
        from xdsl.utils.arg_spec import parse_pipeline

        for spec in parse_pipeline(self.args.passes):
            if spec.name not in self.available_passes:
                close = difflib.get_close_matches(spec.name, self.available_passes, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else " (msir-opt --help lists them)"
                raise fail("msir-opt", f"unknown pass '{spec.name}'{hint}")

    def output_resulting_program(self, prog: ModuleOp) -> str:
        if self.args.emit_dot:
            from msir.viz.ir_graph import to_dot

            return to_dot(prog, max_region_ops=self.args.dot_max_region_ops)
        if self.args.target.split("{")[0] == "llvm":
            _check_lowered_to_llvm(prog)
        return super().output_resulting_program(prog)

    def register_all_targets(self):
        super().register_all_targets()
        self.available_targets["llvm"] = _print_llvm

    def register_all_frontends(self):
        super().register_all_frontends()
        self.available_frontends["py"] = lambda io: None  # handled in parse_chunk

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        super().register_all_arguments(arg_parser)
        arg_parser.formatter_class = _HelpFormatter
        arg_parser.epilog = _PassListing([n for n in self.available_passes if n not in pipeline.PASSES])
        arg_parser.add_argument(
            "--entry", type=str, default=None, help="Python input: the function to compile"
        )
        arg_parser.add_argument(
            "--emit-dot", action="store_true",
            help="print the resulting IR as a Graphviz graph (DOT text; 'dot -Tsvg' draws it)",
        )
        arg_parser.add_argument(
            "--dot-max-region-ops", type=int, default=MAX_REGION_OPS, metavar="N",
            help="with --emit-dot: draw a loop, if or fusion holding more than N ops as one node",
        )
        arg_parser.add_argument(
            "--args",
            type=str,
            default="",
            help="Python input: comma-separated argument types, e.g. "
            "'tensor<4x8xf32>,f64,i64' (f64 = Python float, i64 = Python int)",
        )

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        if (self.args.frontend or file_extension) != "py":
            text = chunk.read().decode()
            check_string_literals(text, self.get_input_name())
            if (self.args.frontend or file_extension) == "mlir" and not self.args.no_implicit_module \
                    and start_offset == 0:
                try:
                    module, self._sources = parse_module(self.ctx, text, self.get_input_name())
                except RefusedWhileParsing as e:
                    if self.args.verify_diagnostics:  # as xDSL reports a constructor's refusal
                        raise VerifyException(e.problem) from None
                    raise
            else:
                module = super().parse_chunk(io.BytesIO(text.encode()), file_extension, start_offset)
                self._sources = None
            if module is not None and not self.args.disable_verify:
                try:
                    verify_module(module, self._sources)
                except IRVerificationError as e:
                    if self.args.verify_diagnostics:  # xDSL's mode prints a DiagnosticException's message
                        raise VerifyException(e.problem) from None
                    raise
            return module
        from msir.frontend.driver import module_from_file

        self._check_python_arguments(chunk.read().decode())
        return module_from_file(self.args.input_file, self.args.entry, self.args.args)

    def _check_python_arguments(self, source: str) -> None:
        """--entry and --args against the function's parameters, read from its
        source (the frontend's TypeError would be a traceback)."""
        import ast

        defs = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
        if self.args.entry is None:
            raise fail("msir-opt", f"a Python input needs --entry <function> (one of: {', '.join(defs) or 'none'}) "
                       "and --args <its argument types>")
        fn = defs.get(self.args.entry)
        if fn is None or self.args.args.strip():
            return
        required = [a.arg for a in fn.args.args][: len(fn.args.args) - len(fn.args.defaults)]
        if required:
            raise fail("msir-opt", f"{fn.name}() takes arguments {', '.join(required)}: give their types with --args, "
                       "e.g. --args 'tensor<4x8xf32>,f64,i64' (f64 = Python float, i64 = Python int)")


def _print_llvm(module: ModuleOp, output: IO[str]) -> None:
    """`-t llvm`: the LLVM IR the JIT compiles, for this machine's triple
    (`msir.lowering.llvm_text`; xDSL's own target drops function attributes
    and loop hints)."""
    import llvmlite.binding as llvm

    from msir.lowering.llvm_text import module_text

    output.write(module_text(module, llvm.get_process_triple()))


def _check_lowered_to_llvm(module: ModuleOp) -> None:
    """`-t llvm` translates llvm dialect ops only: name the first other op and
    the pipeline that lowers it, instead of xDSL's NotImplementedError."""
    for op in module.walk():
        if op is not module and op.dialect_name() != "llvm":
            loc = op.location
            where = f" at {loc.filename.data}:{loc.line.data}:{loc.column.data}" if isinstance(loc, FileLineColLoc) else ""
            raise fail("msir-opt", f"-t llvm needs a module in the llvm dialect, but it holds {op.name}{where}; "
                       "lower it first with -p convert-msir-to-loops,msir-lower-to-llvm")


def main(argv: list[str] | None = None) -> None:
    from xdsl.utils.exceptions import DiagnosticException

    try:
        MsirOptMain(description="msir modular optimizer driver", args=argv).run()
    except (MsirError, ParseError, DiagnosticException) as e:
        # a diagnostic with its location (and, from the parser, the line and a
        # caret), like mlir-opt's, instead of a Python traceback
        if isinstance(e, ParseError):
            text = format_parse_error(e)
        else:
            text = str(e).rstrip()
        print(text, file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # a bug in msir or xDSL: one line, not a traceback (MSIR_TRACEBACK=1 shows it)
        if os.environ.get("MSIR_TRACEBACK"):
            raise
        print(f"msir-opt: internal error: {type(e).__name__}: {e} (MSIR_TRACEBACK=1 shows where)", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
