from itertools import permutations
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtrain.errors import SpecError
from simtrain.parallel.layout import RankLayout, _expert_compatible
from simtrain.specs.parallel import ParallelSpec

AXES = ("tp", "cp", "dp", "pp")


@st.composite
def layouts(draw):
    degrees = {a: draw(st.sampled_from([1, 2, 3, 4])) for a in AXES}
    dp_cp = degrees["dp"] * degrees["cp"]
    degrees["ep"] = draw(st.sampled_from([d for d in range(1, dp_cp + 1) if dp_cp % d == 0]))
    orders = list(permutations(["tp", "cp", "ep", "dp", "pp"]))
    if degrees["ep"] > 1:
        orders = [o for o in orders if _expert_compatible(o)]
    order = draw(st.sampled_from(orders))
    return RankLayout(degrees, "-".join(order))


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_coords_and_rank_are_inverse(layout):
    world = layout.world_size
    assert world == prod(layout.degrees[a] for a in AXES)
    seen = set()
    for r in range(world):
        c = layout.coords(r)
        assert layout.rank(c) == r
        seen.add(tuple(c[a] for a in AXES))
    assert len(seen) == world


@settings(max_examples=60, deadline=None)
@given(layouts(), st.sampled_from(["tp", "cp", "dp", "pp", "tp-dp", "dp+cp", "tp-cp-dp-pp"]))
def test_dense_groups_partition_world_with_sizes_equal_degrees(layout, axes):
    groups = layout.groups(axes)
    size = prod(layout.degrees[a] for a in axes.replace("+", "-").split("-"))
    assert all(len(g) == size for g in groups)
    flat = sorted(r for g in groups for r in g)
    assert flat == list(range(layout.world_size))
    for g in groups:
        assert all(layout.group_of(r, axes) == g for r in g)
        # members differ only along the group's axes
        others = [a for a in AXES if a not in axes]
        assert len({tuple(layout.coords(r)[a] for a in others) for r in g}) == 1


@settings(max_examples=60, deadline=None)
@given(layouts(), st.sampled_from(["ep", "edp", "ep-edp", "tp-ep"]))
def test_expert_groups_partition_world(layout, axes):
    ep = layout.degrees["ep"]
    edp = layout.degrees["dp"] * layout.degrees["cp"] // ep
    sizes = {"ep": ep, "edp": edp, "ep-edp": ep * edp, "tp-ep": layout.degrees["tp"] * ep}
    groups = layout.groups(axes)
    assert all(len(g) == sizes[axes] for g in groups)
    assert sorted(r for g in groups for r in g) == list(range(layout.world_size))
    # ep x edp re-splits the dp*cp ranks of one (tp, pp) position
    assert sorted(map(sorted, layout.groups("ep-edp"))) == sorted(
        map(sorted, layout.groups("dp-cp"))
    )


def test_megatron_worked_example_tp2_cp1_dp2_pp2():
    layout = RankLayout({"tp": 2, "dp": 2, "pp": 2})
    assert layout.groups("pp") == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert layout.coords(7) == {"tp": 1, "cp": 0, "dp": 1, "pp": 1, "ep": 0, "edp": 1}


def test_order_changes_adjacency():
    inner_dp = RankLayout({"tp": 2, "dp": 4}, order="dp-tp")
    assert inner_dp.groups("dp") == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert inner_dp.groups("tp") == [(0, 4), (1, 5), (2, 6), (3, 7)]


def test_expert_grid_with_cp_resplits_dp_cp():
    # tp=1, cp=2, dp=2, ep=2 -> edp=2; expert grid order tp-ep-edp-pp
    layout = RankLayout({"cp": 2, "dp": 2, "ep": 2})
    assert layout.groups("ep") == [(0, 1), (2, 3)]
    assert layout.groups("edp") == [(0, 2), (1, 3)]
    assert layout.groups("cp") == [(0, 1), (2, 3)]


def test_from_spec_uses_rank_order():
    spec = ParallelSpec(dp=2, tp=2, pp=2, global_batch_size=8, rank_order="tp-cp-ep-dp-pp")
    assert RankLayout.from_spec(spec).groups("dp") == [(0, 2), (1, 3), (4, 6), (5, 7)]


@pytest.mark.parametrize(
    ("degrees", "order", "match"),
    [
        ({"tp": 0}, "tp-cp-ep-dp-pp", "'degrees.tp' must be a positive integer"),
        ({"xx": 2}, "tp-cp-ep-dp-pp", "'degrees' axis must be one of"),
        ({"tp": 2}, "tp-tp-dp-pp", "'order' must list distinct axes"),
        ({"cp": 2}, "tp-dp-pp", "'order' must include axis cp"),
        ({"dp": 4, "ep": 3}, "tp-cp-ep-dp-pp", r"'degrees.ep\*etp'=3 must divide tp\*cp\*dp=4"),
        ({"dp": 4, "ep": 2}, "tp-ep-cp-pp-dp", "'order' must keep ep next to dp"),
    ],
)
def test_bad_layouts_name_the_field(degrees, order, match):
    with pytest.raises(SpecError, match=match):
        RankLayout(degrees, order)


def test_bad_queries():
    layout = RankLayout({"tp": 2, "dp": 2, "ep": 2})
    with pytest.raises(SpecError, match="'rank' must be in"):
        layout.coords(4)
    with pytest.raises(SpecError, match="'axes' must not mix dp"):
        layout.groups("ep-dp")
    with pytest.raises(SpecError, match="'axes' must join names"):
        layout.groups("foo")
    with pytest.raises(SpecError, match=r"'coords.tp' must be in \[0, 2\)"):
        layout.rank({"tp": 2})
    with pytest.raises(SpecError, match=r"'coords\.ep' must be 1 "):
        layout.rank({"tp": 0, "dp": 1, "ep": 0})


def test_tensor_parallel_stays_inside_a_node_only_when_innermost():
    assert RankLayout({"tp": 8, "dp": 4, "pp": 2}).within_node("tp", 8)
    assert not RankLayout({"tp": 8, "dp": 4, "pp": 2}, order="dp-tp-cp-ep-pp").within_node("tp", 8)
    assert RankLayout({"tp": 4, "cp": 2, "dp": 2}).within_node("tp-cp", 8)
    assert not RankLayout({"tp": 4, "cp": 2, "dp": 2}).within_node("dp", 8)
