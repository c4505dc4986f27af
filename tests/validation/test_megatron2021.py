"""Narayanan et al. 2021, Table 1: simulated TF/s per GPU against the published figures.

One set of A100 calibration constants (fitted on vTrain's measured iterations, not on these
rows), no per-row tuning. The rows up to 76.1B run in about a second each; the larger
pipelines (up to 1.4M tasks for the 1T model) are marked slow.
"""

from pathlib import Path

import pytest

from simtrain.validation import validate_case

CASES = Path(__file__).parents[2] / "experiments" / "validation" / "megatron2021"
FAST = ["gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b"]
SLOW = ["gpt-39.1b", "gpt-76.1b", "gpt-145.6b", "gpt-310.1b", "gpt-529.6b", "gpt-1008b"]


@pytest.mark.parametrize("case", FAST)
def test_pp1_rows_within_10_percent(case):
    row = validate_case(CASES / f"{case}.yaml")
    assert abs(row.rel_error) <= 0.10, row
    assert row.within_tolerance


@pytest.mark.parametrize("case", SLOW[:2])
def test_small_pipelined_rows_within_10_percent(case):
    row = validate_case(CASES / f"{case}.yaml")
    assert abs(row.rel_error) <= 0.10, row


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW[2:])
def test_large_pipelined_rows_within_10_percent(case):
    row = validate_case(CASES / f"{case}.yaml")
    assert abs(row.rel_error) <= 0.10, row
