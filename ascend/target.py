"""The `ascend` compile target: msir to `ascend` kernels, run on the emulator.

    convert-msir-to-ascend   msir's preparation passes, then one synchronised
                             ascend.kernel per public function
    ascend-emulator          (native step) each call runs the kernel on the
                             emulator (`msir.ascend.emulator`)

`msir.jit(f, target="ascend")` and `msir.set_context(device_target="Ascend")`
compile for it. The chip is 910A unless `MSIR_ASCEND_CHIP` names another
(910B); it joins the compile cache key. A call passes its arrays as the kernel's GM
buffers (`host_inputs`: f32 matmul operands cast to f16, MindSpore's
`allow_fp32_to_fp16`) and returns the kernel's outputs shaped as the
function's results (`host_outputs`), at the target's precision; `msir-run
--target ascend` does the same. The last call's
`msir.ascend.timing.Profile` is `msir.jit(f).profile`.

Nothing heavy is imported here: the steps import xDSL and the emulator when
they run.
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any

from msir.pipeline import Pass, Pipeline, Step
from msir.targets import Target


def chip() -> str:
    """The chip kernels are compiled for: `MSIR_ASCEND_CHIP`, 910A by default."""
    return os.environ.get("MSIR_ASCEND_CHIP", "910A").strip().upper()


_CALLS = itertools.count()
"""Numbers the calls of emulated functions, so the latest profile is known."""


def host_inputs(kernel, arrays) -> list:
    """The caller's arrays as the GM buffers of a kernel that
    convert-msir-to-ascend lowered: f32 arrays cast to f16 where the kernel
    records it (`msir.host_casts`: MindSpore's `allow_fp32_to_fp16`), and
    arrays of a buffer's size in its shape (GM holds bytes: an elementwise
    kernel's buffers are flat). Anything else is passed as given, for the
    emulator to check."""
    import numpy as np

    from msir.ascend import emulator

    casts = kernel.attributes.get("msir.host_casts")
    casts = [c.data for c in casts.data] if casts is not None else [None] * len(kernel.ins)
    out = []
    for arg, value, cast_from in zip(kernel.ins, arrays, [*casts, *[None] * len(arrays)]):
        value = np.asarray(value)
        dtype = emulator.numpy_dtype(arg.type.dtype, kernel)
        if cast_from is not None and value.dtype == emulator.numpy_dtype(cast_from, kernel):
            value = value.astype(dtype)
        if value.dtype == dtype and value.size == math.prod(arg.type.dims):
            value = value.reshape(arg.type.dims)
        out.append(value)
    return out


def host_outputs(kernel, outputs: list) -> list:
    """The kernel's outputs in the shapes of the function's results
    (`msir.result_shapes`), if it records them."""
    shapes = kernel.attributes.get("msir.result_shapes")
    if shapes is None:
        return outputs
    return [out.reshape(tuple(d.data for d in s.data)) for out, s in zip(outputs, shapes.data)]


class EmulatedFunction:
    """One kernel of an emulated module, callable on NumPy arrays."""

    def __init__(self, module: EmulatedModule, symbol: str):
        self.module, self.symbol = module, symbol
        self.last_run = None
        """(call number, `msir.ascend.timing.Profile`) of the last call, for
        `msir.jit(f).profile`."""

    def __call__(self, *arrays):
        from msir.ascend import emulator

        kernel = emulator.find_kernel(self.module.module, self.symbol)
        result = emulator.run(self.module.module, self.symbol, host_inputs(kernel, arrays))
        self.last_run = (next(_CALLS), result.profile)
        return tuple(host_outputs(kernel, result.outputs))


class EmulatedModule:
    """A module of kernels as the compile driver's native module."""

    def __init__(self, module):
        self.module = module

    def function(self, symbol: str, sites=None) -> EmulatedFunction:
        return EmulatedFunction(self, symbol)


def emulated_module(module, object_sink) -> tuple[EmulatedModule, list]:
    """The lowered module as an `EmulatedModule` (no object code to keep)."""
    from msir.ascend import emulator

    emulator.verify(module)
    return EmulatedModule(module), []


def key_options() -> dict[str, Any]:
    return {"chip": chip()}


class _ChipPass(Pass):
    """`convert-msir-to-ascend` for the chip `MSIR_ASCEND_CHIP` names when
    the pipeline runs."""

    def instance(self):
        from msir.pipeline import pass_class

        return pass_class(self.name)(chip=chip(), **self.options)


ASCEND = Target(
    name="ascend",
    pipeline=Pipeline((_ChipPass("convert-msir-to-ascend"),)),
    native=Step("ascend-emulator", emulated_module),
    symbol=lambda name: name,
    key_options=key_options,
    object_code=False,
)
"""msir's Ascend target (registered as `ascend` in msir.targets)."""
