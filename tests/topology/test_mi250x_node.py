"""The MI250X node as wired: 4 packages x 2 GCDs, quad/dual/single Infinity Fabric pairs."""

import numpy as np
import pytest

from simtrain.catalog.node_wirings import MI250X
from simtrain.collectives.base import GroupLayout
from simtrain.collectives.ring import ring_orders
from simtrain.errors import SpecError
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import build_topology
from simtrain.topology.node_fabric import widest_ring


def mi250x(num_gpus=8, **kw):
    return ClusterSpec(accelerator="MI250X", num_gpus=num_gpus, nics_per_node=4, **kw)


@pytest.mark.parametrize(
    ("dst", "links", "measured_gb_per_s"),
    [(1, 4, 148), (6, 2, 76), (2, 1, 38)],  # amd.md §1.3 (LUMI ReFrame comm_scope references)
)
def test_gcd_pair_bandwidth_matches_measurement(dst, links, measured_gb_per_s):
    model = FlowNetworkModel.from_cluster(mi250x())
    size = 2**30  # the benchmark's transfer size
    busbw = size / model.p2p_time_s(0, dst, size) / 1e9
    assert busbw == pytest.approx(measured_gb_per_s, rel=0.01)
    assert (0, dst, links) in MI250X.pairs


def test_every_gcd_has_one_quad_one_dual_one_single_link():
    degree = {d: sorted(n for a, b, n in MI250X.pairs if d in (a, b)) for d in range(8)}
    assert all(links == [1, 2, 4] for links in degree.values())


def test_gcds_without_a_direct_link_route_over_two_hops_widest_first():
    topo = build_topology(mi250x())
    route = topo.routes(np.array([0]), np.array([3]))[0]
    hops = route[route >= 0]
    assert hops.size == 2
    # 0 -> 1 (quad, 148) -> 3 (single, 38) beats 0 -> 2 (single) -> 3 (quad): same
    # bottleneck, so the tie goes to the first path found; either way 2 hops, 38 GB/s.
    assert topo.link_bandwidth_bytes_per_s[hops].min() == pytest.approx(38e9)


def test_ring_follows_the_quad_and_dual_links():
    order = widest_ring(MI250X, tuple(range(8)))
    links = {frozenset((a, b)): n for a, b, n in MI250X.pairs}
    successor = order[1:] + order[:1]
    hops = [links.get(frozenset((a, b)), 0) for a, b in zip(order, successor, strict=True)]
    assert sorted(hops) == [2, 2, 2, 2, 4, 4, 4, 4]  # every quad pair, never a single link


def test_collective_groups_are_ordered_along_the_ring():
    topo = build_topology(mi250x())
    layout = GroupLayout.of(np.arange(8), topo)
    assert layout.by_node[0].tolist() == [0, 1, 5, 4, 2, 3, 7, 6]
    orders = ring_orders(layout, topo)
    assert [o.tolist() for o in orders] == [[0, 1, 5, 4, 2, 3, 7, 6], [6, 7, 3, 2, 4, 5, 1, 0]]


def test_in_node_ring_all_reduce_is_set_by_the_dual_links():
    # A ring and its reverse over the quad+dual ring: each direction of every dual link
    # carries one ring, so busbw approaches 2 x 76 GB/s.
    model = FlowNetworkModel.from_cluster(mi250x(), algorithm="ring", protocol="simple")
    size = 2**30
    busbw = size / model.collective_time_s("all_reduce", list(range(8)), size) * 2 * 7 / 8
    assert 140e9 < busbw < 152e9


def test_each_package_has_its_own_nic():
    topo = build_topology(mi250x(num_gpus=16))
    assert topo.nics_per_node == 4
    # GCDs 0 and 1 (package 0) leave through the same NIC, GCD 2 through another.
    routes = topo.routes(np.array([0, 1, 2]), np.array([8, 8, 8]))
    first_net = [r[topo.link_class[r.clip(0)] == 2][0] for r in routes]  # class 2 = net
    assert first_net[0] == first_net[1] != first_net[2]


def test_wired_fabric_needs_eight_gcds_per_node():
    with pytest.raises(SpecError, match=r"'cluster\.gpus_per_node' must be 8"):
        build_topology(mi250x(num_gpus=4, gpus_per_node=4, topology={"node_fabric": "mi250x"}))


def test_bisection_of_one_node_is_the_narrowest_half_cut():
    topo = build_topology(mi250x())
    # Packages {0, 1, 2, 3} | {4, 5, 6, 7} keeps the quads and singles inside the halves and
    # cuts the four dual pairs 0-6, 1-5, 2-4, 3-7: 4 x 76 GB/s.
    assert topo.bisection_bandwidth_bytes_per_s == pytest.approx(4 * 76e9)
