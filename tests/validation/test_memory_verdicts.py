"""Zero false out-of-memory verdicts: every published run in the validation suites ran, so
simtrain must not call any of them out of memory (``near_limit`` is allowed: it says the
model cannot tell)."""

from pathlib import Path

import pytest

from experiments.calibration.stacks import torchtitan_memory_rows
from simtrain.catalog import get_accelerator
from simtrain.memory import estimate_memory
from simtrain.specs.loader import experiment_from_dict, load_experiment
from simtrain.validation import validation_cases

SUITES = Path(__file__).parents[2] / "experiments" / "validation"
CASES = validation_cases(SUITES)


def test_the_suites_hold_the_runs():
    suites = {path.parent.name for path in CASES}
    assert {"megatron2021", "llama3", "llm-foundry", "ibm-fsdp", "torchtitan"} <= suites
    assert len(CASES) > 80


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_run_that_ran_is_out_of_memory(path):
    spec = load_experiment(path)
    capacity = get_accelerator(spec.cluster.accelerator).hbm_capacity_bytes
    estimate = estimate_memory(spec, capacity)
    assert estimate.fits, (estimate.verdict, estimate.peak_bytes / 1e9, capacity / 1e9)


@pytest.mark.parametrize("row", torchtitan_memory_rows(), ids=lambda r: r.key)
def test_torchtitan_runs_with_reported_memory_are_not_out_of_memory(row):
    spec = experiment_from_dict(row.spec_dict, row.key)
    assert estimate_memory(spec, row.capacity_gib * 2**30).fits


# torchtitan's reported peaks (GiB reserved, the maximum over the ranks) against simtrain's
# worst rank. Known gaps, all underestimates: the 3-D and 4-D runs on 405B (FSDP x TP x PP,
# with or without CP) are 15-24 % under, 11-21 GiB. The modelled mechanisms (unsharded fp32
# gradients, FP8-gathered weights, FSDP2's fp32 shards and unit gradients, microbatches in
# flight, the pipeline engine's receive buffers, stage outputs and kept logits) do not
# account for it, nor for the 7 GiB between the 1F1B run and the CP 1 run whose microbatches
# hold as many tokens, nor for the 9.6 GiB CP 8 adds; nor does the caching allocator's
# fragmentation (experiments/calibration/allocator_replay.py: 1.6-10 GiB on these runs, and the
# 1F1B and CP 1 runs allocate the same tensors). What the stack keeps there is not known
# (README "Software stacks"). They are expected failures that must start passing when it is
# found.
ROWS = torchtitan_memory_rows()
GAPS = {r.key for r in ROWS if r.key.startswith("405b")}


def _error(row) -> float:
    spec = experiment_from_dict(row.spec_dict, row.key)
    peak = estimate_memory(spec, row.capacity_gib * 2**30).peak_bytes
    return peak / (row.measured_gib * 2**30) - 1


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(r, marks=pytest.mark.xfail(strict=True, reason="3-D gap"))
        if r.key in GAPS
        else r
        for r in ROWS
    ],
    ids=lambda r: r.key,
)
def test_torchtitan_reported_peaks_within_10_percent(row):
    assert abs(_error(row)) <= 0.10, f"{_error(row):+.1%}"


@pytest.mark.parametrize("row", [r for r in ROWS if r.key in GAPS], ids=lambda r: r.key)
def test_the_gaps_are_underestimates_of_at_most_30_percent(row):
    """Before the stack mechanisms (unsharded gradients under PP, torchtitan's microbatch
    count, the vocabulary-parallel loss) these runs were 27-68 % under, before the pipeline
    engine's buffers, kept logits and FSDP2's shards 19-29 %; they must stay within 30 %, on
    the low side."""
    assert -0.30 <= _error(row) < 0
