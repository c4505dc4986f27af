"""The allocation trace experiments/calibration/allocator_replay.py replays (issue 13): a
conservation check, and the finding it supports (README, Software stacks)."""

from experiments.calibration.allocator_replay import COMPUTE, rank_trace, replay_row
from experiments.calibration.caching_allocator import Alloc
from experiments.calibration.stacks import torchtitan_memory_rows
from simtrain.specs.loader import experiment_from_dict

ROWS = {row.key: row for row in torchtitan_memory_rows()}


def test_the_replayed_rank_frees_everything_but_its_states_each_step():
    """Conservation: a step's allocations are all freed by its end, except what persists
    (optimizer states, pipeline receive buffers, the FSDP2 root gathered through the step)."""
    row = ROWS["8b-fsdp8-compile"]
    spec = experiment_from_dict(row.spec_dict, row.key)
    live: set = set()
    for event in rank_trace(spec, 0, steps=2):
        if isinstance(event, Alloc):
            live.add(event.key)
        else:
            live.remove(event.key)
    assert {key[0] for key in live} == {"state", "unsharded"}
    assert {key[1][0] for key in live if key[0] == "unsharded"} == {"root"}


def test_the_1f1b_and_cp1_runs_allocate_the_same_tensors():
    """The 405B 1F1B run (8 microbatches of 4 x 8K tokens) and the CP 1 run (8 of 1 x 32K)
    give the same trace, so no replay of tensor sizes separates their measured peaks
    (82.5 and 75.3 GiB)."""
    specs = [
        experiment_from_dict(ROWS[key].spec_dict, key)
        for key in ("405b-fsdp8-tp8-pp8-1f1b", "405b-fsdp8-cp1-tp8-pp8-32k")
    ]
    assert rank_trace(specs[0], 1, steps=1) == rank_trace(specs[1], 1, steps=1)


def test_fragmentation_in_one_stream_is_far_below_the_405b_gap():
    """Under torchtitan's expandable segments, with FSDP2's reduce-scatter buffers on the
    compute stream, the replay holds under 4 GiB above its live peak on the 405B 1F1B run,
    where simtrain is 18 GiB under the measured peak."""
    row = ROWS["405b-fsdp8-tp8-pp8-1f1b"]
    _, result = replay_row(row, steps=2, expandable=True, rs_stream=COMPUTE)
    assert 0 < result.fragmentation_bytes < 4 * 2**30
