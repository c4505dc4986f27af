"""ECMP hash collisions: what a 1,024-GPU all-reduce and the bisection lose to them.

Usage: PYTHONPATH=. python experiments/network/ecmp.py [--seeds 5] [--size-gib 64]

For a non-blocking fat-tree of 1,024 H100 (128 nodes, 8 NDR NICs each) and the shipped Clos
presets, prints the ring all-reduce bus bandwidth of the ideal (closed-form, every flow at
its NIC's rate), of the flow model with adaptive routing, of the flow model with hashed
ECMP for several seeds, of the closed-form default with ``clos_routing: ecmp`` (its expected
collision loss, one flow per connection), and the achieved bisection of a cut-crossing
permutation.
Reference: without adaptive routing Meta's RSC-1 lost 50-75 % of all-reduce bandwidth
(docs/references/collectives.md §6.2, Kokolis et al.).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from simtrain.network.bisection import bisection_report
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.network.nccl import NcclNetwork
from simtrain.specs.cluster import ClusterSpec

ROOT = Path(__file__).resolve().parents[2]


def preset(name: str, num_gpus: int) -> ClusterSpec:
    data = yaml.safe_load((ROOT / "topologies" / f"{name}.yaml").read_text())["cluster"]
    return ClusterSpec.model_validate({**data, "num_gpus": num_gpus})


def with_routing(cluster: ClusterSpec, routing: str) -> ClusterSpec:
    topology = cluster.topology.model_copy(update={"clos_routing": routing})
    return cluster.model_copy(update={"topology": topology})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="ECMP hash seeds to try")
    parser.add_argument("--size-gib", type=float, default=64.0, help="all-reduce size in GiB")
    args = parser.parse_args()
    size = args.size_gib * 2**30
    clusters = {
        "fat-tree 1,024 H100": ClusterSpec(
            accelerator="H100-SXM", num_gpus=1024, topology={"kind": "fat_tree"}
        ),
        "dgx-a100-superpod 1,024": preset("dgx-a100-superpod", 1024),
        "dgx-h100-superpod 1,024": preset("dgx-h100-superpod", 1024),
    }
    print(f"ring all-reduce of {args.size_gib:g} GiB over every GPU; busbw in GB/s")
    print(
        f"{'cluster':<26} {'ideal':>7} {'adaptive':>9} {'ECMP min':>9} {'ECMP mean':>10} "
        f"{'ECMP max':>9} {'loss':>6} {'nccl ECMP':>10} | bisection ECMP / adaptive"
    )
    for name, cluster in clusters.items():
        n = cluster.num_gpus
        factor = 2 * (n - 1) / n

        def busbw(model, n=n, factor=factor):
            return size / model.collective_time_s("all_reduce", range(n), size) * factor / 1e9

        ideal = busbw(NcclNetwork.from_cluster(cluster, algorithm="ring", protocol="simple"))
        adaptive = busbw(
            FlowNetworkModel.from_cluster(with_routing(cluster, "adaptive"), "ring", "simple")
        )
        hashed = [
            busbw(
                FlowNetworkModel.from_cluster(
                    with_routing(cluster, "ecmp"), "ring", "simple", seed=seed
                )
            )
            for seed in range(args.seeds)
        ]
        mean = sum(hashed) / len(hashed)
        closed = busbw(
            NcclNetwork.from_cluster(
                with_routing(cluster, "ecmp"), algorithm="ring", protocol="simple"
            )
        )
        report = bisection_report(with_routing(cluster, "ecmp"))
        shares = f"{report.ecmp_share:.0%} / {report.adaptive_share:.0%}" if report else "-"
        print(
            f"{name:<26} {ideal:>7.1f} {adaptive:>9.1f} {min(hashed):>9.1f} {mean:>10.1f} "
            f"{max(hashed):>9.1f} {1 - mean / ideal:>6.0%} {closed:>10.1f} | {shares}"
        )


if __name__ == "__main__":
    main()
