import numpy as np
import pytest

from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import build_topology


def topo_of(kind, num_gpus=64, **topology):
    return build_topology(
        ClusterSpec(accelerator="H100-SXM", num_gpus=num_gpus, topology={"kind": kind, **topology})
    )


def kinds_on_route(topo, src, dst):
    row = topo.routes(np.array([src]), np.array([dst]))[0]
    row = row[row >= 0]
    return [(topo.node_kinds[topo.link_src[i]], topo.node_kinds[topo.link_dst[i]]) for i in row]


def test_intra_node_route_uses_the_nvswitch_only():
    topo = topo_of("fat_tree")
    assert kinds_on_route(topo, 0, 5) == [("device", "nvswitch"), ("nvswitch", "device")]


def test_route_is_a_connected_path_from_src_to_dst():
    topo = topo_of("fat_tree", num_gpus=8 * 64, switch_radix=16)
    rng = np.random.default_rng(0)
    src = rng.integers(0, topo.num_devices, 200)
    dst = rng.integers(0, topo.num_devices, 200)
    for s, d, row in zip(src, dst, topo.routes(src, dst), strict=True):
        links = row[row >= 0]
        if s == d:
            assert links.size == 0
            continue
        assert topo.link_src[links[0]] == s and topo.link_dst[links[-1]] == d
        assert (topo.link_dst[links[:-1]] == topo.link_src[links[1:]]).all()


def test_same_leaf_flow_does_not_climb_to_spines():
    topo = topo_of("fat_tree", num_gpus=32)
    assert kinds_on_route(topo, 0, 8) == [("device", "leaf"), ("leaf", "device")]


def test_ecmp_is_deterministic_and_spreads_over_spines():
    topo = topo_of("fat_tree", num_gpus=8 * 64, switch_radix=16)
    src = np.arange(0, 256)
    dst = src + 256
    first, second = topo.routes(src, dst), topo.routes(src, dst)
    assert (first == second).all()
    spines = {int(topo.link_dst[row[1]]) for row in first}
    assert len(spines) > 1


def test_rail_optimized_uses_pxn_to_stay_on_the_destination_rail():
    topo = topo_of("rail_optimized", num_gpus=16)
    # GPU 1 of node 0 -> GPU 3 of node 1: NVLink to GPU 3 of node 0, then rail 3
    assert kinds_on_route(topo, 1, 11) == [
        ("device", "nvswitch"),
        ("nvswitch", "device"),
        ("device", "leaf"),
        ("leaf", "device"),
    ]


def test_rail_only_never_mixes_rails():
    topo = topo_of("rail_only", num_gpus=8 * 128)
    rng = np.random.default_rng(1)
    src = rng.integers(0, topo.num_devices, 300)
    dst = rng.integers(0, topo.num_devices, 300)
    routes = topo.routes(src, dst)
    for d, row in zip(dst, routes, strict=True):
        for lid in row[row >= 0]:
            u, v = int(topo.link_src[lid]), int(topo.link_dst[lid])
            if topo.node_kinds[u] == "device" and topo.node_kinds[v] == "leaf":
                assert u % 8 == d % 8  # leaves the node on the destination's rail


def torus_distance(a, b, shape):
    ca = np.unravel_index(a, shape, order="F")
    cb = np.unravel_index(b, shape, order="F")
    return sum(min(abs(x - y), n - abs(x - y)) for x, y, n in zip(ca, cb, shape, strict=True))


def test_torus_dimension_order_routes_are_shortest_and_x_first():
    topo = build_topology(
        ClusterSpec(
            accelerator="TPUv4",
            num_gpus=64,
            gpus_per_node=4,
            topology={"kind": "torus_3d", "torus_shape": (4, 4, 4)},
        )
    )
    rng = np.random.default_rng(2)
    src = rng.integers(0, 64, 100)
    dst = rng.integers(0, 64, 100)
    routes = topo.routes(src, dst)
    for s, d, row in zip(src, dst, routes, strict=True):
        links = row[row >= 0]
        assert links.size == torus_distance(s, d, (4, 4, 4))
    # 0 -> (1, 1, 0): the first hop moves along x
    row = topo.routes(np.array([0]), np.array([5]))[0]
    assert topo.link_dst[row[0]] == 1


@pytest.mark.parametrize("wrap", [True, False])
def test_open_mesh_has_no_wraparound(wrap):
    topo = build_topology(
        ClusterSpec(
            accelerator="TPUv4",
            num_gpus=8,
            gpus_per_node=4,
            topology={"kind": "torus_3d", "torus_shape": (8, 1, 1), "torus_wraparound": wrap},
        )
    )
    hops = (topo.routes(np.array([0]), np.array([7]))[0] >= 0).sum()
    assert hops == (1 if wrap else 7)
