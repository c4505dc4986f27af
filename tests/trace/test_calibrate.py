"""simtrain calibrate: recover known compute constants from measured kernels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simtrain.api import simulate
from simtrain.catalog import get_accelerator
from simtrain.catalog.calibrations import load_calibration_file
from simtrain.compute import RooflineComputeModel, calibration_for
from simtrain.parallel.builder import build_program
from simtrain.traceio.calibrate import fit_calibration, kernel_samples
from tests.conftest import GPT_TINY, make_experiment
from tests.trace.helpers import cli

pytest.importorskip("chakra", reason="Chakra traces need the 'chakra' extra (mlc-chakra)")

FIXTURE = Path(__file__).parent / "fixtures" / "kineto"
H100 = get_accelerator("H100-SXM")
# A 2-layer model big enough that every kernel lasts many microseconds (Chakra stores
# durations in whole microseconds).
MODEL = {
    "name": "gpt-calib",
    "num_layers": 2,
    "hidden_size": 2048,
    "num_heads": 16,
    "vocab_size": 32000,
    "seq_length": 2048,
}


def profiled_trace(tmp_path: Path, truth) -> Path:
    """Export the experiment's program with every compute task timed under ``truth``."""
    from simtrain.traceio.chakra_export import write_chakra

    spec = make_experiment("parallel.pp=2", model=MODEL)
    program = build_program(spec)
    model = RooflineComputeModel(H100, "bf16", truth)
    for task in program.tasks:
        if task.stream == "compute":
            task.duration_s = model.task_time_s(task.ops)
    out = tmp_path / "profile"
    out.mkdir()
    write_chakra(program, out, H100.name)
    return out


def truth_calibration():
    base = calibration_for("H100-SXM")
    return base.model_copy(
        update={
            "gemm": base.gemm.model_copy(update={"ceiling": {**base.gemm.ceiling, "bf16": 0.6}}),
            "memory_efficiency": 0.55,
            "kernel_overhead_s": 3e-6,
        }
    )


def test_calibrate_recovers_the_constants_a_trace_was_timed_with(tmp_path):
    from simtrain.traceio.chakra import read_chakra

    directory = profiled_trace(tmp_path, truth_calibration())
    samples = kernel_samples(read_chakra(directory))
    assert len(samples) > 20 and any(s.held_out for s in samples)
    fit = fit_calibration(samples, H100, "bf16", calibration_for("H100-SXM"))
    assert fit.fitted["gemm_ceiling"] == pytest.approx(0.6, rel=0.02)
    assert fit.fitted["memory_efficiency"] == pytest.approx(0.55, rel=0.02)
    held = fit.families["gemm"]
    assert held["held_out_mean_abs_error"] < 0.02


def test_calibration_file_drives_an_experiment(tmp_path, capsys):
    directory = profiled_trace(tmp_path, truth_calibration())
    out = tmp_path / "calib.yaml"
    code, stdout, err = cli(
        capsys,
        "calibrate",
        str(directory),
        "--accelerator",
        "H100-SXM",
        "--out",
        str(out),
        "--json",
    )
    assert code == 0, err
    report = json.loads(stdout)
    assert set(report["families"]) >= {"gemm", "memory"}
    calibration = load_calibration_file(out)
    assert calibration.provenance == "fitted" and calibration.fit is not None
    # a model large enough for its GEMMs, not the host's kernel issue, to set the step
    wide = {**GPT_TINY, "hidden_size": 4096, "num_heads": 32, "seq_length": 2048}
    default = simulate(make_experiment(model=wide))
    profiled = simulate(make_experiment(f"cluster.calibration={out}", model=wide))
    # the profiled part reaches a lower GEMM ceiling than the catalog's H100: slower steps
    assert profiled.step_time_s > default.step_time_s
    assert profiled.summary()["compute_calibration"]["provenance"] == "fitted"


def test_kineto_fixture_calibrates_on_its_matmuls(capsys):
    code, stdout, err = cli(
        capsys, "calibrate", str(FIXTURE), "--accelerator", "A100-80GB", "--json"
    )
    assert code == 0, err
    assert json.loads(stdout)["families"]["gemm"]["fit_count"] >= 2


@pytest.mark.parametrize("content", [None, "not a trace", '{"traceEvents": []}'])
def test_empty_or_malformed_trace_directory_is_one_clear_line(tmp_path, capsys, content):
    if content is not None:
        (tmp_path / "trace.0.json").write_text(content)
    code, _, err = cli(capsys, "calibrate", str(tmp_path), "--accelerator", "H100-SXM")
    assert code == 2
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_calibration_for_another_accelerator_is_refused(tmp_path):
    out = tmp_path / "calib.yaml"
    out.write_text(
        json.dumps(calibration_for("A100-80GB").model_dump(mode="json")), encoding="utf-8"
    )
    from simtrain.errors import SpecError

    with pytest.raises(SpecError, match="calibrates A100"):
        simulate(make_experiment(f"cluster.calibration={out}"))
