"""`msir-opt`: the msir pass driver, in the manner of `mlir-opt`/`xdsl-opt`.

It is xDSL's opt driver with the msir dialect and msir's passes registered
(`msir.pipeline.PASSES`, the registry the compile driver uses; `--help`
lists them with a summary each, before xDSL's), plus a Python frontend:
`msir-opt model.py --entry loss --args 'tensor<32x64xf32>,f64'` prints the
`msir` IR of function `loss` specialised to those argument types.

    msir-opt f.mlir -p convert-msir-to-loops,msir-lower-to-llvm -t llvm

A target's pipeline text (`msir.targets.get("cpu").pipeline.text()`) given to
`-p` lowers a module as `msir.jit` does, but for the target's steps (the CPU
JIT's symbol mangling). `--time-passes` prints a table of the passes' times
on stderr.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.xdsl_opt_main import xDSLOptMain

from msir import pipeline


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


class MsirOptMain(xDSLOptMain):
    def register_all_dialects(self):
        super().register_all_dialects()
        from msir.dialects.msir import Msir

        self.ctx.register_dialect("msir", lambda: Msir)

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
            if previous is not None:
                timings.append((str(previous.pipeline_pass_spec()), time.perf_counter() - start))
            if not self.args.disable_verify:
                module.verify()
            if previous is not None and following is not None and self.args.print_between_passes:
                print(f"IR after {previous.name}:")
                Printer(stream=sys.stdout).print_op(module)
                print("\n\n\n")
            if following is None and self.args.time_passes and timings:
                print(pipeline.timing_report(timings), file=sys.stderr)
                timings.clear()
            start = time.perf_counter()

        self.pipeline = PassPipeline.parse_spec(self.available_passes, self.args.passes, callback)

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
            "--args",
            type=str,
            default="",
            help="Python input: comma-separated argument types, e.g. "
            "'tensor<4x8xf32>,f64,i64' (f64 = Python float, i64 = Python int)",
        )

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        if (self.args.frontend or file_extension) != "py":
            return super().parse_chunk(chunk, file_extension, start_offset)
        from msir.frontend.driver import module_from_file

        if self.args.entry is None:
            raise SystemExit("msir-opt: a Python input needs --entry <function name>")
        return module_from_file(self.args.input_file, self.args.entry, self.args.args)


def main(argv: list[str] | None = None) -> None:
    from xdsl.utils.exceptions import DiagnosticException, ParseError

    from msir.errors import MsirError

    try:
        MsirOptMain(description="msir modular optimizer driver", args=argv).run()
    except (MsirError, ParseError, DiagnosticException) as e:
        # a diagnostic with its location (and, from the parser, the line and a
        # caret), like mlir-opt's, instead of a Python traceback
        if isinstance(e, ParseError):
            # xDSL prints "loc\n  line\n  ^^^\n  msg": as "loc: error: msg" then the line
            context = e.span.print_with_context("").rstrip().splitlines()[1:]
            text = "\n".join([f"{e.span.get_location()}: error: {e.msg}", *context])
        else:
            text = str(e).rstrip()
        print(text, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
