"""Kineto (PyTorch profiler) traces: the recorded fixture and a synthetic GPU trace."""

import json
from pathlib import Path

import pytest

from simtrain.traceio.kineto import read_kineto, read_kineto_file
from simtrain.traceio.replay import build_program
from tests.trace.helpers import cli, report

FIXTURE = Path(__file__).parent / "fixtures" / "kineto"
TOPOLOGY = ["--topology", "dgx-h100-superpod", "--accelerator", "H100-SXM"]


def outermost_main_thread_ops(path: Path) -> list[tuple[str, float]]:
    """(name, dur µs) of the top-level cpu_op events of the main thread, from the raw file."""
    events = json.loads(path.read_text())["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    main = max({e["tid"] for e in ops}, key=lambda t: sum(e["tid"] == t for e in ops))
    result, open_until = [], float("-inf")
    for e in sorted((e for e in ops if e["tid"] == main), key=lambda e: (e["ts"], -e["dur"])):
        if e["ts"] >= open_until:
            result.append((e["name"], e["dur"]))
        open_until = max(open_until, e["ts"] + e["dur"])
    return result


def test_fixture_is_small_and_recorded_by_the_script():
    files = sorted(FIXTURE.glob("kineto.*.json"))
    assert [f.name for f in files] == ["kineto.0.json", "kineto.1.json"]
    assert all(f.stat().st_size < 1_000_000 for f in files)
    assert (Path(__file__).parents[2] / "experiments" / "traces" / "record_kineto.py").exists()


@pytest.mark.parametrize("rank", [0, 1])
def test_kernel_durations_are_preserved(rank):
    trace = read_kineto_file(FIXTURE / f"kineto.{rank}.json")
    compute = [(n.name, n.duration_s) for n in trace.nodes if n.kind == "compute"]
    expected = outermost_main_thread_ops(FIXTURE / f"kineto.{rank}.json")
    expected = [(name, dur) for name, dur in expected if name != "c10d::allreduce_"]
    assert [name for name, _ in compute] == [name for name, _ in expected]
    assert [d for _, d in compute] == pytest.approx([dur * 1e-6 for _, dur in expected])


def test_gloo_all_reduce_is_a_sized_collective():
    trace = read_kineto_file(FIXTURE / "kineto.0.json")
    (coll,) = [n for n in trace.nodes if n.kind == "collective"]
    assert coll.ops[0].comm == "all_reduce"
    assert coll.ops[0].comm_bytes == (256 * 512 + 512 + 512 * 256 + 256) * 4  # fp32 grads
    assert coll.group == (0, 1) and trace.world_size == 2


def test_fixture_replays_with_measured_compute(capsys):
    result = report(capsys, "replay", str(FIXTURE), *TOPOLOGY)
    busiest_s = max(
        sum(d for _, d in outermost_main_thread_ops(FIXTURE / f"kineto.{r}.json")) * 1e-6
        for r in (0, 1)
    )
    assert result["replay"]["format"] == "kineto"
    assert result["replay"]["measured_durations_kept"] is True
    # every measured op runs for its measured time; only launch gaps are dropped
    assert busiest_s * 0.9 < result["step_time_s"] < busiest_s * 1.5
    program = build_program(read_kineto(FIXTURE))
    assert all(t.duration_s is not None for t in program.tasks if t.stream == "compute")


def test_retarget_scales_measured_durations_by_peak_ratio(capsys):
    base = report(capsys, "replay", str(FIXTURE), *TOPOLOGY)
    moved = report(
        capsys, "replay", str(FIXTURE), *TOPOLOGY, "--retarget", "--source-accelerator", "A100-80GB"
    )
    note = moved["replay"]["retarget"]
    # aten::mm ops carry their input dims, so the compute model re-times them; the rest is
    # scaled by the peak ratio
    assert note["num_scaled"] > 0 and note["num_reestimated"] >= 2
    assert note["scale"] == pytest.approx(312e12 / 989e12, rel=0.01)
    assert moved["compute_s"] < base["compute_s"]


def test_retarget_without_source_accelerator_is_one_line(capsys):
    code, _, err = cli(capsys, "replay", str(FIXTURE), *TOPOLOGY, "--retarget")
    assert code == 2 and err.count("\n") == 1 and "--source-accelerator" in err


def gpu_trace(rank: int) -> dict:
    kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "args": {"stream": 7}}
    return {
        "distributedInfo": {"rank": rank, "world_size": 2},
        "deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}],
        "traceEvents": [
            {**kernel, "name": "sm90_xmma_gemm", "ts": 0, "dur": 100},
            {**kernel, "name": "vectorized_elementwise_kernel", "ts": 110, "dur": 20},
            {
                **kernel,
                "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                "tid": 9,
                "ts": 140,
                "dur": 500,
                "args": {"In msg nelems": 1 << 20, "dtype": "BFloat16"},
            },
            {**kernel, "name": "optimizer_kernel", "ts": 700, "dur": 30},
        ],
    }


def test_gpu_kernels_and_nccl_kernels(tmp_path, capsys):
    for rank in (0, 1):
        (tmp_path / f"job.{rank}.json").write_text(json.dumps(gpu_trace(rank)))
    traces = read_kineto(tmp_path)
    nodes = traces[0].nodes
    assert [n.kind for n in nodes] == ["compute", "compute", "collective", "compute"]
    assert [n.duration_s for n in nodes] == pytest.approx([100e-6, 20e-6, None, 30e-6])
    assert nodes[2].ops[0].comm_bytes == 2 * (1 << 20)
    assert nodes[2].deps == (1,) and nodes[3].deps == (2,)
    result = report(capsys, "replay", str(tmp_path), *TOPOLOGY)
    assert result["compute_s"] == pytest.approx(150e-6)
    assert result["step_time_s"] > 150e-6


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"traceEvents": [{"ph": "X", "name": "k", "ts": 0, "dur": -1}]}', "event 0 (k)"),
        ('{"traceEvents": [{"ph": "X", "name": "k", "ts": "a", "dur": 1}]}', "'ts' and 'dur'"),
        ('{"traceEvents": {}, "deviceProperties": []}', "must be an object with 'traceEvents'"),
        ('{"traceEvents": [], "distributedInfo": {"rank": -3}}', "the rank must be"),
        ('{"traceEvents": [{"ph": "X", "ts": 0, "dur', "invalid JSON"),
        ('{"traceEvents": ' + "[" * 200_000 + "]" * 200_000 + "}", "nested too deeply"),
    ],
)
def test_broken_kineto_trace_is_one_line(tmp_path, capsys, content, fragment):
    (tmp_path / "bad.0.json").write_text(content)
    code, _, err = cli(capsys, "replay", str(tmp_path), *TOPOLOGY)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "bad.0.json" in err and fragment in err


def test_process_groups_come_from_the_event_or_pg_config(tmp_path, capsys):
    # ranks 0-1 and 2-3 each run their own all-reduce: matched within their group only
    for rank in range(4):
        trace = gpu_trace(rank)
        trace["distributedInfo"] = {
            "rank": rank,
            "world_size": 4,
            "pg_config": [{"pg_name": "3", "ranks": [0, 1]}, {"pg_name": "4", "ranks": [2, 3]}],
        }
        args = trace["traceEvents"][2]["args"]
        if rank < 2:
            args["Process Group Ranks"] = "[0, 1]"
        else:
            args["Process Group Name"] = "4"
        (tmp_path / f"job.{rank}.json").write_text(json.dumps(trace))
    traces = read_kineto(tmp_path)
    groups = [next(n.group for n in t.nodes if n.kind == "collective") for t in traces]
    assert groups == [(0, 1), (0, 1), (2, 3), (2, 3)]
    assert report(capsys, "replay", str(tmp_path), *TOPOLOGY)["step_time_s"] > 0


def test_launch_gaps_from_cuda_runtime_calls_are_replayed(tmp_path, capsys):
    trace = gpu_trace(0)
    trace["distributedInfo"] = {"rank": 0, "world_size": 1}
    kernels = [e for e in trace["traceEvents"] if "nccl" not in e["name"]]
    trace["traceEvents"] = list(kernels)
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 1}
    # the host launches the third kernel 300 µs after the second one ended: a launch gap
    for correlation, (kernel, launch_ts) in enumerate(zip(kernels, [-10, 100, 430], strict=True)):
        kernel["args"] = {"correlation": correlation}
        trace["traceEvents"].append(
            {**launch, "ts": launch_ts, "dur": 5, "args": {"correlation": correlation}}
        )
    (tmp_path / "job.0.json").write_text(json.dumps(trace))
    nodes = read_kineto(tmp_path)[0].nodes
    host = [n for n in nodes if n.stream == "host"]
    assert [n.duration_s for n in host] == pytest.approx([0.0, 110e-6, 330e-6])
    result = report(capsys, "replay", str(tmp_path), *TOPOLOGY)
    # launches end at -5, 105, 435 µs (relative: 0, 110, 440); kernels of 100, 20, 30 µs
    assert result["step_time_s"] == pytest.approx(470e-6)
    assert result["compute_s"] == pytest.approx(150e-6)  # host time is not device time
    assert result["exposed_comm_s"] == pytest.approx(0.0)
