"""The closed-form model's view of a dragonfly: switch and group tiers under SPMD."""

import numpy as np
import pytest

from simtrain.network.fabric import group_fabric
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import build_topology


def fabric(devices, routing="ugal", nodes=512):
    cluster = ClusterSpec(
        accelerator="MI250X",
        num_gpus=8 * nodes,
        nics_per_node=4,
        topology={"kind": "dragonfly", "num_groups": 74, "routing": routing},
    )
    return group_fabric(build_topology(cluster), cluster, np.asarray(devices))


def test_two_nodes_on_one_switch_are_nic_bound():
    view = fabric(np.arange(16), nodes=2)
    assert view.inter.bandwidth_bytes_per_s == pytest.approx(4 * 23.82e9)


def test_minimal_routing_squeezes_rings_through_one_local_link():
    # One GCD per node over 512 nodes in 4 groups: 124 of the ring's 512 hops move to the
    # next switch of their group (31 per group), and each switch's 16 NICs push that share
    # through its one local link to the next switch. The group's 7 replicas on the other
    # GCDs run the same ring: 8 flows on a node's 4 NICs, 2 per NIC.
    group = np.arange(0, 8 * 512, 8)
    minimal = fabric(group, "minimal").inter.bandwidth_bytes_per_s
    ugal = fabric(group, "ugal").inter.bandwidth_bytes_per_s
    assert minimal == pytest.approx(23.82e9 / (16 * 124 / 512) / 2)
    assert ugal == pytest.approx(23.82e9 / 2)  # adaptive routing spreads over 31 local links


def test_replicas_of_a_group_share_the_node_nics():
    # Data-parallel group of a TP 2 job: GCDs 0, 2, 4, 6 of each node. It opens 4 channels,
    # the TP-rank-1 group (GCDs 1, 3, 5, 7) 4 more, on the node's 4 NICs: each group's ring
    # reaches half of the 4 x 23.82 GB/s a whole-node group reaches.
    half = np.concatenate([np.arange(0, 8, 2) + 8 * n for n in range(2)])
    whole = np.arange(16)
    shared = fabric(half, nodes=2)
    assert shared.notes["flows_per_nic"] == 2
    assert shared.inter.bandwidth_bytes_per_s == pytest.approx(2 * 23.82e9)
    assert fabric(whole, nodes=2).inter.bandwidth_bytes_per_s == pytest.approx(4 * 23.82e9)


def test_all_to_all_across_groups_pays_the_global_taper():
    group = np.arange(0, 8 * 512, 8)  # 4 groups of 128 nodes
    minimal = fabric(group, "minimal").inter.exchange_bytes_per_s
    ugal = fabric(group, "ugal").inter.exchange_bytes_per_s
    assert minimal < ugal < 23.82e9
