"""The `ascend` compile target: msir to `ascend` kernels, run on the emulator.

    convert-msir-to-ascend   msir's preparation passes, then one synchronised
                             ascend.kernel per public function
    ascend-emulator          (native step) each call runs the kernel on the
                             emulator (`msir.ascend.emulator`)

`msir.jit(f, target="ascend")` and `msir.set_context(device_target="Ascend")`
compile for it. The chip is 910A unless `MSIR_ASCEND_CHIP` names another
(910B); it joins the compile cache key. A call casts its arrays as the kernel
records in `msir.host_casts` (f32 matmul operands to f16, MindSpore's
`allow_fp32_to_fp16`) and returns the kernel's outputs, shaped as the
function's results, at the target's precision. The last call's
`msir.ascend.timing.Profile` is `EmulatedModule.profile`.

Nothing heavy is imported here: the steps import xDSL and the emulator when
they run.
"""

from __future__ import annotations

import os
from typing import Any

from msir.pipeline import Pass, Pipeline, Step
from msir.targets import Target


def chip() -> str:
    """The chip kernels are compiled for: `MSIR_ASCEND_CHIP`, 910A by default."""
    return os.environ.get("MSIR_ASCEND_CHIP", "910A").strip().upper()


class EmulatedFunction:
    """One kernel of an emulated module, callable on NumPy arrays."""

    def __init__(self, module: EmulatedModule, symbol: str, shapes: list[tuple[int, ...]]):
        self.module, self.symbol, self.shapes = module, symbol, shapes

    def __call__(self, *arrays):
        import numpy as np

        from msir.ascend import emulator

        kernel = emulator.find_kernel(self.module.module, self.symbol)
        inputs = []
        for arg, value in zip(kernel.ins, arrays):
            value = np.asarray(value)
            dtype = emulator.numpy_dtype(arg.type.dtype, kernel)
            # the kernel's GM buffers are flat for elementwise chains, and f16
            # for matmul operands the caller passes as f32 (msir.host_casts)
            inputs.append(value.astype(dtype, copy=False).reshape(arg.type.dims))
        result = emulator.run(self.module.module, self.symbol, inputs)
        self.module.profile = result.profile
        return tuple(out.reshape(shape) for out, shape in zip(result.outputs, self.shapes))


class EmulatedModule:
    """A module of kernels as the compile driver's native module."""

    def __init__(self, module, shapes: dict[str, list[tuple[int, ...]]]):
        self.module, self.shapes = module, shapes
        self.profile = None
        """The timing profile of the last call of any of its kernels."""

    def function(self, symbol: str, sites=None) -> EmulatedFunction:
        return EmulatedFunction(self, symbol, self.shapes[symbol])


def emulated_module(module, object_sink) -> tuple[EmulatedModule, list]:
    """The lowered module as an `EmulatedModule` (no object code to keep)."""
    from msir.ascend import emulator

    emulator.verify(module)
    shapes = {}
    for kernel in module.ops:
        result_shapes = kernel.attributes.get("msir.result_shapes")
        shapes[kernel.sym_name.data] = [tuple(d.data for d in s.data) for s in result_shapes.data]
    return EmulatedModule(module, shapes), []


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
