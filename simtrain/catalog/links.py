"""Built-in links: scale-up fabrics (per device) and scale-out NICs (per port).

Bandwidths are line rates per direction from ``docs/references/hardware.md`` §7.2 and §7.3.
``efficiency`` is the measured fraction of line rate that NCCL reaches for large messages,
from ``docs/references/collectives.md`` §6.1 and §6.2; latencies are per ring step (see below).
"""

from __future__ import annotations

from simtrain.specs.hardware import LinkSpec

_HW = "docs/references/hardware.md"
_COLL = "docs/references/collectives.md"
# Per-step latency of a ring collective over NVLink, fitted on the two points of vTrain's
# measured 8 x A100 all-reduce table (docs/references/calibration-data.md §1.2): 8.19 ms at
# 1 GiB gives busbw 229 GB/s; 92.8 µs at 1 MiB then leaves 92.8 - 1.75 * 1 MiB / 229 GB/s
# = 84.8 µs of latency over 2 * (8 - 1) = 14 steps, 6.06 µs per step. (NCCL's own model,
# docs/references/collectives.md §6.3, gives 8.4 µs + 14 x 3.4 µs = 56 µs for the Simple protocol.)
NVLINK_LAT_S = (92.8e-6 - 1.75 * 2**20 / 229e9) / 14
# NCCL's Simple-protocol hardware latencies, docs/references/collectives.md §6.3 version A:
# PCI 5.7 µs and NET 14 µs per step (Simple is the protocol NCCL picks for the large messages
# of training).
PCI_LAT_S = 5.7e-6
NET_LAT_S = 14e-6
# NDR efficiency: 47 GB/s measured (46-48, docs/references/collectives.md §6.2) of a 50 GB/s
# line rate.
NDR_EFFICIENCY = 47 / 50
# NVLink4 ring: ≈370 GB/s busbw of 450 GB/s per direction (docs/references/collectives.md §6.1).
NVLINK4_EFFICIENCY = 370 / 450

LINKS: dict[str, LinkSpec] = {
    spec.name: spec
    for spec in [
        LinkSpec(
            name="nvlink3",
            kind="scale_up",
            bandwidth_bytes_per_s=300e9,
            latency_s=NVLINK_LAT_S,
            efficiency=230 / 300,
            source=f"{_HW} §7.2 (12 links x 25 GB/s per direction); ring busbw ≈230 GB/s, "
            f"{_COLL} §6.1 (nccl-tests#149)",
        ),
        LinkSpec(
            name="nvlink4",
            kind="scale_up",
            bandwidth_bytes_per_s=450e9,
            latency_s=NVLINK_LAT_S,
            efficiency=NVLINK4_EFFICIENCY,
            source=f"{_HW} §7.2 (18 x 25 GB/s per direction); ring busbw ≈370 GB/s, "
            f"{_COLL} §6.1 (nccl-tests#212)",
        ),
        LinkSpec(
            name="nvlink5",
            kind="scale_up",
            bandwidth_bytes_per_s=900e9,
            latency_s=NVLINK_LAT_S,
            efficiency=NVLINK4_EFFICIENCY,
            source=f"{_HW} §7.2 (1.8 TB/s bidirectional); efficiency assumed equal to "
            "NVLink4's (no published busbw)",
        ),
        LinkSpec(
            name="pcie4",
            kind="scale_up",
            bandwidth_bytes_per_s=32e9,
            latency_s=PCI_LAT_S,
            efficiency=0.8,
            source=f"{_HW} §7.2 (x16, ≈32 GB/s per direction, UNVERIFIED); efficiency 0.8 "
            "assumed (128b/130b coding and TLP headers)",
        ),
        LinkSpec(
            name="pcie5",
            kind="scale_up",
            bandwidth_bytes_per_s=64e9,
            latency_s=PCI_LAT_S,
            efficiency=0.8,
            source=f"{_HW} §7.2 (x16, ≈64 GB/s per direction); efficiency 0.8 assumed as pcie4",
        ),
        LinkSpec(
            name="infinity-fabric-mi250x",
            kind="scale_up",
            bandwidth_bytes_per_s=400e9,
            latency_s=NVLINK_LAT_S,
            efficiency=0.7,
            source=f"{_HW} §7.1 (≈800 GB/s bidirectional per package, UNVERIFIED); "
            "efficiency 0.7 assumed (no published RCCL busbw in the reference set)",
        ),
        LinkSpec(
            name="infinity-fabric-mi300x",
            kind="scale_up",
            bandwidth_bytes_per_s=448e9,
            latency_s=NVLINK_LAT_S,
            efficiency=0.7,
            source=f"{_HW} §7.1 (7 x 128 GB/s = 896 GB/s bidirectional); efficiency 0.7 assumed",
        ),
        LinkSpec(
            name="ici-v4",
            kind="scale_up",
            bandwidth_bytes_per_s=1.1e15 / 4096,
            latency_s=NET_LAT_S / 2,
            efficiency=1.0,
            source=f"{_HW} §7.1: pod all-reduce bandwidth 1.1 PB/s over 4,096 chips "
            "(already an achieved figure, so efficiency 1)",
        ),
        LinkSpec(
            name="ici-v5p",
            kind="scale_up",
            bandwidth_bytes_per_s=4800e9 / 8 / 2,
            latency_s=NET_LAT_S / 2,
            efficiency=0.9,
            source=f"{_HW} §7.1: ICI 4,800 Gb/s per chip (both directions); efficiency 0.9 assumed",
        ),
        LinkSpec(
            name="ib-edr",
            kind="scale_out",
            bandwidth_bytes_per_s=12.5e9,
            latency_s=NET_LAT_S,
            efficiency=12.2 / 12.5,
            source=f"{_HW} §7.3 (100 Gb/s; ≈12.2 GB/s per NIC measured, nccl-tests#29)",
        ),
        LinkSpec(
            name="ib-hdr",
            kind="scale_out",
            bandwidth_bytes_per_s=25e9,
            latency_s=NET_LAT_S,
            efficiency=24 / 25,
            source=f"{_HW} §7.3 (200 Gb/s; ≈24 GB/s per NIC: 8 x HDR = 192 GB/s busbw, nccl#812)",
        ),
        LinkSpec(
            name="ib-ndr",
            kind="scale_out",
            bandwidth_bytes_per_s=50e9,
            latency_s=NET_LAT_S,
            efficiency=NDR_EFFICIENCY,
            source=f"{_HW} §7.3 (400 Gb/s; 46-48 GB/s per NIC, nccl-tests#290/#267)",
        ),
        LinkSpec(
            name="ib-xdr",
            kind="scale_out",
            bandwidth_bytes_per_s=100e9,
            latency_s=NET_LAT_S,
            efficiency=NDR_EFFICIENCY,
            source=f"{_HW} §7.3 (800 Gb/s); efficiency assumed equal to NDR's",
        ),
        LinkSpec(
            name="roce-200g",
            kind="scale_out",
            bandwidth_bytes_per_s=25e9,
            latency_s=NET_LAT_S,
            efficiency=24 / 25,
            source=f"{_HW} §7.3 (200 Gb/s; efficiency as HDR: Llama 3 tuned RoCE to IB parity)",
        ),
        LinkSpec(
            name="roce-400g",
            kind="scale_out",
            bandwidth_bytes_per_s=50e9,
            latency_s=NET_LAT_S,
            efficiency=NDR_EFFICIENCY,
            source=f"{_HW} §7.3 (400 Gb/s; efficiency as NDR: Llama 3 tuned RoCE to IB parity)",
        ),
        LinkSpec(
            name="slingshot-200g",
            kind="scale_out",
            bandwidth_bytes_per_s=25e9,
            latency_s=NET_LAT_S,
            efficiency=24 / 25,
            source=f"{_HW} §7.3 (HPE Slingshot-11, 200 Gb/s per Cassini NIC on Frontier and "
            "LUMI-G); efficiency assumed equal to HDR's",
        ),
    ]
}
