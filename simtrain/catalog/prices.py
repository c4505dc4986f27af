"""GPU-hour prices: one dated snapshot per accelerator, with its source, and the other offers.

Cloud prices move every quarter, so every figure carries the date and the page it was read
from (``docs/references/hardware.md`` §7.4, "snapshots; verify before use"). The *preset* of
an accelerator is the figure :func:`preset_price` returns when an experiment sets no
``cost.usd_per_gpu_hour``: the most recent snapshot §7.4 gives for it, at the low end of a
quoted range. Accelerators §7.4 has no price for (MI250X, MI300X, TPU v4, TPU v5p) have
no preset: asking for one is a :class:`~simtrain.errors.SpecError` that says so, never an
invented number.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.errors import SpecError

_REF = "docs/references/hardware.md §7.4"


@dataclass(frozen=True)
class GpuHourPrice:
    """One price of one GPU for one hour.

    Attributes:
        usd_per_gpu_hour: US dollars per GPU-hour (node prices divided by GPUs per node).
        offer: what is being bought (provider, instance, billing model).
        date: when the price was read, as the source states it.
        source: where the figure comes from.
    """

    usd_per_gpu_hour: float
    offer: str
    date: str
    source: str


PRESET_PRICES: dict[str, GpuHourPrice] = {
    "A100-40GB": GpuHourPrice(
        1.844,
        "AWS EC2 Capacity Blocks, p4d.24xlarge ($14.75/h / 8 GPUs)",
        "page 'to be updated January 1, 2025'",
        f"{_REF}: AWS Capacity Blocks pricing page copy",
    ),
    "A100-80GB": GpuHourPrice(
        1.49,
        "tier-2 clouds, A100 80GB (low end of $1.49-2.49)",
        "early 2026",
        f"{_REF}: pricegpu.pages.dev",
    ),
    "H100-SXM": GpuHourPrice(
        2.49,
        "tier-2 clouds (Lambda, CoreWeave, Crusoe), H100 SXM (low end of $2.49-2.85)",
        "Q1 2026",
        f"{_REF}: digiterialabs.com; pricegpu.pages.dev",
    ),
    "H200": GpuHourPrice(
        5.408,
        "AWS EC2 Capacity Blocks, p5e ($43.26/h / 8 GPUs)",
        "page 'to be updated January 1, 2025'",
        f"{_REF}: AWS Capacity Blocks pricing page copy",
    ),
    "B200": GpuHourPrice(
        4.50,
        "specialised clouds, B200 on demand (low end of $4.50-6.00)",
        "2026-03-11",
        f"{_REF}: lyceum.technology, 'NVIDIA B200 GPU Cloud Pricing 2026'",
    ),
    "H800": GpuHourPrice(
        2.00,
        "DeepSeek's own rental assumption for H800",
        "December 2024",
        f"{_REF}: DeepSeek-V3 report, Table 1",
    ),
}
"""The preset price of each accelerator that has one (keys are catalog names)."""

OTHER_OFFERS: dict[str, tuple[GpuHourPrice, ...]] = {
    "A100-40GB": (
        GpuHourPrice(
            4.10,
            "AWS p4d.24xlarge on demand ($32.77/h / 8 GPUs)",
            "about 2021-2024 (date not stated)",
            f"{_REF}: adhdecode.pages.dev",
        ),
    ),
    "A100-80GB": (
        GpuHourPrice(2.49, "tier-2 clouds, A100 80GB (high end)", "early 2026", f"{_REF}"),
    ),
    "H100-SXM": (
        GpuHourPrice(
            12.29,
            "AWS p5.48xlarge on demand ($98.32/h / 8 GPUs)",
            "2023-07-27",
            f"{_REF}: NextPlatform",
        ),
        GpuHourPrice(
            4.916,
            "AWS EC2 Capacity Blocks, p5.48xlarge US East ($39.33/h / 8 GPUs)",
            "page 'to be updated January 1, 2025'",
            f"{_REF}: AWS Capacity Blocks pricing page copy",
        ),
        GpuHourPrice(
            6.3,
            "NVIDIA DGX Cloud node rental (≈$37,000/month per 8-GPU node)",
            "November 2023",
            f"{_REF}: Engadget",
        ),
        GpuHourPrice(1.90, "Hyperstack H100 SXM ('from')", "undated", f"{_REF}: gpu.blog"),
    ),
    "B200": (
        GpuHourPrice(
            6.03, "Spheron B200 SXM on demand", "2026-03-17", f"{_REF}: spheron.network blog"
        ),
        GpuHourPrice(4.99, "Runpod B200 on demand", "2025 (undated)", f"{_REF}: runpod.io guide"),
    ),
}
"""Further dated offers from §7.4, for comparison tables (never used as defaults)."""


def preset_price(accelerator: str) -> GpuHourPrice:
    """The preset GPU-hour price of ``accelerator`` (case-insensitive catalog name).

    Raises:
        SpecError: no price is known for this accelerator; the message lists those that have
            one and says how to give a price.

    Examples:
        >>> preset_price("H100-SXM").usd_per_gpu_hour
        2.49
    """
    folded = {name.lower(): price for name, price in PRESET_PRICES.items()}
    if accelerator.lower() in folded:
        return folded[accelerator.lower()]
    known = ", ".join(PRESET_PRICES)
    raise SpecError(
        f"'cost.usd_per_gpu_hour' must be set for {accelerator!r}: docs/references/hardware.md "
        f"§7.4 lists no price for it (got no price; accelerators with a preset: {known})"
    )
