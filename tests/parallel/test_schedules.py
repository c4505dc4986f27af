import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtrain.errors import ScheduleError, SpecError
from simtrain.parallel.schedules import (
    SCHEDULES,
    Action,
    build_schedule,
    dualpipe_rank_of,
    format_grid,
    get_schedule,
    num_stages_of,
    validate_schedule,
)

GOLDEN = Path(__file__).parent / "golden"
SPLIT = {"zb-h1", "zb-h2"}


def test_registry_has_every_schedule_and_lookup_lists_names():
    assert set(SCHEDULES) == {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "dualpipe"}
    with pytest.raises(
        SpecError, match="one of gpipe, 1f1b, interleaved, zb-h1, zb-h2, dualpipe"
    ) as err:
        get_schedule("pipedream")
    assert all(name in str(err.value) for name in SCHEDULES)


def test_action_prints_compactly():
    assert str(Action(12, "W", 7)) == "12W7"


@st.composite
def schedule_args(draw):
    name = draw(st.sampled_from(sorted(SCHEDULES)))
    pp = draw(st.integers(1, 6))
    vpp = 1
    if name == "dualpipe":
        pp = 2 * draw(st.integers(1, 3))
        m = 2 * draw(st.integers(pp, pp + 4))
    elif name == "interleaved":
        vpp = draw(st.integers(1, 4))
        m = pp * draw(st.integers(1, 4))
    else:
        m = draw(st.integers(1, 12))
    return name, pp, m, vpp


@settings(max_examples=80, deadline=None)
@given(schedule_args())
def test_every_schedule_runs_each_action_once_per_stage_and_microbatch(args):
    name, pp, m, vpp = args
    actions = build_schedule(name, pp, m, vpp)
    assert sorted(actions) == list(range(pp))
    num_stages = num_stages_of(actions)
    assert num_stages == pp * vpp
    counts = Counter((a.stage, a.kind, a.microbatch) for acts in actions.values() for a in acts)
    kinds = ("F", "B", "W") if name in SPLIT else ("F", "B")
    expected = {(s, k, j) for s in range(num_stages) for k in kinds for j in range(m)}
    if name == "dualpipe":  # some backwards are split: W only where B was split
        expected |= {key for key in counts if key[1] == "W"}
    assert set(counts) == expected
    assert set(counts.values()) == {1}
    # every rank runs as many forwards and backwards (each a full stage in dualpipe)
    assert {sum(a.kind != "W" for a in acts) for acts in actions.values()} == {2 * m * vpp}


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (6, 14)])
def test_dualpipe_places_two_model_copies_in_opposite_directions(pp, m):
    actions = build_schedule("dualpipe", pp, m)
    for rank, acts in actions.items():
        assert {a.stage for a in acts} == {rank, pp - 1 - rank}
        assert all(dualpipe_rank_of(a, pp, m) == rank for a in acts)
    # the two ranks at the ends feed microbatches of their own direction first
    assert str(actions[0][0]) == "0F0"
    assert str(actions[pp - 1][0]) == f"0F{m // 2}"


def test_one_f_one_b_warmup_is_p_minus_one_minus_rank():
    actions = build_schedule("1f1b", 4, 8)
    for rank, acts in actions.items():
        first_b = next(i for i, a in enumerate(acts) if a.kind == "B")
        assert first_b == 4 - rank


def test_validation_reports_missing_repeated_and_deadlocked_actions_with_grid():
    good = build_schedule("1f1b", 2, 2)
    missing = {0: good[0][:-1], 1: good[1]}
    with pytest.raises(ScheduleError, match="action 0B1 is missing") as err:
        validate_schedule(missing, 2, 2)
    assert "step  rank0 rank1" in str(err.value) and err.value.grid
    with pytest.raises(ScheduleError, match="action 0F0 runs 2 times"):
        validate_schedule({0: [*good[0], Action(0, "F", 0)], 1: good[1]}, 2, 2)
    # rank 1 waits for its backward before its forward: a cycle through rank 0
    swapped = {0: good[0], 1: [good[1][1], good[1][0], *good[1][2:]]}
    with pytest.raises(ScheduleError, match="deadlocks: rank 0 at 0B0, rank 1 at 1B0"):
        validate_schedule(swapped, 2, 2)
    with pytest.raises(ScheduleError, match="runs on ranks 0 and 1"):
        validate_schedule({0: [*good[0], Action(1, "W", 0)], 1: good[1]}, 2, 2)
    with pytest.raises(ScheduleError, match="0W5 is not part of the schedule"):
        validate_schedule({0: [*good[0], Action(0, "W", 5)], 1: good[1]}, 2, 2)


@pytest.mark.parametrize(
    ("name", "pp", "m", "vpp", "match"),
    [
        ("interleaved", 4, 6, 2, "'num_microbatches' must be a multiple of 'pp'=4"),
        ("1f1b", 4, 8, 2, "'vpp' must be 1 for the 1f1b schedule"),
        ("gpipe", 0, 8, 1, "'pp' must be at least 1"),
        ("zb-h1", 2, 0, 1, "'num_microbatches' must be at least 1"),
        ("dualpipe", 3, 12, 1, "'pp' must be even"),
        ("dualpipe", 4, 6, 1, r"'num_microbatches' must be even and at least 2\*pp=8"),
    ],
)
def test_bad_arguments_are_spec_errors(name, pp, m, vpp, match):
    with pytest.raises(SpecError, match=match):
        build_schedule(name, pp, m, vpp)


GOLDEN_CASES = [
    ("1f1b", 4, 6, 1),
    ("interleaved", 2, 4, 2),
    ("zb-h1", 3, 4, 1),
    ("zb-h2", 3, 4, 1),
    ("dualpipe", 4, 8, 1),
]


def _golden_text() -> str:
    parts = []
    for name, pp, m, vpp in GOLDEN_CASES:
        grid = format_grid(build_schedule(name, pp, m, vpp))
        parts.append(f"# {name} pp={pp} microbatches={m} vpp={vpp}\n{grid}\n")
    return "\n".join(parts)


def test_schedule_grids_match_golden_file():
    path = GOLDEN / "schedules.txt"
    text = _golden_text()
    if os.environ.get("SIMTRAIN_REGEN_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), "regenerate with SIMTRAIN_REGEN_GOLDEN=1 if intended"
