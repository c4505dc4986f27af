from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from pydantic import ValidationError

from simtrain.errors import SpecError
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.loader import load_yaml_tree
from simtrain.specs.topology import TopologySpec
from simtrain.topology import build_topology

PRESET_DIR = Path(__file__).parents[2] / "topologies"
PRESETS = sorted(PRESET_DIR.glob("*.yaml"))


def cluster(accelerator="H100-SXM", num_gpus=16, **kw):
    return ClusterSpec(accelerator=accelerator, num_gpus=num_gpus, **kw)


def test_default_topology_spec_is_full_bisection_fat_tree():
    spec = TopologySpec()
    assert (spec.kind, spec.oversubscription, spec.pod_oversubscription) == ("fat_tree", 1, 1)


def test_unknown_topology_kind_is_a_validation_error():
    with pytest.raises(ValidationError, match="kind"):
        cluster(topology={"kind": "hypercube"})


def test_typo_in_topology_field_is_rejected():
    with pytest.raises(ValidationError, match="oversubscribtion"):
        cluster(topology={"oversubscribtion": 2})


def test_nvswitch_node_counts_and_nvls_capability():
    h100 = build_topology(cluster(num_gpus=8))
    a100 = build_topology(cluster("A100-80GB", num_gpus=8))
    assert h100.count_nodes() == {"device": 8, "nvswitch": 1}
    assert h100.num_links == 16  # one up and one down port group per GPU
    assert h100.nvls_switch is not None and a100.nvls_switch is None


def test_mi300x_node_is_a_full_mesh():
    topo = build_topology(cluster("MI300X", num_gpus=8))
    assert topo.node_fabric == "p2p_mesh"
    assert topo.num_links == 8 * 7
    # each pair link carries 1/7 of the GPU's fabric bandwidth (316.82 GB/s, amd.md §4.2)
    assert np.allclose(topo.link_bandwidth_bytes_per_s * 7, 316.82e9)


def test_three_tier_when_leaves_do_not_fit_one_pod():
    topo = build_topology(cluster(num_gpus=8 * 64, topology={"switch_radix": 16}))
    counts = topo.count_nodes()
    assert topo.details["tiers"] == "3"
    assert counts["leaf"] == 64 and "core" in counts


def test_switches_too_small_for_the_cluster_are_an_error():
    # radix 4 holds 4**3/4 = 16 NICs in three tiers; 512 need 128 pods of 4 ports
    with pytest.raises(SpecError, match="switch_radix'=4 must be at least the 128 pods"):
        build_topology(cluster(num_gpus=8 * 64, topology={"switch_radix": 4}))


def test_two_tiers_forced_on_too_many_leaves_is_an_error():
    with pytest.raises(SpecError, match="num_tiers"):
        build_topology(cluster(num_gpus=8 * 64, topology={"switch_radix": 8, "num_tiers": 2}))


def test_torus_shape_must_hold_num_gpus():
    with pytest.raises(SpecError, match="torus_shape"):
        build_topology(
            cluster("TPUv4", num_gpus=100, gpus_per_node=4, topology={"kind": "torus_3d"})
        )


def test_single_node_kind_rejects_multiple_nodes():
    with pytest.raises(SpecError, match="single_node"):
        build_topology(cluster(num_gpus=16, topology={"kind": "single_node"}))


def test_tpuv4_pod_bisection_matches_published_24_tb_per_s():
    spec = ClusterSpec.model_validate(load_yaml_tree(PRESET_DIR / "tpuv4-pod.yaml")["cluster"])
    assert spec.accelerator == "TPUv4"
    topo = build_topology(spec)
    assert topo.bisection_bandwidth_bytes_per_s == pytest.approx(24e12, rel=0.10)


def half_cut_max_flow(topo):
    """Max flow from the first half of the nodes' devices to the second half."""
    g = nx.DiGraph()
    for lid in range(topo.num_links):
        g.add_edge(
            int(topo.link_src[lid]),
            int(topo.link_dst[lid]),
            capacity=float(topo.link_bandwidth_bytes_per_s[lid]),
        )
    half = topo.num_devices // 2
    for d in range(topo.num_devices):
        if d < half:
            g.add_edge("s", d, capacity=float("inf"))
        else:
            g.add_edge(d, "t", capacity=float("inf"))
    return nx.maximum_flow_value(g, "s", "t")


@pytest.mark.parametrize(
    "topology",
    [
        {"kind": "fat_tree", "switch_radix": 4, "oversubscription": 2},
        {"kind": "fat_tree", "switch_radix": 4, "num_tiers": 3, "pod_oversubscription": 4},
        {"kind": "rail_optimized", "switch_radix": 4},
    ],
)
def test_analytic_bisection_equals_networkx_max_flow(topology):
    topo = build_topology(cluster(num_gpus=16, gpus_per_node=2, topology=topology))
    assert half_cut_max_flow(topo) == pytest.approx(topo.bisection_bandwidth_bytes_per_s, rel=1e-6)


def test_oversubscription_divides_bisection():
    full = build_topology(cluster(num_gpus=64, topology={"switch_radix": 8}))
    over = build_topology(cluster(num_gpus=64, topology={"switch_radix": 8, "oversubscription": 4}))
    assert over.bisection_bandwidth_bytes_per_s == pytest.approx(
        full.bisection_bandwidth_bytes_per_s / 4
    )


def test_torus_field_on_a_clos_warns():
    with pytest.warns(UserWarning, match="torus_shape"):
        build_topology(cluster(num_gpus=16, topology={"torus_shape": (2, 2, 4)}))


def test_clos_field_on_a_torus_warns():
    with pytest.warns(UserWarning, match="oversubscription"):
        build_topology(
            cluster(
                "TPUv4", 64, gpus_per_node=4, topology={"kind": "torus_3d", "oversubscription": 2}
            )
        )


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_every_preset_validates_and_builds(path):
    spec = ClusterSpec.model_validate(load_yaml_tree(path)["cluster"])
    topo = build_topology(spec)
    assert topo.num_devices == spec.num_gpus
    assert topo.bisection_bandwidth_bytes_per_s > 0


def test_llama3_preset_has_one_to_seven_above_the_pod():
    spec = ClusterSpec.model_validate(
        load_yaml_tree(PRESET_DIR / "llama3-roce-h100.yaml")["cluster"]
    )
    topo = build_topology(spec)
    # 24,576 GPUs x 47 GB/s / 2, divided by 7 above the 3,072-GPU pods
    assert topo.bisection_bandwidth_bytes_per_s == pytest.approx(24576 * 47e9 / 2 / 7)
    assert topo.details["pods"] == "8"
