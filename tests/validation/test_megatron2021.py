"""Narayanan et al. 2021, Table 1: simulated TF/s per GPU against the published figures.

One set of A100 calibration constants, no per-row tuning. The pp = 1 rows run in under a
second each; the pipelined rows (up to 1.4M tasks for the 1T model) are marked slow.
"""

from pathlib import Path

import pytest

from simtrain.validation import validate_case

CASES = Path(__file__).parents[2] / "experiments" / "validation" / "megatron2021"
FAST = ["gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b"]
SLOW = ["gpt-39.1b", "gpt-76.1b", "gpt-145.6b", "gpt-310.1b", "gpt-529.6b", "gpt-1008b"]


@pytest.mark.parametrize("case", FAST)
def test_pp1_rows_within_15_percent(case):
    row = validate_case(CASES / f"{case}.yaml")
    assert abs(row.rel_error) <= 0.15, row
    assert row.within_tolerance


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW)
def test_pipelined_rows_within_tolerance(case):
    row = validate_case(CASES / f"{case}.yaml")
    assert row.within_tolerance, row
