"""``simtrain reliability``: JSON keys, determinism and one-line errors (simulate() stubbed)."""

import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from simtrain.cli import run_app

LLAMA = str(Path(__file__).resolve().parents[2] / "experiments/reliability/llama3-405b.yaml")
KEYS = {
    "policy",
    "ettr_mean",
    "ettr_ci95",
    "wall_days_mean",
    "interruptions_mean",
    "interruptions_by_cause",
    "gpu_hours_lost_mean",
}


@dataclass
class _Result:
    step_time_s: float = 6.7
    model_state_bytes: float = 405e9 * 16


@pytest.fixture
def stub_simulate(monkeypatch):
    """Replace simtrain.api with a stub whose simulate() returns a fixed step."""
    calls = []
    api = types.ModuleType("simtrain.api")

    def simulate(spec, full=None):
        calls.append(spec)
        return _Result()

    api.simulate = simulate
    monkeypatch.setitem(sys.modules, "simtrain.api", api)
    return calls


def _run(capsys, *args):
    code = run_app(["reliability", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_one_object_per_policy_with_the_issue_keys(stub_simulate, capsys):
    code, out, err = _run(capsys, LLAMA, "--policies", "spec,elastic", "--runs", "3", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [row["policy"] for row in rows] == ["spec", "elastic"]
    for row in rows:
        assert set(row) == KEYS
        lo, hi = row["ettr_ci95"]
        assert lo <= row["ettr_mean"] <= hi
        assert row["interruptions_mean"] == pytest.approx(419, rel=0.15)


def test_same_seed_same_output_other_seed_other_output(stub_simulate, capsys):
    args = (LLAMA, "--policies", "spec", "--runs", "2", "--json")
    first = _run(capsys, *args, "--seed", "5")[1]
    again = _run(capsys, *args, "--seed", "5")[1]
    other = _run(capsys, *args, "--seed", "6")[1]
    assert first == again
    assert first != other


def test_table_output(stub_simulate, capsys):
    code, out, _ = _run(capsys, LLAMA, "--policies", "spec,sync-hourly", "--runs", "2")
    assert code == 0
    assert "sync-hourly" in out
    assert "ETTR" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "spec,yolo"], "'--policies' must name known policies"),
        (["--runs", "0"], "'--runs' must be an integer in 1..1,048,576 (got 0)"),
        (["--set", "reliability.checkpoint.interval_s=0"], "interval_s' must be a number of"),
        (["--set", "reliability.checkpoint.interval_s=-5"], "(got -5)"),
        (["--set", "reliability.failure_rate_scale=-1"], "'reliability.failure_rate_scale'"),
    ],
)
def test_bad_input_is_one_line_without_traceback(stub_simulate, capsys, args, message):
    code, _, err = _run(capsys, LLAMA, *args)
    assert code != 0
    assert message in err
    assert err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert not stub_simulate  # rejected before the step simulation


def test_negative_rate_in_file_is_one_line(stub_simulate, capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    text = (
        Path(LLAMA)
        .read_text()
        .replace(
            "  failure_preset: llama3-405b",
            "  failure_preset: llama3-405b\n  failures:\n"
            "    - {component: gpu, rate_per_device_hour: -0.5}",
        )
    )
    path.write_text(text)
    code, _, err = _run(capsys, str(path))
    assert code != 0
    assert "'reliability.failures.0.rate_per_device_hour'" in err
    assert "(got -0.5)" in err
    assert len(err.strip().splitlines()) == 1


def test_experiment_without_reliability_section_is_one_line(stub_simulate, capsys, tmp_path):
    path = tmp_path / "plain.yaml"
    text = Path(LLAMA).read_text()
    path.write_text(text[: text.index("reliability:")])
    code, _, err = _run(capsys, str(path))
    assert code != 0
    assert "'reliability' section is required" in err
    assert len(err.strip().splitlines()) == 1
