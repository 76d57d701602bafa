"""Meshes, layouts and strategies: the vocabulary of auto-parallel planning.

* A `Mesh` is a grid of devices, `(n0,)` or `(n0, n1, ...)`, with optional axis
  names (`../shared/parallel.md` §2).
* A `Layout` says how a value is stored: `dims[i]` lists the mesh axes that
  split its dimension i (major to minor), `partial` the mesh axes over which
  the global value is the sum of the local ones. Its text form is
  `dims=[[0],[]], partial=[1]`.
* A strategy assigns, to each mesh axis, one loop letter of an op (or None:
  the axis is unused, the work replicated along it). Text form `"m,-"`;
  MindSpore's per-input slice tuples `((2, 1), (1, 4))` are converted to it
  (`strategy_from_slices`). Several axes on one loop split it by their
  product, the lower axis index major; a strategy is valid only if that
  product divides the loop's size.

Nothing here imports xDSL: a plan's layouts and strategies are plain data.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Strategy = tuple  # one loop letter (str) or None per mesh axis


@dataclass(frozen=True)
class Mesh:
    """A grid of devices: `shape[a]` devices along mesh axis a."""

    shape: tuple[int, ...]
    axis_names: tuple[str, ...] | None = None

    def __post_init__(self):
        if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in self.shape):
            raise ValueError(f"a mesh shape is a tuple of device counts, got {self.shape!r}")
        shape = tuple(int(n) for n in self.shape)
        if not shape or any(n < 1 for n in shape):
            raise ValueError(f"a mesh needs one or more axes of size >= 1, got shape {self.shape}")
        object.__setattr__(self, "shape", shape)
        if self.axis_names is not None:
            names = tuple(self.axis_names)
            if len(names) != len(shape) or len(set(names)) != len(names):
                raise ValueError(f"mesh axis names {names} must be {len(shape)} distinct names")
            object.__setattr__(self, "axis_names", names)

    @staticmethod
    def of(mesh: Mesh | int | Sequence[int]) -> Mesh:
        """A `Mesh`, from a Mesh, a device count or a shape tuple."""
        if isinstance(mesh, Mesh):
            return mesh
        if isinstance(mesh, (int, np.integer)):
            return Mesh((mesh,))
        if not isinstance(mesh, (tuple, list)):
            raise ValueError(f"a mesh is a Mesh, a device count or a shape tuple, got {type(mesh).__name__}")
        return Mesh(tuple(mesh))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def axis_label(self, a: int) -> str:
        """`axis 1 ('model', size 4)`: how errors and reports name a mesh axis."""
        name = f"'{self.axis_names[a]}', " if self.axis_names else ""
        return f"mesh axis {a} ({name}size {self.shape[a]})"


@dataclass(frozen=True)
class Layout:
    """How a value is stored across a mesh: `dims[i]` = the mesh axes splitting
    dimension i (major to minor); `partial` = the axes over which the local
    values are partial sums of the global one."""

    dims: tuple[tuple[int, ...], ...]
    partial: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(tuple(int(a) for a in d) for d in self.dims))
        object.__setattr__(self, "partial", tuple(sorted(int(a) for a in self.partial)))
        used = [a for d in self.dims for a in d] + list(self.partial)
        if len(used) != len(set(used)):
            raise ValueError(f"layout {self}: a mesh axis is used twice")

    @staticmethod
    def parse(text: str) -> Layout:
        """A layout from its text form, `dims=[[0],[]], partial=[1]` (`partial=` may be omitted)."""
        axes = r"\[[\d\s,]*\]"
        m = re.fullmatch(rf"\s*dims\s*=\s*\[((?:\s*{axes}\s*,?)*)\]\s*(?:,\s*partial\s*=\s*\[([\d\s,]*)\])?\s*",
                         text)
        if m is None:
            raise ValueError(f"cannot read layout {text!r}: expected the form 'dims=[[0],[]], partial=[]'")
        dims = re.findall(r"\[([\d\s,]*)\]", m.group(1))
        return Layout(tuple(_ints(d) for d in dims), _ints(m.group(2) or ""))

    @staticmethod
    def of(value: Layout | str) -> Layout:
        return value if isinstance(value, Layout) else Layout.parse(value)

    @property
    def rank(self) -> int:
        return len(self.dims)

    def resolved(self) -> Layout:
        """The same split with nothing partial."""
        return Layout(self.dims)

    def check_mesh(self, mesh: Mesh) -> None:
        for a in (*[a for d in self.dims for a in d], *self.partial):
            if not 0 <= a < mesh.rank:
                raise ValueError(f"layout {self} names mesh axis {a}, but the mesh {mesh.shape} has {mesh.rank} axes")

    def local_shape(self, shape: Sequence[int], mesh: Mesh) -> tuple[int, ...]:
        """The shape of one device's piece of a value of global `shape`."""
        return tuple(n // math.prod(mesh.shape[a] for a in d) for n, d in zip(shape, self.dims))

    def __str__(self) -> str:
        dims = ",".join("[" + ",".join(map(str, d)) + "]" for d in self.dims)
        return f"dims=[{dims}], partial=[{','.join(map(str, self.partial))}]"


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in text.replace(" ", "").split(",") if t)


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------


def format_strategy(strategy: Strategy) -> str:
    """`("m", None)` -> `"m,-"`."""
    return ",".join(s or "-" for s in strategy)


def parse_strategy(text: str, mesh: Mesh, letters: str) -> Strategy:
    """`"m,-"` -> `("m", None)`; ValueError naming what is wrong."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != mesh.rank:
        raise ValueError(f"strategy {text!r} has {len(parts)} entries, one per mesh axis of the mesh {mesh.shape} "
                         f"is expected")
    out = []
    for a, p in enumerate(parts):
        if p == "-":
            out.append(None)
        elif len(p) == 1 and p in letters:
            out.append(p)
        else:
            raise ValueError(f"strategy {text!r}: entry {p!r} for {mesh.axis_label(a)} is neither '-' nor one of "
                             f"the op's loop letters {', '.join(letters)}")
    return tuple(out)


def split_of(strategy: Strategy, letter: str, mesh: Mesh) -> int:
    """By how much `strategy` splits loop `letter`."""
    return math.prod(mesh.shape[a] for a, s in enumerate(strategy) if s == letter)


def axes_on(strategy: Strategy, letter: str | None) -> tuple[int, ...]:
    """The mesh axes (ascending: major to minor) `strategy` puts on `letter`."""
    return tuple(a for a, s in enumerate(strategy) if s == letter and letter is not None)


def enumerate_strategies(letters: str, sizes: dict[str, int], mesh: Mesh) -> list[Strategy]:
    """Every valid strategy over loops `letters`, in the stated enumeration
    order: per mesh axis the choices are `-` then the letters in `letters`'
    order, axis 0 the most significant. Axes of size 1 are left unused (a
    split by 1 changes nothing)."""
    choices = [(None,) if n == 1 else (None, *letters) for n in mesh.shape]
    return [s for s in itertools.product(*choices) if all(sizes[c] % split_of(s, c, mesh) == 0 for c in letters)]


def strategy_from_slices(slices: Sequence[Sequence[int]], input_letters: Sequence[str], mesh: Mesh) -> Strategy:
    """MindSpore's per-input slice counts (`((2, 1), (1, 4))` for a matmul
    `mk,kn`) as a strategy: each letter's count (equal wherever the letter
    appears) is the product of mesh axes assigned to it, letters taking the
    lowest-numbered free axes that multiply to their count, in order of first
    appearance. ValueError when the counts disagree or no axes multiply to one."""
    if len(slices) != len(input_letters):
        raise ValueError(f"slice strategy {tuple(map(tuple, slices))} has {len(slices)} entries, "
                         f"the op has {len(input_letters)} inputs ({', '.join(input_letters)})")
    counts: dict[str, int] = {}
    for i, (term, s) in enumerate(zip(input_letters, slices)):
        s = tuple(int(c) for c in s)
        if len(s) != len(term):
            raise ValueError(f"slice strategy entry {s} for input {i} has {len(s)} numbers, the input has "
                             f"{len(term)} dimensions ({term})")
        for letter, c in zip(term, s):
            if letter == "1":
                if c != 1:
                    raise ValueError(f"input {i}: a dimension of size 1 cannot be sliced {c} ways")
                continue
            if counts.setdefault(letter, c) != c:
                raise ValueError(f"slice strategy: loop {letter} is sliced {counts[letter]} ways in one input and "
                                 f"{c} in another")
    strategy: list[str | None] = [None] * mesh.rank
    free = [a for a in range(mesh.rank)]
    for letter, c in counts.items():
        if c == 1:
            continue
        axes = _axes_with_product(free, c, mesh)
        if axes is None:
            raise ValueError(f"slice strategy: no free mesh axes of the mesh {mesh.shape} multiply to {c} "
                             f"(loop {letter})")
        for a in axes:
            strategy[a] = letter
            free.remove(a)
    return tuple(strategy)


def _axes_with_product(free: list[int], count: int, mesh: Mesh) -> tuple[int, ...] | None:
    for r in range(1, len(free) + 1):
        for axes in itertools.combinations(free, r):
            if math.prod(mesh.shape[a] for a in axes) == count:
                return axes
    return None
