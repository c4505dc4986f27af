"""Probe: what one mechanism would do to LLM Foundry's FULL_SHARD trends and row errors.

Usage:
  PYTHONPATH=. python experiments/calibration/trend_probe.py [VARIANT ...] [--series]

A variant is ``nominal`` (simtrain as it is), ``no-variability`` (every rank at its nominal
speed), ``ring-latency=K`` (NCCL's ring latency term times K, as in ``scaling_probe.py``),
``step-overhead=S`` (S seconds added to every simulated step: a per-step cost outside the
model, such as a trainer's per-batch host work) or ``microbatch-overhead=S`` (S seconds per
micro-batch). For each variant the probe prints how many of the 17 FULL_SHARD series meet
issue 13's trend target (``stacks.py --trend``) and the throughput MAPE of the fit and
held-out rows of all 216 rows (``stacks.py --report``); ``--series`` adds each series' trend.

It fits nothing and changes no constant: the variants ask which mechanism would have the
measured shape, not what its size is. No source in the reference set sizes a per-step or
per-micro-batch host cost of Composer, or a ring latency above NCCL's tuning constants.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from experiments.calibration.scaling_probe import scale_ring_latency
from experiments.calibration.stacks import Row, load_rows, predict, trend_table
from simtrain.collectives import cost

VARIANT_KINDS = (
    "nominal",
    "no-variability",
    "ring-latency",
    "step-overhead",
    "microbatch-overhead",
)
DEFAULT_VARIANTS = ("nominal", "ring-latency=3", "step-overhead=0.03", "microbatch-overhead=0.03")


def _accumulation(row: Row) -> int:
    p, gpus = row.spec_dict["parallel"], row.spec_dict["cluster"]["num_gpus"]
    return p["global_batch_size"] // (p["micro_batch_size"] * gpus)


def _tokens_per_gpu_step(row: Row) -> float:
    spec = row.spec_dict
    per_step = spec["parallel"]["global_batch_size"] * spec["model"]["seq_length"]
    return per_step / spec["cluster"]["num_gpus"]


def _without_variability(row: Row) -> Row:
    simulation = {"variability": {"rank_speed_cv": 0.0, "straggler_probability": 0.0}}
    return dataclasses.replace(row, spec_dict={**row.spec_dict, "simulation": simulation})


def simulated(rows: list[Row], variant: str) -> dict[str, float]:
    """Tokens/s per GPU of every row under ``variant``."""
    kind, _, value = variant.partition("=")
    if kind not in VARIANT_KINDS:
        raise SystemExit(
            "variant must be nominal, no-variability, ring-latency=K, step-overhead=S or "
            f"microbatch-overhead=S (got {variant!r})"
        )
    original = scale_ring_latency(float(value)) if kind == "ring-latency" else None
    try:
        runs = [_without_variability(r) for r in rows] if kind == "no-variability" else rows
        tokens = {r.key: predict(r) for r in runs}
    finally:
        if original is not None:
            cost.COSTS["ring"] = original
    if kind in ("step-overhead", "microbatch-overhead"):
        for row in rows:
            per_step = _tokens_per_gpu_step(row)
            added = float(value) * (_accumulation(row) if kind == "microbatch-overhead" else 1)
            tokens[row.key] = per_step / (per_step / tokens[row.key] + added)
    return tokens


def summary(rows: list[Row], tokens: dict[str, float]) -> dict[str, Any]:
    """Trend count and fit / held-out MAPE of one variant."""
    full_shard = [r for r in rows if r.key.endswith("|FULL_SHARD")]
    trends = trend_table(full_shard, tokens)
    errors: dict[str, list[float]] = {"fit": [], "held_out": []}
    for row in rows:
        part = "held_out" if row.held_out else "fit"
        errors[part].append(abs(tokens[row.key] / row.tokens_per_s_per_gpu - 1))
    return {
        "met": sum(t["meets"] for t in trends),
        "series": len(trends),
        "trends": trends,
        **{f"mape_{part}": sum(e) / len(e) for part, e in errors.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", default=list(DEFAULT_VARIANTS))
    parser.add_argument("--series", action="store_true", help="each series' trend too")
    args = parser.parse_args()
    rows = load_rows("llm-foundry")
    for variant in args.variants:
        result = summary(rows, simulated(rows, variant))
        print(
            f"{variant:28s} trend met {result['met']:2d} of {result['series']}  "
            f"MAPE fit {result['mape_fit']:6.2%}  held out {result['mape_held_out']:6.2%}"
        )
        if args.series:
            for t in result["trends"]:
                print(
                    f"    {t['series']:48s} measured {t['measured']:+6.1%}  "
                    f"simulated {t['simulated']:+6.1%}  {'meets' if t['meets'] else 'misses'}"
                )


if __name__ == "__main__":
    main()
