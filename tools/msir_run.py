"""`msir-run`: compile a function of an `msir` module and run it on given inputs
(the `mlir-cpu-runner` of msir, for end-to-end lit tests).

    msir-run f.mlir --entry f --input '[1, 2, 3]:f32' --input '2.5:f64'

Each `--input` is a Python literal (nested lists for arrays) and an element type
(f32, f64, i1, i32, i64), or `@file.npy`. Every result is printed on one line as
`result N: <type> = <values>`. `--target` chooses the compile target by name
(`msir.targets`; default cpu); `--target ascend` runs an `ascend.kernel` on
the emulator instead (`msir.ascend.cli`).
"""

from __future__ import annotations

import argparse
import ast
import sys

import numpy as np

ASCEND = "ascend"
"""`--target ascend` runs an `ascend.kernel` on the emulator (not yet a compile target of `msir.targets`)."""

_DTYPES = {"f32": np.float32, "f64": np.float64, "i1": np.bool_, "i32": np.int32, "i64": np.int64}


def parse_input(text: str) -> np.ndarray:
    if text.startswith("@"):
        return np.load(text[1:])
    value, _, dtype = text.rpartition(":")
    if dtype not in _DTYPES:
        raise SystemExit(f"msir-run: input '{text}' must end with one of :{', :'.join(_DTYPES)}")
    return np.asarray(ast.literal_eval(value), dtype=_DTYPES[dtype])


def format_result(i: int, a: np.ndarray) -> str:
    name = {v: k for k, v in _DTYPES.items()}[a.dtype.type]
    shape = "x".join(str(d) for d in a.shape)
    type_ = f"tensor<{shape + 'x' if shape else ''}{name}>"
    values = np.array2string(np.asarray(a), separator=", ", threshold=1 << 30, max_line_width=1 << 30)
    return f"result {i}: {type_} = {values}"


def _check_inputs(entry, given: int) -> None:
    """One --input per argument of the entry, named with its type when one is
    missing (the native call's TypeError would be a traceback)."""
    from msir.tools.msir_opt import fail

    params = entry.body.block.args if entry.body.blocks else ()
    types = entry.function_type.inputs.data
    if given < len(types):
        i = given
        name = f"%{params[i].name_hint}" if params and params[i].name_hint else f"#{i}"
        raise fail("msir-run", f"@{entry.sym_name.data} takes {len(types)} arguments but {given} --input given: "
                   f"missing argument {i} ({name}: {types[i]})")
    if given > len(types):
        raise fail("msir-run", f"@{entry.sym_name.data} takes {len(types)} arguments but {given} --input given")


def main(argv: list[str] | None = None) -> None:
    from xdsl.dialects.func import FuncOp
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError

    from msir import targets
    from msir.compiler import compile_module, make_context
    from msir.errors import MsirError
    from msir.tools.msir_opt import check_string_literals, fail, format_parse_error

    p = argparse.ArgumentParser(description="compile and run a function of an msir module")
    p.add_argument("input_file")
    p.add_argument("--entry", required=True, help="the function to run")
    p.add_argument("--input", action="append", default=[], help="an argument: literal:dtype or @file.npy")
    p.add_argument("--target", default=targets.DEFAULT,
                   help=f"the compile target ({', '.join(targets.TARGETS)}), or {ASCEND}: run an ascend.kernel on "
                   "the emulator (msir.ascend) and print its cycles")
    args = p.parse_args(argv)
    if args.input_file.endswith(".py"):
        raise fail("msir-run", f"{args.input_file} is a Python file; msir-run runs an msir module: "
                   f"write one with msir-opt {args.input_file} --entry {args.entry} --args <argument types>")
    try:
        with open(args.input_file) as f:
            text = f.read()
    except OSError as e:
        raise fail("msir-run", f"cannot read {args.input_file}: {e.strerror}") from None
    if args.target == ASCEND:
        from msir.ascend import cli

        try:
            inputs = [parse_input(t) for t in args.input]
        except (OSError, ValueError) as e:
            raise fail("msir-run", f"cannot read an input: {e}") from None
        return cli.run(args.input_file, text, args.entry, inputs)
    try:
        check_string_literals(text, args.input_file)
        module = Parser(make_context(), text, args.input_file).parse_module()
        entry = next((op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == args.entry), None)
        if entry is not None:
            _check_inputs(entry, len(args.input))
        compiled = compile_module(module, args.entry, target=args.target)
        results = compiled.native(*[parse_input(t) for t in args.input])
    except ParseError as e:
        print(format_parse_error(e), file=sys.stderr)
        sys.exit(1)
    except MsirError as e:
        print(str(e), file=sys.stderr)
        sys.exit(1)
    for i, r in enumerate(results):
        print(format_result(i, r))


if __name__ == "__main__":
    main()
