"""`nn.Cell`, MindSpore's network building block, and the containers `SequentialCell`, `CellList`.

A Cell is a plain Python object to msir's compiler: a subclass writes
`__init__` (its Parameters and sub-cells as attributes) and `construct`, and
calling it runs `construct`:

* in GRAPH_MODE (msir's default) `net(x)` compiles `construct` with the
  frontend (`msir.jit(net)`, once per argument signature) and calls the
  native code. Attributes are read from `self` at compile time; Parameters
  and Tensors are hidden runtime arguments read at every call (updating a
  Parameter never recompiles); sub-cells are calls of their `construct`,
  inlined; every other attribute `construct` reads (`self.training`
  included) is a guard of the compiled code, so `set_train()` or a changed
  attribute compiles again instead of running stale code;
* in PYNATIVE_MODE `construct` runs as Python, op by op, on Tensors; under an
  auto-parallel context that runs on one device, unsharded, so the outermost
  such call warns (`nn.TrainOneStepCell` and `Model.train` run their
  compiled step sharded instead, `msir.nn.wrap`).

A `construct` may update its Parameters in both modes, as MindSpore's may:
`ops.assign(self.p, v)`, or `self.p = v` with a Tensor `v` (which sets the
Parameter, not the attribute). Compiled code returns the new values and the
call writes them into the Parameters (`msir.frontend.parameter_writes`).

Either way the results are Tensors (`msir.common.tensor`), whatever the
arguments were. A compiled Cell is found again by the persistent trace cache
(`msir.trace_cache`: keyed by its class, with what `construct` read from
`self` and its Tensors' dtypes and shapes in the manifest), so another
instance or another process does not trace it again. Inside compiled code (a jitted function or a transform
calling `net(x)`) a Cell call is an ordinary inlined call.

`bprop(self, *inputs, out, dout)` gives a Cell a custom backward, as in
MindSpore: in compiled code it is the reverse rule of the Cell's `construct`
through msir's custom-vjp mechanism (`msir.custom_vjp`: the forward keeps
the inputs and the output, the backward calls `bprop`); in PYNATIVE_MODE
`construct` is one node of the eager tape whose adjoint is `bprop`
(`msir.eager.tracer.custom_vjp_call`). A bprop Cell may not hold Parameters
(a clear error: pass them as arguments instead); in PyNative it has one output.

Parameter names follow MindSpore (see `msir.common.parameter`):
`parameters_and_names()` gives the attribute paths ("fc1.weight").
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from msir import ops
from msir.common.parameter import PARAMETER_NAME_DEFAULT, Parameter
from msir.common.tensor import Tensor, unwrap, wrap
from msir.context import auto_parallel_key, pynative
from msir.errors import ShapeError, UnsupportedSyntaxError
from msir.transforms import CustomVjp, compile_time


class Cell:
    """The base class of networks and layers (mindspore.nn.Cell)."""

    __msir_plain_object__ = True
    """Compiled code reads a Cell's attributes (`msir.trace_cache.is_plain_object`)."""
    __msir_call__ = "construct"
    """What a call of a Cell runs in compiled code (`msir.transforms.compiled_call_name`)."""

    def __init__(self, auto_prefix: bool = True, flags: dict | None = None):
        object.__setattr__(self, "_params", OrderedDict())
        object.__setattr__(self, "_cells", OrderedDict())
        object.__setattr__(self, "_auto_prefix", auto_prefix)
        object.__setattr__(self, "_scope", "")
        object.__setattr__(self, "_graph", None)
        object.__setattr__(self, "training", False)
        object.__setattr__(self, "requires_grad", False)

    # -- attributes: Parameters and sub-cells are registered ---------------------

    def __setattr__(self, name: str, value: Any) -> None:
        registry = self.__dict__.get("_params")
        if registry is None and isinstance(value, (Parameter, Cell)):
            raise AttributeError(
                f"{type(self).__name__}: assign Parameters and Cells after calling super().__init__() "
                f"(attribute '{name}')"
            )
        if isinstance(value, Parameter):
            self.insert_param_to_cell(name, value)
        elif registry is not None and registry.get(name) is not None and _is_tensor_value(value):
            # MindSpore: a Tensor assigned to a Parameter attribute sets the Parameter's value
            ops.assign(registry[name], value)
        elif isinstance(value, Cell):
            self.insert_child_to_cell(name, value)
        else:
            if registry is not None:
                self._params.pop(name, None)
                self._cells.pop(name, None)
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._params.pop(name, None)
        self._cells.pop(name, None)
        object.__delattr__(self, name)

    def insert_param_to_cell(self, param_name: str, param: Parameter, check_name_contain_dot: bool = True) -> None:
        """Register `param` as attribute `param_name` (named so if it has no name yet)."""
        if check_name_contain_dot and "." in param_name:
            raise KeyError(f"the name of a parameter attribute cannot contain '.': {param_name!r}")
        if param.name == PARAMETER_NAME_DEFAULT:
            param.name = self._scope + param_name
        self._params[param_name] = param
        object.__setattr__(self, param_name, param)

    def insert_child_to_cell(self, child_name: str, child_cell: "Cell") -> None:
        """Register `child_cell` as attribute `child_name`; its parameters' names
        get the prefix `child_name.` (MindSpore's auto_prefix)."""
        self._cells[child_name] = child_cell
        object.__setattr__(self, child_name, child_cell)
        if self._auto_prefix:
            child_cell.update_parameters_name(self._scope + child_name + ".")

    def update_parameters_name(self, prefix: str = "", recurse: bool = True) -> None:
        """Prefix the names of this Cell's parameters (and its sub-cells') with `prefix`."""
        object.__setattr__(self, "_scope", prefix + self._scope)
        for _, p in self.parameters_and_names(expand=recurse):
            p.name = prefix + p.name
        for _, cell in self.cells_and_names():
            if cell is not self:
                object.__setattr__(cell, "_scope", prefix + cell._scope)

    # -- traversal ------------------------------------------------------------------

    def cells_and_names(self, cells: set | None = None, name_prefix: str = "") -> Iterator[tuple[str, "Cell"]]:
        """This Cell and every Cell under it, each once, with its attribute path."""
        seen = set() if cells is None else cells
        if id(self) in seen:
            return
        seen.add(id(self))
        yield name_prefix, self
        for name, cell in self._cells.items():
            if cell is not None:
                yield from cell.cells_and_names(seen, f"{name_prefix}.{name}" if name_prefix else name)

    def cells(self):
        """The direct sub-cells."""
        return self.name_cells().values()

    def name_cells(self) -> "OrderedDict[str, Cell]":
        """The direct sub-cells by attribute name."""
        return OrderedDict((n, c) for n, c in self._cells.items() if c is not None)

    def parameters_and_names(self, name_prefix: str = "", expand: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Every Parameter (each once) with its attribute path, as MindSpore names them."""
        cells = self.cells_and_names(name_prefix=name_prefix) if expand else [(name_prefix, self)]
        seen: set[int] = set()
        for cell_name, cell in cells:
            for name, p in cell._params.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{cell_name}.{name}" if cell_name else name), p

    def get_parameters(self, expand: bool = True) -> Iterator[Parameter]:
        for _, p in self.parameters_and_names(expand=expand):
            yield p

    def trainable_params(self, recurse: bool = True) -> list[Parameter]:
        """The Parameters with `requires_grad` (what an optimizer updates, what `weights=` differentiates)."""
        return [p for p in self.get_parameters(expand=recurse) if p.requires_grad]

    def untrainable_params(self, recurse: bool = True) -> list[Parameter]:
        return [p for p in self.get_parameters(expand=recurse) if not p.requires_grad]

    def parameters_dict(self, recurse: bool = True) -> "OrderedDict[str, Parameter]":
        return OrderedDict((p.name, p) for p in self.get_parameters(expand=recurse))

    # -- modes ---------------------------------------------------------------------

    def set_train(self, mode: bool = True) -> "Cell":
        """Training (True) or evaluation (False) for this Cell and every Cell
        under it (`self.training`: Dropout and the like read it). Compiled code
        that read `training` compiles again."""
        for _, cell in self.cells_and_names():
            object.__setattr__(cell, "training", bool(mode))
        return self

    def set_grad(self, requires_grad: bool = True) -> "Cell":
        object.__setattr__(self, "requires_grad", bool(requires_grad))
        return self

    @property
    def cls_name(self) -> str:
        return type(self).__name__

    # -- calling ---------------------------------------------------------------------

    def construct(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define construct()")

    def __call__(self, *args, **kwargs):
        if pynative():
            if _has_bprop(self) and _any_traced(args):
                return self._construct_with_bprop(args, kwargs)
            if _eager_depth[0] or auto_parallel_key() is None:
                return wrap(self.construct(*args, **kwargs))
            if not _any_traced(args):
                warnings.warn(f"{type(self).__name__} runs eagerly on one device: under set_auto_parallel_context, "
                              f"PYNATIVE_MODE runs only nn.TrainOneStepCell and Model.train sharded (as compiled "
                              f"steps); to run this Cell sharded, call it in GRAPH_MODE or through msir.jit",
                              UserWarning, stacklevel=2)
            _eager_depth[0] += 1  # the Cells it calls are part of it: no warning of their own
            try:
                return wrap(self.construct(*args, **kwargs))
            finally:
                _eager_depth[0] -= 1
        graph = self._graph
        if graph is None:
            from msir.api import JitFunction

            graph = JitFunction(self)
            object.__setattr__(self, "_graph", graph)
        return wrap(graph(*args, **kwargs))

    def _construct_with_bprop(self, args: tuple, kwargs: dict) -> Any:
        """PyNative differentiation of a bprop Cell: `construct` recorded as one
        node of the eager tape whose adjoint is `bprop` (`msir.eager.tracer.custom_vjp_call`)."""
        from msir.eager.tracer import custom_vjp_call

        self._check_bprop_holds_no_parameters()
        if kwargs:
            raise UnsupportedSyntaxError(f"{type(self).__name__}.bprop: pass the inputs of a bprop Cell by position")

        def primal(*xs):
            return unwrap(self.construct(*wrap(xs)))

        def backward(xs, out, dout):
            grads = self.bprop(*wrap(tuple(xs)), wrap(out), wrap(dout))
            return unwrap(grads if isinstance(grads, tuple) else (grads,))

        return wrap(custom_vjp_call(primal, backward, list(unwrap(args)), f"{type(self).__name__}.bprop"))

    def _check_bprop_holds_no_parameters(self) -> None:
        held = [name for name, _ in self.parameters_and_names()]
        if held:
            raise UnsupportedSyntaxError(
                f"{type(self).__name__}.bprop: a Cell with a custom backward cannot hold Parameters in msir yet "
                f"({', '.join(held)}); keep them in a Cell around it and pass them to this one as arguments"
            )

    def __msir_custom_vjp__(self, method) -> CustomVjp | None:
        """The Cell as a function with its custom backward (`bprop`), or None.
        `method(name)` is the bound method compiled code reads."""
        if not _has_bprop(self):
            return None
        self._check_bprop_holds_no_parameters()
        rule = CustomVjp(method("construct"))
        rule.__name__ = f"{type(self).__name__}.construct"
        return rule.defvjp(_KeepInputs(rule.fn), _CallBprop(method("bprop"), type(self).__name__))

    def __getstate__(self) -> dict:
        """The Cell without its compiled code (copies and pickles compile again)."""
        return {k: (None if k == "_graph" else v) for k, v in self.__dict__.items() if not k.startswith("__msir_jit_")}

    # -- printing ------------------------------------------------------------------------

    def extend_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}<{self.extend_repr()}"]
        for name, cell in self.name_cells().items():
            child = repr(cell).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        return "\n".join(lines) + (">" if len(lines) == 1 else "\n  >")


def _is_tensor_value(value: Any) -> bool:
    from msir.eager.tracer import Tracer

    return isinstance(value, Tensor) or type(value) is Tracer


def _has_bprop(cell: Cell) -> bool:
    return callable(getattr(type(cell), "bprop", None))


_eager_depth = [0]
"""How many Cells under an auto-parallel context are running eagerly (PYNATIVE_MODE) around this call."""


def _any_traced(args: tuple) -> bool:
    from msir.eager.tracer import Tracer

    return any(type(a) is Tracer for a in unwrap(args))


class _KeepInputs:
    """The forward of a bprop Cell: `construct`'s output, and as residuals the inputs and the output."""

    def __init__(self, construct):
        self.construct = construct
        self.__name__ = f"{construct.__self__.__class__.__name__}_forward"

    def __msir_translate__(self, tr, args: list, kwargs: dict, node) -> Any:
        out = tr.call_value(self.construct, list(args), kwargs, node)
        return out, (tuple(args), out)


class _CallBprop:
    """The backward of a bprop Cell: `bprop(*inputs, out, dout)`, one gradient per input."""

    def __init__(self, bprop, cell_name: str):
        self.bprop = bprop
        self.__name__ = f"{cell_name}_bprop"

    def __msir_translate__(self, tr, args: list, kwargs: dict, node) -> Any:
        (inputs, out), dout = args
        grads = tr.call_value(self.bprop, [*inputs, out, dout], {}, node)
        return grads if isinstance(grads, tuple) else (grads,)


@compile_time("python")
def check_input(layer: Cell, shape: tuple, expected: tuple) -> None:
    """Refuse an input of `shape` to `layer` unless it matches `expected`:
    a tuple of ints and None (any size), `...` first for any leading axes.
    Called by layers' `construct`: at compile time in compiled code (shapes
    are static), at the call in PyNative mode. The error names the layer, the
    expected and the received shape."""
    shape = tuple(shape)
    leading = len(expected) > 0 and expected[0] is Ellipsis
    tail = expected[1:] if leading else expected
    matches = (len(shape) >= len(tail) if leading else len(shape) == len(tail)) and all(
        e is None or e == s for e, s in zip(reversed(tail), reversed(shape))
    )
    if not matches:
        shown = ", ".join("..." if e is Ellipsis else "?" if e is None else str(e) for e in expected)
        where = f" '{layer._scope.rstrip('.')}'" if layer._scope else ""
        raise ShapeError(
            f"{type(layer).__name__}{where}: expected an input of shape ({shown}), got {tuple(shape)}"
        )


class SequentialCell(Cell):
    """Cells called in order, each on the previous one's output (mindspore.nn.SequentialCell):
    `SequentialCell(c1, c2)`, `SequentialCell([c1, c2])` or an OrderedDict of named cells."""

    def __init__(self, *args):
        super().__init__()
        cells = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple, OrderedDict, dict)) else args
        items = cells.items() if isinstance(cells, (OrderedDict, dict)) else ((str(i), c) for i, c in enumerate(cells))
        for name, cell in items:
            if not isinstance(cell, Cell):
                raise TypeError(f"SequentialCell holds Cells, got {type(cell).__name__}")
            self.insert_child_to_cell(name, cell)
        self.cell_list = list(self._cells.values())

    def __getitem__(self, index):
        if isinstance(index, slice):
            return SequentialCell(list(self._cells.values())[index])
        return list(self._cells.values())[index]

    def __len__(self) -> int:
        return len(self._cells)

    def append(self, cell: Cell) -> "SequentialCell":
        self.insert_child_to_cell(str(len(self._cells)), cell)
        self.cell_list = list(self._cells.values())
        return self

    def construct(self, input_data):
        for cell in self.cell_list:
            input_data = cell(input_data)
        return input_data


class CellList(Cell, list):
    """A list of Cells whose parameters belong to the Cell holding it
    (mindspore.nn.CellList): iterate or index it in `construct`."""

    def __init__(self, *args):
        Cell.__init__(self)
        list.__init__(self)
        for cell in (args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args):
            self.append(cell)

    def append(self, cell: Cell) -> None:
        if not isinstance(cell, Cell):
            raise TypeError(f"CellList holds Cells, got {type(cell).__name__}")
        self.insert_child_to_cell(str(len(self)), cell)
        list.append(self, cell)

    def extend(self, cells) -> "CellList":
        for cell in cells:
            self.append(cell)
        return self

    def construct(self, *inputs):
        raise TypeError("a CellList is not callable: call its cells")

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return Cell.__repr__(self)


__all__ = ["Cell", "CellList", "SequentialCell", "check_input"]
