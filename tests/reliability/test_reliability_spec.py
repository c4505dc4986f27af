"""Bad reliability input gets one clear message naming the field, the value and what is valid."""

from pathlib import Path

import pytest
import yaml

from simtrain.errors import SpecError
from simtrain.reliability import get_policy, run_params
from simtrain.reliability.failures import load_preset
from simtrain.specs.loader import load_experiment

LLAMA = Path(__file__).resolve().parents[2] / "experiments/reliability/llama3-405b.yaml"


def _load(tmp_path, reliability_patch, **top):
    data = yaml.safe_load(LLAMA.read_text())
    data["reliability"].update(reliability_patch)
    data.update(top)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_experiment(path)


@pytest.mark.parametrize(
    ("patch", "field", "got"),
    [
        (
            {"failures": [{"component": "gpu", "rate_per_device_hour": -1e-6}]},
            "'reliability.failures.0.rate_per_device_hour'",
            "(got -1e-06)",
        ),
        (
            {"checkpoint": {"kind": "sync", "interval_s": 0}},
            "interval_s' must be a number of seconds in 1..1e7",
            "(got 0)",
        ),
        (
            {"checkpoint": {"kind": "sync", "interval_s": -60}},
            "interval_s' must be a number of seconds in 1..1e7",
            "(got -60)",
        ),
        ({"failure_preset": "rsc-3"}, "'reliability.failure_preset'", "'rsc-1'"),
        ({"recovery": {"kind": "reboot"}}, "'reliability.recovery'", "'elastic'"),
        ({"failure_rate_scale": -2}, "'reliability.failure_rate_scale'", "(got -2)"),
        ({"storage": {"write_bandwidth_bytes_per_s": 0}}, "write_bandwidth_bytes_per_s", "(got 0)"),
        ({"num_spare_nodes": 3}, "'reliability.num_spare_nodes' is not a known field", ""),
    ],
)
def test_bad_input_is_one_line_naming_the_field(tmp_path, patch, field, got):
    with pytest.raises(SpecError) as info:
        _load(tmp_path, patch)
    message = str(info.value)
    assert "\n" not in message
    assert field in message
    assert got in message


def test_unknown_policy_lists_the_known_ones():
    with pytest.raises(SpecError, match=r"'--policies' must name known policies: spec, .*elastic"):
        get_policy("yolo")


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(SpecError, match="llama3-405b, rsc-1"):
        load_preset("nope")


def test_run_without_length_is_an_error(tmp_path):
    spec = _load(tmp_path, {"horizon_days": None})
    with pytest.raises(SpecError, match=r"'training\.total_tokens' must be > 0"):
        run_params(spec, spec.reliability, 6.7, 1e12)


def test_step_time_must_be_positive(tmp_path):
    spec = _load(tmp_path, {})
    with pytest.raises(SpecError, match="'step_time_s' must be > 0"):
        run_params(spec, spec.reliability, 0.0, 1e12)
