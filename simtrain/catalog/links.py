"""Built-in links: scale-up fabrics (per device) and scale-out NICs (per port).

Bandwidths are line rates per direction from ``docs/references/hardware.md`` §7.2 and §7.3.
``efficiency`` is the measured fraction of line rate that NCCL reaches for large messages,
from ``docs/references/collectives.md`` §6.1 and §6.2; latencies are per ring step (see below).
"""

from __future__ import annotations

from simtrain.specs.hardware import LinkSpec

_HW = "docs/references/hardware.md"
_COLL = "docs/references/collectives.md"
_AMD = "docs/references/amd.md"
_TPU = "docs/references/tpu.md"
_NET = "docs/references/networks.md"
# NCCL's Simple-protocol hardware latency per ring step over NVLink,
# docs/references/collectives.md §6.3 version A (3.4 µs). What a real machine adds per call
# (launch, synchronisation) is fitted per accelerator family in
# simtrain/catalog/collective_calibrations/.
NVLINK_LAT_S = 3.4e-6
# NCCL's Simple-protocol hardware latencies, docs/references/collectives.md §6.3 version A:
# PCI 5.7 µs and NET 14 µs per step (Simple is the protocol NCCL picks for the large messages
# of training).
PCI_LAT_S = 5.7e-6
NET_LAT_S = 14e-6
# Infinity Fabric (xGMI) link of MI250X: 16 bits at 25 GT/s, 50 GB/s per direction; a dual
# link measures 76 GB/s (docs/references/amd.md §1.2-1.3). Rings over the node's quad and
# dual links (amd.md §1.4) are bottlenecked by a dual link.
MI250X_IF_LINK_BYTES_PER_S = 50e9
MI250X_RING_LINKS = 2
MI250X_IF_EFFICIENCY = 76 / 100
# MI300X: seven rings that share no link use all 7 Infinity Fabric links of a GPU, so the
# ring bus bandwidth is 7 x 64 GB/s x efficiency; RCCL measures 316.82 GB/s at 8 GiB on one
# ND MI300X v5 node (docs/references/amd.md §4.2), the point this efficiency is fitted on.
MI300X_IF_EFFICIENCY = 316.82 / 448
# Slingshot-11: osu_bw moves 23,820 MB/s per NIC on LUMI-G (networks.md §1.2) of 25 GB/s.
SLINGSHOT_EFFICIENCY = 23.82 / 25
# Per-step latency of a ring over Slingshot-11 NICs, fitted by
# experiments/calibration/slingshot.py on the one measured 2-node RCCL point (busbw 85 GB/s
# at 128 MiB, networks.md §1.3) given the NIC bandwidth above.
SLINGSHOT_STEP_LATENCY_S = 10.37e-6
# Per-step latency of a ring over TPU DCN (host-mediated transfers between slices), fitted
# by experiments/calibration/tpu_dcn.py on MaxText's v5e multi-slice MFU decline (16B and
# 64B series; 32B and 128B held out), docs/references/tpu.md §5. v4 and v5p inherit it.
TPU_DCN_STEP_LATENCY_S = 0.626e-3
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
            max_domain_devices=256,
            source=f"{_HW} §7.2 (18 x 25 GB/s per direction); ring busbw ≈370 GB/s, "
            f"{_COLL} §6.1 (nccl-tests#212); domains of up to 256 GPUs over the NVLink "
            f"Switch System, {_HW} §7.2.1",
        ),
        LinkSpec(
            name="nvlink4-h800",
            kind="scale_up",
            bandwidth_bytes_per_s=200e9,
            latency_s=NVLINK_LAT_S,
            efficiency=NVLINK4_EFFICIENCY,
            max_domain_devices=8,
            source=f"{_HW} §7.2 (H800: 8 x 25 GB/s per direction, 400 GB/s both ways); "
            "efficiency as NVLink4's ring, which gives 164 GB/s against the 160 GB/s DeepSeek "
            f"measured ({_HW} §7.1 H800 row); HGX boards of 8",
        ),
        LinkSpec(
            name="nvlink5",
            kind="scale_up",
            bandwidth_bytes_per_s=900e9,
            latency_s=NVLINK_LAT_S,
            efficiency=NVLINK4_EFFICIENCY,
            max_domain_devices=576,
            source=f"{_HW} §7.2 (1.8 TB/s bidirectional); efficiency assumed equal to "
            f"NVLink4's (no published busbw); domains of up to 576 GPUs (NVL72 racks: 72), "
            f"{_HW} §7.2.1",
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
            bandwidth_bytes_per_s=MI250X_RING_LINKS * MI250X_IF_LINK_BYTES_PER_S,
            latency_s=NVLINK_LAT_S,
            efficiency=MI250X_IF_EFFICIENCY,
            source=f"{_AMD} §1.2-1.4: a GCD's ring bandwidth inside an MI250X node, set by the "
            "dual link (2 x 50 GB/s per direction) that the best ring over the node's quad and "
            "dual links must cross; efficiency 76/100 as measured on a dual pair (§1.3). The "
            "mi250x node fabric wires every pair at its own measured bandwidth",
        ),
        LinkSpec(
            name="infinity-fabric-mi300x",
            kind="scale_up",
            bandwidth_bytes_per_s=448e9,
            latency_s=NVLINK_LAT_S,
            efficiency=MI300X_IF_EFFICIENCY,
            source=f"{_HW} §7.1 (7 x 128 GB/s = 896 GB/s bidirectional, 448 per direction); "
            f"efficiency fitted on the 8 GiB point of the measured RCCL all-reduce curve, "
            f"{_AMD} §4.2 (experiments/calibration/rccl_mi300x.py)",
        ),
        LinkSpec(
            name="ici-v4",
            kind="scale_up",
            bandwidth_bytes_per_s=1.1e15 / 4096,
            latency_s=NET_LAT_S / 2,
            efficiency=1.0,
            ports=6,
            source=f"{_TPU} §2: pod all-reduce bandwidth 1.1 PB/s over 4,096 chips, six links "
            "per chip (44.8 GB/s each, scaling-book: 45); already an achieved figure, so "
            "efficiency 1",
        ),
        LinkSpec(
            name="ici-v5e",
            kind="scale_up",
            bandwidth_bytes_per_s=51.2e12 / 256,
            latency_s=NET_LAT_S / 2,
            efficiency=1.0,
            ports=4,
            source=f"{_TPU} §2: pod all-reduce bandwidth 51.2 TB/s over 256 chips = 200 GB/s "
            "per chip one way, four links of 50 GB/s (2D torus); an achieved figure like v4's",
        ),
        LinkSpec(
            name="ici-v5p",
            kind="scale_up",
            bandwidth_bytes_per_s=4800e9 / 8,
            latency_s=NET_LAT_S / 2,
            efficiency=0.9,
            ports=6,
            source=f"{_TPU} §2: ICI 4,800 Gb/s per chip per direction over six links (100 GB/s "
            "each); scaling-book gives 90 GB/s per link one way, hence efficiency 0.9",
        ),
        LinkSpec(
            name="dcn-v4",
            kind="scale_out",
            bandwidth_bytes_per_s=2.5e10,
            latency_s=TPU_DCN_STEP_LATENCY_S,
            efficiency=1.0,
            source=f"{_TPU} §3: ≈2.5e10 B/s per host, scaling-book's typical (achieved) DCN "
            "figure for TPU v4; per-step latency inherited from the v5e fit (§5)",
        ),
        LinkSpec(
            name="dcn-v5e",
            kind="scale_out",
            bandwidth_bytes_per_s=2 * 100e9 / 8,
            latency_s=TPU_DCN_STEP_LATENCY_S,
            efficiency=1.0,
            source=f"{_TPU} §3: 2 x 100 Gb/s NICs per v5e host (6.4 Tb/s per 256-chip pod of 32 "
            "hosts); efficiency 1 assumed (no measured DCN bandwidth in the reference set); "
            f"per-step latency fitted on the multi-slice MFU decline, {_TPU} §5 "
            "(experiments/calibration/tpu_dcn.py)",
        ),
        LinkSpec(
            name="dcn-v5p",
            kind="scale_out",
            bandwidth_bytes_per_s=2.5e10,
            latency_s=TPU_DCN_STEP_LATENCY_S,
            efficiency=1.0,
            source=f"{_TPU} §3: no published v5p figure; scaling-book's typical 2.5e10 B/s per "
            "host assumed; per-step latency inherited from the v5e fit (§5)",
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
            name="slingshot-11",
            kind="scale_out",
            bandwidth_bytes_per_s=200e9 / 8,
            latency_s=SLINGSHOT_STEP_LATENCY_S,
            efficiency=SLINGSHOT_EFFICIENCY,
            source=f"{_NET} §1.1 (HPE Slingshot-11 Cassini NIC, 200 Gb/s); efficiency 23.82/25 "
            f"from osu_bw on LUMI-G, §1.2; per-step latency fitted on the 2-node RCCL busbw, "
            "§1.3 (experiments/calibration/slingshot.py)",
        ),
        LinkSpec(
            name="omni-path-100g",
            kind="scale_out",
            bandwidth_bytes_per_s=100e9 / 8,
            latency_s=NET_LAT_S,
            efficiency=12.2 / 12.5,
            source=f"{_NET} §3 (Intel Omni-Path 100 Series, 100 Gb/s); efficiency assumed equal "
            "to IB EDR's (same 100 Gb/s class; no measured busbw in the reference set)",
        ),
    ]
}
