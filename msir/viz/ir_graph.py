"""The IR as a picture: a module's functions drawn as a Graphviz graph.

`to_dot(module)` turns any module msir's pipeline holds (the frontend's
output, after `msir-grad`, after `msir-fuse`, or below) into DOT text:

* each function is a cluster, coloured by its role: the primal code, the
  augmented forward of reverse mode (`@f__fwd`), the adjoint (`@f__bwd`,
  `@f__rebwd`, and every op named `"<name>/grad"`), the tangent code of forward
  mode (`@f__jvp`, ops named `"<name>/jvp"`);
* each op is a node labelled with its name, its result types and its
  `msir.name`; its source location is the node's tooltip; an SSA use is an
  edge from the producer to the user; constants are small grey nodes;
* a `msir.fusion` is a cluster of its body (its block arguments are its
  operands, its yield its results: the edges go straight through);
* a loop or an `if` is a cluster holding a header node (the op, whose results
  its users read), its block arguments (induction variable, carried values)
  and its body; a region's yield is a dashed edge back to the header that does
  not constrain the layout;
* a region op holding more than `max_region_ops` ops is one node
  ("msir.for, 57 ops"), so that a long function stays readable.

`render_svg(dot_text)` runs Graphviz's `dot` (a system package; `dot -V`),
and `dot_available()` says whether it is there. `module_at_stage` traces a
Python function and runs a target's pipeline up to a named stage; `graph`
(exported as `msir.viz.graph`) puts the three together. `msir-opt --emit-dot`
prints the DOT of its result. Nothing here changes the IR it draws.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msir.errors import MsirError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Operation, Region, SSAValue

MAX_REGION_OPS = 40
"""A region op with more ops than this (nested ones counted) is drawn as one node."""

STAGE_ALIASES = {"msir-grad": "msir-grad-jvp", "msir-jvp": "msir-grad-jvp", "grad": "msir-grad-jvp",
                 "fuse": "msir-fuse", "loops": "convert-msir-to-loops"}
"""Stage names a user may write for the pipeline's own (`msir-grad` runs as `msir-grad-jvp`)."""

FRONTEND = "frontend"

# role -> (cluster fill, node fill)
_ROLE_COLOURS = {
    "primal": ("#f4f6f8", "#dfe8f3"),
    "forward": ("#eef5ff", "#cfe2ff"),
    "adjoint": ("#fff3e6", "#ffd8a8"),
    "tangent": ("#eefaf0", "#c3ecc9"),
}
_CONSTANT_FILL = "#eeeeee"
_FUSION_FILL = "#fffbe0"
_REGION_FILL = "#ffffff"
_REGION_NAMES = {"msir.while": ("condition", "body"), "msir.if": ("then", "else"),
                 "scf.while": ("before", "after"), "scf.if": ("then", "else")}
_ROLE_TITLES = {"primal": "", "forward": "  (forward)", "adjoint": "  (adjoint)", "tangent": "  (tangent)"}


class VizError(MsirError):
    """A picture that cannot be made: an unknown stage, no Graphviz for SVG, no matplotlib for PNG."""


def function_role(name: str) -> str:
    """The role of a function by the names msir's differentiation passes give
    (`msir.passes.grad`, `msir.passes.jvp`): the suffix added last decides."""
    parts = name.split("__")
    for part in reversed(parts[1:]):
        if part in ("bwd", "rebwd"):
            return "adjoint"
        if part in ("fwd",):
            return "forward"
        if part == "jvp":
            return "tangent"
    return "primal"


def _op_role(op: Operation, inherited: str) -> str:
    from msir.dialects.msir import NAME_ATTR

    name = op.attributes.get(NAME_ATTR)
    if name is not None:
        last = name.data.rsplit("/", 1)[-1] if "/" in name.data else ""
        if last == "grad":
            return "adjoint"
        if last == "jvp":
            return "tangent"
    return inherited


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _type_text(t: Any) -> str:
    """A type as a label shows it: `4x8xf32`; a function type by its arity (it can be very long)."""
    from xdsl.dialects.builtin import FunctionType, TensorType

    if isinstance(t, TensorType):
        dims = "x".join("?" if d < 0 else str(d) for d in t.get_shape())
        return f"{dims}x{t.element_type}" if dims else str(t.element_type)
    if isinstance(t, FunctionType):
        ins, outs = len(t.inputs.data), len(t.outputs.data)
        outs_text = _type_text(t.outputs.data[0]) if outs == 1 else f"{outs} results"
        return f"function ({ins} args) -> {outs_text}"
    text = str(t)
    return text if len(text) <= 48 else text[:45] + "..."


def _location(op: Operation) -> str:
    from xdsl.dialects.builtin import FileLineColLoc

    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{Path(loc.filename.data).name}:{loc.line.data}:{loc.column.data}"
    return ""


def _short_name(op: Operation) -> str:
    from xdsl.dialects import func

    if isinstance(op, func.CallOp):
        return f"call @{op.callee.root_reference.data}"
    name = op.name
    return name[len("msir."):] if name.startswith("msir.") else name


def _constant_text(op: Operation) -> str:
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

    value = op.attributes.get("value") or op.properties.get("value")
    if isinstance(value, DenseIntOrFPElementsAttr):
        values = value.get_values()
        if values and all(v == values[0] for v in values):
            v = values[0]
            text = f"{v:g}" if isinstance(v, float) else str(v)
            return text if len(values) == 1 else f"{text} ({_type_text(op.results[0].type)})"
    return f"constant {_type_text(op.results[0].type)}" if op.results else "constant"


def _is_constant(op: Operation) -> bool:
    return op.name in ("msir.constant", "arith.constant") and not op.regions


def _count_ops(region: Region) -> int:
    """The ops in `region`, nested ones included, terminators not."""
    return sum(1 for block in region.blocks for op in block.walk() if not _is_terminator(op))


def _is_terminator(op: Operation) -> bool:
    return op.name in ("msir.yield", "scf.yield", "msir.condition", "scf.condition")


class _DotWriter:
    """One pass over a module, writing DOT lines (see the module docstring)."""

    def __init__(self, max_region_ops: int):
        self.max_region_ops = max_region_ops
        self.lines: list[str] = []
        self.node_of: dict[SSAValue, str] = {}
        self.edges: list[str] = []
        self.count = 0

    def new_id(self, prefix: str = "n") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def node(self, depth: int, label: str, fill: str, *, shape: str = "box", tooltip: str = "",
             extra: str = "") -> str:
        nid = self.new_id()
        attrs = [f"label={_quote(label)}", f"fillcolor={_quote(fill)}", f"shape={shape}"]
        if tooltip:
            attrs.append(f"tooltip={_quote(tooltip)}")
        if extra:
            attrs.append(extra)
        self.emit(depth, f"{nid} [{', '.join(attrs)}];")
        return nid

    def edges_into(self, target: str, operands: Iterable[SSAValue]) -> None:
        for value in operands:
            source = self.node_of.get(value)
            if source is not None:  # a value defined in a collapsed region never reaches here
                self.edges.append(f"{source} -> {target};")

    # -- functions ---------------------------------------------------------

    def function(self, fn: Operation) -> None:
        name = fn.sym_name.data
        role = function_role(name)
        cluster_fill, _ = _ROLE_COLOURS[role]
        self.emit(1, f"subgraph cluster_{self.new_id('f')} {{")
        self.emit(2, f"label={_quote('@' + name + _ROLE_TITLES[role])}; style=filled; fillcolor={_quote(cluster_fill)};")
        if fn.body.blocks:
            block = fn.body.blocks[0]
            for i, arg in enumerate(block.args):
                self.node_of[arg] = self.node(2, f"arg {i}\n{_type_text(arg.type)}", "#ffffff", shape="ellipse")
            self.ops(block.ops, 2, role)
        self.emit(1, "}")

    def ops(self, ops: Iterable[Operation], depth: int, role: str) -> None:
        for op in ops:
            self.op(op, depth, role)

    def op(self, op: Operation, depth: int, role: str) -> None:
        role = _op_role(op, role)
        if _is_constant(op):
            nid = self.node(depth, _constant_text(op), _CONSTANT_FILL, shape="plaintext",
                            extra="fontsize=8, style=filled")
            for r in op.results:
                self.node_of[r] = nid
            return
        if op.regions and any(r.blocks for r in op.regions):
            inner = sum(_count_ops(r) for r in op.regions)
            if inner > self.max_region_ops:
                self.simple(op, depth, role, note=f"{inner} ops")
            elif op.name == "msir.fusion":
                self.fusion(op, depth, role)
            else:
                self.region_op(op, depth, role)
            return
        if _is_terminator(op):
            return  # drawn by the region op that owns it
        label = _short_name(op)
        if op.name == "func.return":
            label = "return"
        self.simple(op, depth, role, label=label)

    def label_of(self, op: Operation, label: str | None = None, note: str = "") -> str:
        from msir.dialects.msir import NAME_ATTR

        lines = [label or _short_name(op)]
        if note:
            lines[0] += f", {note}"
        types = [_type_text(r.type) for r in op.results]
        if types:
            lines.append(", ".join(types) if len(types) <= 3 else f"{', '.join(types[:3])}, ... ({len(types)})")
        name = op.attributes.get(NAME_ATTR)
        if name is not None:
            lines.append(f"'{name.data}'")
        return "\n".join(lines)

    def simple(self, op: Operation, depth: int, role: str, label: str | None = None, note: str = "") -> str:
        fill = _ROLE_COLOURS[role][1]
        nid = self.node(depth, self.label_of(op, label, note), fill, tooltip=_location(op))
        self.edges_into(nid, op.operands)
        for r in op.results:
            self.node_of[r] = nid
        return nid

    def fusion(self, op: Operation, depth: int, role: str) -> None:
        self.emit(depth, f"subgraph cluster_{self.new_id('g')} {{")
        self.emit(depth + 1, f"label={_quote('fusion')}; style=\"filled,dashed\"; fillcolor={_quote(_FUSION_FILL)};")
        block = op.regions[0].blocks[0]
        for arg, operand in zip(block.args, op.operands, strict=False):
            if operand in self.node_of:
                self.node_of[arg] = self.node_of[operand]
        self.ops(block.ops, depth + 1, role)
        self.emit(depth, "}")
        terminator = block.last_op
        if terminator is not None and _is_terminator(terminator):
            for result, yielded in zip(op.results, terminator.operands, strict=False):
                if yielded in self.node_of:
                    self.node_of[result] = self.node_of[yielded]

    def region_op(self, op: Operation, depth: int, role: str) -> None:
        self.emit(depth, f"subgraph cluster_{self.new_id('r')} {{")
        self.emit(depth + 1, f"label={_quote(_short_name(op))}; style=\"rounded\"; bgcolor={_quote(_REGION_FILL)};")
        header = self.simple(op, depth + 1, role)
        for i, region in enumerate(op.regions):
            for block in region.blocks:
                for k, arg in enumerate(block.args):
                    self.node_of[arg] = self.node(depth + 1, f"arg {k}\n{_type_text(arg.type)}", "#ffffff",
                                                  shape="ellipse", extra="fontsize=8")
                    self.edges.append(f"{header} -> {self.node_of[arg]} [style=dotted, arrowhead=none];")
                if len(op.regions) > 1:
                    self.emit(depth + 1, f"subgraph cluster_{self.new_id('b')} {{")
                    names = _REGION_NAMES.get(op.name, ())
                    title = names[i] if i < len(names) else f"region {i}"
                    self.emit(depth + 2, f"label={_quote(title)}; style=dotted;")
                self.ops(block.ops, depth + 2 if len(op.regions) > 1 else depth + 1, role)
                if len(op.regions) > 1:
                    self.emit(depth + 1, "}")
                terminator = block.last_op
                if terminator is not None and _is_terminator(terminator):
                    for value in terminator.operands:
                        source = self.node_of.get(value)
                        if source is not None:
                            self.edges.append(f"{source} -> {header} [style=dashed, constraint=false, color=\"#888888\"];")
        self.emit(depth, "}")


def to_dot(module: ModuleOp, *, max_region_ops: int = MAX_REGION_OPS, title: str = "") -> str:
    """The DOT text of `module`'s functions (see the module docstring)."""
    from xdsl.dialects import func

    writer = _DotWriter(max_region_ops)
    writer.emit(0, "digraph msir {")
    writer.emit(1, "graph [rankdir=TB, newrank=true, fontname=Helvetica, fontsize=11, nodesep=0.25, ranksep=0.35"
                + (f", label={_quote(title)}, labelloc=t" if title else "") + "];")
    writer.emit(1, 'node [shape=box, style="rounded,filled", fontname=Helvetica, fontsize=10, margin="0.08,0.03"];')
    writer.emit(1, "edge [arrowsize=0.5, color=\"#555555\"];")
    for op in module.ops:
        if isinstance(op, func.FuncOp):
            writer.function(op)
    writer.lines.extend("  " + e for e in writer.edges)
    writer.emit(0, "}")
    return "\n".join(writer.lines) + "\n"


def dot_available() -> bool:
    """Is Graphviz's `dot` on PATH?"""
    return shutil.which("dot") is not None


def render_svg(dot_text: str, timeout: float = 60.0) -> str:
    """`dot_text` laid out by Graphviz's `dot` as SVG text."""
    exe = shutil.which("dot")
    if exe is None:
        raise VizError("drawing SVG needs Graphviz's 'dot' (e.g. 'apt-get install graphviz'); "
                       "the DOT text is available without it")
    try:
        done = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise VizError(f"Graphviz's dot took longer than {timeout:g} s to lay the graph out") from e
    if done.returncode != 0:
        raise VizError(f"Graphviz's dot failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode()


def stage_names(target: str = "cpu") -> list[str]:
    """The stages `module_at_stage` can stop after, for `target`: the frontend, then its pipeline's."""
    from msir import targets

    return [FRONTEND, *targets.get(target).pipeline.labels()]


def module_at_stage(fn: Any, example_args: Sequence[Any], stage: str = FRONTEND, target: str = "cpu") -> ModuleOp:
    """The IR of `fn` traced for `example_args`, after `stage` of `target`'s pipeline."""
    from msir import targets
    from msir.compiler import make_context
    from msir.frontend.driver import spec_of, trace

    wanted = STAGE_ALIASES.get(stage, stage)
    names = stage_names(target)
    if wanted not in names:
        raise VizError(f"unknown stage '{stage}': the stages of the {target} target are {', '.join(names)}")
    fn = getattr(fn, "__wrapped__", fn)
    module = trace(fn, [spec_of(a) for a in example_args]).module
    if wanted == FRONTEND:
        return module
    ctx = make_context()
    for s in targets.get(target).pipeline.stages:
        s.apply(ctx, module)
        if s.label == wanted:
            break
    return module


@dataclass
class IRGraph:
    """A drawn function: its DOT text, and SVG when Graphviz is installed."""

    dot: str
    stage: str

    def svg(self) -> str:
        return render_svg(self.dot)

    def save(self, path: str | Path) -> Path:
        """Write the picture: SVG to a `.svg` path (Graphviz needed), DOT text to any other."""
        path = Path(path)
        path.write_text(self.svg() if path.suffix == ".svg" else self.dot)
        return path

    def _repr_svg_(self) -> str | None:  # shown inline by Jupyter
        return self.svg() if dot_available() else None


def graph(fn: Any, *example_args: Any, stage: str = FRONTEND, target: str = "cpu",
          max_region_ops: int = MAX_REGION_OPS, path: str | Path | None = None) -> IRGraph:
    """Draw `fn`'s IR for `example_args` after `stage` (`"frontend"`, `"msir-grad"`,
    `"msir-fuse"`, or any stage name of `stage_names(target)`).

    With `path`, also write it: SVG when Graphviz's `dot` is installed, else
    the DOT text beside it (`path` with the suffix `.dot`)."""
    module = module_at_stage(fn, example_args, stage, target)
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "function"))
    result = IRGraph(to_dot(module, max_region_ops=max_region_ops, title=f"{name} after {stage}"), stage)
    if path is not None:
        path = Path(path)
        if path.suffix == ".svg" and not dot_available():
            path = path.with_suffix(".dot")
        result.save(path)
    return result
