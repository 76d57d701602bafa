"""`msir-run`: compile a function of an `msir` module and run it on given inputs
(the `mlir-cpu-runner` of msir, for end-to-end lit tests).

    msir-run f.mlir --entry f --input '[1, 2, 3]:f32' --input '2.5:f64'

Each `--input` is a Python literal (nested lists for arrays) and an element type
(f16, bf16, f32, f64, i1, i32, i64), rounded to it as NumPy's `astype` would, or
`@file.npy`. NumPy saves an ml_dtypes bfloat16 array as raw 2-byte records
(`<V2`), so such a file is read as `@file.npy:bf16`. Every result is printed on
one line as `result N: <type> = <values>`, as NumPy prints them. `--target`
chooses the compile target by name (`msir.targets`; default cpu); `--target
ascend` runs an `ascend.kernel` on the emulator instead (`msir.ascend.cli`).
"""

from __future__ import annotations

import argparse
import ast
import os
import sys

import numpy as np

ASCEND = "ascend"
"""`--target ascend` runs an `ascend.kernel` on the emulator (not yet a compile target of `msir.targets`)."""

_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i1": "bool",
           "i32": "int32", "i64": "int64"}
"""The element types of --input, by their msir (NumPy) dtype names."""


def _dtype(element_type: str) -> np.dtype:
    from msir.dialects.primitives import numpy_dtype
    from msir.errors import DTypeError

    try:
        return numpy_dtype(_DTYPES[element_type])
    except DTypeError as e:
        raise SystemExit(f"msir-run: error: {e.message}") from None


def _load(text: str) -> np.ndarray:
    path, colon, _ = text[1:].rpartition(":") if text.endswith(":bf16") else (text[1:], "", "")
    try:
        a = np.load(path)
    except (OSError, ValueError) as e:
        raise SystemExit(f"msir-run: error: cannot read {path}: {e}") from None
    if colon:
        if a.dtype.itemsize != 2 or a.dtype.kind not in "Vu":
            raise SystemExit(f"msir-run: error: {path} holds {a.dtype} values, not the 2-byte records of bfloat16")
        return a.view(_dtype("bf16"))
    if a.dtype.kind == "V":
        raise SystemExit(f"msir-run: error: {path} holds raw {a.dtype} records (how NumPy saves ml_dtypes "
                         f"types): read bfloat16 as @{path}:bf16")
    return a


def parse_input(text: str) -> np.ndarray:
    if text.startswith("@"):
        return _load(text)
    value, _, dtype = text.rpartition(":")
    if dtype not in _DTYPES:
        raise SystemExit(f"msir-run: input '{text}' must end with one of :{', :'.join(_DTYPES)}")
    return np.asarray(ast.literal_eval(value), dtype=_dtype(dtype))


def format_result(i: int, a: np.ndarray) -> str:
    name = {v: k for k, v in _DTYPES.items()}[a.dtype.name]
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
    from xdsl.utils.exceptions import DiagnosticException, ParseError

    from msir import targets
    from msir.compiler import compile_module, make_context
    from msir.errors import MsirError
    from msir.tools.msir_opt import check_string_literals, fail, format_parse_error
    from msir.verify import parse_module, verify_module

    p = argparse.ArgumentParser(description="compile and run a function of an msir module")
    p.add_argument("input_file")
    p.add_argument("--entry", required=True, help="the function to run")
    p.add_argument("--input", action="append", default=[], help="an argument: literal:dtype or @file.npy")
    p.add_argument("--target", default=targets.DEFAULT,
                   help=f"the compile target ({', '.join(targets.TARGETS)}), or {ASCEND}: run an ascend.kernel on "
                   "the emulator (msir.ascend) and print its cycles")
    p.add_argument("--timeline", action="store_true",
                   help=f"with --target {ASCEND}: also print each pipe's busy intervals on the slowest core")
    args = p.parse_args(argv)
    if args.timeline and args.target != ASCEND:
        raise fail("msir-run", f"--timeline shows the emulator's pipes: it needs --target {ASCEND}")
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
        return cli.run(args.input_file, text, args.entry, inputs, timeline=args.timeline)
    try:
        check_string_literals(text, args.input_file)
        module, sources = parse_module(make_context(), text, args.input_file)
        verify_module(module, sources)
        entry = next((op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == args.entry), None)
        if entry is not None:
            _check_inputs(entry, len(args.input))
        compiled = compile_module(module, args.entry, target=args.target)
        results = compiled.native(*[parse_input(t) for t in args.input])
    except ParseError as e:
        print(format_parse_error(e), file=sys.stderr)
        sys.exit(1)
    except (MsirError, DiagnosticException) as e:  # a located diagnostic, or a pass refusing the module
        print(str(e).rstrip(), file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # a bug in msir or xDSL: one line, not a traceback (MSIR_TRACEBACK=1 shows it)
        if os.environ.get("MSIR_TRACEBACK"):
            raise
        print(f"msir-run: internal error: {type(e).__name__}: {e} (MSIR_TRACEBACK=1 shows where)", file=sys.stderr)
        sys.exit(2)
    for i, r in enumerate(results):
        print(format_result(i, r))


if __name__ == "__main__":
    main()
