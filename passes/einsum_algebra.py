"""Einsum's index algebra, written against the differentiation rules' `Builder`
interface (`msir.passes.grad_rules`): the same code emits msir ops
(`IRBuilder`, in `msir-lower-einsum` and the einsum rules) and computes on NumPy
arrays (`NumpyBuilder`, so the decomposition is checked against `np.einsum`
without compiling).

* `einsum_terms`: the operand terms and the output term of a verified spec.
* `take_diagonals`: the diagonal of every repeated subscript of an operand
  (`ii->i`): its axes grouped by transpose, flattened by reshape, and read by
  one strided `slice` (step 1 + n + n^2 ... walks the diagonal of n^k elements).
  `scatter_diagonals` is its adjoint: the same layout, `scatter_slice` back.
* `decompose_einsum`: an einsum as primitives. Repeated subscripts take their
  diagonal; subscripts of one operand only that the output lacks are summed
  (`reduce_sum`) first. Two operands with a contracted subscript and a free
  one become transpose -> reshape -> (batched) `matmul` -> reshape ->
  transpose, with the subscript orders and operand roles chosen to copy the
  fewest elements (a transpose of the last two axes costs nothing: the matmul
  reads it in place as the BLAS transpose flag). Otherwise (outer and
  elementwise products, dots, batches of dots) the operands are broadcast
  against each other, multiplied, and the contracted axes summed.

No msir or xDSL imports: the eager path imports the rules, and with them this module.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

V = Any  # a builder value (see grad_rules.V)


def einsum_terms(spec: str) -> tuple[list[str], str]:
    """`"ij,jk->ik"` -> `(["ij", "jk"], "ik")`, for a spec `msir.einsum` verified."""
    inputs, _, output = spec.partition("->")
    return inputs.split(","), output


def einsum_spec(terms: Sequence[str], output: str) -> str:
    return ",".join(terms) + "->" + output


def distinct(term: str) -> str:
    """The subscripts of `term`, each once, in order of first appearance."""
    return "".join(dict.fromkeys(term))


def _inverse(perm: Sequence[int]) -> list[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


def _swap_last(rank: int) -> list[int]:
    return [*range(rank - 2), rank - 1, rank - 2]


# -- diagonals -------------------------------------------------------------------


@dataclass(frozen=True)
class _DiagonalLayout:
    """An operand with repeated subscripts, its axes grouped by subscript and each
    group flattened: group c of size n**count holds c's diagonal at step 1+n+...+n**(count-1)."""

    perm: list[int]
    grouped: list[int]
    sizes: list[int]
    steps: list[int]

    @staticmethod
    def of(term: str, shape: Sequence[int]) -> _DiagonalLayout:
        letters = distinct(term)
        size = dict(zip(term, shape))
        count = {c: term.count(c) for c in letters}
        return _DiagonalLayout(
            perm=[axis for c in letters for axis, d in enumerate(term) if d == c],
            grouped=[size[c] ** count[c] for c in letters],
            sizes=[size[c] for c in letters],
            steps=[sum(size[c] ** j for j in range(count[c])) for c in letters],
        )


def take_diagonals(B, x: V, term: str) -> tuple[V, str]:
    """`x` (axes named by `term`) reduced to the diagonal of each repeated
    subscript, and its subscripts (`distinct(term)`)."""
    if len(set(term)) == len(term):
        return x, term
    layout = _DiagonalLayout.of(term, B.shape(x))
    flat = B.reshape(B.transpose(x, layout.perm), layout.grouped)
    return B.slice(flat, [0] * len(layout.sizes), layout.sizes, layout.steps), distinct(term)


def scatter_diagonals(B, g: V, term: str, shape: Sequence[int]) -> V:
    """The adjoint of `take_diagonals`: zeros of `shape` (axes named by `term`)
    with `g` (axes `distinct(term)`) on the diagonals."""
    if len(set(term)) == len(term):
        return g
    layout = _DiagonalLayout.of(term, shape)
    flat = B.scatter_slice(g, [0] * len(layout.sizes), layout.steps, layout.grouped)
    grouped_axes = B.reshape(flat, [shape[a] for a in layout.perm])
    return B.transpose(grouped_axes, _inverse(layout.perm))


# -- the decomposition -----------------------------------------------------------


def decompose_einsum(B, spec: str, xs: Sequence[V]) -> V:
    """`einsum(spec, *xs)` computed with the builder's primitives (see the module
    docstring); the result has the einsum's shape and dtype."""
    terms, out = einsum_terms(spec)
    operands: list[tuple[V, str]] = []
    for i, (x, term) in enumerate(zip(xs, terms)):
        x, term = take_diagonals(B, x, term)
        elsewhere = out + "".join(t for j, t in enumerate(terms) if j != i)
        summed = [axis for axis, c in enumerate(term) if c not in elsewhere]
        x = B.reduce("sum", x, summed, False)
        operands.append((x, "".join(c for c in term if c in elsewhere)))
    if len(operands) == 1:
        x, term = operands[0]
        return B.transpose(x, [term.index(c) for c in out])
    (a, ta), (b, tb) = operands
    sizes = {**dict(zip(ta, B.shape(a))), **dict(zip(tb, B.shape(b)))}
    contracted = (set(ta) & set(tb)) - set(out)
    free = set(ta) ^ set(tb)
    if contracted and free:
        plan = min(_matmul_plans(ta, tb, out, sizes), key=lambda p: p.cost)
        return plan.emit(B, a, b)
    return _multiply_and_sum(B, (a, ta), (b, tb), out, "".join(c for c in ta if c in contracted), sizes)


def _multiply_and_sum(B, a: tuple[V, str], b: tuple[V, str], out: str, contracted: str,
                      sizes: dict[str, int]) -> V:
    """Both operands broadcast to axes `out + contracted`, multiplied, and the
    contracted (trailing) axes summed: products without a matrix in them, where
    a matmul would have a unit dimension (an outer product has k = 1, a dot
    m = n = 1) and a fused multiply does the same work with no BLAS call."""
    order = out + contracted
    product = B.binary("mul", _spread(B, *a, order, sizes), _spread(B, *b, order, sizes))
    return B.reduce("sum", product, list(range(len(out), len(order))), False)


def _spread(B, x: V, term: str, order: str, sizes: dict[str, int]) -> V:
    """`x` (axes `term`) broadcast to the axes `order`: transposed into that order,
    with a unit axis for each subscript it lacks after its first one (NumPy's
    broadcasting supplies the leading ones)."""
    mine = [c for c in order if c in term]
    x = B.transpose(x, [term.index(c) for c in mine])
    first = next((k for k, c in enumerate(order) if c in term), len(order))
    x = B.reshape(x, [sizes[c] if c in term else 1 for c in order[first:]])
    return B.broadcast_to(x, [sizes[c] for c in order])


@dataclass(frozen=True)
class _MatmulOperand:
    """How one operand becomes a (batched) matmul operand: transposed into
    `layout`, reshaped to `shape` (batch, free, contracted groups flattened; a
    vector without batch or free subscripts), then, with `swap`, its last two
    axes swapped (for free, in the matmul)."""

    layout: str
    shape: list[int]
    swap: bool
    cost: int

    @staticmethod
    def plan(term: str, batch: str, free: str, contracted: str, sizes: dict[str, int],
             lhs: bool) -> _MatmulOperand:
        size = math.prod(sizes[c] for c in term)
        if not batch and not free:
            layout, shape, swap = contracted, [math.prod(sizes[c] for c in contracted)], False
        else:
            groups = (free, contracted) if lhs else (contracted, free)
            plain, swapped = batch + groups[0] + groups[1], batch + groups[1] + groups[0]
            swap = term == swapped != plain
            layout = swapped if swap else plain
            inner = groups[::-1] if swap else groups
            shape = ([math.prod(sizes[c] for c in batch)] if batch else []) + [
                math.prod(sizes[c] for c in g) for g in inner
            ]
        cost = (size if term != layout else 0) + (size if shape != [sizes[c] for c in layout] else 0)
        return _MatmulOperand(layout, shape, swap, cost)

    def emit(self, B, x: V, term: str) -> V:
        x = B.reshape(B.transpose(x, [term.index(c) for c in self.layout]), self.shape)
        return B.transpose(x, _swap_last(len(self.shape))) if self.swap else x


@dataclass(frozen=True)
class _MatmulPlan:
    """`matmul(lhs, rhs)` of the planned operands (`swapped`: b is the lhs), its
    result (axes `batch + lhs free + rhs free`) reshaped and transposed to `out`.
    `cost`: elements copied by transposes and reshapes that are not free."""

    swapped: bool
    terms: tuple[str, str]
    lhs: _MatmulOperand
    rhs: _MatmulOperand
    natural: str
    out: str
    out_shape: list[int]
    cost: int

    def emit(self, B, a: V, b: V) -> V:
        x, y = (b, a) if self.swapped else (a, b)
        product = B.matmul(self.lhs.emit(B, x, self.terms[0]), self.rhs.emit(B, y, self.terms[1]))
        product = B.reshape(product, self.out_shape)
        return B.transpose(product, [self.natural.index(c) for c in self.out])


def _orders(letters: set[str], *terms: str) -> list[str]:
    """The distinct orders in which `terms` list `letters`."""
    return list(dict.fromkeys("".join(c for c in t if c in letters) for t in terms))


def _matmul_plans(ta: str, tb: str, out: str, sizes: dict[str, int]) -> Iterator[_MatmulPlan]:
    """Every plan that takes each group's subscript order from a tensor holding
    it, with either operand as the lhs (the output's orders and a as the lhs
    first, so that they win ties)."""
    batch, contracted = set(ta) & set(tb) & set(out), (set(ta) & set(tb)) - set(out)
    free_a, free_b = set(ta) - set(tb), set(tb) - set(ta)
    out_size = math.prod(sizes[c] for c in out)
    for bt in _orders(batch, out, ta, tb):
        for fa in _orders(free_a, out, ta):
            for fb in _orders(free_b, out, tb):
                for k in _orders(contracted, ta, tb):
                    for swapped in (False, True):
                        (tl, fl), (tr, fr) = ((tb, fb), (ta, fa)) if swapped else ((ta, fa), (tb, fb))
                        lhs = _MatmulOperand.plan(tl, bt, fl, k, sizes, lhs=True)
                        rhs = _MatmulOperand.plan(tr, bt, fr, k, sizes, lhs=False)
                        natural = bt + fl + fr
                        product_shape = ([math.prod(sizes[c] for c in bt)] if bt else []) + [
                            math.prod(sizes[c] for c in f) for f, v in ((fl, lhs), (fr, rhs))
                            if len(v.shape) > 1
                        ]
                        out_shape = [sizes[c] for c in natural]
                        cost = lhs.cost + rhs.cost + (out_size if product_shape != out_shape else 0) + (
                            out_size if natural != out else 0
                        )
                        yield _MatmulPlan(swapped, (tl, tr), lhs, rhs, natural, out, out_shape, cost)
