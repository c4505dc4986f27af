import itertools

import pytest

from simtrain.engine import run_program
from simtrain.memory import estimate_stage_memory, memory_timeline
from simtrain.parallel.schedule_timing import StageTimes, schedule_program
from simtrain.parallel.schedules import build_schedule
from simtrain.specs import ClusterSpec, ExperimentSpec, ModelSpec, ParallelSpec

MODEL = ModelSpec(num_layers=16, hidden_size=1024, num_heads=16, vocab_size=32000, seq_length=2048)


def spec_for(schedule: str, vpp: int = 1) -> ExperimentSpec:
    par = ParallelSpec(dp=1, tp=2, sp=True, pp=4, vpp=vpp, pipeline_schedule=schedule,
                       global_batch_size=8)  # fmt: skip
    return ExperimentSpec(
        model=MODEL, parallel=par, cluster=ClusterSpec(accelerator="A100-80GB", num_gpus=8)
    )


@pytest.mark.parametrize(("schedule", "vpp"), [("1f1b", 1), ("gpipe", 1), ("interleaved", 2)])
def test_timeline_peak_equals_estimate_when_the_engine_keeps_the_order(schedule, vpp):
    spec = spec_for(schedule, vpp)
    program = schedule_program(build_schedule(schedule, 4, 8, vpp), StageTimes())
    result = run_program(program)
    for rank in range(4):
        estimate = estimate_stage_memory(spec, 80e9, rank)
        timeline = memory_timeline(program, result.start_s, result.end_s, rank, estimate)
        assert max(b for _, b in timeline) == pytest.approx(estimate.peak_bytes)
        # everything allocated is freed by the end of the step
        assert timeline[-1][1] == pytest.approx(timeline[0][1])
        assert timeline[0][1] == pytest.approx(
            estimate.peak_bytes - estimate.breakdown_bytes["activations.layers"]
        )


@pytest.mark.parametrize(("schedule", "vpp"), [("1f1b", 1), ("interleaved", 2), ("zb-h2", 1)])
def test_timeline_of_a_full_simulation_peaks_at_the_estimate(schedule, vpp):
    # per-op programs label every compute task of an action with str(action)
    from simtrain.api import simulate

    small = ModelSpec(num_layers=8, hidden_size=512, num_heads=8, vocab_size=1024, seq_length=512)
    par = ParallelSpec(dp=1, pp=4, vpp=vpp, pipeline_schedule=schedule, global_batch_size=8)
    spec = ExperimentSpec(
        model=small, parallel=par, cluster=ClusterSpec(accelerator="A100-80GB", num_gpus=4)
    )
    result = simulate(spec)
    for rank in range(4):
        estimate = estimate_stage_memory(spec, 80e9, rank)
        timeline = memory_timeline(result.program, result.start_s, result.end_s, rank, estimate)
        assert max(b for _, b in timeline) == pytest.approx(estimate.peak_bytes)


def test_without_pipelining_memory_rises_and_falls_once_per_microbatch():
    from simtrain.api import simulate

    small = ModelSpec(num_layers=4, hidden_size=512, num_heads=8, vocab_size=1024, seq_length=512)
    par = ParallelSpec(dp=1, pp=1, global_batch_size=4)  # 4 microbatches, one after another
    spec = ExperimentSpec(
        model=small, parallel=par, cluster=ClusterSpec(accelerator="A100-80GB", num_gpus=1)
    )
    result = simulate(spec)
    estimate = estimate_stage_memory(spec, 80e9, 0)
    values = [
        b for _, b in memory_timeline(result.program, result.start_s, result.end_s, 0, estimate)
    ]
    static = estimate.peak_bytes - estimate.breakdown_bytes["activations.layers"]
    assert max(values) == pytest.approx(estimate.peak_bytes)
    # each microbatch climbs from the static bytes to the peak and back down again
    peaks = sum(
        1
        for a, b in itertools.pairwise(values)
        if b == pytest.approx(estimate.peak_bytes) and a < b
    )
    returns = sum(1 for a, b in itertools.pairwise(values) if b == pytest.approx(static) and a > b)
    assert peaks == 4 and returns == 4
    assert len(set(values)) > 8  # layer by layer, not one step per microbatch
