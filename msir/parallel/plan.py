"""A plan: the strategy of every op of a function, its §4 cost and a report.

A `Plan` answers `strategy_of(name)` (the text form, `"m,-"`), `spec_of(name)`
(the op's loop space as an einsum spec: `"mk,kn->mn"`), `layout_of(arg)` (how
an argument is stored), `cost` (the total in seconds, a float) and
`breakdown` (compute_s, comm_fwd_s, comm_bwd_s, memory_bytes), all recomputed
from the cost model's terms for the chosen strategies, and prints a report
with one row per op: its spec, strategy, local shapes, the collectives of its
edges (forward; backward after `|`) and its cost.

`run(*global_args)` executes the plan on emulated devices
(`msir.parallel.emulated`), or, under an MPI job, this rank's device
(`msir.parallel.mpi_runtime`): the traced function gets each op's strategy
and each argument's layout, `msir-shard` makes the per-device function
(`device_ir`), compiled once on first use. The plan of a training step (a
function differentiating its loss inside) runs the whole step, forward and
backward, sharded (`msir.parallel.training`). `last_profile` says where the
latest run's time went: native segments, collectives and the rest.
"""

from __future__ import annotations

import numpy as np

from msir.errors import PlanningError
from msir.parallel.cost_model import Setting, Terms
from msir.parallel.mesh_layout import Layout, Strategy, format_strategy
from msir.parallel.search import Problem, Solution


class Plan:
    """The optimum the search found for one function on one mesh."""

    def __init__(self, setting: Setting, problem: Problem, solution: Solution):
        self.setting = setting
        self.graph = setting.graph
        self.mesh = setting.mesh
        self.method = solution.method
        self.strategies: dict[str, Strategy] = {}
        self.leaf_layouts: dict[int, Layout] = {}
        for var, c in zip(problem.variables, solution.choice):
            if var.kind == "op":
                self.strategies[var.name] = var.options[c]
            else:
                self.leaf_layouts[var.index] = var.options[c]
        self.rows = [self._row_terms(i) for i in range(len(self.graph.nodes))]
        self.leaf_rows = {v: setting.leaf_terms(v, layout) for v, layout in self.leaf_layouts.items()}
        total = Terms(compute=setting.fixed_compute, memory=problem.base_memory)
        for t in (*self.rows, *self.leaf_rows.values()):
            total.add(t)
        self.totals = total
        self._program = None

    # -- the answers ---------------------------------------------------------

    def strategy_of(self, name: str) -> str:
        """The strategy of op `name` in text form: one loop letter or `-` per mesh axis."""
        return format_strategy(self.strategies[self.graph.node(name).name])

    def spec_of(self, name: str) -> str:
        """The loop space of op `name` as an einsum spec (strategies are written in its letters)."""
        return self.graph.node(name).spec

    def layout_of(self, arg: int) -> Layout:
        """How flattened argument `arg` is stored: its own layout if it is a
        decision leaf, else the layout of its one use."""
        if not 0 <= arg < len(self.graph.leaves):
            raise PlanningError(f"argument {arg} out of range: '{self.graph.fn_name}' has "
                                f"{len(self.graph.leaves)} array arguments", self.graph.loc)
        value = self.graph.leaves[arg]
        if value in self.leaf_layouts:
            return self.leaf_layouts[value]
        uses = self.setting.uses[value]
        if not uses:
            return Layout(((),) * len(self.graph.values[value].shape))
        i, k = uses[0]
        return self.setting.in_layout(self.graph.nodes[i].uses[k], self.strategies[self.graph.nodes[i].name])

    @property
    def cost(self) -> float:
        """The §4 total of the plan, seconds per step."""
        return self.totals.time

    @property
    def breakdown(self) -> dict:
        t = self.totals
        return {"compute_s": t.compute, "comm_fwd_s": t.comm_fwd, "comm_bwd_s": t.comm_bwd,
                "memory_bytes": t.memory}

    # -- execution -------------------------------------------------------------

    @property
    def device_module(self):
        """The per-device module: the function after `msir-shard` with this plan's strategies."""
        return self._emulated().module

    @property
    def device_ir(self) -> str:
        """The per-device function as text (what `msir-opt -p msir-shard` prints)."""
        return str(self.device_module)

    @property
    def last_profile(self):
        """Where this plan's latest `run` spent its time (`msir.parallel.emulated.RunProfile`: total_s,
        segments_s, collectives_s, other_s, collective_calls, collective_bytes), None before its first run."""
        return None if self._program is None else self._program.last_profile

    def run(self, *global_args):
        """`fn(*global_args)` run sharded on emulated devices, or on the ranks of
        an MPI job: the global results, in the tuples and lists `fn` returns them in."""
        graph, program = self.graph, self._emulated()
        arg_leaves = graph.step_arg_leaves if graph.step is not None else graph.arg_leaves
        if len(global_args) != len(arg_leaves):
            from msir.errors import MsirTypeError

            raise MsirTypeError(f"the plan of '{graph.fn_name if graph.step is None else graph.step.entry}' takes "
                                f"{len(arg_leaves)} arguments, got {len(global_args)}", graph.loc)
        leaves = []
        for i, arg in enumerate(global_args):
            if i < len(arg_leaves) and arg_leaves[i]:
                given = _leaves(arg)
                self._check_argument(i, given, arg_leaves[i], program)
                leaves.extend(given)
        results = program.run(*leaves)
        return _rebuild(graph.out_structure, results)

    def _check_argument(self, i: int, given: list, positions: list[int], program) -> None:
        """Argument `i`'s arrays `given` against what the plan was made for (the per-device function's
        arguments `positions`): a located error naming the argument, its shape and the layout it is stored in."""
        if len(given) == len(positions):
            shapes, dtypes = program.global_shapes, program.arg_dtypes
            # the common case first: an array of the planned shape and dtype (no message is built)
            if all(type(x) is np.ndarray and x.shape == shapes[j] and x.dtype == dtypes[j]
                   for x, j in zip(given, positions)):
                return
        self._argument_error(i, given, positions, program)

    def _argument_error(self, i: int, given: list, positions: list[int], program) -> None:
        """`_check_argument`'s error, if there is one (a Python scalar, a list or a Tensor may be right)."""
        from msir.errors import DTypeError, ShapeError

        graph = self.graph
        names, locs = (graph.step.arg_names, graph.step.arg_locs) if graph.step is not None else (
            graph.arg_names, graph.arg_locs)
        name, loc = (names[i], locs[i]) if i < len(names) else (f"arg{i}", graph.loc)
        what = f"argument {i} ('{name}') of '{graph.fn_name if graph.step is None else graph.step.entry}'"
        if len(given) != len(positions):
            raise ShapeError(f"{what} holds {len(given)} array{'s' * (len(given) != 1)}; the plan was made for "
                             f"{len(positions)}", loc)
        for k, (x, j) in enumerate(zip(given, positions)):
            part = f"array {k} of {what}" if len(positions) > 1 else what
            if isinstance(x, (bool, int, float)):
                continue  # a Python scalar takes the type the trace gave it
            shape, want = np.shape(x), program.global_shapes[j]
            if shape != want:
                raise ShapeError(f"{part} has shape {shape} (rank {len(shape)}); the plan was made for shape {want} "
                                 f"(rank {len(want)}), stored in layout {program.arg_layouts[j]}", loc)
            dtype = np.asarray(x).dtype
            if dtype != program.arg_dtypes[j]:
                raise DTypeError(f"{part} has dtype {dtype}; the plan was made for {program.arg_dtypes[j]}", loc)

    def _emulated(self):
        if self._program is None:
            from msir.parallel.emulated import sharded_module
            from msir.parallel.mpi_runtime import program_for

            layouts = [self.layout_of(i) for i in range(len(self.graph.leaves))]
            if self.graph.step is not None:
                from msir.parallel.training import sharded_step_module

                module, entry = sharded_step_module(self.graph, self.mesh, self.strategies, layouts)
            else:
                module, entry = sharded_module(self.graph, self.mesh, self.strategies, layouts), self.graph.entry
            self._program = program_for(module, entry, self.graph.loc)
        return self._program

    # -- the terms of each op --------------------------------------------------

    def _row_terms(self, i: int) -> Terms:
        """The terms of the edges into op i, then op i's own (the report's order: inputs first)."""
        node = self.graph.nodes[i]
        s = self.strategies[node.name]
        terms = Terms()
        for k, use in enumerate(node.uses):
            v = self.graph.values[use.value]
            if v.producer is not None:
                p = self.graph.nodes[v.producer]
                terms.add(self.setting.edge_terms(i, k, self.strategies[p.name], s))
            elif use.value in self.leaf_layouts:
                terms.add(self.setting.leaf_edge_terms(i, k, self.leaf_layouts[use.value], s))
        return terms.add(self.setting.node_terms(i, s))

    # -- the report ----------------------------------------------------------

    def _local_shapes(self, i: int) -> str:
        node = self.graph.nodes[i]
        s = self.strategies[node.name]
        ins = []
        for use in node.uses:
            v = self.graph.values[use.value]
            shape = self.setting.in_layout(use, s).local_shape(v.shape, self.mesh)
            ins.append("x".join(map(str, shape)) or "()")
        out_v = self.graph.values[node.out]
        out = "x".join(map(str, self.setting.out_layout(node, s).local_shape(out_v.shape, self.mesh))) or "()"
        return f"{', '.join(ins)} -> {out}"

    def report(self) -> str:
        header = (f"plan of '{self.graph.fn_name}' on mesh {self.mesh.shape} ({self.method}): "
                  f"cost {self.cost:.6g} s = compute {self.totals.compute:.6g} + comm fwd "
                  f"{self.totals.comm_fwd:.6g} + comm bwd {self.totals.comm_bwd:.6g}; "
                  f"memory {self.totals.memory:.6g} B per device")
        rows = [("op", "spec", "strategy", "local shapes", "collectives (fwd | bwd)", "cost s")]
        for v, layout in self.leaf_layouts.items():
            value = self.graph.values[v]
            rows.append((f"arg {value.name}", "", str(layout),
                         "x".join(map(str, layout.local_shape(value.shape, self.mesh))), "", "0"))
        for i, node in enumerate(self.graph.nodes):
            t = self.rows[i]
            comm = "; ".join(str(c) for c in t.fwd if c.kind != "all_slice")
            back = "; ".join(str(c) for c in t.bwd if c.kind != "all_slice")
            rows.append((node.name, node.spec, format_strategy(self.strategies[node.name]), self._local_shapes(i),
                         f"{comm or '-'} | {back or '-'}", f"{t.time:.4g}"))
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        lines = [header] + ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        ops = ", ".join(f"{n}: {format_strategy(s)!r}" for n, s in self.strategies.items())
        return f"<Plan of {self.graph.fn_name} on {self.mesh.shape}: cost {self.cost:.6g} s; {ops}>"


def _leaves(arg) -> list:
    """The arrays of one argument, flattened as the frontend flattens tuples and lists."""
    if isinstance(arg, (tuple, list)):
        return [x for a in arg for x in _leaves(a)]
    return [arg]


def _rebuild(structure, results: list):
    """`results` (the flat results of the per-device function, global) in the traced result tree."""
    kind, payload = structure
    if kind == "leaf":
        return results[payload]
    if kind == "tuple":
        return tuple(_rebuild(s, results) for s in payload)
    if kind == "list":
        return [_rebuild(s, results) for s in payload]
    return payload  # a constant the function returns
