import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtrain.collectives import ALGORITHMS
from simtrain.errors import SpecError
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import build_topology

TOPO = build_topology(
    ClusterSpec(accelerator="H100-SXM", num_gpus=64, topology={"switch_radix": 8, "sharp": True})
)

# Bytes each algorithm must inject for a collective of size S on n ranks.
EXPECTED_BYTES = {
    ("ring", "all_reduce"): lambda n, s: 2 * (n - 1) * s,
    ("ring", "all_gather"): lambda n, s: (n - 1) * s,
    ("ring", "reduce_scatter"): lambda n, s: (n - 1) * s,
    ("halving_doubling", "all_reduce"): lambda n, s: 2 * (n - 1) * s,
    ("halving_doubling", "reduce_scatter"): lambda n, s: (n - 1) * s,
    ("hierarchical", "all_reduce"): None,  # checked against its own formula below
    ("direct", "all_to_all"): lambda n, s: (n - 1) * s,
    ("direct", "all_gather"): lambda n, s: (n - 1) * s,
    ("direct", "broadcast"): lambda n, s: (n - 1) * s,
}


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(sorted(k for k, v in EXPECTED_BYTES.items() if v)),
    st.sampled_from([2, 4, 8, 16, 32]),
    st.floats(1e3, 1e9),
)
def test_bytes_sent_match_the_algorithm_volume(case, n, size):
    algorithm, kind = case
    schedule = ALGORITHMS[algorithm].build(kind, np.arange(n), size, TOPO)
    assert schedule.bytes_sent == pytest.approx(EXPECTED_BYTES[case](n, size), rel=1e-9)


@pytest.mark.parametrize("nodes,per_node", [(2, 8), (4, 4), (8, 2)])
def test_hierarchical_bytes(nodes, per_node):
    devices = np.array([node * 8 + i for node in range(nodes) for i in range(per_node)])
    size = 1e6
    schedule = ALGORITHMS["hierarchical"].build("all_reduce", devices, size, TOPO)
    n, k, m = devices.size, per_node, nodes
    intra = 2 * n * (k - 1) * size / k
    inter = n * 2 * (m - 1) * size / (k * m)
    assert schedule.bytes_sent == pytest.approx(intra + inter)


def test_every_phase_flow_stays_inside_the_group():
    devices = np.array([0, 1, 8, 9, 16, 17, 24, 25])
    for info in ALGORITHMS.values():
        if info.name == "torus":  # whole-torus only: see the torus tests
            continue
        for kind in info.kinds:
            schedule = info.build(kind, devices, 1e6, TOPO)
            for phase in schedule.phases:
                ends = set(phase.src.tolist()) | set(phase.dst.tolist())
                switches = {i for i, k in enumerate(TOPO.node_kinds) if k != "device"}
                assert ends <= set(devices.tolist()) | switches, (info.name, kind)
                routes = TOPO.routes(phase.src, phase.dst)
                hops = (routes >= 0).sum(axis=1)
                assert (hops[phase.src != phase.dst] > 0).all(), (info.name, kind)


def test_ring_opens_one_channel_per_nic_across_nodes():
    schedule = ALGORITHMS["ring"].build("all_reduce", np.arange(16), 1.0, TOPO)
    phase = schedule.phases[0]
    cross = (phase.src // 8) != (phase.dst // 8)
    # 8 rings, each crossing both node boundaries once; every NIC sends exactly once
    assert cross.sum() == 16
    assert sorted((phase.src[cross] % 8).tolist()) == sorted(list(range(8)) * 2)


def test_halving_doubling_needs_a_power_of_two():
    with pytest.raises(SpecError, match="power-of-two"):
        ALGORITHMS["halving_doubling"].build("all_reduce", np.arange(6), 1.0, TOPO)


def test_hierarchical_needs_the_same_ranks_on_every_node():
    with pytest.raises(SpecError, match="same number of group ranks"):
        ALGORITHMS["hierarchical"].build("all_reduce", np.array([0, 1, 8]), 1.0, TOPO)


def test_nvls_on_a100_nvswitch_is_refused():
    a100 = build_topology(ClusterSpec(accelerator="A100-80GB", num_gpus=8))
    with pytest.raises(SpecError, match="nvls needs NVSwitches"):
        ALGORITHMS["nvls"].build("all_reduce", np.arange(8), 1.0, a100)


def test_tree_depth_is_chain_plus_log2_nodes():
    schedule = ALGORITHMS["tree"].build("all_reduce", np.arange(64), 1024.0, TOPO)
    phase = schedule.phases[0]
    # 8 nodes of 8: chain of 7 hops + floor(log2 8) = 3 tree hops, up and down
    assert phase.num_latencies == 2 * (7 + 3)


def test_sharp_tree_aggregates_once_per_switch_and_rail():
    # 8 nodes x 8 NICs on radix-8 switches: 4 NIC ports per leaf, 4 leaves per pod, so
    # rail j of node k sits on leaf 2k + j // 4; each rail's tree spans 8 leaves in 4 pods.
    schedule = ALGORITHMS["sharp"].build("all_reduce", np.arange(64), 8e6, TOPO)
    tree = schedule.phases[1]
    up = tree.src < tree.dst  # parents have higher graph indices than their children
    pairs = zip(tree.src[up], tree.dst[up], strict=True)
    kinds = [(TOPO.node_kinds[s], TOPO.node_kinds[d]) for s, d in pairs]
    assert kinds.count(("device", "leaf")) == 8 * 8
    assert kinds.count(("leaf", "spine")) == 8 * 8
    assert kinds.count(("spine", "core")) == 8 * 4
    assert len(kinds) == 160
    assert (tree.size_bytes == 8e6 / 8).all()


def test_sharp_needs_capable_switches():
    plain = build_topology(ClusterSpec(accelerator="H100-SXM", num_gpus=16))
    with pytest.raises(SpecError, match="sharp needs scale-out switches"):
        ALGORITHMS["sharp"].build("all_reduce", np.arange(16), 1.0, plain)


@pytest.mark.parametrize("shape", [(4, 4, 4), (2, 4, 8), (8, 1, 1)])
def test_torus_stages_use_one_hop_flows_and_move_ring_volume(shape):
    n = int(np.prod(shape))
    topo = build_topology(
        ClusterSpec(
            accelerator="TPUv4",
            num_gpus=n,
            gpus_per_node=1,
            topology={"kind": "torus_3d", "torus_shape": shape},
        )
    )
    schedule = ALGORITHMS["torus"].build("reduce_scatter", np.arange(n), 3e6, topo)
    for phase in schedule.phases:
        assert ((topo.routes(phase.src, phase.dst) >= 0).sum(axis=1) == 1).all()
    # each chip sends (n_d - 1)/n_d of its current shard per dimension stage
    expected = 0.0
    for c in range(3):
        shard = 1e6
        for stage in range(3):
            size = shape[(c + stage) % 3]
            expected += n * shard * (size - 1) / size
            shard /= size
    assert schedule.bytes_sent == pytest.approx(expected)
