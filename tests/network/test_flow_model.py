"""FlowNetworkModel: closed forms, measured busbw at 1 GiB (collectives.md §6.1-6.2), errors."""

import pytest

from simtrain.catalog import get_link
from simtrain.errors import SpecError
from simtrain.network.base import NetworkModel
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.specs.cluster import ClusterSpec

GiB = 2**30


def model(accelerator="H100-SXM", num_gpus=8, algorithm="auto", protocol="auto", **kw):
    cluster = ClusterSpec(accelerator=accelerator, num_gpus=num_gpus, **kw)
    return FlowNetworkModel.from_cluster(cluster, algorithm=algorithm, protocol=protocol)


def all_reduce_busbw(m, n, size=GiB):
    return size / m.collective_time_s("all_reduce", range(n), size) * 2 * (n - 1) / n


def test_implements_the_network_model_protocol():
    assert isinstance(model(), NetworkModel)


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("size", [1e3, 1e6, float(GiB)])
def test_uncontended_ring_all_reduce_matches_the_closed_form_exactly(n, size):
    link = get_link("nvlink4")
    m = model(num_gpus=8, algorithm="ring", protocol="none")
    b, alpha = link.effective_bandwidth_bytes_per_s, link.latency_s
    expected = 2 * (n - 1) / n * size / b + 2 * (n - 1) * alpha
    assert m.collective_time_s("all_reduce", range(n), size) == pytest.approx(expected, rel=1e-9)


def test_ring_all_gather_closed_form():
    link = get_link("nvlink3")
    m = model("A100-80GB", algorithm="ring", protocol="none")
    expected = 7 / 8 * GiB / link.effective_bandwidth_bytes_per_s + 7 * link.latency_s
    assert m.collective_time_s("all_gather", range(8), GiB) == pytest.approx(expected, rel=1e-9)


# Measured large-message busbw, docs/references/collectives.md §6.1 and §6.2, each within ±10 %.
MEASURED = [
    ("8xA100 ring (nccl-tests#149)", dict(accelerator="A100-80GB", num_gpus=8), "ring", 8, 230),
    ("8xH100 ring (nccl-tests#212)", dict(num_gpus=8), "ring", 8, 370),
    ("8xH100 NVLS (nccl-tests#212)", dict(num_gpus=8), "nvls", 8, 480),
    (
        "2xDGX-A100 8xHDR ring (nccl#812)",
        dict(accelerator="A100-80GB", num_gpus=16),
        "ring",
        16,
        192,
    ),
    (
        "one NDR NIC (nccl-tests#290)",
        dict(num_gpus=2, gpus_per_node=1, nics_per_node=1),
        "ring",
        2,
        47.5,
    ),
]


@pytest.mark.parametrize(
    "name,cluster,algorithm,n,published", MEASURED, ids=[m[0] for m in MEASURED]
)
def test_busbw_at_1gib_within_10_percent_of_measured(name, cluster, algorithm, n, published):
    m = model(algorithm=algorithm, **cluster)
    assert all_reduce_busbw(m, n) / 1e9 == pytest.approx(published, rel=0.10)


def test_nvls_gpu_count_scaling_matches_user_measurements():
    # NVIDIA/nccl#1455 (collectives.md §6.1): NVLS busbw 420 (5), 440 (6), 460 (7), 480 (8)
    m = model(algorithm="nvls")
    for n, published in [(5, 420), (6, 440), (7, 460), (8, 480)]:
        assert all_reduce_busbw(m, n) / 1e9 == pytest.approx(published, rel=0.05)


def test_auto_picks_nvls_for_large_and_a_low_latency_protocol_for_small_messages():
    m = model()
    large = m.time_collective("all_reduce", range(8), GiB)
    small = m.time_collective("all_reduce", range(8), 1024)
    assert (large.algorithm, large.protocol) == ("nvls", "simple")
    assert small.protocol == "ll"


def test_auto_is_never_slower_than_any_single_nccl_algorithm():
    for size in (1e4, 1e7, 1e9):
        best = model(num_gpus=16).collective_time_s("all_reduce", range(16), size)
        for algorithm in ("ring", "tree", "nvls"):
            assert best <= model(num_gpus=16, algorithm=algorithm).collective_time_s(
                "all_reduce", range(16), size
            ) * (1 + 1e-12)


def test_tree_latency_grows_with_log2_of_the_node_count():
    # single-GPU nodes, tiny message: the tree pays 2 * floor(log2 n) hop latencies
    def latency(n):
        m = model(num_gpus=n, gpus_per_node=1, nics_per_node=1, algorithm="tree", protocol="ll")
        return m.collective_time_s("all_reduce", range(n), 8.0)

    base = latency(2)
    assert (latency(64) - base) / (latency(8) - base) == pytest.approx((6 - 1) / (3 - 1), rel=0.02)
    ring = model(num_gpus=64, gpus_per_node=1, nics_per_node=1, algorithm="ring", protocol="ll")
    assert latency(64) < ring.collective_time_s("all_reduce", range(64), 8.0) / 4


def test_oversubscribed_cross_pod_ring_gets_one_over_r_of_full_bisection():
    def busbw(r):
        topology = {"switch_radix": 4, "num_tiers": 3, "pod_oversubscription": r}
        m = model(
            num_gpus=16,
            gpus_per_node=1,
            nics_per_node=1,
            algorithm="ring",
            protocol="none",
            topology=topology,
        )
        # 4 pods of 4 (radix 4 holds 4**3/4 = 16 NICs); rank i on pod i % 4: every ring hop
        # crosses the core
        m = type(m)(m.topology, "ring", "none", placement=[(i % 4) * 4 + i // 4 for i in range(16)])
        return all_reduce_busbw(m, 16)

    assert busbw(4) / busbw(1) == pytest.approx(1 / 4, rel=0.05)


def test_group_larger_than_topology_is_a_spec_error():
    with pytest.raises(SpecError, match=r"'ranks' must be global ranks 0\.\.7"):
        model().collective_time_s("all_reduce", range(16), GiB)


def test_nvls_over_pcie_is_a_spec_error():
    m = model(scale_up_link="pcie5", algorithm="nvls")
    with pytest.raises(SpecError, match="nvls needs NVSwitches"):
        m.collective_time_s("all_reduce", range(8), GiB)


def test_unknown_algorithm_lists_the_valid_names():
    with pytest.raises(SpecError, match="valid: auto, direct, halving_doubling"):
        model(algorithm="bogus")


def test_algorithm_that_lacks_the_collective_is_named():
    with pytest.raises(SpecError, match="tree does not implement all_to_all"):
        model(algorithm="tree").collective_time_s("all_to_all", range(8), GiB)


def test_p2p_across_nodes_runs_at_one_nic():
    m = model(num_gpus=16, protocol="none")
    t = m.p2p_time_s(0, 8, GiB)
    assert GiB / t / 1e9 == pytest.approx(47, rel=0.01)
    assert m.p2p_time_s(3, 3, GiB) == 0.0


def test_schedule_returns_the_chosen_algorithm_phases():
    m = model(num_gpus=16)
    timing = m.time_collective("all_reduce", range(16), GiB)
    schedule = m.schedule("all_reduce", range(16), GiB)
    assert timing.algorithm == "ring"
    assert schedule.bytes_sent == pytest.approx(2 * 15 * GiB)


def test_auto_on_a_torus_keeps_to_ring_patterns():
    cluster = ClusterSpec(
        accelerator="TPUv4",
        num_gpus=64,
        gpus_per_node=4,
        topology={"kind": "torus_3d", "torus_shape": (4, 4, 4)},
    )
    m = FlowNetworkModel.from_cluster(cluster)
    assert m.time_collective("all_reduce", range(64), GiB).algorithm == "torus"
    assert m.time_collective("all_reduce", range(16), GiB).algorithm == "ring"


def test_sharp_busbw_does_not_fall_with_node_count_unlike_the_ring():
    def busbw(n, algorithm):
        m = model(
            num_gpus=n, algorithm=algorithm, topology={"kind": "rail_optimized", "sharp": True}
        )
        return all_reduce_busbw(m, n)

    assert busbw(1024, "sharp") == pytest.approx(busbw(128, "sharp"), rel=0.02)
    assert busbw(1024, "ring") < 0.5 * busbw(128, "ring")  # 2(n-1) NET step latencies
    assert (
        model(num_gpus=1024, topology={"sharp": True})
        .time_collective("all_reduce", range(1024), GiB)
        .algorithm
        == "sharp"
    )


def test_from_experiment_uses_the_cluster_and_the_algorithm_choice():
    from simtrain.specs.loader import experiment_from_dict

    spec = experiment_from_dict(
        {
            "model": {
                "num_layers": 2,
                "hidden_size": 256,
                "num_heads": 8,
                "seq_length": 128,
                "vocab_size": 1000,
            },
            "parallel": {"tp": 8, "global_batch_size": 2},
            "cluster": {"accelerator": "H100-SXM", "num_gpus": 16},
            "simulation": {"network_model": "flow", "collective_algorithm": "tree"},
        }
    )
    m = FlowNetworkModel.from_experiment(spec)
    assert m.topology.num_devices == 16
    assert m.time_collective("all_reduce", range(16), GiB).algorithm == "tree"


def dp_groups_model(kind, **topology):
    m = model(num_gpus=128, topology={"kind": kind, "switch_radix": 8, **topology})
    return m, [list(range(j, 128, 8)) for j in range(8)]  # 8 DP groups, one per local rank


def test_concurrent_dp_groups_contend_on_a_fat_tree_but_not_on_separate_rails():
    m, groups = dp_groups_model("fat_tree")
    alone = m.collective_time_s("all_reduce", groups[0], 2**28)
    assert m.concurrent_time_s("all_reduce", groups, 2**28) > 2 * alone  # shared spines
    m, groups = dp_groups_model("rail_only")
    alone = m.collective_time_s("all_reduce", groups[0], 2**28)
    assert m.concurrent_time_s("all_reduce", groups, 2**28) == pytest.approx(alone)


def test_concurrent_groups_must_have_one_shape():
    m, _ = dp_groups_model("fat_tree")
    with pytest.raises(SpecError, match="'groups' must have the same shape"):
        m.concurrent_time_s("all_reduce", [list(range(0, 128, 8)), list(range(8))], 2**20)


def test_pipelined_ring_broadcast_closed_form():
    link = get_link("nvlink4")
    b, alpha = link.effective_bandwidth_bytes_per_s, link.latency_s
    size = 64 * 2**20
    chunks = size // (512 * 1024)  # 128 pipeline chunks of NCCL's 512 KiB
    expected = (chunks + 8 - 2) * (size / chunks) / b + (8 - 1) * alpha
    m = model(algorithm="ring", protocol="none")
    assert m.collective_time_s("broadcast", range(8), size) == pytest.approx(expected, rel=1e-9)


def test_direct_all_to_all_in_a_node_shares_each_port_among_peers():
    link = get_link("nvlink4")
    expected = 7 / 8 * GiB / link.effective_bandwidth_bytes_per_s + link.latency_s
    m = model(protocol="none")
    assert m.collective_time_s("all_to_all", range(8), GiB) == pytest.approx(expected, rel=1e-9)


def test_tpuv4_pod_torus_all_reduce_reaches_the_published_1_1_pb_per_s():
    # docs/references/hardware.md §7.1 (TPU v4): pod all-reduce bandwidth 1.1 PB/s over 4,096 chips
    cluster = ClusterSpec(
        accelerator="TPUv4",
        num_gpus=4096,
        gpus_per_node=4,
        topology={"kind": "torus_3d", "torus_shape": (16, 16, 16)},
    )
    m = FlowNetworkModel.from_cluster(cluster)
    size = 4 * GiB
    timing = m.time_collective("all_reduce", range(4096), size)
    assert timing.algorithm == "torus"
    busbw = size / timing.time_s * 2 * 4095 / 4096
    assert busbw * 4096 == pytest.approx(1.1e15, rel=0.05)


def test_torus_algorithm_needs_the_whole_torus():
    cluster = ClusterSpec(
        accelerator="TPUv4",
        num_gpus=64,
        gpus_per_node=4,
        topology={"kind": "torus_3d", "torus_shape": (4, 4, 4)},
    )
    m = FlowNetworkModel.from_cluster(cluster, algorithm="torus")
    with pytest.raises(SpecError, match="torus needs a torus_3d topology"):
        m.collective_time_s("all_reduce", range(32), GiB)
