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
    # through its one local link to the next switch.
    group = np.arange(0, 8 * 512, 8)
    minimal = fabric(group, "minimal").inter.bandwidth_bytes_per_s
    ugal = fabric(group, "ugal").inter.bandwidth_bytes_per_s
    assert minimal == pytest.approx(23.82e9 / (16 * 124 / 512))
    assert ugal == pytest.approx(23.82e9)  # adaptive routing spreads over 31 local links


def test_all_to_all_across_groups_pays_the_global_taper():
    group = np.arange(0, 8 * 512, 8)  # 4 groups of 128 nodes
    minimal = fabric(group, "minimal").inter.exchange_bytes_per_s
    ugal = fabric(group, "ugal").inter.exchange_bytes_per_s
    assert minimal < ugal < 23.82e9
