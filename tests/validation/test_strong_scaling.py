"""Strong scaling: at a fixed global batch, throughput per GPU falls as GPUs are added."""

import itertools

import pytest

from simtrain.api import simulate
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
