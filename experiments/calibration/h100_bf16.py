"""Fit H100's BF16 GEMM ceiling on BF16 training runs, with a declared hold-out.

Usage:
  PYTHONPATH=. python experiments/calibration/h100_bf16.py [--report] [--json]

Why: the H100 GEMM table the kernel fit uses (``kernels.py``) is FP8 only, so the BF16
ceiling in ``simtrain/catalog/calibrations/h100.yaml`` was derived from it by the ratio of the
measured maximum achievable BF16 and FP8 matmul throughputs (MAMF), and the sustained
fraction was fitted on NVIDIA's NeMo FP8 runs. No BF16 H100 run constrained a constant, and
every BF16 H100 run of the reference set comes out too fast with it. This script fits the one
number, the BF16 (and FP16) GEMM ceiling, on measured BF16 H100 training throughput, bounded
above by the MAMF BF16 figure (794.5 of 989.4 TF/s, docs/references/kernels.md §GEMM).

The split, declared here before any fit ran:

- fit: the LLM Foundry rows (``stacks.py``, MosaicML's benchmark tables) on H100 at
  ``amp_bf16`` that fall in the fit part of ``stacks.py``'s declared split (CRC-32 of the row
  key, a third held out);
- held out: the other LLM Foundry H100 ``amp_bf16`` rows; and, never fitted on, the IBM +
  PyTorch FSDP H100 rows (``stacks.py`` suite ``ibm-fsdp``) and Llama 3 405B on 8,192 H100
  (``experiments/validation/llama3``), BF16 runs of two other stacks.

FP8 rows (NeMo, LLM Foundry ``amp_fp8``) do not use the BF16 ceiling and do not move.
``--report`` prints the errors with the catalog's constants without fitting. The error is
simulated / measured throughput - 1 (tokens/s per GPU; TF/s per GPU for Llama 3).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.calibration import stacks
from simtrain.api import compute_model_for, network_model_for
from simtrain.compute import calibration_for
from simtrain.engine import run_program
from simtrain.engine.variability import speed_factors
from simtrain.parallel.builder import build_program
from simtrain.specs.calibration import ComputeCalibration
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import load_experiment

ROOT = Path(__file__).resolve().parents[2]
ACCELERATOR = "H100-SXM"
MAMF_BF16 = 794.5 / 989.4  # measured maximum achievable BF16 matmul over peak (upper bound)
LLAMA3 = ROOT / "experiments" / "validation" / "llama3" / "llama3-405b-8192.yaml"
LLAMA3_TFLOPS = 430.0  # published TF/s per GPU (the suite's expected value)


@dataclass
class Case:
    """One measured BF16 H100 run, built once and timed under candidate constants."""

    name: str
    row_set: str  # fit, held_out or blind
    spec: ExperimentSpec
    measured: float  # tokens/s per GPU, or TF/s per GPU (flops_per_step given)
    flops_per_step: float = 0.0  # hardware FLOPs per step when measured is TF/s per GPU

    def __post_init__(self) -> None:
        self.program = build_program(self.spec)
        self.network = network_model_for(self.spec)
        # the rank-speed draw simulate() makes (simulation.variability, seeded by spec.seed)
        variability = self.spec.simulation.variability
        rng = np.random.default_rng(self.spec.seed)
        self.speed = (
            speed_factors(self.program.weights, variability, rng) if variability.active else None
        )

    def predicted(self, calibration: ComputeCalibration) -> float:
        """Simulated throughput per GPU in the unit of ``measured``."""
        compute = compute_model_for(self.spec, calibration)
        step = run_program(self.program, compute, self.network, self.speed)
        gpus = self.spec.cluster.num_gpus
        if self.flops_per_step:
            return self.flops_per_step / step.step_time_s / gpus / 1e12
        tokens = self.spec.parallel.global_batch_size * self.spec.model.seq_length
        return tokens / step.step_time_s / gpus


def cases() -> list[Case]:
    """The BF16 H100 runs with their declared row set (see the module docstring)."""
    out = []
    for row in stacks.load_rows("llm-foundry"):
        if row.key.startswith("H100") and "|amp_bf16|" in row.key:
            row_set = "held_out" if row.held_out else "fit"
            out.append(Case(row.key, row_set, row.spec(), row.tokens_per_s_per_gpu))
    for row in stacks.load_rows("ibm-fsdp"):
        if row.key.startswith("H100"):
            out.append(Case(row.key, "blind", row.spec(), row.tokens_per_s_per_gpu))
    llama3 = load_experiment(LLAMA3)
    from simtrain.api import simulate

    flops = simulate(llama3).summary()["hardware_flops_per_step"]
    out.append(Case("llama3-405b-8192xh100", "blind", llama3, LLAMA3_TFLOPS, flops))
    return out


def with_ceiling(base: ComputeCalibration, ceiling: float) -> ComputeCalibration:
    """``base`` with its 16-bit GEMM ceiling set to ``ceiling``."""
    ceilings = {**base.gemm.ceiling, "bf16": ceiling, "fp16": ceiling}
    return base.model_copy(update={"gemm": base.gemm.model_copy(update={"ceiling": ceilings})})


def mean_abs_log(chosen: list[Case], calibration: ComputeCalibration) -> float:
    """Mean |log(simulated / measured)|: robust to the few rows off any trend."""
    return float(np.mean([abs(math.log(c.predicted(calibration) / c.measured)) for c in chosen]))


def fit(all_cases: list[Case], base: ComputeCalibration) -> float:
    """Golden-section search of the BF16 ceiling in [0.5, MAMF] on the fit rows."""
    chosen = [c for c in all_cases if c.row_set == "fit"]
    cache: dict[float, float] = {}

    def loss(ceiling: float) -> float:
        if ceiling not in cache:
            cache[ceiling] = mean_abs_log(chosen, with_ceiling(base, ceiling))
            print(f"  ceiling {ceiling:.4f} -> {cache[ceiling]:.4f}", file=sys.stderr)
        return cache[ceiling]

    low, high = 0.5, MAMF_BF16
    ratio = (math.sqrt(5) - 1) / 2
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    while high - low > 0.002:
        if loss(a) < loss(b):
            high, b = b, a
            a = high - ratio * (high - low)
        else:
            low, a = a, b
            b = low + ratio * (high - low)
    return round(min(cache, key=cache.get), 4)


def report(all_cases: list[Case], calibration: ComputeCalibration) -> list[dict]:
    """MAPE, max and mean signed error per row set, plus each blind case."""
    errors = [(c, c.predicted(calibration) / c.measured - 1) for c in all_cases]
    out = []
    for name in ("fit", "held_out", "blind"):
        es = np.array([e for c, e in errors if c.row_set == name])
        out.append(
            {
                "set": name,
                "rows": int(es.size),
                "mape": float(np.abs(es).mean()),
                "max": float(np.abs(es).max()),
                "mean_signed": float(es.mean()),
            }
        )
    out += [{"case": c.name, "error": e} for c, e in errors if c.row_set == "blind"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="errors with the catalog's constants")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args()
    base = calibration_for(ACCELERATOR)
    all_cases = cases()
    calibration = base
    if not args.report:
        ceiling = fit(all_cases, base)
        calibration = with_ceiling(base, ceiling)
        print(json.dumps({"fitted": {"gemm.ceiling.bf16": ceiling}}), file=sys.stderr)
    for line in report(all_cases, calibration):
        if args.json:
            print(json.dumps(line))
        elif "set" in line:
            print(
                f"{line['set']:<9} rows {line['rows']:>3}  MAPE {line['mape']:6.1%}  "
                f"max {line['max']:6.1%}  mean signed {line['mean_signed']:+6.1%}"
            )
        else:
            print(f"  {line['case']:<55} {line['error']:+6.1%}")


if __name__ == "__main__":
    main()
