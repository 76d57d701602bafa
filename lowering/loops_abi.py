"""The loops level as the later stages read it: the attributes and the runtime
error call that `convert-msir-to-loops` leaves in its output for
`msir-lower-to-llvm` and the JIT (meanings: the contract in
`msir.lowering.to_loops`; donation: `msir.lowering.bufferize`).

Plain names only, so that every stage can import them without the others.
"""

ERROR_FUNC = "__msir_error"
"""`func.func private @__msir_error(i32 code, i64 site)`: records a runtime error."""
ERR_INDEX = 1
"""Error code: an index out of range (`msir.take`, `msir.scatter_add`)."""
ERR_ZERO_DIVISION = 2
"""Error code: integer division or modulo by zero (`msir.floordiv`, `msir.rem`)."""
ERR_RANGE_STEP = 5
"""Error code: a `msir.for` step of zero at run time (Python's `range` refuses it)."""
ERR_USER = 6
"""Error code: a failed `msir.check` (user code's `assert` or `raise`); its message travels with the call."""
RAISE_FUNC = "__msir_raise"
"""`func.func private @__msir_raise(i32 code, i64 site, i64 v0, ..., i64 v3)`: records a failed
`msir.check` with the bits of its runtime values (`raise_slot_bits`); the call carries `msir.message`."""
RAISE_SLOTS = 4
"""Runtime values a failed check records (msir.dialects.msir.MAX_CHECK_VALUES)."""
MESSAGE_ATTR = "msir.message"
"""On a call of `@__msir_raise`: JSON {"error", "message" (a str.format template), "dtypes"}."""
ERR_INTERRUPTED = 7
"""Error code: a `while` loop stopped because SIGINT arrived (Ctrl-C; `msir.lowering.interrupt`)."""
INTERRUPT_FUNC = "__msir_interrupted"
"""`func.func private @__msir_interrupted() -> i32`: nonzero once SIGINT arrived
during this native call (`msir.lowering.interrupt`); every lowered `while` polls it."""

SITES_ATTR = "msir.sites"
"""On the module: the "file:line:col" of each error site, by site number."""
SITE_ATTR = "msir.site"
"""On a `memref.alloc` or a checked call: its site number."""
STACK_CHECK_ATTR = "msir.stack_check"
"""On a call that may recurse: msir-lower-to-llvm checks the native stack first."""
NUM_OUTPUTS_ATTR = "msir.num_outputs"
"""On a function: how many of its trailing arguments are output buffers."""
DONATE_ATTR = "msir.donate"
"""On a public function's argument: the caller gives its buffer away (`msir.lowering.bufferize`, Donation)."""
ALIAS_OF_ATTR = "msir.alias_of"
"""On an output argument: the caller may pass the buffer of this input there."""
DONATION_REFUSED_ATTR = "msir.donation_refused"
"""On a function: why each donated argument that was not paired was refused."""
ROW_LOCAL_ATTR = "msir.row_local"
"""On a `memref.alloc`: a one-row buffer of a row group, which each thread
running part of the row loop may replace by its own copy."""
GEMM_EPILOGUE_ATTR = "msir.gemm_epilogue"
"""On an `scf.for` right after a call of `__msir_gemm_f32`/`_f64`: the loop is
that product's elementwise epilogue (iteration i reads row i of C, no other
row), which msir-lower-to-llvm may run per chunk of C's rows after each chunk's
gemm (`msir.lowering.blas`, "Epilogues"); lowered alone it means the same."""
