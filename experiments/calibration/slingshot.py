"""Fit the per-step latency of Slingshot-11 on LUMI-G's RCCL reference; check held-out points.

Fit (declared before fitting, never moved): the one 2-node RCCL all-reduce reference on
LUMI-G, busbw 85.00 GB/s at 134,217,728 B on 16 ranks (docs/references/networks.md §1.3).
The NIC bandwidth is not fitted: it is osu_bw's 23.82 GB/s (§1.2). With it fixed, the ring
(Simple protocol, as rccl-tests runs at that size on this hardware's default) leaves one free
constant, the latency per ring step, found by bisection.

Held out: torch.distributed all_reduce and all_gather at 512 MB on the same 2 x 8 GCDs
(§1.3; busbw 98.4 and 90.8 GB/s), and, for the shape of the curve only, NCCL over Slingshot
on 16 Kestrel H100 nodes (§1.4; NICs per node not published: shown for 2 and 4).

Usage: python experiments/calibration/slingshot.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simtrain.catalog import get_link
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.network.nccl import NcclNetwork
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import build_topology

FIT = ("all_reduce", 16, 134_217_728, 85.00)
"""(op, ranks, size in bytes, measured busbw GB/s): LUMI ReFrame rccl_test reference."""
HELD_OUT = [
    ("all_reduce", 16, 512e6, 840 * 15 / 16 / 8),  # torch_comm_coll: 840 Gb/s throughput
    ("all_gather", 16, 512e6, 775 * 15 / 16 / 8),  # 775 Gb/s throughput
]
"""Held-out LUMI-G points (op, ranks, size, busbw GB/s)."""
KESTREL = [
    (2**20, 1.45),
    (2**24, 14.99),
    (2**26, 41.91),
    (2**27, 42.35),
    (2**29, 45.26),
    (2**32, 45.72),
]
"""NREL Kestrel NCCL all-reduce busbw on 64 H100 / 16 nodes (size, GB/s)."""
LUMI = ClusterSpec(
    accelerator="MI250X",
    num_gpus=16,
    nics_per_node=4,
    topology={"kind": "dragonfly", "num_groups": 20, "links_per_group_pair": 26},
)


def busbw(
    cluster: ClusterSpec,
    op: str,
    ranks: int,
    size: float,
    latency_s: float | None,
    protocol: str = "simple",
) -> float:
    """Bus bandwidth in GB/s with the NICs' per-step latency set to ``latency_s``."""
    topo = build_topology(cluster)
    if latency_s is not None:
        nic = (topo.link_latency_s > 0) & (topo.link_class == 2)  # NET links into the fabric
        topo = dataclasses.replace(
            topo, link_latency_s=np.where(nic, latency_s, topo.link_latency_s)
        )
    model = FlowNetworkModel(topo, algorithm="ring", protocol=protocol)
    t = model.collective_time_s(op, list(range(ranks)), size)
    factor = 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks
    return size / t * factor / 1e9


def fit_latency() -> float:
    """Per-step latency (s) at which the ring reproduces the fit point."""
    op, ranks, size, target = FIT
    lo, hi = 0.0, 100e-6
    for _ in range(40):
        mid = (lo + hi) / 2
        if busbw(LUMI, op, ranks, size, mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def row(label: str, got: float, target: float) -> str:
    """One printed comparison line."""
    return f"  {label}: {got:.1f} vs {target:.1f} GB/s ({got / target - 1:+.1%})"


def main() -> None:
    latency = fit_latency()
    catalog = get_link("slingshot-11").latency_s
    print(f"fitted per-step latency: {latency * 1e6:.2f} us (catalog: {catalog * 1e6:.2f} us)")
    op, ranks, size, target = FIT
    print("fit:")
    got = busbw(LUMI, op, ranks, size, catalog)
    print(row(f"{op} {ranks} ranks {size / 2**20:.0f} MiB", got, target))
    print("held out (LUMI-G, torch.distributed):")
    for op, ranks, size, target in HELD_OUT:
        got = busbw(LUMI, op, ranks, size, catalog)
        print(row(f"{op} {ranks} ranks {size / 1e6:.0f} MB", got, target))
    print("the default closed-form model (nccl) on the same points, for comparison:")
    nccl = NcclNetwork.from_cluster(LUMI, algorithm="ring")
    for op, ranks, size, target in (FIT, *HELD_OUT):
        t = nccl.collective_time_s(op, list(range(ranks)), size)
        factor = 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks
        print(row(f"{op} {ranks} ranks {size / 2**20:.0f} MiB", size / t * factor / 1e9, target))
    print("shape check (Kestrel, H100 on Slingshot, NICs per node not published):")
    for nics in (2, 4):
        kestrel = ClusterSpec(
            accelerator="H100-SXM",
            num_gpus=64,
            gpus_per_node=4,
            nics_per_node=nics,
            scale_out_link="slingshot-11",
            topology={"kind": "dragonfly", "nic_ports_per_switch": 16},
        )
        cells = [
            f"{s / 2**20:g}M {busbw(kestrel, 'all_reduce', 64, s, None, 'auto'):.1f}/{m}"
            for s, m in KESTREL
        ]
        print(f"  {nics} NICs: " + ", ".join(cells))


if __name__ == "__main__":
    main()
