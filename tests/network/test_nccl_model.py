"""NcclNetwork, the default model: measured anchors, NCCL's choices, topology awareness."""

import numpy as np
import pytest

from simtrain.catalog.collective_calibration import collective_calibration_for
from simtrain.collectives.cost import AUTO_ALGORITHMS, COSTS, tune
from simtrain.errors import SpecError
from simtrain.network.base import DescribedNetwork, NetworkModel
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.network.nccl import NcclNetwork
from simtrain.specs.cluster import ClusterSpec

GiB = 2**30
MiB = 2**20


def model(accelerator="H100-SXM", num_gpus=8, algorithm="auto", protocol="auto", **kw):
    cluster = ClusterSpec(accelerator=accelerator, num_gpus=num_gpus, **kw)
    return NcclNetwork.from_cluster(cluster, algorithm=algorithm, protocol=protocol)


def busbw(m, n, size=4 * GiB, kind="all_reduce"):
    factor = 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n
    return size / m.collective_time_s(kind, range(n), size) * factor


def test_is_a_described_network_model():
    m = model()
    assert isinstance(m, NetworkModel)
    assert isinstance(m, DescribedNetwork)
    assert m.collective_time_s("all_reduce", [3], GiB) == 0.0
    assert m.p2p_time_s(2, 2, GiB) == 0.0


# Issue 3's anchors: measured large-message busbw (docs/references/collectives.md §6.1-6.2).
ANCHORS = [
    ("8xA100 ring (nccl-tests#149)", dict(accelerator="A100-80GB"), "ring", 8, 230),
    ("8xH100 ring (nccl-tests#212)", {}, "ring", 8, 370),
    ("8xH100 NVLS (nccl-tests#212)", {}, "auto", 8, 480),
    ("2xDGX-A100 8xHDR (nccl#812)", dict(accelerator="A100-80GB", num_gpus=16), "ring", 16, 192),
    ("one NDR NIC (nccl-tests#290)", dict(num_gpus=2, gpus_per_node=1, nics_per_node=1), "ring",
     2, 47.5),
]  # fmt: skip


@pytest.mark.parametrize("name,cluster,algorithm,n,published", ANCHORS, ids=[a[0] for a in ANCHORS])
def test_busbw_anchors_within_5_percent(name, cluster, algorithm, n, published):
    m = model(algorithm=algorithm, **{"num_gpus": 8, **cluster})
    assert busbw(m, n) / 1e9 == pytest.approx(published, rel=0.05)


def test_one_ndr_nic_stays_in_the_measured_46_to_49_range():
    m = model(num_gpus=2, gpus_per_node=1, nics_per_node=1)
    assert 46e9 <= busbw(m, 2, 16 * GiB) <= 49e9


def test_vtrain_8xa100_table_fit_row_and_held_out_row():
    # docs/references/calibration-data.md §1.2: 92.8 µs at 1 MiB (fitted), 8.19 ms at 1 GiB
    m = model("A100-80GB")
    assert m.collective_time_s("all_reduce", range(8), MiB) == pytest.approx(92.8e-6, rel=0.01)
    assert m.collective_time_s("all_reduce", range(8), GiB) == pytest.approx(8.19e-3, rel=0.02)


def test_small_messages_in_a_node_are_protocol_bound():
    m = model("A100-80GB")
    choices = {s: m.time_collective("all_reduce", range(8), s) for s in (4096, 16 * MiB, GiB)}
    assert choices[4096].protocol == "ll"
    assert choices[16 * MiB].protocol == "ll128"
    assert choices[GiB].protocol == "simple"
    # latency-bound: 4 KiB costs nearly what 8 B does, far from size / bandwidth
    tiny = m.collective_time_s("all_reduce", range(8), 8)
    assert choices[4096].time_s < 1.1 * tiny
    assert choices[4096].time_s > 50 * 4096 * 1.75 / 230e9


def test_tp_all_reduce_latency_grows_with_the_group():
    m = model("A100-80GB")
    times = [m.collective_time_s("all_reduce", range(n), 2 * MiB) for n in (2, 4, 8)]
    assert times[0] < times[1] < times[2]


def test_large_data_parallel_groups_choose_trees_for_latency_and_rings_for_bandwidth():
    m = model("A100-80GB", num_gpus=1024)
    group = range(0, 1024, 8)  # one rank per node: 128 nodes
    assert m.time_collective("all_reduce", group, 64 * 1024).algorithm == "tree"
    assert m.time_collective("all_reduce", group, 4 * GiB).algorithm == "ring"


@pytest.mark.parametrize("num_gpus", [8, 64])
@pytest.mark.parametrize("accelerator", ["A100-80GB", "H100-SXM"])
@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter"])
def test_auto_is_never_slower_than_any_valid_algorithm_and_protocol(num_gpus, accelerator, kind):
    m = model(accelerator, num_gpus=num_gpus, topology={"sharp": True})
    fabric = m.fabric(range(num_gpus))
    for size in (8.0, 1e5, 3e6, 1e8, 4e9):
        best = tune(kind, fabric, size, overhead_s=m.overhead_s)
        for name in AUTO_ALGORITHMS[kind]:
            for protocol in ("ll", "ll128", "simple"):
                try:
                    other = tune(kind, fabric, size, name, protocol, m.overhead_s)
                except SpecError:
                    continue
                assert best.time_s <= other.time_s * (1 + 1e-12), (name, protocol, size)


def test_closed_form_agrees_with_the_uncontended_flow_model():
    # Across nodes only at large sizes: the flow model waits for every ring step's slowest
    # (inter-node) hop, NCCL's model lets chunks pay each hop's own latency.
    for accelerator, n, algorithm, sizes in [
        ("A100-80GB", 8, "ring", (MiB, GiB)),
        ("A100-80GB", 32, "ring", (16 * GiB,)),
        ("H100-SXM", 8, "nvls", (MiB, GiB)),
        ("H100-SXM", 8, "ring", (MiB, GiB)),
    ]:
        cluster = ClusterSpec(accelerator=accelerator, num_gpus=n)
        flow = FlowNetworkModel.from_cluster(cluster, algorithm=algorithm, protocol="simple")
        closed = NcclNetwork.from_cluster(cluster, algorithm=algorithm, protocol="simple")
        for size in sizes:
            a = closed.collective_time_s("all_reduce", range(n), size)
            b = flow.collective_time_s("all_reduce", range(n), size)
            assert a == pytest.approx(b, rel=0.03), (accelerator, n, algorithm, size)


def test_oversubscription_costs_rings_that_cross_it_and_spares_those_that_do_not():
    topology = {"switch_radix": 4, "num_tiers": 3, "pod_oversubscription": 4}

    def ring_busbw(placement):
        cluster = ClusterSpec(
            accelerator="H100-SXM", num_gpus=16, gpus_per_node=1, nics_per_node=1, topology=topology
        )
        m = NcclNetwork.from_cluster(cluster, algorithm="ring", placement=placement)
        return busbw(m, 16)

    # radix 4 holds 4**3/4 = 16 NICs: 4 pods of 4
    in_order = ring_busbw(None)  # consecutive nodes share leaves and pods
    across = ring_busbw([(i % 4) * 4 + i // 4 for i in range(16)])  # every hop changes pod
    assert across / in_order == pytest.approx(1 / 4, rel=0.05)
    assert in_order / 1e9 == pytest.approx(47, rel=0.05)


def test_rail_only_all_to_all_forwards_over_nvlink_but_rings_stay_on_their_rail():
    def fabric(kind):
        cluster = ClusterSpec(accelerator="H100-SXM", num_gpus=64, topology={"kind": kind})
        return NcclNetwork.from_cluster(cluster).fabric(range(64))

    rail_only, fat_tree = fabric("rail_only"), fabric("fat_tree")
    assert rail_only.ring_bandwidth_bytes_per_s == fat_tree.ring_bandwidth_bytes_per_s
    assert rail_only.cross_rail_via_scale_up and not fat_tree.cross_rail_via_scale_up
    size = 256 * MiB
    a2a_rail = tune("all_to_all", rail_only, size).time_s
    a2a_tree = tune("all_to_all", fat_tree, size).time_s
    assert a2a_rail >= a2a_tree


def test_torus_pod_all_reduce_reaches_the_published_1_1_pb_per_s():
    cluster = ClusterSpec(
        accelerator="TPUv4",
        num_gpus=4096,
        gpus_per_node=4,
        topology={"kind": "torus_3d", "torus_shape": (16, 16, 16)},
    )
    m = NcclNetwork.from_cluster(cluster)
    timing = m.time_collective("all_reduce", range(4096), 16 * GiB)
    assert (timing.algorithm, timing.protocol) == ("torus", "none")
    # hardware.md §7.1: 1.1 PB/s over 4,096 chips = 269 GB/s bus bandwidth per chip
    assert busbw(m, 4096, 16 * GiB) * 4096 / 1e15 == pytest.approx(1.1, rel=0.05)
    # a TP group along one full wrap-around dimension uses both directions: two links
    x_ring = m.fabric(range(16)).multi_ring
    assert x_ring is not None
    assert x_ring.bandwidth_bytes_per_s == pytest.approx(2 * 1.1e15 / 4096 / 6)


def test_data_parallel_across_tpu_slices_shares_each_host_dcn_port():
    cluster = ClusterSpec(
        accelerator="TPUv5e",
        num_gpus=512,
        gpus_per_node=8,
        topology={"kind": "torus_3d", "torus_shape": (16, 16, 1), "num_slices": 2},
    )
    m = NcclNetwork.from_cluster(cluster)
    dp = m.fabric([5, 256 + 5])  # one chip per slice, as MaxText's DCN data parallelism
    assert (dp.num_nodes, dp.ranks_per_node) == (2, 1)
    dcn_host = 25e9  # dcn-v5e: 2 x 100 Gb/s per host of 8 chips (tpu.md §3)
    assert dp.ring_bandwidth_bytes_per_s == pytest.approx(dcn_host / 8)
    slice_ring = m.fabric(range(256))
    assert slice_ring.inter is None and slice_ring.multi_ring is not None
    # a group of both whole slices reduces inside each over ICI, then over DCN
    both = m.time_collective("all_reduce", range(512), GiB)
    assert both.algorithm == "hierarchical" and both.protocol == "none"


def test_calibrations_have_provenance():
    assert collective_calibration_for("A100-40GB").provenance == "fitted"
    assert collective_calibration_for("H100-SXM").fit is not None
    assert collective_calibration_for("B200").provenance == "inherited"
    assert collective_calibration_for("MI250X").name == "default"
    a100 = collective_calibration_for("A100-80GB")
    assert a100.fit is not None and abs(a100.fit.held_out_error or 0) < 0.02


def test_named_algorithm_that_cannot_run_is_a_one_line_error():
    with pytest.raises(SpecError, match="'algo' nvls needs NVSwitches"):
        model("A100-80GB", algorithm="nvls").collective_time_s("all_reduce", range(8), GiB)
    with pytest.raises(SpecError, match=r"'algo' must be a known .*valid: auto, direct"):
        model(algorithm="bogus")
    with pytest.raises(SpecError, match="'algo' tree does not implement all_gather"):
        model(algorithm="tree").collective_time_s("all_gather", range(8), GiB)
    with pytest.raises(SpecError, match="'protocol' ll128 is not available"):
        pcie = model(
            "A100-80GB", protocol="ll128", scale_up_link="pcie4", topology={"node_fabric": "pcie"}
        )
        pcie.collective_time_s("all_reduce", range(8), GiB)
    with pytest.raises(SpecError, match=r"'ranks' must be global ranks 0\.\.7"):
        model().collective_time_s("all_reduce", range(16), GiB)


def test_every_cost_model_runs_on_a_two_node_group():
    m = model("H100-SXM", num_gpus=16, topology={"sharp": True})
    fabric = m.fabric(range(16))
    refused = {("torus", k) for k in COSTS["torus"].kinds} | {
        ("nvls", "all_gather"),  # NVLS across nodes: all-reduce with SHARP only
        ("nvls", "reduce_scatter"),
    }
    for name, cost in COSTS.items():
        for kind in cost.kinds:
            if (name, kind) in refused:
                with pytest.raises(SpecError, match=f"'algo' {name}"):
                    tune(kind, fabric, 1e6, name, "auto")
                continue
            timing = tune(kind, fabric, 1e6, name, "auto")
            assert np.isfinite(timing.time_s) and timing.time_s > 0, (name, kind)
