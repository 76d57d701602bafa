"""Meshes, layouts, strategies (text and MindSpore slice tuples) and §3's
deterministic reshard sequences with their §4 times
(`../shared/parallel.md`)."""

import pytest

from msir.parallel.mesh_layout import (
    Layout,
    Mesh,
    enumerate_strategies,
    format_strategy,
    parse_strategy,
    strategy_from_slices,
)
from msir.parallel.reshard import reshard, reshard_time

MESH = Mesh((2, 4))


def kinds(steps):
    return [(c.kind, c.axis, c.dim, c.to_dim, c.in_bytes) for c in steps]


def test_layout_text_round_trip():
    layout = Layout.parse("dims=[[0],[]], partial=[1]")
    assert layout == Layout(((0,), ()), (1,))
    assert Layout.parse(str(layout)) == layout
    assert Layout.parse("dims=[[1,0],[]]") == Layout(((1, 0), ()))
    with pytest.raises(ValueError, match="expected the form"):
        Layout.parse("[[0],[]]")
    with pytest.raises(ValueError, match="used twice"):
        Layout(((0,), (0,)))


def test_strategy_text_and_slices():
    assert parse_strategy("m,-", MESH, "mnk") == ("m", None)
    assert format_strategy(("k", "n")) == "k,n"
    with pytest.raises(ValueError, match="one per mesh axis"):
        parse_strategy("m", MESH, "mnk")
    with pytest.raises(ValueError, match="'z' for mesh axis 1"):
        parse_strategy("m,z", MESH, "mnk")
    # MindSpore's matmul strategy ((2, 1), (1, 4)): m in 2, n in 4
    assert strategy_from_slices(((2, 1), (1, 4)), ["mk", "kn"], MESH) == ("m", "n")
    # k in 8: both axes, the lower one major
    assert strategy_from_slices(((1, 8), (8, 1)), ["mk", "kn"], MESH) == ("k", "k")
    assert strategy_from_slices(((1, 4), (4, 1)), ["mk", "kn"], MESH) == (None, "k")
    with pytest.raises(ValueError, match="sliced 2 ways in one input and 4"):
        strategy_from_slices(((1, 2), (4, 1)), ["mk", "kn"], MESH)
    with pytest.raises(ValueError, match="multiply to 3"):
        strategy_from_slices(((3, 1), (1, 1)), ["mk", "kn"], MESH)


def test_enumeration_order_and_divisibility():
    # per axis: '-', then the letters; axis 0 most significant; m=2 cannot take the 4-way axis
    got = enumerate_strategies("mn", {"m": 2, "n": 8}, MESH)
    assert got[:4] == [(None, None), (None, "n"), ("m", None), ("m", "n")]
    assert (None, "m") not in got and ("n", "n") in got
    assert enumerate_strategies("m", {"m": 8}, Mesh((1, 2))) == [(None, None), (None, "m")]


# Step A: partial axes (ascending): reduce_scatter onto the lowest dim whose dst
# extends cur by the axis, else all_reduce. Global shape (8, 16) float32.
def test_partial_reduce_scatter_or_all_reduce():
    whole = 8 * 16 * 4
    cur = Layout(((), ()), (0,))
    assert kinds(reshard(cur, Layout(((0,), ())), (8, 16), 4, MESH)) == [("reduce_scatter", 0, 0, None, whole)]
    assert kinds(reshard(cur, Layout(((), (0,))), (8, 16), 4, MESH)) == [("reduce_scatter", 0, 1, None, whole)]
    assert kinds(reshard(cur, Layout(((), ())), (8, 16), 4, MESH)) == [("all_reduce", 0, None, None, whole)]
    # dst[0] = (1, 0): axis 0 does not extend cur[0] = () to a prefix: all_reduce, then slices
    steps = reshard(cur, Layout(((1, 0), ())), (8, 16), 4, MESH)
    assert kinds(steps) == [("all_reduce", 0, None, None, whole), ("all_slice", 1, 0, None, whole),
                            ("all_slice", 0, 0, None, whole // 4)]
    # both partial: axis 0 first (scatters dim 0), then axis 1 onto dim 1, on the halved buffer
    steps = reshard(Layout(((), ()), (0, 1)), Layout(((0,), (1,))), (8, 16), 4, MESH)
    assert kinds(steps) == [("reduce_scatter", 0, 0, None, whole), ("reduce_scatter", 1, 1, None, whole // 2)]


# Step B: a dim whose axes are not a prefix of dst pops its last axis: all_to_all
# to a dim it extends, else all_gather; step C slices what dst still lacks.
def test_moves_gathers_and_slices():
    whole = 8 * 16 * 4
    steps = reshard(Layout(((0,), ())), Layout(((), (0,))), (8, 16), 4, MESH)
    assert kinds(steps) == [("all_to_all", 0, 0, 1, whole // 2)]
    steps = reshard(Layout(((0,), ())), Layout(((), ())), (8, 16), 4, MESH)
    assert kinds(steps) == [("all_gather", 0, 0, None, whole // 2)]
    steps = reshard(Layout(((), ())), Layout(((1,), (0,))), (8, 16), 4, MESH)
    assert kinds(steps) == [("all_slice", 1, 0, None, whole), ("all_slice", 0, 1, None, whole // 4)]
    # (0, 1) on dim 0 to (1,) on dim 0 and (0,) on dim 1: pop 1 (gather: dim 1 wants 0
    # first), pop 0 (to dim 1: a prefix), then slice axis 1 onto dim 0
    steps = reshard(Layout(((0, 1), ())), Layout(((1,), (0,))), (8, 16), 4, MESH)
    assert kinds(steps) == [("all_gather", 1, 0, None, whole // 8), ("all_to_all", 0, 0, 1, whole // 2),
                            ("all_slice", 1, 0, None, whole // 2)]
    assert reshard(Layout(((1,), ())), Layout(((1,), ())), (8, 16), 4, MESH) == ()


def time_of(cur, dst, alpha=(1e-5, 2e-6), bandwidth=(1e9, 4e10)):
    return reshard_time(reshard(cur, dst, (8, 16), 4, MESH), MESH, alpha, bandwidth)


def test_collective_times():
    s = 8 * 16 * 4  # bytes of the whole (8, 16) float32 value
    # all_reduce on axis 1 (n = 4): alpha + 2 (n-1)/n s / B
    assert time_of(Layout(((), ()), (1,)), Layout(((), ()))) == pytest.approx(2e-6 + 2 * 3 / 4 * s / 4e10, rel=1e-12)
    # reduce_scatter on axis 0 (n = 2): alpha + (n-1)/n s / B
    assert time_of(Layout(((), ()), (0,)), Layout(((0,), ()))) == pytest.approx(1e-5 + 1 / 2 * s / 1e9, rel=1e-12)
    # all_to_all of a quarter on axis 1: alpha + (n-1)/n s / B
    assert time_of(Layout(((1,), ())), Layout(((), (1,)))) == pytest.approx(2e-6 + 3 / 4 * (s / 4) / 4e10,
                                                                            rel=1e-12)
    # all_gather of a quarter on axis 1: alpha + (n-1) s / B; slices are free
    assert time_of(Layout(((1,), ())), Layout(((), ()))) == pytest.approx(2e-6 + 3 * (s / 4) / 4e10, rel=1e-12)
    assert time_of(Layout(((), ())), Layout(((0,), (1,)))) == 0.0


def _apply(steps, cur: Layout, shape, itemsize, mesh):
    """Replay `steps` on `cur`, checking each is legal where it stands and the buffer sizes it records."""
    import math

    dims, partial = [list(d) for d in cur.dims], list(cur.partial)

    def local():
        return itemsize * math.prod(n // math.prod(mesh.shape[a] for a in d) for n, d in zip(shape, dims))

    for c in steps:
        assert c.in_bytes == local(), c
        if c.kind == "all_reduce":
            partial.remove(c.axis)
        elif c.kind == "reduce_scatter":
            partial.remove(c.axis)
            dims[c.dim].append(c.axis)
        elif c.kind == "all_gather":
            assert dims[c.dim][-1] == c.axis, c
            dims[c.dim].pop()
        elif c.kind == "all_to_all":
            assert dims[c.dim][-1] == c.axis, c
            dims[c.dim].pop()
            dims[c.to_dim].append(c.axis)
        else:
            assert c.kind == "all_slice" and not partial, c
            dims[c.dim].append(c.axis)
    return Layout(tuple(tuple(d) for d in dims), tuple(partial))


def test_every_reshard_on_a_2x4_mesh_ends_at_its_destination():
    import itertools

    shape = (8, 16)
    choices = [(None, 0, 1)] * 2  # each mesh axis splits dim 0, dim 1 or nothing
    layouts = []
    for pick in itertools.product(*choices):
        for order in ((0, 1), (1, 0)):  # both major-to-minor orders when two axes share a dim
            dims = tuple(tuple(a for a in order if pick[a] == i) for i in range(2))
            layouts.append(Layout(dims))
    layouts = list(dict.fromkeys(layouts))
    partials = [Layout(layout.dims, p) for layout in layouts for p in ((0,), (1,), (0, 1))
                if not set(p) & {a for d in layout.dims for a in d}]
    count = 0
    for cur in layouts + partials:
        for dst in layouts:
            steps = reshard(cur, dst, shape, 4, MESH)
            assert _apply(steps, cur, shape, 4, MESH) == dst, (cur, dst, steps)
            assert [c.kind for c in steps] == sorted((c.kind for c in steps), key=lambda k: (
                k not in ("all_reduce", "reduce_scatter"), k == "all_slice")), (cur, dst, steps)
            count += 1
    assert count == len(layouts) * (len(layouts) + len(partials))
