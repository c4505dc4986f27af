"""parallel.mesh: MaxText-style ICI/DCN axes resolved into tp, dp and FSDP sharding."""

import pytest

from simtrain.errors import SpecError
from simtrain.specs.loader import experiment_from_dict


def experiment(mesh, num_slices=2, **parallel):
    return experiment_from_dict(
        {
            "model": {
                "num_layers": 2,
                "hidden_size": 1024,
                "num_heads": 16,
                "seq_length": 2048,
                "vocab_size": 32000,
            },
            "parallel": {"global_batch_size": 1024, "mesh": mesh, **parallel},
            "cluster": {
                "accelerator": "TPUv5e",
                "num_gpus": 256 * num_slices,
                "gpus_per_node": 8,
                "topology": {
                    "kind": "torus_3d",
                    "torus_shape": [16, 16, 1],
                    "num_slices": num_slices,
                },
            },
        }
    )


def test_fsdp_fills_the_slice_and_dp_spans_the_slices():
    p = experiment({"ici_fsdp": -1, "dcn_dp": -1}, num_slices=4).parallel
    assert (p.tp, p.dp, p.zero_stage, p.zero_shard_group_size) == (1, 1024, 3, 256)
    assert (p.mesh.ici_fsdp, p.mesh.dcn_dp) == (256, 4)


def test_fsdp_times_tp_as_maxtext_128b():
    p = experiment({"ici_fsdp": 16, "ici_tp": 16}).parallel
    assert (p.tp, p.dp, p.zero_shard_group_size) == (16, 32, 16)


def test_mesh_that_does_not_multiply_to_the_slice_is_one_clear_error():
    with pytest.raises(SpecError) as err:
        experiment({"ici_fsdp": 16, "ici_tp": 8})
    message = str(err.value)
    assert "'parallel.mesh' ici axes ici_fsdp=16*ici_tp=8*ici_dp=1" in message
    assert "must multiply to the chips of one slice = 256 (got 128)" in message


def test_dcn_axis_must_match_the_slices():
    with pytest.raises(SpecError, match="must multiply to the number of slices = 2"):
        experiment({"dcn_dp": 4})


def test_degrees_set_by_hand_must_agree_with_the_mesh():
    with pytest.raises(SpecError, match=r"'parallel\.tp' must be left out or equal 1"):
        experiment({"ici_fsdp": -1}, tp=2)
