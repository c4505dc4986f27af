"""ECMP hash collisions against adaptive routing on a Clos (issue 15, step 3)."""

import numpy as np
import pytest

from simtrain.cli.app import run_app
from simtrain.network.bisection import bisection_flows, bisection_report
from simtrain.network.fabric_clos import typical_max_load
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.network.nccl import NcclNetwork
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import build_topology

GiB = 2**30


def fat_tree(num_gpus=1024, routing="ecmp", **topology):
    return ClusterSpec(
        accelerator="H100-SXM",
        num_gpus=num_gpus,
        topology={"kind": "fat_tree", "clos_routing": routing, **topology},
    )


def spine_links(topo, src, dst):
    routes = topo.routes(src, dst)
    kinds = np.array(topo.node_kinds)
    leaf_to_spine = (kinds[topo.link_src] == "leaf") & (kinds[topo.link_dst] == "spine")
    return [tuple(r[(r >= 0) & leaf_to_spine[np.maximum(r, 0)]]) for r in routes]


def test_the_hash_is_deterministic_for_a_seed_and_changes_with_it():
    src, dst = bisection_flows(build_topology(fat_tree(256)))
    paths = {seed: spine_links(build_topology(fat_tree(256), seed), src, dst) for seed in (0, 1)}
    assert paths[0] == spine_links(build_topology(fat_tree(256), 0), src, dst)
    assert paths[0] != paths[1]


def test_adaptive_routing_spreads_a_permutation_over_every_uplink():
    topo = build_topology(fat_tree(1024, "adaptive"))
    src, dst = bisection_flows(topo)
    used = [link for path in spine_links(topo, src, dst) for link in path]
    # 64 nodes x 8 NICs cross the cut each way over 32 leaves x 32 uplinks: one flow each
    assert len(used) == len(set(used)) == 1024
    hashed = [
        link for path in spine_links(build_topology(fat_tree(1024)), src, dst) for link in path
    ]
    assert len(set(hashed)) < len(hashed)  # the hash puts several flows on some uplinks


def test_achieved_bisection_falls_short_with_hashing_and_not_with_adaptive_routing():
    report = bisection_report(fat_tree(1024))
    assert report.nominal_bytes_per_s == pytest.approx(1024 / 2 * 47e9)
    assert report.ecmp_share < 0.8
    assert report.adaptive_share == pytest.approx(1.0)


def test_1024_gpu_all_reduce_loses_bandwidth_to_hash_collisions_only():
    size = 64 * GiB  # bandwidth-bound: latency is about 1 % of the time

    def busbw(model):
        return size / model.collective_time_s("all_reduce", range(1024), size) * 2 * 1023 / 1024

    ideal = busbw(
        NcclNetwork.from_cluster(fat_tree(routing=None), algorithm="ring", protocol="simple")
    )
    hashed = busbw(FlowNetworkModel.from_cluster(fat_tree(), "ring", "simple"))
    adaptive = busbw(FlowNetworkModel.from_cluster(fat_tree(routing="adaptive"), "ring", "simple"))
    assert ideal / 1e9 == pytest.approx(8 * 47, rel=0.05)
    assert hashed < 0.8 * ideal
    assert adaptive == pytest.approx(ideal, rel=0.05)
    # the closed form's expected collision loss agrees with the flow model's hashed routes
    closed = busbw(NcclNetwork.from_cluster(fat_tree(), algorithm="ring", protocol="simple"))
    assert closed == pytest.approx(hashed, rel=0.1)


def test_more_flows_per_connection_spread_the_hash_and_a_larger_job_collides_more():
    size = 4 * GiB

    def busbw(num_gpus, routing="ecmp", **topology):
        cluster = fat_tree(num_gpus, routing, **topology)
        model = NcclNetwork.from_cluster(cluster, algorithm="ring", protocol="simple")
        # one rank per node: every NIC of a leaf carries the group's pattern (SPMD)
        return size / model.collective_time_s("all_reduce", range(0, num_gpus, 8), size)

    one, four, sixteen = (busbw(1024, ecmp_flows_per_connection=k) for k in (1, 4, 16))
    adaptive = busbw(1024, "adaptive")
    assert one < four < sixteen <= adaptive
    # more leaves and spines in the job: a busier busiest link
    assert busbw(4096) < busbw(256)


def test_typical_busiest_bin_of_a_hash():
    # 16 flows on 16 uplinks: one each on average, about 6 on the busiest of 16K such links
    assert typical_max_load(16, 16, 16_384) == 6
    assert typical_max_load(16, 16, 1) < typical_max_load(16, 16, 16_384)
    # 16 flows per connection: the busiest link is far closer to its mean of 16
    assert 16 < typical_max_load(256, 16, 16_384) < 3 * 16


def test_topology_command_reports_achieved_against_nominal_bisection(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "cluster: {accelerator: H100-SXM, num_gpus: 256, topology: {kind: fat_tree, "
        "switch_radix: 16}}\n"
    )
    assert run_app(["topology", str(path), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "achieved, ECMP hashing, seed 3" in out and "achieved, adaptive routing" in out
    assert "(100% of nominal)" in out
