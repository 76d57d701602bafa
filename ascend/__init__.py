"""The emulator of the `ascend` dialect (`msir.dialects.ascend`).

`msir.ascend.emulator.run(module, entry, inputs)` executes a kernel on NumPy,
core by core, and returns its outputs and a timing profile; every hardware
rule it checks (capacities, alignment, data paths, races between and within
pipes, the flag protocol, cube shapes and dtypes, vector footprints) is an
`msir.ascend.errors.AscendError` naming the op, its source location, the
buffer and the byte range. Modules: `errors` (the error classes), `layouts`
(where a logical element of a buffer is stored), `hazards` (happens-before
tracking), `timing` (the cost model and the per-pipe discrete-event
schedule), `emulator` (scalar control, functional execution), `cli`
(`msir-run --target ascend`).

Nothing is imported here: `import msir` stays light.
"""
