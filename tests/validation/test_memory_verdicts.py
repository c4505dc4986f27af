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
