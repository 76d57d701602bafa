"""`msir-run kernel.mlir --target ascend --entry f --input @a.npy`: run an
`ascend.kernel` on the emulator (inputs passed as `msir.ascend.target.host_inputs`
does for a kernel convert-msir-to-ascend lowered), print its outputs (one line each, as
`msir-run` prints results) and its profile (cycles, per-pipe busy time, the
critical pipe), and with `--timeline` each pipe's busy intervals
(`msir.ascend.timing.Profile.timeline`). Every emulator error is one line, `msir-run: error:
<file:line:col>: <message>`, and exit status 1, never a traceback.
"""

from __future__ import annotations

import sys

import numpy as np

_DTYPE_NAMES = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.int8): "i8",
                np.dtype(np.int32): "i32"}


def make_context():
    """The dialects of an ascend kernel: builtin, arith, scf and ascend."""
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, scf

    from msir.dialects.ascend import Ascend

    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, scf.Scf, Ascend):
        ctx.load_dialect(d)
    return ctx


def format_output(i: int, a: np.ndarray) -> str:
    name = _DTYPE_NAMES.get(a.dtype, str(a.dtype))
    shape = "x".join(str(d) for d in a.shape)
    values = np.array2string(a, separator=", ", threshold=1 << 30, max_line_width=1 << 30)
    return f"result {i}: tensor<{shape}x{name}> = {values}"


def run(path: str, text: str, entry: str, inputs: list[np.ndarray], timeline: bool = False) -> None:
    """Parse `text` (the contents of `path`), run `entry`, print (`timeline`:
    the profile's timeline too); exit 1 on error."""
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError

    from msir.ascend import emulator
    from msir.ascend.target import host_inputs, host_outputs
    from msir.errors import MsirError
    from msir.tools.msir_opt import check_string_literals, format_parse_error

    try:
        check_string_literals(text, path)
        module = Parser(make_context(), text, path).parse_module()
        emulator.verify(module)
        kernel = emulator.find_kernel(module, entry)
        result = emulator.run(module, entry, host_inputs(kernel, inputs))
    except ParseError as e:
        print(format_parse_error(e), file=sys.stderr)
        sys.exit(1)
    except MsirError as e:
        where = f"{e.loc}: " if e.loc is not None else ""
        print(f"msir-run: error: {where}{e.message}", file=sys.stderr)
        sys.exit(1)
    for i, out in enumerate(host_outputs(kernel, result.outputs)):
        print(format_output(i, out))
    print(result.profile)
    if timeline:
        print(result.profile.timeline())
