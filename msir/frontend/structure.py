"""Frontend values as structures of runtime leaves.

A value the translator passes across a function boundary (returned, given to
an outlined function, a function value's arguments or results) is a structure
(`("tuple" | "list", [...])`, `("leaf", k)`, `("const", value)`) and a list of
runtime leaves (`Tensor`s). These helpers take values apart and put them back
together from SSA results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from msir.dialects import msir as M
from msir.frontend.values import KnownInt, Tensor

if TYPE_CHECKING:
    from xdsl.ir import SSAValue


def _rebuild(structure, leaves):
    kind_, payload = structure
    if kind_ == "tuple":
        return tuple(_rebuild(s, leaves) for s in payload)
    if kind_ == "list":
        return [_rebuild(s, leaves) for s in payload]
    if kind_ == "leaf":
        return next(leaves)
    return payload


def _tensors(values: Sequence[SSAValue], weak: Sequence[bool]) -> list[Tensor]:
    out = []
    for k, v in enumerate(values):
        w = weak[k] if k < len(weak) else False
        out.append(Tensor(v, M.dtype_of(v.type), M.shape_of(v.type), w))
    return out


def _runtime_leaves(v: Any) -> list[Any]:
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _runtime_leaves(item)]
    if isinstance(v, (Tensor, KnownInt)):
        return [v]
    return []


def _structure_of(v: Any) -> Any:
    if isinstance(v, tuple):
        return ("tuple", [_structure_of(x) for x in v])
    if isinstance(v, list):
        return ("list", [_structure_of(x) for x in v])
    if isinstance(v, (Tensor, KnownInt)):
        return ("leaf", 0)
    return ("const", v)


def _struct_leaves(structure: Any) -> list[Any]:
    kind_, payload = structure
    if kind_ in ("tuple", "list"):
        return [x for s in payload for x in _struct_leaves(s)]
    return [structure] if kind_ == "leaf" else []


def _rebuild_like(template: Any, leaves) -> Any:
    """`template`'s structure with its runtime leaves taken from `leaves`."""
    if isinstance(template, tuple):
        return tuple(_rebuild_like(x, leaves) for x in template)
    if isinstance(template, list):
        return [_rebuild_like(x, leaves) for x in template]
    if isinstance(template, (Tensor, KnownInt)):
        return next(leaves)
    return None


def _leaves(values: list[Any]) -> list[Tensor]:
    out: list[Tensor] = []
    for v in values:
        if isinstance(v, (tuple, list)):
            out.extend(_leaves(list(v)))
        elif isinstance(v, KnownInt):
            out.append(v.tensor)
        elif isinstance(v, Tensor):
            out.append(v)
    return out
