"""Traces written by mlc-chakra's own tools (its generator and jsonizer), not by simtrain."""

import subprocess
import sys
from pathlib import Path

import pytest

from simtrain.traceio.chakra import read_chakra
from tests.trace.helpers import cli, report

TOPOLOGY = ["--topology", "dgx-h100-superpod", "--accelerator", "H100-SXM"]
NUM_NPUS = 4
REPLAYABLE = [
    "ALL_REDUCE",
    "ALL_GATHER",
    "REDUCE_SCATTER",
    "ALL_TO_ALL",
    "BROADCAST",
    "BARRIER",
    "one_comp_node",
    "two_comp_nodes_dependent",
    "two_comp_nodes_independent",
    "one_metadata_node_all_types",
    "one_remote_mem_load_node",
    "one_remote_mem_store_node",
]

pytestmark = pytest.mark.needs_extra("chakra")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """Every trace family of ``chakra_generator --num_npus 4``, one folder per family."""
    root = tmp_path_factory.mktemp("chakra_generator")
    subprocess.run(
        [sys.executable, "-m", "chakra.src.generator.generator", "--num_npus", str(NUM_NPUS)],
        cwd=root,
        check=True,
        capture_output=True,
    )
    for path in list(root.glob("*.et")):
        family = path.name.rsplit(".", 2)[0]
        (root / family).mkdir(exist_ok=True)
        path.rename(root / family / path.name)
    return root


@pytest.mark.parametrize("family", REPLAYABLE)
def test_generator_trace_imports_and_replays(generated, capsys, family):
    traces = read_chakra(generated / family)
    assert [t.rank for t in traces] == list(range(NUM_NPUS))
    result = report(capsys, "replay", str(generated / family), *TOPOLOGY)
    assert result["num_gpus"] == NUM_NPUS
    assert result["step_time_s"] >= 0


def test_generator_compute_runtime_is_kept(generated, capsys):
    # chakra_generator gives compute nodes a 5 µs duration_micros (--default_runtime)
    single = report(capsys, "replay", str(generated / "one_comp_node"), *TOPOLOGY)
    two = report(capsys, "replay", str(generated / "two_comp_nodes_dependent"), *TOPOLOGY)
    assert single["step_time_s"] == pytest.approx(5e-6)
    assert two["step_time_s"] == pytest.approx(10e-6)


def test_generator_all_reduce_is_timed_by_the_network(generated):
    (node,) = read_chakra(generated / "ALL_REDUCE")[0].nodes
    assert node.kind == "collective"
    assert node.ops[0].comm == "all_reduce" and node.ops[0].comm_bytes == 65536
    assert node.duration_s is None


def test_generator_send_without_peer_is_one_line(generated, capsys):
    # the generator's send/recv nodes carry no comm_src/comm_dst, so they cannot be paired
    code, _, err = cli(capsys, "replay", str(generated / "one_comm_send_node"), *TOPOLOGY)
    assert code == 2 and err.count("\n") == 1
    assert "one_comm_send_node.0.et: node" in err and "'comm_src' is missing" in err


def test_jsonizer_output_replays_like_the_et_files(generated, tmp_path, capsys):
    json_dir = tmp_path / "json"
    json_dir.mkdir()
    for rank in range(NUM_NPUS):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "chakra.src.jsonizer.jsonizer",
                "--input_filename",
                str(generated / "ALL_REDUCE" / f"ALL_REDUCE.{rank}.et"),
                "--output_filename",
                str(json_dir / f"ALL_REDUCE.{rank}.json"),
            ],
            check=True,
            capture_output=True,
        )
    from_et = report(capsys, "replay", str(generated / "ALL_REDUCE"), *TOPOLOGY)
    from_json = report(capsys, "replay", str(json_dir), *TOPOLOGY)
    assert from_json["step_time_s"] == pytest.approx(from_et["step_time_s"])
    assert from_json["step_time_s"] > 0


# An ASTRA-sim text workload: name, reserved, then per phase (forward, input gradient, weight
# gradient) compute time, collective and size, and the update time.
TEXT_WORKLOAD = """{kind}
2
layer0 -1 1000 ALLGATHER 4096 1000 REDUCESCATTER 4096 1000 ALLREDUCE 1048576 10
layer1 -1 2000 ALLTOALL 8192 2000 NONE 0 2000 ALLREDUCE 2097152 10
"""


@pytest.mark.parametrize("kind", ["MICRO", "DATA", "MODEL", "HYBRID_DATA_MODEL"])
def test_text_converter_trace_imports_and_replays(tmp_path, capsys, kind):
    source = tmp_path / "workload.txt"
    source.write_text(TEXT_WORKLOAD.format(kind=kind))
    out = tmp_path / "et"
    out.mkdir()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "chakra.src.converter.converter",
            "--log-filename",
            str(tmp_path / "converter.log"),
            "Text",
            "--input",
            str(source),
            "--output",
            str(out / "workload"),
            "--num-npus",
            str(NUM_NPUS),
            "--num-passes",
            "2",
        ],
        check=True,
        capture_output=True,
    )
    traces = read_chakra(out)
    assert len(traces) == NUM_NPUS
    compute_s = sum(n.duration_s or 0.0 for n in traces[0].nodes if n.kind == "compute")
    result = report(capsys, "replay", str(out), *TOPOLOGY)
    assert result["step_time_s"] > 0
    assert result["step_time_s"] >= compute_s  # measured compute times are kept
