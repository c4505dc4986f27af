"""Hybrid sharding's all-reduce across shard groups: overlapped, or exposed (jax-xla, DCN)."""

import pytest

from simtrain.api import simulate
from simtrain.specs.loader import experiment_from_dict


def run(slices, **parallel):
    spec = experiment_from_dict(
        {
            "model": {
                "num_layers": 4,
                "hidden_size": 4096,
                "num_heads": 32,
                "seq_length": 2048,
                "vocab_size": 32000,
            },
            "parallel": {
                "micro_batch_size": 4,
                "global_batch_size": 16 * slices,
                "mesh": {"ici_fsdp": -1, "dcn_dp": -1},
                **parallel,
            },
            "cluster": {
                "accelerator": "TPUv5e",
                "num_gpus": 4 * slices,
                "gpus_per_node": 4,
                "topology": {"kind": "torus_3d", "torus_shape": [2, 2, 1], "num_slices": slices},
            },
            "training": {"framework": "jax-xla"},
        }
    )
    return simulate(spec).summary()


def test_jax_xla_exposes_the_cross_slice_reduction_per_layer():
    one, four = run(1), run(4)
    hidden = run(4, overlap_replica_grad_reduce=True)
    assert four["spec"]["parallel"]["overlap_replica_grad_reduce"] is False
    # Exposed: each of the 4 layers' (and the embedding's) all-reduces over 4 slices pays
    # 2 x 3 DCN ring steps of latency on top of the one-slice step.
    extra = four["step_time_s"] - one["step_time_s"]
    assert extra > 4 * 6 * 0.9e-3
    assert hidden["step_time_s"] < four["step_time_s"] - 0.5 * extra


@pytest.mark.parametrize("slices", [2, 4])
def test_more_slices_cost_more(slices):
    assert run(2 * slices)["step_time_s"] > run(slices)["step_time_s"]
