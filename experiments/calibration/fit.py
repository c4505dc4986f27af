"""Fit an accelerator's compute-calibration constants on measured runs from the reference set.

Usage:
  python experiments/calibration/fit.py --dataset vtrain [--rows multi|all|sample] [--json]
  python experiments/calibration/fit.py --dataset nemo [--json]

Datasets: ``vtrain`` (A100: the vTrain measured iterations, ``vtrain.py``) and ``nemo``
(H100: NVIDIA NeMo's published throughputs, ``nemo_h100.py``). Minimises the mean squared log
error of simulated against measured step time by coordinate descent over the constants of
``simtrain.compute.calibration`` that the dataset constrains (``FITTED``), keeping the rest at
their table values. Programs are built once per row; each evaluation only re-times and
replays them. The result is printed as a table (and the fitted constants, to be copied into
``simtrain/compute/calibration.py`` with the date and this command as their source).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import nemo_h100
import vtrain

from simtrain.catalog import get_accelerator
from simtrain.compute import RooflineComputeModel, calibration_for
from simtrain.engine import run_program
from simtrain.network.alpha_beta import AlphaBetaNetwork
from simtrain.parallel.builder import build_program
from simtrain.specs.experiment import ExperimentSpec

PARAMETERS = {
    "host_issue_s": [0.0, 10e-6, 20e-6, 30e-6, 45e-6, 60e-6, 90e-6],
    "gemm_efficiency": [0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9],
    "gemm_k_half": [0.0, 64.0, 128.0, 256.0, 512.0],
    "memory_efficiency": [0.5, 0.6, 0.7, 0.8, 0.9],
    "kernel_overhead_s": [0.0, 2e-6, 4e-6, 8e-6],
    "attention_fwd_efficiency": [0.3, 0.4, 0.5, 0.6, 0.7],
    "attention_bwd_efficiency": [0.2, 0.3, 0.4, 0.5],
}
# The vTrain runs (unfused attention, small to large models) constrain the host and GEMM
# shape terms; NeMo's nine H100 rows (large models, fused attention) only the efficiencies
# of the big kernels, so the H100 fit keeps the other terms at the A100 values.
FITTED = {
    "vtrain": (
        "host_issue_s",
        "gemm_efficiency",
        "gemm_k_half",
        "memory_efficiency",
        "kernel_overhead_s",
    ),
    "nemo": (
        "gemm_efficiency",
        "memory_efficiency",
        "attention_fwd_efficiency",
        "attention_bwd_efficiency",
    ),
}


def select_rows(which: str) -> list[dict[str, str]]:
    """Rows to fit on: multi-node (109), all (1,549), or a sample.

    The sample takes every 16th single-node row and the multi-node rows except GPT-3 175B,
    whose 21 long pipelines dominate the fit's run time; they stay as a hold-out check.
    """
    rows = vtrain.load_rows()
    multi = [r for r in rows if r["scope"] == "multi_node"]
    if which == "multi":
        return multi
    if which == "all":
        return rows
    single = [r for r in rows if r["scope"] == "single_node"]
    return single[::16] + [r for r in multi if r["reported_params_billion"] != "175"]


def measured_runs(dataset: str, rows: str) -> list[tuple[ExperimentSpec, float]]:
    """(experiment, measured step time in s) pairs of a dataset."""
    if dataset == "vtrain":
        return [
            (vtrain.row_experiment(r), float(r["measured_iter_time_s"])) for r in select_rows(rows)
        ]
    runs = []
    for row in nemo_h100.ROWS:
        spec, tokens_per_s_per_gpu = nemo_h100.row_experiment(row)
        tokens = spec.parallel.global_batch_size * spec.model.seq_length
        runs.append((spec, tokens / (tokens_per_s_per_gpu * spec.cluster.num_gpus)))
    return runs


def prepare(runs):
    """Build each run's program and network once."""
    return [
        (spec, measured, build_program(spec), AlphaBetaNetwork.from_cluster(spec.cluster))
        for spec, measured in runs
    ]


def errors(prepared, calibration) -> np.ndarray:
    """Log errors (simulated / measured) of every prepared run under ``calibration``."""
    logs = []
    for spec, measured, program, network in prepared:
        acc = get_accelerator(spec.cluster.accelerator)
        compute = RooflineComputeModel(acc, spec.training.dtype, calibration)
        step = run_program(program, compute, network).step_time_s
        logs.append(math.log(step / measured))
    return np.array(logs)


def fit(prepared, accelerator: str, names: tuple[str, ...], rounds: int = 2):
    """Coordinate descent over ``names``; returns the best calibration and its loss."""
    best = calibration_for(accelerator)
    best_loss = float(np.mean(errors(prepared, best) ** 2))
    for _ in range(rounds):
        for name in names:
            for value in PARAMETERS[name]:
                trial = dataclasses.replace(best, **{name: value})
                loss = float(np.mean(errors(prepared, trial) ** 2))
                if loss < best_loss:
                    best, best_loss = trial, loss
            print(
                f"  {name} = {getattr(best, name)}  (rms log error {math.sqrt(best_loss):.3f})",
                file=sys.stderr,
                flush=True,
            )
    return best, best_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=["vtrain", "nemo"], default="vtrain")
    parser.add_argument(
        "--rows", choices=["multi", "all", "sample"], default="sample", help="vtrain rows to fit on"
    )
    parser.add_argument("--rounds", type=int, default=2, help="coordinate-descent rounds")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    began = time.perf_counter()
    prepared = prepare(measured_runs(args.dataset, args.rows))
    accelerator = prepared[0][0].cluster.accelerator
    names = FITTED[args.dataset]
    calibration, loss = fit(prepared, accelerator, names, args.rounds)
    logs = errors(prepared, calibration)
    rel = np.exp(logs) - 1
    result = {
        "rows": len(prepared),
        "constants": {k: getattr(calibration, k) for k in names},
        "rms_log_error": math.sqrt(loss),
        "median_abs_rel_error": float(np.median(np.abs(rel))),
        "p90_abs_rel_error": float(np.quantile(np.abs(rel), 0.9)),
        "wall_s": time.perf_counter() - began,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'constant':<20} {'value':>10}")
    for key, value in result["constants"].items():
        print(f"{key:<20} {value:>10.4g}")
    print(
        f"rows {result['rows']}, rms log error {result['rms_log_error']:.3f}, "
        f"median |error| {result['median_abs_rel_error']:.1%}, "
        f"p90 |error| {result['p90_abs_rel_error']:.1%}, wall {result['wall_s']:.0f} s"
    )


if __name__ == "__main__":
    main()
