"""Speed benchmark of the whole-run reliability model (issue 6): 100 Monte Carlo runs of a
90-day training on 16,384 H100 in at most 10 s of wall time.

The job is experiments/reliability/llama3-405b.yaml (Llama 3 54-day failure rates, ≈7.8
unexpected interruptions a day, planned maintenance every 27.6 h) with the horizon moved to 90
days, under several policies. The step time is fixed at 6.7 s (≈ Llama 3 Table 4 throughput)
instead of calling simulate(): this benchmark times the reliability layer alone.
Run: PYTHONPATH=. python experiments/bench/reliability.py
"""

from __future__ import annotations

import time
from pathlib import Path

from simtrain.reliability import get_policy, monte_carlo, run_params, summarize
from simtrain.specs.loader import load_experiment

EXPERIMENT = Path(__file__).resolve().parents[1] / "reliability" / "llama3-405b.yaml"
STEP_TIME_S = 6.7
MODEL_STATE_BYTES = 405e9 * 16  # 405B parameters × 16 bytes (mixed-precision Adam)
NUM_RUNS = 100
TARGET_S = 10.0
POLICIES = ("spec", "sync-young-daly", "in-memory", "elastic", "sync-no-spares")


def main() -> None:
    spec = load_experiment(EXPERIMENT, ["reliability.horizon_days=90"])
    print(f"{NUM_RUNS} Monte Carlo runs of a 90-day, {spec.cluster.num_gpus}-GPU training")
    print(f"{'policy':<18}{'failures/run':>14}{'ETTR':>8}{'wall time s':>13}{'target':>9}")
    for name in POLICIES:
        reliability = get_policy(name)(spec.reliability)
        params = run_params(spec, reliability, STEP_TIME_S, MODEL_STATE_BYTES)
        began = time.perf_counter()
        results = monte_carlo(params, NUM_RUNS, seed=spec.seed)
        elapsed_s = time.perf_counter() - began
        summary = summarize(results, spec.cluster.num_gpus)
        verdict = "ok" if elapsed_s <= TARGET_S else "SLOW"
        print(
            f"{name:<18}{summary.interruptions_mean:>14.0f}{summary.ettr_mean:>8.3f}"
            f"{elapsed_s:>13.2f}{verdict:>9}"
        )


if __name__ == "__main__":
    main()
