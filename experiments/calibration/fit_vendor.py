"""Fit MI250X and TPU compute constants on their validation suites, with a declared hold-out.

Usage (from the repository root):
  PYTHONPATH=. python experiments/calibration/fit_vendor.py --suite mi250x [--report]
  PYTHONPATH=. python experiments/calibration/fit_vendor.py --suite tpu [--report]

Suites are the experiments under ``experiments/validation/<suite>/`` (each with the published
figure in its ``expected:`` block) and their fit / held-out split is ``vendor_splits.py``,
committed before any fit ran. Every published figure becomes a measured step time: a step
time as is, tokens/s as tokens per step over it, MFU as the step's model FLOPs (simtrain's
convention, which is MaxText's 2023-24 count) over MFU x peak x chips.

What is fitted (the rest stays as the starting calibration says):

- ``mi250x``: starting from A100's fractions with the GEMM ceiling set to the measured
  maximum achievable matmul of one GCD (147 of 191.5 TF/s, docs/references/amd.md §3), the
  sustained compute fraction (golden-section search); the HBM fraction and the host issue
  costs stay A100's. (Freeing those three as well, by Nelder-Mead, moved the fit rows by
  less than 0.1 point and drove the HBM fraction to its bound of 1: five rows do not
  identify them.)
- ``tpu``: one GEMM ceiling per TPU generation (v5e, v5p) on that generation's fit rows (no
  maximum-achievable-matmul measurement exists for TPUs, so the ceiling is the one free
  constant, with a sustained fraction of 1), starting from A100's fractions with the TPU's
  own matrix-unit tile (128 x 128) and no compute units taken by collectives (ICI DMA), in
  compiled execution (no host issue cost); the DCN term is ``tpu_dcn.py``'s.

Both minimise the mean absolute log error of the step time over the fit rows, then report the
fit and held-out rows (MAPE, max). ``--report`` skips the fit and reports the calibration the
catalog holds now.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from vendor_splits import SPLITS

from simtrain.api import compute_model_for, load_experiment, network_model_for
from simtrain.catalog import get_accelerator
from simtrain.compute import calibration_for
from simtrain.compute.fitting import golden_section
from simtrain.engine import run_program
from simtrain.engine.variability import speed_factors
from simtrain.metrics.flops import step_flops
from simtrain.parallel.builder import build_program
from simtrain.specs.calibration import ComputeCalibration

SUITES = Path(__file__).resolve().parents[1] / "validation"
MI250X_MAMF_FRACTION = 147.0 / 191.5
"""Maximum achievable BF16 matmul of one MI250X GCD over its peak (amd.md §3)."""


class Run:
    """One suite row: its experiment, measured step time and row set."""

    def __init__(self, name: str, row_set: str) -> None:
        self.name = name
        self.row_set = row_set
        self.spec = load_experiment(SUITES / self.suite_dir / f"{name}.yaml")
        self.measured_s = measured_step_s(self.spec)
        self._program = None
        self._speed: dict[int, float] | None = None

    suite_dir = ""

    def simulate(self, calibration: ComputeCalibration) -> float:
        """Simulated step time under ``calibration``, as ``simtrain run`` would report it.

        The rank speeds are the first draw of the experiment's seed (``simulate``'s), so the
        fitted constants reproduce what users see, stragglers of a synchronous step included.
        """
        if self._program is None:
            self._program = build_program(self.spec)
            variability = self.spec.simulation.variability
            if variability.active:
                rng = np.random.default_rng(self.spec.seed)
                self._speed = speed_factors(self._program.weights, variability, rng)
        compute = compute_model_for(self.spec, calibration)
        network = network_model_for(self.spec)
        return run_program(self._program, compute, network, self._speed).step_time_s


def measured_step_s(spec) -> float:
    """The published figure of ``spec.expected`` as a step time (see the module docstring)."""
    expected = spec.expected
    tokens = spec.parallel.global_batch_size * spec.model.seq_length
    if expected.metric == "step_time_s":
        return expected.value
    if expected.metric == "tokens_per_s":
        return tokens / expected.value
    if expected.metric == "mfu":
        peak = get_accelerator(spec.cluster.accelerator).peak_flops[spec.training.dtype]
        return step_flops(spec).model / (expected.value * peak * spec.cluster.num_gpus)
    raise ValueError(f"unsupported expected.metric {expected.metric}")


def load_runs(suite: str) -> list[Run]:
    """Every row of ``suite`` with its declared row set."""
    Run.suite_dir = suite
    split = SPLITS[suite]
    return [Run(name, side) for side in ("fit", "held_out") for name in split[side]]


def mean_abs_log(runs: list[Run], cal: ComputeCalibration) -> float:
    """Mean absolute log error of the step time."""
    return float(np.mean([abs(math.log(r.simulate(cal) / r.measured_s)) for r in runs]))


def golden(loss, low: float, high: float) -> float:
    """Minimiser of a unimodal ``loss`` on [low, high], each evaluation printed."""

    def logged(x: float) -> float:
        value = loss(x)
        print(f"    {x:.4f} -> {value:.4f}", file=sys.stderr, flush=True)
        return value

    return golden_section(logged, low, high, 0.005)


def with_sustained(cal: ComputeCalibration, fraction: float) -> ComputeCalibration:
    """``cal`` with the sustained compute fraction set."""
    return cal.model_copy(update={"sustained_compute_fraction": fraction})


def fit_sustained(runs: list[Run], cal: ComputeCalibration) -> ComputeCalibration:
    """Golden-section search of the sustained compute fraction in [0.3, 1]."""
    best = golden(lambda x: mean_abs_log(runs, with_sustained(cal, x)), 0.3, 1.0)
    return with_sustained(cal, round(best, 3))


def with_ceiling(cal: ComputeCalibration, ceiling: float) -> ComputeCalibration:
    """``cal`` with the 16-bit GEMM ceiling set and a sustained fraction of 1."""
    gemm = cal.gemm.model_copy(update={"ceiling": dict.fromkeys(("bf16", "fp16"), ceiling)})
    return cal.model_copy(update={"gemm": gemm, "sustained_compute_fraction": 1.0})


def fit_ceiling(runs: list[Run], cal: ComputeCalibration) -> ComputeCalibration:
    """Golden-section search of the GEMM ceiling in [0.4, 1]."""
    best = golden(lambda x: mean_abs_log(runs, with_ceiling(cal, x)), 0.4, 1.0)
    return with_ceiling(cal, round(best, 3))


def start(suite: str, accelerator: str) -> ComputeCalibration:
    """The calibration a fit starts from (see the module docstring)."""
    base = calibration_for("A100-80GB")
    if suite == "mi250x":
        ceiling = dict.fromkeys(("bf16", "fp16"), round(MI250X_MAMF_FRACTION, 4))
        return base.model_copy(update={"gemm": base.gemm.model_copy(update={"ceiling": ceiling})})
    # TPU: the matrix units are 128 x 128 systolic arrays (one tile shape) and ICI
    # collectives run on the chip's DMA engines, not on the matrix units (tpu.md §1).
    gemm = base.gemm.model_copy(update={"tile_shapes": ((128, 128),), "tile_reuse_penalty": 0.0})
    return base.model_copy(update={"gemm": gemm, "collective_sms": 0})


def report(runs: list[Run], cals: dict[str, ComputeCalibration]) -> None:
    """Per-row errors, then MAPE / max per row set, per accelerator and over the suite."""
    errors: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        acc = r.spec.cluster.accelerator
        sim = r.simulate(cals[acc])
        err = r.measured_s / sim - 1  # throughput error: simulated / measured - 1
        for key in ((acc, r.row_set), ("suite", r.row_set)):
            errors.setdefault(key, []).append(err)
        print(
            f"  {r.row_set:8} {r.name:24} sim {sim:9.3f} s  meas {r.measured_s:9.3f} s  "
            f"throughput {err:+.1%}"
        )
    for (who, side), errs in sorted(errors.items(), key=lambda kv: kv[0][0] == "suite"):
        if who != "suite" and len(cals) == 1:
            continue
        a = np.abs(errs)
        print(f"  {who} {side}: {len(errs)} rows, MAPE {a.mean():.1%}, max {a.max():.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=sorted(SPLITS), required=True)
    parser.add_argument("--report", action="store_true", help="report the catalog's calibration")
    args = parser.parse_args()
    runs = load_runs(args.suite)
    accelerators = sorted({r.spec.cluster.accelerator for r in runs})
    cals: dict[str, ComputeCalibration] = {}
    for acc in accelerators:
        if args.report:
            cals[acc] = calibration_for(acc)
            continue
        fit_rows = [r for r in runs if r.row_set == "fit" and r.spec.cluster.accelerator == acc]
        cal = start(args.suite, acc)
        print(f"fitting {acc} on {len(fit_rows)} rows", file=sys.stderr)
        fit = fit_ceiling if args.suite == "tpu" else fit_sustained
        cal = fit(fit_rows, cal)
        cals[acc] = cal
        eager = cal.host["eager"]
        print(
            f"{acc}: sustained_compute_fraction {cal.sustained_compute_fraction}, "
            f"memory_efficiency {cal.memory_efficiency:.3g}, gemm ceiling "
            f"{cal.gemm.ceiling.get('bf16')}, eager host {eager.per_kernel_s:.3g} s/kernel "
            f"{eager.per_collective_s:.3g} s/collective"
        )
    report(runs, cals)


if __name__ == "__main__":
    main()
