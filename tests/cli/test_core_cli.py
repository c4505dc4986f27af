"""simtrain run / validate / trace / list, and one-line errors for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simtrain.cli.app import run_app

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "experiments" / "quickstart.yaml")
REPORT_KEYS = {
    "step_time_s",
    "tokens_per_s",
    "tflops_per_gpu",
    "mfu",
    "hfu",
    "exposed_comm_s",
    "memory",
    "spec",
    "simtrain_version",
}


def run(capsys, *argv):
    code = run_app(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_has_the_documented_keys(capsys):
    code, out, _ = run(capsys, "run", QUICKSTART, "--json")
    assert code == 0
    report = json.loads(out)
    assert set(report) >= REPORT_KEYS
    assert {"peak_bytes", "capacity_bytes", "fits"} <= set(report["memory"])
    assert report["spec"]["parallel"]["dp"] == 8  # fully resolved
    assert 0 < report["mfu"] < 1


def test_run_writes_report_and_applies_overrides(capsys, tmp_path):
    code, out, _ = run(capsys, "run", QUICKSTART, "--set", "parallel.tp=4", "--out", str(tmp_path))
    assert code == 0
    assert "step time" in out and "MFU" in out and "memory per GPU" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["spec"]["parallel"]["tp"] == 4
    assert report["spec"]["parallel"]["dp"] == 4


def test_trace_round_trips(capsys, tmp_path):
    from simtrain.parallel.trace import program_from_dict

    target = tmp_path / "trace.json"
    code, _, _ = run(capsys, "trace", QUICKSTART, "--out", str(target))
    assert code == 0
    data = json.loads(target.read_text())
    assert data["schema"] == "simtrain-trace" and data["version"] == 1
    program = program_from_dict(data)
    assert len(program.tasks) == len(data["tasks"]) > 0


@pytest.mark.parametrize("what", ["accelerators", "links", "workloads", "topologies"])
def test_list(capsys, what):
    code, out, _ = run(capsys, "list", what)
    assert code == 0
    expected = {
        "accelerators": "H100-SXM",
        "links": "nvlink4",
        "workloads": "llama3-405b",
        "topologies": "dgx-h100-superpod",
    }[what]
    assert expected in out


def test_validate_json_and_exit_code(capsys, tmp_path):
    (tmp_path / "case.yaml").write_text(
        f"extends: {QUICKSTART}\nname: case\n"
        "expected: {metric: step_time_s, value: 1.0e-9, tolerance: 0.1, source: test}\n"
    )
    code, out, _ = run(capsys, "validate", str(tmp_path), "--json")
    assert code == 1  # predicted step time is nowhere near 1 ns
    (row,) = json.loads(out)
    assert set(row) >= {"case", "metric", "expected", "predicted", "rel_error", "within_tolerance"}
    assert row["case"] == "case" and row["within_tolerance"] is False


BAD_INPUTS = [
    (["--set", "parallel.tp=3"], "parallel.tp=3 must divide model.num_heads=32"),
    (["--set", "cluster.accelerator=V100"], "known: A100-40GB, A100-80GB, H100-SXM"),
    (["--set", "parallel.global_batch_size=-8"], "'parallel.global_batch_size'"),
    (["--set", "parallel.tensor_parallel=2"], "'parallel.tensor_parallel' is not a known field"),
    (
        ["--set", "training.dtype=fp8", "--set", "cluster.accelerator=A100-80GB"],
        "'training.dtype' must be supported by A100-80GB",
    ),
    # parallelism (issue 4): each message names the fields
    (
        [
            "--set",
            "parallel.pp=4",
            "--set",
            "parallel.vpp=2",
            "--set",
            "parallel.pipeline_schedule=interleaved",
            "--set",
            "parallel.global_batch_size=12",
        ],
        "must be a multiple of parallel.pp=4 for the interleaved schedule",
    ),
    (["--set", "parallel.cp=3"], "parallel.cp*2=6 must divide model.seq_length=8192"),
    (["--set", "parallel.ep=2"], "parallel.ep=2 needs an MoE model"),
    (
        [
            "--set",
            "parallel.pp=2",
            "--set",
            "parallel.pipeline_schedule=dualpipe",
            "--set",
            "parallel.global_batch_size=8",
        ],
        "parallel.pipeline_schedule=dualpipe needs an even parallel.pp",
    ),
    (["--set", "parallel.dp=3"], "must equal cluster.num_gpus=16"),
    (
        ["--set", "parallel.zero_shard_group_size=3"],
        "parallel.zero_shard_group_size=3 must divide parallel.dp*cp=8",
    ),
]


@pytest.mark.parametrize(("extra", "needle"), BAD_INPUTS)
def test_bad_input_is_one_line_on_stderr(capsys, extra, needle):
    code, _, err = run(capsys, "run", QUICKSTART, *extra)
    assert code != 0
    assert err.startswith("error: ") and needle in err, err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_missing_file_and_malformed_yaml(capsys, tmp_path):
    code, _, err = run(capsys, "run", str(tmp_path / "missing.yaml"))
    assert code != 0 and "does not exist" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    code, _, err = run(capsys, "run", str(bad))
    assert code != 0 and "must be valid YAML" in err and len(err.strip().splitlines()) == 1


def test_console_script_prints_no_traceback(tmp_path):
    bad = tmp_path / "typo.yaml"
    bad.write_text(f"extends: {QUICKSTART}\nparallel: {{tp: 3}}\n")
    proc = subprocess.run(
        [sys.executable, "-c", "from simtrain.cli import main; main()", "run", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_help_lists_every_command_in_readme_order_with_an_untruncated_summary(capsys):
    from simtrain.cli.app import COMMAND_ORDER

    code, out, _ = run(capsys, "--help")
    lines = [line for line in out.split("Commands:")[1].splitlines() if line.strip()]
    assert code == 0 and not any(line.endswith("...") for line in lines)
    assert [line.split()[0] for line in lines] == list(COMMAND_ORDER)
    readme = (ROOT / "README.md").read_text()
    positions = [readme.index(f"| `simtrain {name} ") for name in COMMAND_ORDER]
    assert positions == sorted(positions)


def test_version_and_bare_command(capsys):
    from simtrain.api import simtrain_version

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"simtrain {simtrain_version()}"
    code, _, err = run(capsys)  # no command: the help as it prints, not folded into one line
    assert code == 2 and err.startswith("Usage: simtrain") and "\nCommands:\n" in err


def test_plan_help_names_the_default_framework(capsys):
    from simtrain.specs.framework import DEFAULT_FRAMEWORK

    code, out, _ = run(capsys, "plan", "--help")
    assert code == 0 and f"default: {DEFAULT_FRAMEWORK}" in " ".join(out.split())
