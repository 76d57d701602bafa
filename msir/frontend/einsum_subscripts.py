"""NumPy's `np.einsum` subscripts as `msir.einsum` specs, shared by the compiled
frontend and the eager tracer.

`plan_einsum(subscripts, shapes, dtypes)` reads a call as NumPy does and says
how to compute it with the op, whose spec leaves nothing implicit (one or two
operands, letters only, an explicit output; see `msir.dialects.msir.parse_einsum`):

* spaces are ignored; an implicit output (no `->`) is the letters that appear
  exactly once, in ASCII order (uppercase first), after the ellipsis axes;
* `...` becomes letters the subscripts do not use, right-aligned across the
  operands (an operand with fewer broadcast axes takes the last ones);
* a subscript's size is the one size other than 1 it has across the operands:
  an axis of size 1 is stretched (`EinsumPlan.shapes`, the `broadcast_to`
  target of each operand), as NumPy broadcasts it;
* every operand is cast to the promoted dtype (`np.result_type` of the
  operands: einsum converts Python numbers to arrays, so none is weak);
  booleans are refused, as for matmul;
* three or more operands contract pairwise, left to right, each intermediate
  keeping the letters a later operand or the output still needs
  (`EinsumPlan.steps`).

Errors (`ShapeError`, `DTypeError`) carry no location: the caller adds the
user's.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from msir.errors import DTypeError, ShapeError
from msir.frontend.values import promote

_LETTERS = string.ascii_letters


@dataclass(frozen=True)
class EinsumPlan:
    dtype: str
    """The dtype every operand is cast to."""
    shapes: tuple[tuple[int, ...], ...]
    """Each operand's shape with its size-1 axes stretched to their subscript's size."""
    steps: tuple[str, ...]
    """Explicit specs: one for one or two operands; for more, step k contracts
    the result so far (operand 0 at first) with operand k + 1."""


def plan_einsum(
    subscripts: str, shapes: Sequence[Sequence[int]], dtypes: Sequence[str], fname: str = "np.einsum"
) -> EinsumPlan:
    """How to compute `np.einsum(subscripts, *operands)` for operands of `shapes`
    and `dtypes`; error messages name the function `fname`."""
    terms, output = _explicit_terms(subscripts, [len(s) for s in shapes], fname)
    sizes = _subscript_sizes(terms, shapes, fname)
    dtype = dtypes[0]
    for d in dtypes[1:]:
        dtype, _ = promote(dtype, False, d, False)
    if dtype == "bool":
        raise DTypeError(f"{fname} of boolean arrays is not supported (cast them to a number type first)")
    stretched = tuple(tuple(sizes[c] for c in term) for term in terms)
    return EinsumPlan(dtype, stretched, _pairwise_steps(terms, output))


def contract(plan: EinsumPlan, operands: Sequence[Any], einsum: Callable[[str, list], Any]) -> Any:
    """Run `plan.steps` on `operands` (already cast and stretched) with
    `einsum(spec, values)`; a one-operand identity spec is the operand itself."""
    if len(operands) == 1:
        (spec,) = plan.steps
        term, _, output = spec.partition("->")
        return operands[0] if term == output else einsum(spec, [operands[0]])
    result = operands[0]
    for spec, operand in zip(plan.steps, operands[1:]):
        result = einsum(spec, [result, operand])
    return result


def _explicit_terms(subscripts: str, ranks: Sequence[int], fname: str) -> tuple[list[str], str]:
    """The operand terms and the output with `...` expanded and the output explicit."""
    spec = subscripts.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    if "->" in output:
        raise ShapeError(f"{fname} subscripts '{subscripts}' have more than one '->'")
    terms = inputs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(
            f"{fname} subscripts '{subscripts}' name {len(terms)} operands, but {len(ranks)} were given"
        )
    for where, term in [*((f"operand {i}", t) for i, t in enumerate(terms)), ("the output", output)]:
        _check_characters(subscripts, where, term, fname)
    used = set(inputs + output) - set(".,")
    free = [c for c in _LETTERS if c not in used]
    broadcast_ranks = []
    for i, (term, rank) in enumerate(zip(terms, ranks)):
        named = len(term.replace("...", ""))
        if "..." in term and rank < named:
            raise ShapeError(
                f"{fname} operand {i} has {rank} dimensions, fewer than the {named} its subscripts '{term}' name"
            )
        if "..." not in term and rank != named:
            raise ShapeError(
                f"{fname} operand {i} has {rank} dimensions, but its subscripts '{term}' name {named} "
                "(use '...' to broadcast the others)"
            )
        broadcast_ranks.append(rank - named)
    n_broadcast = max(broadcast_ranks, default=0)
    if n_broadcast > len(free):
        raise ShapeError(f"{fname} subscripts '{subscripts}' need more than the {len(_LETTERS)} letters")
    ellipsis = "".join(free[:n_broadcast])
    terms = [t.replace("...", ellipsis[n_broadcast - k :]) for t, k in zip(terms, broadcast_ranks)]
    if arrow:
        if "..." not in output and n_broadcast:
            raise ShapeError(
                f"{fname} subscripts '{subscripts}' broadcast axes with '...' but the output has no '...'"
            )
        output = output.replace("...", ellipsis)
    else:
        letters = "".join(terms)
        output = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ellipsis))
    for c in output:
        if output.count(c) > 1:
            raise ShapeError(f"{fname} output subscript '{c}' appears more than once in '{subscripts}'")
        if not any(c in t for t in terms):
            raise ShapeError(f"{fname} output subscript '{c}' appears in no operand of '{subscripts}'")
    return terms, output


def _check_characters(subscripts: str, where: str, term: str, fname: str) -> None:
    if term.count("...") > 1:
        raise ShapeError(f"{fname} subscripts '{subscripts}' have more than one '...' in {where}")
    for c in term.replace("...", ""):
        if c == ".":
            raise ShapeError(f"{fname} subscripts '{subscripts}' have a '.' that is not part of '...' in {where}")
        if c not in _LETTERS:
            raise ShapeError(f"{fname} subscripts '{subscripts}' have the invalid subscript {c!r} (letters only)")


def _subscript_sizes(terms: Sequence[str], shapes: Sequence[Sequence[int]], fname: str) -> dict[str, int]:
    """Each subscript's size: axes of one operand that share a subscript (a
    diagonal) agree exactly; across operands a size of 1 stretches."""
    sizes: dict[str, int] = {}
    where: dict[str, int] = {}
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        own: dict[str, int] = {}
        for c, d in zip(term, shape):
            if c in own and own[c] != d:
                raise ShapeError(
                    f"{fname} operand {i} of shape {tuple(shape)} repeats subscript '{c}' on axes of sizes "
                    f"{own[c]} and {d}"
                )
            own[c] = d
        for c, d in own.items():
            if c not in sizes or sizes[c] == 1:
                sizes[c], where[c] = d, i
            elif d != 1 and d != sizes[c]:
                raise ShapeError(
                    f"{fname} subscript '{c}' has size {sizes[c]} in operand {where[c]} but {d} in operand {i}"
                )
    return sizes


def _pairwise_steps(terms: Sequence[str], output: str) -> tuple[str, ...]:
    if len(terms) == 1:
        return (f"{terms[0]}->{output}",)
    steps = []
    so_far = terms[0]
    for k in range(1, len(terms)):
        if k == len(terms) - 1:
            result = output
        else:
            needed = set(output).union(*terms[k + 1 :])
            result = "".join(c for c in dict.fromkeys(so_far + terms[k]) if c in needed)
        steps.append(f"{so_far},{terms[k]}->{result}")
        so_far = result
    return tuple(steps)
