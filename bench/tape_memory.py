"""Tape memory of W6's gradient (100-step RNN, hidden 128, batch 32, input 32, f32):
the rows reverse mode tapes per step against keeping every float intermediate of
the loop body.

    python bench/tape_memory.py
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from workloads import _w6_inputs, w6_loss  # noqa: E402

from msir.dialects import msir as M  # noqa: E402
from msir.frontend.driver import spec_of, trace  # noqa: E402
from msir.passes.grad import ModuleAD, is_float_type  # noqa: E402

args = _w6_inputs(False, np.random.default_rng(0))
T = args[2].shape[0]
t = trace(w6_loss, [spec_of(a) for a in args])
ad = ModuleAD(t.module)
pair = ad.pair(t.entry, ad.funcs[t.entry], (0, 1))
fwd = ad.funcs[pair.fwd]
row = 0
for op in fwd.walk():
    if isinstance(op, M.TapeAllocOp):
        shape = M.shape_of(op.result.type)[1:]
        row += int(np.prod(shape)) * 4
        print("tape", op.result.type)
body = [g for n, g in ad.funcs.items() if n.endswith("__for_region0")][0]
inter = sum(int(np.prod(M.shape_of(r.type))) * 4 for op in body.body.block.walk() for r in op.results if is_float_type(r.type))
print(f"tapes: {row / 1024:.1f} KiB per step, {row * T / 2**20:.2f} MiB for T={T}; "
      f"every float intermediate of the body: {inter / 1024:.1f} KiB per step, {inter * T / 2**20:.2f} MiB")
