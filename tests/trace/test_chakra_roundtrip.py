"""Chakra export and import: an exported experiment replays at the step time of simtrain run."""

from pathlib import Path

import pytest

from simtrain.api import compute_model_for, load_experiment, network_model_for, simulate
from simtrain.engine import run_program
from simtrain.traceio.chakra import read_chakra
from simtrain.traceio.chakra_export import write_chakra
from simtrain.traceio.model import TraceNode
from simtrain.traceio.replay import build_program
from tests.trace.helpers import QUICKSTART, SMALL_3D, cli, report

pytestmark = pytest.mark.needs_extra("chakra")


def test_round_trip_step_time_matches_run_within_one_percent(capsys, chakra_dir):
    ran = report(capsys, "run", QUICKSTART, *SMALL_3D)
    replayed = report(capsys, "replay", str(chakra_dir), "--experiment", QUICKSTART, *SMALL_3D)
    assert replayed["step_time_s"] == pytest.approx(ran["step_time_s"], rel=0.01)
    assert replayed["mfu"] == pytest.approx(ran["mfu"], rel=0.01)
    assert replayed["bubble_fraction"] == pytest.approx(ran["bubble_fraction"], rel=0.01)


def test_replay_report_has_the_run_keys(capsys, chakra_dir):
    ran = report(capsys, "run", QUICKSTART, *SMALL_3D)
    replayed = report(capsys, "replay", str(chakra_dir), "--experiment", QUICKSTART, *SMALL_3D)
    assert set(ran) <= set(replayed)
    assert replayed["memory"] is None  # traces do not record allocations
    assert replayed["replay"]["format"] == "chakra"
    assert replayed["replay"]["num_rank_files"] == 2
    assert replayed["spec"] == ran["spec"]
    assert replayed["simtrain_version"] == ran["simtrain_version"]


def test_exported_files_carry_standard_chakra_nodes(chakra_dir):
    traces = read_chakra(chakra_dir)
    assert [t.rank for t in traces] == [0, 4]  # one rank per pipeline stage (symmetry)
    kinds = {node.kind for trace in traces for node in trace.nodes}
    assert kinds == {"compute", "collective", "send", "recv"}
    assert all(t.world_size == 8 for t in traces)
    sends = [n for n in traces[0].nodes if n.kind == "send"]
    assert all(isinstance(n, TraceNode) and n.peer == 4 for n in sends)


def test_replay_on_a_topology_and_accelerator(capsys, chakra_dir):
    replayed = report(
        capsys,
        "replay",
        str(chakra_dir),
        "--topology",
        "dgx-h100-superpod",
        "--accelerator",
        "H100-SXM",
    )
    assert replayed["step_time_s"] > 0
    assert replayed["tokens_per_step"] is None


def test_replay_needs_exactly_one_cluster_source(capsys, chakra_dir):
    code, _, err = cli(capsys, "replay", str(chakra_dir))
    assert code == 2
    assert err.count("\n") == 1 and "--experiment" in err


def test_set_without_experiment_is_one_line(capsys, chakra_dir):
    code, _, err = cli(
        capsys,
        "replay",
        str(chakra_dir),
        "--topology",
        "dgx-h100-superpod",
        "--accelerator",
        "H100-SXM",
        "--set",
        "parallel.tp=2",
    )
    assert code == 2 and err.count("\n") == 1 and "needs --experiment" in err


def test_unknown_export_format_is_one_line(capsys, tmp_path):
    code, _, err = cli(
        capsys, "trace", QUICKSTART, "--format", "nope", "--out", str(tmp_path / "x")
    )
    assert code == 2
    assert "'--format' must be simtrain or chakra" in err


@pytest.mark.parametrize(
    "overrides",
    [
        ["parallel.pp=1"],
        ["parallel.pp=4", "parallel.pipeline_schedule=interleaved", "parallel.vpp=2"],
        ["parallel.pp=2", "parallel.pipeline_schedule=zb-h1"],
        ["parallel.pp=2", "parallel.cp=2", "parallel.zero_stage=3"],
        ["parallel.pp=2", "simulation.network_model=flow"],
    ],
    ids=["tp-dp", "interleaved", "zb-h1", "cp-zero3", "flow-network"],
)
def test_round_trip_is_exact_across_schedules(tmp_path, overrides):
    spec = load_experiment(
        Path(QUICKSTART),
        [
            "model.num_layers=8",
            "cluster.num_gpus=16",
            "parallel.global_batch_size=16",
            "simulation.variability.rank_speed_cv=0",
            "simulation.variability.straggler_probability=0",
            *overrides,
        ],
    )
    simulated = simulate(spec)
    write_chakra(simulated.program, tmp_path, spec.cluster.accelerator)
    replayed = run_program(
        build_program(read_chakra(tmp_path)), compute_model_for(spec), network_model_for(spec)
    )
    assert replayed.step_time_s == pytest.approx(simulated.step_time_s, rel=1e-9)


def test_replay_prints_a_table_without_json(capsys, chakra_dir):
    code, out, err = cli(capsys, "replay", str(chakra_dir), "--experiment", QUICKSTART, *SMALL_3D)
    assert code == 0, err
    assert "step time" in out and "chakra" in out and "MFU" in out
