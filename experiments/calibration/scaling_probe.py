"""Probe: how much of each scaling series' decline one mechanism of simtrain accounts for.

Usage:
  PYTHONPATH=. python experiments/calibration/scaling_probe.py [VARIANT ...] [--all]

A variant is ``nominal`` (simtrain as it is), ``no-variability`` (every rank at its nominal
speed: ``rank_speed_cv`` 0, no fail-slow stragglers), ``rank-speed-cv=X`` (the spread of
rank speeds set to X, also beyond the documented 2 % bound the fit keeps) or
``ring-latency=K`` (the latency term of NCCL's ring, the algorithm of every all-gather and
reduce-scatter across nodes, times K; 0 removes it). For each series of ``scaling.py``
the probe prints the throughput per GPU at the largest count relative to the smallest,
measured and under each variant.

It fits nothing and changes no constant: ``ring-latency=K`` swaps the ring's cost function
in this process only, to ask whether a larger per-step latency would have the measured
shape across model sizes (it does for the LLM Foundry 1B-13B series at K of about 3, not
for 30B and 70B; README "Scaling"). No source gives such a K, so simtrain keeps NCCL's own
constants. Without ``--all`` the Megatron-LM points above 512 GPUs and Llama 3 (one point,
minutes of simulation) are left out.
"""

from __future__ import annotations

import argparse
import dataclasses

from experiments.calibration.scaling import Point, series_points, table, with_cv
from simtrain.collectives import cost

DEFAULT_VARIANTS = ("nominal", "no-variability", "ring-latency=0", "ring-latency=3")


def without_variability(point: Point) -> Point:
    """``point`` with every rank at its nominal speed."""
    spec = point.spec
    variability = spec.simulation.variability.model_copy(
        update={"rank_speed_cv": 0.0, "straggler_probability": 0.0}
    )
    simulation = spec.simulation.model_copy(update={"variability": variability})
    return dataclasses.replace(point, spec=spec.model_copy(update={"simulation": simulation}))


def scale_ring_latency(factor: float) -> cost.CostModel:
    """Install a ring cost whose latency term is ``factor`` times NCCL's; return the original."""
    original = cost.COSTS["ring"]

    def scaled(kind: str, fabric, size_bytes: float, protocol: str) -> tuple[float, float]:
        latency, transfer = original.cost(kind, fabric, size_bytes, protocol)
        return factor * latency, transfer

    cost.COSTS["ring"] = dataclasses.replace(original, cost=scaled)
    return original


def decline(points: list[Point], variant: str, repeat: int) -> dict[str, tuple[float, float]]:
    """Measured and simulated normalised throughput at each series' largest count."""
    original = None
    if variant == "no-variability":
        points = [without_variability(p) for p in points]
    elif variant.startswith("rank-speed-cv="):
        cv = float(variant.split("=", 1)[1])
        points = [dataclasses.replace(p, spec=with_cv(p.spec, cv)) for p in points]
    elif variant.startswith("ring-latency="):
        original = scale_ring_latency(float(variant.split("=", 1)[1]))
    elif variant != "nominal":
        raise SystemExit(
            "variant must be nominal, no-variability, rank-speed-cv=X or ring-latency=K "
            f"(got {variant!r})"
        )
    try:
        rows = table(points, None, repeat)
    finally:
        if original is not None:
            cost.COSTS["ring"] = original
    last = {r["series"]: r for r in rows}
    return {s: (r["measured_scaling"], r["simulated_scaling"]) for s, r in last.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", default=list(DEFAULT_VARIANTS))
    parser.add_argument("--all", action="store_true", help="every point, Llama 3 included")
    parser.add_argument("--repeat", type=int, default=8, help="seeded steps per point")
    args = parser.parse_args()
    points = series_points()
    if not args.all:
        points = [
            p
            for p in points
            if not (p.series.startswith("megatron") and p.gpus > 512)
            and not p.series.startswith("llama3")
        ]
    results = {v: decline(points, v, args.repeat) for v in args.variants}
    series = list(results[args.variants[0]])
    print(f"{'series':<32} {'measured':>9} " + " ".join(f"{v:>16}" for v in args.variants))
    for s in series:
        measured = results[args.variants[0]][s][0]
        cells = " ".join(f"{results[v][s][1]:>16.3f}" for v in args.variants)
        print(f"{s:<32} {measured:>9.3f} {cells}")


if __name__ == "__main__":
    main()
