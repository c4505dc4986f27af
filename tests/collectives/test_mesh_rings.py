"""Rings on a full point-to-point mesh (MI300X): n - 1 rings that share no link."""

import pytest

from simtrain.collectives.ring import disjoint_rings
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.specs.cluster import ClusterSpec


def test_eight_peers_split_into_seven_link_disjoint_rings():
    rings = disjoint_rings(8)
    assert len(rings) == 7 and all(sorted(r) == list(range(8)) for r in rings)
    arcs = [(a, b) for r in rings for a, b in zip(r, (*r[1:], r[0]), strict=True)]
    assert len(arcs) == len(set(arcs)) == 8 * 7  # every directed link exactly once


def test_no_split_exists_for_four_peers():
    assert disjoint_rings(4) == ()


@pytest.mark.parametrize(
    ("size", "measured_gb_per_s"),
    [(2**30, 313.92), (2**31, 315.06), (2**32, 314.85)],  # amd.md §4.2 (held out)
)
def test_mi300x_in_node_all_reduce_matches_rccl_at_large_sizes(size, measured_gb_per_s):
    model = FlowNetworkModel.from_cluster(ClusterSpec(accelerator="MI300X", num_gpus=8))
    busbw = size / model.collective_time_s("all_reduce", list(range(8)), size) * 2 * 7 / 8
    assert busbw / 1e9 == pytest.approx(measured_gb_per_s, rel=0.10)
