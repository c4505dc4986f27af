"""LLM Foundry's FULL_SHARD series: simtrain follows the measured change of MFU with GPU count.

Issue 13's must-show: for the FSDP rows of one model across GPU counts, as the source ran them
(LLM Foundry grows the global batch with the GPUs and sometimes changes the micro-batch, the
gradient accumulation or the checkpointing between counts), the simulated change of throughput
per GPU from the smallest to the largest count has the measured sign and at least half its
size (``experiments/calibration/stacks.py``: :func:`trend_table`, ``--trend``). Throughput
per GPU and MFU change by the same ratio within a series (one model, sequence and precision).

Eight of the 17 series meet it. The others are strict expected failures that name what the
per-row diagnosis found (README, software-stack validation): when a modelled mechanism closes
one, its test passes unexpectedly and fails, and the series moves to ``MEETS``. The rows are
read from the reference data (outside the repository); without it the module is skipped.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from experiments.calibration.reference import has_reference
from experiments.calibration.stacks import SOURCE_FILE, Row, load_rows, predict, trend_table

if not has_reference(SOURCE_FILE):
    pytest.skip("no shared/reference data beside this checkout", allow_module_level=True)

MEETS = (
    "A100 40GB|mpt-1b|seq2048|bf16/PURE|FULL_SHARD",
    "A100 40GB|mpt-760m|seq2048|bf16/PURE|FULL_SHARD",
    "A100 40GB|mpt-7b|seq2048|bf16/PURE|FULL_SHARD",
    "H100 80GB|mpt-30b|seq2048|amp_bf16|FULL_SHARD",
    "H100 80GB|mpt-3b|seq2048|amp_bf16|FULL_SHARD",
    "H100 80GB|mpt-70b|seq2048|amp_bf16|FULL_SHARD",
    "H100 80GB|mpt-7b|seq2048|amp_bf16|FULL_SHARD",
)
"""Series whose simulated trend has the measured sign and at least half its size."""

SMALL_MODEL_DECLINE = (
    "per-GPU loss from 8 to 128 A100 too small; the measured extra time per FSDP collective "
    "is about NCCL's ring-latency growth, hidden under compute here"
)
GAPS = {
    "A100 40GB|mpt-125m|seq2048|bf16/PURE|FULL_SHARD": SMALL_MODEL_DECLINE,
    "A100 40GB|mpt-350m|seq2048|bf16/PURE|FULL_SHARD": SMALL_MODEL_DECLINE,
    "A100 40GB|mpt-3b|seq2048|bf16/PURE|FULL_SHARD": SMALL_MODEL_DECLINE,
    "H100 80GB|mpt-1b|seq2048|amp_bf16|FULL_SHARD": (
        "16 -> 64 H100 loses 1.8 % where 3.6 % was measured (ring latency, as above)"
    ),
    "A100 40GB|mpt-13b|seq2048|bf16/PURE|FULL_SHARD": (
        "the 8-GPU rows (44 % MFU at every sequence length, 8,192 tokens per micro-batch, "
        "states 24 of 40 GiB) run 11 % slower than simulated; 16-128 GPUs 6 % faster"
    ),
    "A100 40GB|mpt-70b|seq2048|bf16/PURE|FULL_SHARD": (
        "the 64-GPU row (micro-batch 2, no accumulation) runs 35 % slower than simulated, "
        "the same micro-batch on 32 A100 80GB within 1 %"
    ),
    "A100 40GB|mpt-30b|seq2048|bf16/PURE|FULL_SHARD": (
        "+0.3 % simulated where half the measured +0.9 % is 0.47 %, since A100's k_half refit "
        "with the host synchronisation points (2026-12-02; +0.5 % before)"
    ),
    "A100 80GB|mpt-70b|seq2048|bf16/PURE|FULL_SHARD": (
        "+4.9 % simulated where 4.95 % is half the measured +9.9 %"
    ),
    "H100 80GB|mpt-13b|seq2048|amp_bf16|FULL_SHARD": (
        "micro-batch 2 without checkpointing (8-64 GPUs) 0-5 % too fast, micro-batch 16 with "
        "full checkpointing (128-512) 2-3 % too slow"
    ),
    "H100 80GB|mpt-760m|seq2048|amp_bf16|FULL_SHARD": (
        "the 8-GPU row (34.9 % MFU, 37.9 on 16 GPUs) is simulated 17.8 % too fast, 10 points "
        "more than its 1,024- and 4,096-token neighbours on the same 8 GPUs (+7.9, +7.5 %)"
    ),
}
"""Series simtrain misses, with what the per-row diagnosis found."""


@cache
def rows() -> tuple[Row, ...]:
    """Every FULL_SHARD row of LLM Foundry's tables."""
    return tuple(r for r in load_rows("llm-foundry") if r.key.endswith("|FULL_SHARD"))


@cache
def trends() -> dict[str, dict[str, Any]]:
    """The trend of every series, simulating only its smallest and largest GPU count."""
    ends: dict[str, list[Row]] = {}
    for row in rows():
        series = "|".join(
            p for p in row.key.split("|") if not p.endswith("gpu") and not p.startswith("mbs")
        )
        ends.setdefault(series, []).append(row)
    needed = set()
    for members in ends.values():
        by_gpus = sorted(members, key=lambda r: r.spec_dict["cluster"]["num_gpus"])
        needed |= {by_gpus[0].key, by_gpus[-1].key}
    predicted = {r.key: predict(r) for r in rows() if r.key in needed}
    return {t["series"]: t for t in trend_table(list(rows()), predicted)}


def test_every_series_meets_or_has_a_named_gap():
    assert sorted(trends()) == sorted((*MEETS, *GAPS))


@pytest.mark.parametrize(
    "series",
    [
        *MEETS,
        *(
            pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=gap))
            for s, gap in GAPS.items()
        ),
    ],
)
def test_simulated_trend_has_the_measured_sign_and_half_its_size(series):
    trend = trends()[series]
    measured, simulated = trend["measured"], trend["simulated"]
    assert measured * simulated > 0, f"{series}: measured {measured:+.1%}, sim {simulated:+.1%}"
    assert abs(simulated) >= 0.5 * abs(measured), (
        f"{series}: measured {measured:+.1%}, simulated {simulated:+.1%}"
    )


def _row(key: str, gpus: int, tokens_per_s: float) -> Row:
    spec = {"cluster": {"num_gpus": gpus}}
    return Row("t", key, spec, tokens_per_s, 0.5, "test")


@pytest.mark.parametrize(
    ("simulated_last", "meets"),
    [(90.0, True), (95.0, True), (96.0, False), (101.0, False), (80.0, True)],
)
def test_trend_rule_wants_the_sign_and_half_the_measured_change(simulated_last, meets):
    # measured: 100 -> 90 tokens/s per GPU (-10 %); half of it is -5 %
    first, last = (
        _row("m|8gpu|mbs1|FULL_SHARD", 8, 100.0),
        _row("m|64gpu|mbs1|FULL_SHARD", 64, 90.0),
    )
    table = trend_table([first, last], {first.key: 100.0, last.key: simulated_last})
    assert table[0]["gpus"] == [8, 64]
    assert table[0]["measured"] == pytest.approx(-0.10)
    assert table[0]["meets"] is meets
