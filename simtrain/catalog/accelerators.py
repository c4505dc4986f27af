"""Built-in accelerators. Every figure appears once, here, with its source.

Unless noted, figures are from ``docs/references/hardware.md`` §7.1 (dense peaks; sparse
figures are never used). Memory capacities are binary (GiB) because HBM stacks are sized in
powers of two: an "80 GB" A100 reports 81,920 MiB. SM/CU counts come from the vendors'
architecture whitepapers (A100: 108 SMs; H100/H200 SXM5: 132; B200: 148 per the Blackwell
datasheet; MI250X: 110 CUs per GCD; MI300X: 304 CUs; TPU: 4 MXUs per TensorCore, 2 cores).
"""

from __future__ import annotations

from simtrain.specs.hardware import AcceleratorSpec

GiB = 2**30
TERA = 1e12
_REF = "docs/references/hardware.md §7.1"

ACCELERATORS: dict[str, AcceleratorSpec] = {
    spec.name: spec
    for spec in [
        AcceleratorSpec(
            name="A100-40GB",
            vendor="nvidia",
            peak_flops={"bf16": 312 * TERA, "fp16": 312 * TERA, "tf32": 156 * TERA},
            hbm_capacity_bytes=40 * GiB,
            hbm_bandwidth_bytes_per_s=1555e9,
            tdp_watts=400,
            num_compute_units=108,
            scale_up_link="nvlink3",
            scale_out_link="ib-hdr",
            source=f"{_REF} (A100 40GB SXM row)",
        ),
        AcceleratorSpec(
            name="A100-80GB",
            vendor="nvidia",
            peak_flops={"bf16": 312 * TERA, "fp16": 312 * TERA, "tf32": 156 * TERA},
            hbm_capacity_bytes=80 * GiB,
            hbm_bandwidth_bytes_per_s=2039e9,
            tdp_watts=400,
            num_compute_units=108,
            scale_up_link="nvlink3",
            scale_out_link="ib-hdr",
            source=f"{_REF} (A100 80GB SXM row)",
        ),
        AcceleratorSpec(
            name="H100-SXM",
            vendor="nvidia",
            peak_flops={
                "bf16": 989.4 * TERA,
                "fp16": 989.4 * TERA,
                "fp8": 1978.9 * TERA,
                "tf32": 494.7 * TERA,
            },
            hbm_capacity_bytes=80 * GiB,
            hbm_bandwidth_bytes_per_s=3.35e12,
            tdp_watts=700,
            num_compute_units=132,
            scale_up_link="nvlink4",
            scale_out_link="ib-ndr",
            source=f"{_REF} (H100 SXM5 row)",
        ),
        AcceleratorSpec(
            name="H200",
            vendor="nvidia",
            peak_flops={
                "bf16": 989.4 * TERA,
                "fp16": 989.4 * TERA,
                "fp8": 1978.9 * TERA,
                "tf32": 494.7 * TERA,
            },
            hbm_capacity_bytes=141e9,
            hbm_bandwidth_bytes_per_s=4.8e12,
            tdp_watts=700,
            num_compute_units=132,
            scale_up_link="nvlink4",
            scale_out_link="ib-ndr",
            source=f"{_REF} (H200 SXM row; 141 GB is decimal as published)",
        ),
        AcceleratorSpec(
            name="H800",
            vendor="nvidia",
            # The China SKU of H100 SXM5: the same compute, NVLink cut to 8 links.
            peak_flops={
                "bf16": 989.4 * TERA,
                "fp16": 989.4 * TERA,
                "fp8": 1978.9 * TERA,
                "tf32": 494.7 * TERA,
            },
            hbm_capacity_bytes=80 * GiB,
            hbm_bandwidth_bytes_per_s=3.35e12,  # as H100 SXM5 (no published H800 figure)
            tdp_watts=700,  # as H100 SXM5 (assumed)
            num_compute_units=132,
            scale_up_link="nvlink4-h800",
            # DeepSeek's H800 nodes reach 50 GB/s over InfiniBand per GPU (§7.1 H800 row).
            scale_out_link="ib-ndr",
            source=f"{_REF} (H800 row: H100 compute, 80 GB, NVLink 400 GB/s; memory "
            "bandwidth and power as H100 SXM5, assumed)",
        ),
        AcceleratorSpec(
            name="H20",
            vendor="nvidia",
            peak_flops={
                "bf16": 148 * TERA,
                "fp16": 148 * TERA,
                "fp8": 296 * TERA,  # UNVERIFIED (INT8 296 TOPS; Hopper's FP8 = INT8 rate)
                "tf32": 74 * TERA,
            },
            hbm_capacity_bytes=96e9,
            hbm_bandwidth_bytes_per_s=4.0e12,
            tdp_watts=400,
            num_compute_units=78,  # UNVERIFIED (a Geekbench 6 listing)
            scale_up_link="nvlink4",
            scale_out_link="ib-ndr",
            source=f"{_REF} (H20 row, secondary sources; FP8 peak and SM count UNVERIFIED)",
        ),
        AcceleratorSpec(
            name="B200",
            vendor="nvidia",
            peak_flops={
                "bf16": 2250 * TERA,
                "fp16": 2250 * TERA,
                "fp8": 4500 * TERA,
                # MXFP8 runs on the FP8 tensor-core path (docs/references/numerics.md §MXFP8)
                "mxfp8": 4500 * TERA,
                "tf32": 1100 * TERA,
            },
            hbm_capacity_bytes=180e9,
            hbm_bandwidth_bytes_per_s=8e12,
            tdp_watts=1000,
            num_compute_units=148,
            scale_up_link="nvlink5",
            # A DGX B200 ships 8 single-port ConnectX-7 NICs at 400 Gb/s (one per GPU, as on
            # DGX H100), not the 800 Gb/s XDR of the next generation (hardware.md §7.5).
            scale_out_link="ib-ndr",
            source=f"{_REF} (B200 HGX 1000 W row; 180 GB usable, decimal as published); "
            "NICs: docs/references/hardware.md §7.5 (DGX B200: 8 x 400 Gb/s ConnectX-7)",
        ),
        AcceleratorSpec(
            name="GB200",
            vendor="nvidia",
            # The B200 die in a Grace-Blackwell superchip, at 1,200 W: higher clocks than HGX.
            peak_flops={
                "bf16": 2500 * TERA,
                "fp16": 2500 * TERA,
                "fp8": 5000 * TERA,
                "mxfp8": 5000 * TERA,  # the FP8 tensor-core path, as B200
                "tf32": 1250 * TERA,
            },
            hbm_capacity_bytes=186e9,
            hbm_bandwidth_bytes_per_s=8e12,
            tdp_watts=1200,
            num_compute_units=148,  # the B200 die (assumed)
            scale_up_link="nvlink5",
            # One ConnectX-7 (400 Gb/s) per GPU on each 4-GPU compute tray (§7.5).
            scale_out_link="ib-ndr",
            source=f"{_REF} (B200 in GB200 row; 186 GB visible per GPU); NICs: "
            "docs/references/hardware.md §7.5 (GB200 NVL72 compute tray); NVL72 racks: "
            "cluster.gpus_per_node 72 (docs/references/hardware.md §7.2.1)",
        ),
        AcceleratorSpec(
            name="B300",
            vendor="nvidia",
            # ASSUMPTION (labelled in hardware.md §7.1): no published dense BF16/FP8 figure in
            # the reference set; taken equal to B200's.
            peak_flops={
                "bf16": 2250 * TERA,
                "fp16": 2250 * TERA,
                "fp8": 4500 * TERA,
                "mxfp8": 4500 * TERA,
                "tf32": 1100 * TERA,
            },
            hbm_capacity_bytes=288e9,
            hbm_bandwidth_bytes_per_s=8e12,
            tdp_watts=1100,
            num_compute_units=148,
            scale_up_link="nvlink5",
            # 800 Gb/s ConnectX-8 NICs come with the B300 generation (§7.5).
            scale_out_link="ib-xdr",
            source=f"{_REF} (B300 row: ASSUMPTION, every figure unverified)",
        ),
        AcceleratorSpec(
            name="MI250X",
            vendor="amd",
            # One MI250X package is two GCDs; simtrain's device is one GCD, so the package
            # figures (383 TF/s, 128 GB, 3.2 TB/s, 560 W) are halved.
            peak_flops={"bf16": 191.5 * TERA, "fp16": 191.5 * TERA},
            hbm_capacity_bytes=64 * GiB,
            hbm_bandwidth_bytes_per_s=1.6e12,
            tdp_watts=280,
            num_compute_units=110,
            scale_up_link="infinity-fabric-mi250x",
            scale_out_link="slingshot-11",
            source=f"{_REF} (MI250X row, per GCD = package / 2)",
        ),
        AcceleratorSpec(
            name="MI300X",
            vendor="amd",
            peak_flops={
                "bf16": 1307.4 * TERA,
                "fp16": 1307.4 * TERA,
                "fp8": 2614.9 * TERA,
                "tf32": 653.7 * TERA,
            },
            hbm_capacity_bytes=192 * GiB,
            hbm_bandwidth_bytes_per_s=5.3e12,
            tdp_watts=750,
            num_compute_units=304,
            scale_up_link="infinity-fabric-mi300x",
            scale_out_link="roce-400g",
            source=f"{_REF} (MI300X row; TF32 UNVERIFIED there)",
        ),
        AcceleratorSpec(
            name="TPUv4",
            vendor="google",
            peak_flops={"bf16": 275 * TERA},
            hbm_capacity_bytes=32 * GiB,
            hbm_bandwidth_bytes_per_s=1200e9,
            tdp_watts=192,  # measured maximum; Google publishes no TDP
            num_compute_units=8,
            scale_up_link="ici-v4",
            scale_out_link="dcn-v4",
            source=f"{_REF} (TPU v4 row; power is the measured max 192 W)",
        ),
        AcceleratorSpec(
            name="TPUv5p",
            vendor="google",
            peak_flops={"bf16": 459 * TERA},
            hbm_capacity_bytes=95e9,
            hbm_bandwidth_bytes_per_s=2765e9,
            tdp_watts=None,
            num_compute_units=8,
            scale_up_link="ici-v5p",
            scale_out_link="dcn-v5p",
            source=f"{_REF} (TPU v5p row; no published power figure)",
        ),
        AcceleratorSpec(
            name="TPUv5e",
            vendor="google",
            peak_flops={"bf16": 197 * TERA},
            hbm_capacity_bytes=16 * GiB,
            hbm_bandwidth_bytes_per_s=819e9,
            tdp_watts=None,
            num_compute_units=4,  # one TensorCore of 4 MXUs
            scale_up_link="ici-v5e",
            scale_out_link="dcn-v5e",
            source="docs/references/tpu.md §1 (TPU v5e: 197 TF/s bf16, 16 GB HBM2 at 819 GB/s, "
            "one TensorCore; no published power figure)",
        ),
    ]
}
