"""Argument and result trees: the leaves of nested tuples and lists.

msir passes tuples and lists of arrays as their leaves (`None` and strings are
constants, not leaves) and rebuilds results from them. A leaf of msir's import
graph, shared by the API, the eager engine and the vjp runtime.
"""

from __future__ import annotations

from typing import Any


def leaves(a: Any, out: list[Any]) -> None:
    """Append the leaves of `a` (depth first) to `out`."""
    t = type(a)
    if t is tuple or t is list:
        for x in a:
            leaves(x, out)
    elif not (a is None or t is str):
        out.append(a)


def rebuild_leaves(template: Any, values) -> Any:
    """`template`'s tuples and lists with its leaves (not None/str) taken from the iterator `values`."""
    t = type(template)
    if t is tuple:
        return tuple(rebuild_leaves(x, values) for x in template)
    if t is list:
        return [rebuild_leaves(x, values) for x in template]
    if template is None or t is str:
        return template
    return next(values)


def count_leaves(spec: Any) -> int:
    """The number of arguments of the traced function a parameter's spec
    (`msir.frontend.driver.spec_of`) becomes."""
    if spec[0] in ("tuple", "list"):
        return sum(count_leaves(s) for s in spec[1])
    return 0 if spec[0] == "const" else 1
