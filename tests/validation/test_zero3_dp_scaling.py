"""ZeRO-3 at a fixed global batch: per-GPU throughput falls as the data-parallel group grows.

With one sequence per GPU at the largest count, adding GPUs shortens each rank's compute
while every per-unit all-gather and reduce-scatter keeps its size and pays a ring latency
that grows with the group (issue 13, "Must show": DP 64 -> 4,096 on a fat-tree).
"""

import itertools

from simtrain.api import simulate
from tests.conftest import make_experiment

MODEL = {
    "name": "gpt-1b",
    "num_layers": 8,
    "hidden_size": 2048,
    "num_heads": 16,
    "vocab_size": 32000,
    "seq_length": 2048,
}
GLOBAL_BATCH = 4096  # one sequence per GPU at 4,096 GPUs


def test_zero3_throughput_per_gpu_falls_from_64_to_4096_gpus():
    per_gpu = []
    for gpus in (64, 512, 4096):
        spec = make_experiment(
            f"cluster.num_gpus={gpus}",
            f"parallel.global_batch_size={GLOBAL_BATCH}",
            "parallel.micro_batch_size=1",
            "parallel.zero_stage=3",
            "training.framework=pytorch-fsdp1",
            "cluster.topology.kind=fat_tree",
            model=MODEL,
        )
        per_gpu.append(simulate(spec).summary()["tokens_per_s"] / gpus)
    assert all(b < a for a, b in itertools.pairwise(per_gpu)), per_gpu
    assert per_gpu[-1] < 0.5 * per_gpu[0], per_gpu
