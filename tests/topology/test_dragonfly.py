"""Dragonfly: groups of all-to-all switches, global links between groups, three routings."""

import numpy as np
import pytest
from pydantic import ValidationError

from simtrain.errors import SpecError
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import build_topology

GLOBAL = object()


def dragonfly(num_gpus=16, gpus_per_node=8, nics=4, **topo):
    return ClusterSpec(
        accelerator="MI250X",
        num_gpus=num_gpus,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics,
        topology={"kind": "dragonfly", **topo},
    )


def small(routing="minimal", num_gpus=64, **kw):
    # Groups of 4 switches x 1 NIC port = 4 nodes per group (1 NIC per node, 4 GPUs).
    return dragonfly(
        num_gpus=num_gpus,
        gpus_per_node=4,
        nics=1,
        num_groups=kw.pop("num_groups", 8),
        switches_per_group=4,
        nic_ports_per_switch=1,
        links_per_group_pair=1,
        routing=routing,
        **kw,
    )


def global_hops(topo, routes):
    """Global links on each route: links between switches of different groups."""
    first = topo.node_kinds.index("group_switch")
    per_group = 4 if topo.num_nodes < 100 else 32
    src, dst = topo.link_src[routes.clip(0)], topo.link_dst[routes.clip(0)]
    switch = (src >= first) & (dst >= first) & (routes >= 0)
    cross = (src - first) // per_group != (dst - first) // per_group
    return (switch & cross).sum(axis=1)


def test_frontier_like_counts_and_bisection():
    topo = build_topology(dragonfly(num_gpus=8 * 512, num_groups=74))
    assert topo.count_nodes()["group_switch"] == 74 * 32
    assert "74" in topo.details["groups"] and "4 used" in topo.details["groups"]
    assert "10804 in all" in topo.details["global links"]  # 74 * 73 / 2 pairs x 4 links
    # 4 groups used: the worst half cut crosses 2 x 2 pairs x 4 links of 23.82 GB/s.
    assert topo.bisection_bandwidth_bytes_per_s == pytest.approx(16 * 23.82e9)


def test_minimal_routes_take_at_most_one_global_link():
    topo = build_topology(dragonfly(num_gpus=8 * 512, num_groups=8))
    src = np.zeros(4, dtype=np.int64)
    dst = np.array([8, 8 * 4, 8 * 130, 8 * 400])  # same switch, group, next group, far group
    routes = topo.routes(src, dst)
    links = (routes >= 0).sum(axis=1)
    assert links.tolist()[:2] == [2, 3]  # NIC up/down, plus one local hop
    assert 3 <= links[2] <= 5 and 3 <= links[3] <= 5
    assert global_hops(topo, routes).tolist() == [0, 0, 1, 1]


def test_valiant_detours_through_a_third_group():
    topo = build_topology(dragonfly(num_gpus=8 * 512, num_groups=8, routing="valiant"))
    routes = topo.routes(np.zeros(3, dtype=np.int64), np.array([8 * 130, 8 * 131, 8 * 400]))
    assert global_hops(topo, routes).tolist() == [2, 2, 2]


def test_ugal_spreads_an_adversarial_group_to_group_exchange():
    # Every node of group 0 sends to its peer in group 1 over a single global link: minimal
    # routing serialises the four flows on it, Valiant and UGAL spread them over other groups.
    def exchange_s(routing):
        model = FlowNetworkModel.from_cluster(small(routing, num_gpus=32, num_groups=8))
        pairs = [[4 * i, 16 + 4 * i] for i in range(4)]
        return model.concurrent_time_s("send_recv", pairs, 2**28)

    minimal, valiant, ugal = exchange_s("minimal"), exchange_s("valiant"), exchange_s("ugal")
    # UGAL weighs the two-global-hop detour double, so it stops detouring once the minimal
    # link carries no more than twice a detour's load: half of the four flows move.
    assert ugal <= 0.8 * minimal
    assert valiant <= 0.8 * minimal


def test_ugal_keeps_uncongested_traffic_minimal():
    topo_min = build_topology(small("minimal"))
    topo_ugal = build_topology(small("ugal"))
    src, dst = np.array([0]), np.array([16])  # one flow alone: nothing to balance
    assert np.array_equal(topo_min.routes(src, dst), topo_ugal.routes(src, dst)[:, :5])


def test_ring_all_reduce_on_two_nodes_of_one_switch():
    model = FlowNetworkModel.from_cluster(dragonfly(num_groups=20), algorithm="ring")
    size = 2**27
    busbw = size / model.collective_time_s("all_reduce", list(range(16)), size) * 2 * 15 / 16
    # four NICs of 23.82 GB/s bound it (95.3 GB/s), latency takes the rest at 128 MiB
    assert 75e9 < busbw < 95.3e9


def test_zero_groups_is_a_validation_error():
    with pytest.raises(ValidationError, match="num_groups"):
        dragonfly(num_groups=0)


def test_unknown_routing_is_a_validation_error_listing_the_valid_ones():
    with pytest.raises(ValidationError, match=r"minimal.*valiant.*ugal"):
        dragonfly(routing="adaptive")


def test_too_few_groups_for_the_cluster():
    with pytest.raises(SpecError, match=r"'cluster\.topology\.num_groups' must hold"):
        build_topology(dragonfly(num_gpus=8 * 300, num_groups=2))


def test_switch_radix_overflow():
    with pytest.raises(SpecError, match=r"'cluster\.topology\.switch_radix' must fit"):
        build_topology(dragonfly(num_groups=74, links_per_group_pair=40))


def test_nic_ports_must_take_whole_nodes():
    with pytest.raises(SpecError, match="nic_ports_per_switch"):
        build_topology(dragonfly(nic_ports_per_switch=6))


def test_one_group_dragonfly_routes_inside_the_group():
    topo = build_topology(dragonfly(num_gpus=8 * 8, num_groups=1, routing="ugal"))
    routes = topo.routes(np.array([0, 0]), np.array([8, 8 * 5]))
    assert ((routes >= 0).sum(axis=1)).tolist() == [2, 3]
