"""Resharding: the deterministic collective sequence from one layout to another,
and its time (`../shared/parallel.md` §3 and §4).

From `cur` to `dst` (`dst` never partial):

A. partial axes in ascending order: `reduce_scatter(a, j)` if `cur[j] + (a,)`
   is a prefix of `dst[j]` (lowest such j), else `all_reduce(a)`;
B. while some `cur[i]` is not a prefix of `dst[i]` (lowest i first): pop its
   last axis a; `all_to_all(a, i -> j)` if `cur[j] + (a,)` is a prefix of
   `dst[j]` (lowest such j), else `all_gather(a, i)`;
C. the remaining `dst` axes, dimension by dimension, by local `all_slice`.

Each collective runs on one mesh axis a (n = mesh[a] devices, s = bytes of
the per-device input buffer, which the sequence tracks as the layout changes):

| collective     | time                          |
| all_reduce     | alpha + 2(n-1)/n * s / B      |
| reduce_scatter | alpha + (n-1)/n * s / B       |
| all_gather     | alpha + (n-1) * s / B         |
| all_to_all     | alpha + (n-1)/n * s / B       |
| all_slice      | 0                             |
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from msir.parallel.mesh_layout import Layout, Mesh


@dataclass(frozen=True)
class Collective:
    """One step of a reshard on mesh axis `axis`: `dim` is the tensor dimension
    it splits or gathers (all_to_all: moves the split from `dim` to `to_dim`);
    `in_bytes` the per-device input buffer."""

    kind: str  # all_reduce | reduce_scatter | all_gather | all_to_all | all_slice
    axis: int
    dim: int | None
    to_dim: int | None
    in_bytes: int

    def __str__(self) -> str:
        where = {
            "all_reduce": "",
            "reduce_scatter": f", dim {self.dim}",
            "all_gather": f", dim {self.dim}",
            "all_slice": f", dim {self.dim}",
            "all_to_all": f", dim {self.dim}->{self.to_dim}",
        }[self.kind]
        return f"{self.kind}(axis {self.axis}{where}, {self.in_bytes} B)"

    def time(self, mesh: Mesh, alpha: Sequence[float], bandwidth: Sequence[float]) -> float:
        n, s = mesh.shape[self.axis], self.in_bytes
        a, b = alpha[self.axis], bandwidth[self.axis]
        if self.kind == "all_slice":
            return 0.0
        if self.kind == "all_reduce":
            return a + 2 * (n - 1) / n * s / b
        if self.kind == "all_gather":
            return a + (n - 1) * s / b
        return a + (n - 1) / n * s / b  # reduce_scatter, all_to_all


def _is_prefix(p: Sequence[int], q: Sequence[int]) -> bool:
    return tuple(q[: len(p)]) == tuple(p)


def reshard(cur: Layout, dst: Layout, shape: Sequence[int], itemsize: int, mesh: Mesh) -> tuple[Collective, ...]:
    """The collectives that turn a value of global `shape` stored as `cur` into `dst`."""
    return _reshard(cur, dst, tuple(shape), itemsize, mesh)


@lru_cache(maxsize=1 << 16)
def _reshard(cur: Layout, dst: Layout, shape: tuple[int, ...], itemsize: int, mesh: Mesh) -> tuple[Collective, ...]:
    assert not dst.partial, f"reshard to a partial layout {dst}"
    assert cur.rank == dst.rank == len(shape), (cur, dst, shape)
    dims = [list(d) for d in cur.dims]
    want = dst.dims
    local = itemsize * math.prod(n // math.prod(mesh.shape[a] for a in d) for n, d in zip(shape, dims))
    steps: list[Collective] = []
    for a in cur.partial:  # A
        j = next((j for j in range(len(dims)) if _is_prefix([*dims[j], a], want[j])), None)
        if j is None:
            steps.append(Collective("all_reduce", a, None, None, local))
        else:
            steps.append(Collective("reduce_scatter", a, j, None, local))
            dims[j].append(a)
            local //= mesh.shape[a]
    while True:  # B
        i = next((i for i in range(len(dims)) if not _is_prefix(dims[i], want[i])), None)
        if i is None:
            break
        a = dims[i].pop()
        j = next((j for j in range(len(dims)) if j != i and _is_prefix([*dims[j], a], want[j])), None)
        if j is None:
            steps.append(Collective("all_gather", a, i, None, local))
            local *= mesh.shape[a]
        else:
            steps.append(Collective("all_to_all", a, i, j, local))
            dims[j].append(a)
    for i, d in enumerate(dims):  # C
        for a in want[i][len(d):]:
            steps.append(Collective("all_slice", a, i, None, local))
            local //= mesh.shape[a]
    return tuple(steps)


def reshard_time(steps: Sequence[Collective], mesh: Mesh, alpha: Sequence[float], bandwidth: Sequence[float]) -> float:
    return sum(c.time(mesh, alpha, bandwidth) for c in steps)
