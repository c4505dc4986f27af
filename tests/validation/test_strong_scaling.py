"""Strong scaling: at a fixed global batch, throughput per GPU falls as GPUs are added."""

import itertools

import pytest

from simtrain.api import build_program, compute_model_for, network_model_for, simulate
from simtrain.compute import calibration_for
from simtrain.engine import run_program
from tests.conftest import make_experiment

MODEL = {
    "name": "gpt-small",
    "num_layers": 4,
    "hidden_size": 1024,
    "num_heads": 16,
    "vocab_size": 32000,
    "seq_length": 1024,
}


@pytest.mark.parametrize(
    "layout",
    [
        ("parallel.zero_stage=1",),
        ("parallel.tp=8", "parallel.sp=true"),
        ("parallel.zero_stage=3",),
    ],
    ids=["dp-zero1", "tp8-dp", "fsdp"],
)
def test_tokens_per_gpu_fall_with_gpu_count_at_fixed_global_batch(layout):
    per_gpu = []
    for gpus in (16, 32, 64, 128, 256):
        spec = make_experiment(
            f"cluster.num_gpus={gpus}", "parallel.global_batch_size=256", *layout, model=MODEL
        )
        result = simulate(spec)
        per_gpu.append(result.summary()["tokens_per_s"] / gpus)
    assert all(b < a for a, b in itertools.pairwise(per_gpu)), per_gpu
    # and by more than the ideal-scaling rounding: 16x the GPUs lose at least 4 % (the eager
    # host's issue time of this small model, about a third of its step, does not grow with
    # the data-parallel size; tp 8 loses 4.8 %)
    assert per_gpu[-1] < 0.96 * per_gpu[0]


WEAK_MODEL = {
    "name": "mpt-1b",
    "num_layers": 24,
    "hidden_size": 2048,
    "num_heads": 16,
    "vocab_size": 50368,
    "seq_length": 2048,
    "activation": "gelu",
    "use_bias": False,
}
"""LLM Foundry's MPT-1B shape (calibration-stacks.md §C1)."""


def _weak_scaling(persistent: bool) -> list[float]:
    """Tokens/s per GPU of FSDP on H100 at a fixed per-GPU batch, 64 -> 512 GPUs.

    As LLM Foundry ran MPT-1B there: SHARD_GRAD_OP, 12 sequences per GPU, no recomputation.
    """
    calibration = calibration_for("H100-SXM")
    calibration = calibration.model_copy(
        update={"gemm": calibration.gemm.model_copy(update={"persistent": persistent})}
    )
    per_gpu = []
    for gpus in (64, 128, 256, 512):
        spec = make_experiment(
            f"cluster.num_gpus={gpus}",
            "cluster.scale_out_link=ib-ndr",
            "cluster.nics_per_node=8",
            "training.framework=llm-foundry",
            "parallel.zero_stage=2",
            "parallel.micro_batch_size=12",
            f"parallel.global_batch_size={12 * gpus}",
            "simulation.variability.rank_speed_cv=0",
            "simulation.variability.straggler_probability=0",
            model=WEAK_MODEL,
        )
        compute = compute_model_for(spec, calibration)
        result = run_program(build_program(spec, False), compute, network_model_for(spec))
        per_gpu.append(12 * 2048 / result.step_time_s)
    return per_gpu


def test_fsdp_throughput_per_gpu_falls_with_dp_at_fixed_per_gpu_work():
    # Weak scaling (LLM Foundry's rule: the batch grows with the GPUs): every FSDP
    # all-gather and reduce-scatter pays a ring latency that grows with the ranks, and on
    # Hopper the persistent GEMMs it overlaps run their displaced CTAs in a second round
    # for as long as it lasts, so the step grows with the GPU count (README "Scaling").
    per_gpu = _weak_scaling(persistent=True)
    assert all(b < a for a, b in itertools.pairwise(per_gpu)), per_gpu
    spread = _weak_scaling(persistent=False)
    decline, spread_decline = 1 - per_gpu[-1] / per_gpu[0], 1 - spread[-1] / spread[0]
    # the second round carries most of the decline (LLM Foundry's small models lose 7-10 %
    # from 128 to 512 H100, calibration-stacks.md §C1)
    assert decline > 2 * spread_decline and decline > 0.03, (decline, spread_decline)
