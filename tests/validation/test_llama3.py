"""Llama 3 405B on 8,192 H100 (Table 4, first row): the blind test of the H100 constants."""

from pathlib import Path

from simtrain.validation import validate_case

CASE = Path(__file__).parents[2] / "experiments" / "validation" / "llama3" / "llama3-405b-8192.yaml"


def test_llama3_405b_within_10_percent_of_430_tflops():
    row = validate_case(CASE)
    assert row.metric == "tflops_per_gpu" and row.expected == 430
    assert abs(row.rel_error) <= 0.10, row
