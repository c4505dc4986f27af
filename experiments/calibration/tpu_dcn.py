"""Fit the DCN per-step latency of TPU v5e on MaxText's multi-slice MFU decline.

Data: MaxText on 1, 2, 4, 8, 16 and 32 slices of v5e-256 for four models
(docs/references/tpu.md §5; the runs are ``experiments/validation/tpu/v5e-*-x*.yaml``). The
decline is what DCN costs: MFU on one slice minus MFU on s slices, the same weak-scaling
step with data parallelism across slices. Split, declared before fitting and never moved:
the fit uses the 16B and 64B series; the 32B and 128B series are held out.

Mechanism (jax-xla profile, ``overlaps.replica_grad_reduce: false``): each scanned layer's
gradient all-reduce across slices over DCN is exposed. Its ring takes 2(s - 1) steps, each
paying the DCN link's per-step latency (plus the bytes over the hosts' ports), so the decline
grows with layers x slices, as the data do. The one free constant is that latency; the
decline is linear in it, so two evaluations give the least-squares value, and a third
checks it.

Acceptance (issue 14): every slice count of every series within 3 MFU points.

Usage (from the repository root): PYTHONPATH=. python experiments/calibration/tpu_dcn.py
[--latency-s X]   (evaluate one latency instead of fitting)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simtrain.api import load_experiment, simulate
from simtrain.catalog.links import LINKS

SUITE = Path(__file__).resolve().parents[1] / "validation" / "tpu"
SLICES = (1, 2, 4, 8, 16, 32)
FIT_MODELS = ("16b", "64b")
"""The series the latency is fitted on."""
HELD_OUT_MODELS = ("32b", "128b")
"""The series held out."""
LINK = "dcn-v5e"
PROBE_LATENCIES_S = (0.0, 1e-3)
"""Two latencies the decline is evaluated at; it is linear in between and beyond."""


def mfu_series(model: str, latency_s: float) -> dict[int, tuple[float, float]]:
    """Slices -> (simulated MFU, measured MFU) of one model with the DCN latency set."""
    original = LINKS[LINK]
    LINKS[LINK] = original.model_copy(update={"latency_s": latency_s})
    try:
        out = {}
        for s in SLICES:
            spec = load_experiment(SUITE / f"v5e-{model}-x{s}.yaml")
            assert spec.expected is not None
            out[s] = (simulate(spec).summary()["mfu"], spec.expected.value)
        return out
    finally:
        LINKS[LINK] = original


def declines(series: dict[int, tuple[float, float]]) -> dict[int, tuple[float, float]]:
    """Slices -> (simulated, measured) decline in MFU points from one slice."""
    sim1, meas1 = series[1]
    return {s: (100 * (sim1 - sim), 100 * (meas1 - meas)) for s, (sim, meas) in series.items()}


def fit() -> float:
    """Least-squares latency over the fit series' declines (linear in the latency)."""
    lo, hi = PROBE_LATENCIES_S
    num = den = 0.0
    for model in FIT_MODELS:
        at_lo, at_hi = declines(mfu_series(model, lo)), declines(mfu_series(model, hi))
        for s in SLICES[1:]:
            base, measured = at_lo[s]
            slope = (at_hi[s][0] - base) / (hi - lo)
            num += slope * (measured - base)
            den += slope * slope
    return lo + num / den


def report(latency_s: float) -> None:
    """Print every series' declines at ``latency_s`` and the worst miss per side."""
    print(f"DCN per-step latency {latency_s * 1e3:.3f} ms ({LINK})")
    for side, models in (("fit", FIT_MODELS), ("held out", HELD_OUT_MODELS)):
        worst = 0.0
        for model in models:
            series = mfu_series(model, latency_s)
            cells = []
            for s, (sim, meas) in declines(series).items():
                worst = max(worst, abs(sim - meas))
                cells.append(f"x{s} {sim:4.1f}/{meas:4.1f}")
            sim1, meas1 = series[1]
            print(
                f"  {side:8} {model:>4}: MFU(1) {100 * sim1:.1f}/{100 * meas1:.1f}; "
                "decline sim/meas " + ", ".join(cells[1:])
            )
        print(f"  {side}: worst decline miss {worst:.2f} points")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-s", type=float, default=None, help="evaluate, do not fit")
    args = parser.parse_args()
    latency = fit() if args.latency_s is None else args.latency_s
    report(latency)


if __name__ == "__main__":
    main()
