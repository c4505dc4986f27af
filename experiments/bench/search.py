"""Search benchmark (issue 17): estimator and simulator speed, and how well they agree.

Usage: PYTHONPATH=. python experiments/bench/search.py [--json] [--sample 500] [--workers 2]
       [--seed 0] [--space-model llama3-70b] [--space-sizes 2048,3072,4096,6144,8192]

1. *Estimator speed on a planner's search space.* Every layout the planner enumerates for
   ``--space-model`` (default Llama 3 70B on 2,048-8,192 H100, 16M tokens per step) is built
   and estimated on one core: configurations per second with cold caches (a fresh
   estimator, as a search starts) and warm (the same configurations again); and cold again
   with the cyclic garbage collector paused, as a search's stage 1 runs
   (:mod:`simtrain.sweep.plan_search`, :func:`simtrain.gcpause.cyclic_gc_paused`).
2. *Agreement on random configurations.* ``--sample`` configurations (default 500) drawn with
   a fixed seed from two populations: the 1,080-configuration sweep
   ``experiments/sweeps/llama3-70b-1024.yaml`` and the planner's layout space for Llama 3 8B
   on 8-64 H100 under every framework profile (1M tokens per step). Each is estimated and
   simulated (memory is not checked: agreement is about step time); the table reports the
   distribution of |estimate / simulation - 1| (median, p95, max), the configurations of
   the largest disagreement, and the simulator's configurations per second on one core (its
   own wall time per configuration).

The 1-minute load average is printed alongside: on a shared machine, rates scale with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from simtrain.errors import SpecError
from simtrain.estimator import Estimator
from simtrain.gcpause import cyclic_gc_paused
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import load_yaml_tree
from simtrain.specs.sweep import load_sweep
from simtrain.sweep.enumerate import candidates
from simtrain.sweep.executors import get_executor
from simtrain.sweep.plan_search import PlanProblem
from simtrain.sweep.space import LayoutSpace

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = sorted(p.stem for p in (ROOT / "simtrain/catalog/frameworks").glob("*.yaml"))


def planner_specs(model: str, sizes: tuple[int, ...], batch_tokens: float) -> list[Any]:
    """Every valid layout of the planner's space for ``model`` on ``sizes`` H100 GPUs."""
    problem = PlanProblem(
        load_yaml_tree(ROOT / "workloads" / f"{model}.yaml")["model"],
        {"accelerator": "H100-SXM", "gpus_per_node": 8},
        sizes,
        batch_tokens,
        15e12,
        LayoutSpace(),
    )
    layouts = problem.layouts()
    specs = []
    for n, point in problem.points():
        try:
            specs.append(layouts.spec(n, point))
        except SpecError:
            continue
    return specs


def estimator_speed(specs: list[Any]) -> dict[str, float]:
    """Configurations per second of the estimator on one core, cold and warm."""
    estimator = Estimator()
    with cyclic_gc_paused():
        began = time.process_time()
        for spec in specs:
            estimator.estimate(spec)
        paused = time.process_time() - began
    estimator = Estimator()
    began = time.process_time()
    for spec in specs:
        estimator.estimate(spec)
    cold = time.process_time() - began
    began = time.process_time()
    for spec in specs:
        estimator.estimate(spec)
    warm = time.process_time() - began
    return {
        "configurations": len(specs),
        "cold_per_s": len(specs) / cold,
        "warm_per_s": len(specs) / warm,
        "cold_cpu_s": cold,
        "cold_gc_paused_per_s": len(specs) / paused,
        "extrapolated": estimator.stats["extrapolated"],
    }


def random_sample(count: int, seed: int) -> list[tuple[str, Any]]:
    """``count`` (population, spec) pairs, half from each population."""
    rng = np.random.default_rng(seed)
    sweep, base = load_sweep(ROOT / "experiments/sweeps/llama3-70b-1024.yaml")
    swept = [c.spec for c in candidates(sweep, base, "bench") if c.status == "pending"]
    small = planner_specs("llama3-8b", (8, 16, 32, 64), 2**20)
    chosen = [("llama3-70b sweep", swept[i]) for i in rng.choice(len(swept), count // 2, False)]
    while len(chosen) < count:  # a layout under a random stack (redrawn if the stack refuses it)
        spec = small[rng.integers(len(small))]
        framework = FRAMEWORKS[rng.integers(len(FRAMEWORKS))]
        data = spec.model_dump(mode="json")
        data["training"]["framework"] = framework
        for key in ("attention_kernel", "execution_mode", "grad_reduce_dtype"):
            data["training"].pop(key, None)  # resolved from the new profile
        for key in ("overlap_grad_reduce", "overlap_replica_grad_reduce",
                    "grad_bucket_size_bytes"):  # fmt: skip
            data["parallel"].pop(key, None)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                chosen.append((f"llama3-8b x {framework}", ExperimentSpec.model_validate(data)))
        except ValueError:
            continue
    return chosen


def simulate_step(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker task: one simulated step and its wall time."""
    from simtrain.api import simulate

    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = ExperimentSpec.model_validate(payload)
    try:
        step = simulate(spec).step_time_s
    except Exception as exc:  # reported, and the benchmark goes on
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"step_time_s": step, "wall_s": time.perf_counter() - began}


WORST = 5  # configurations of the largest disagreement listed, to look into


def layout(spec: Any) -> str:
    """The parallel layout of a configuration, in one line."""
    p = spec.parallel
    return (
        f"{spec.cluster.num_gpus} GPUs tp {p.tp} pp {p.pp} vpp {p.vpp} cp {p.cp} dp {p.dp} "
        f"ZeRO-{p.zero_stage} mb {p.micro_batch_size} x {p.num_microbatches} "
        f"{p.pipeline_schedule} recompute {p.recompute}"
    )


def agreement(sample: list[tuple[str, Any]], workers: int) -> dict[str, Any]:
    """Estimate and simulate every configuration of the sample; errors and speeds."""
    estimator = Estimator()
    estimates = {str(i): estimator.estimate(spec).step_time_s for i, (_, spec) in enumerate(sample)}
    runner = get_executor("local", workers)
    results: dict[str, dict[str, Any]] = {}
    began = time.perf_counter()
    try:
        items = ((str(i), spec.model_dump(mode="json")) for i, (_, spec) in enumerate(sample))
        for key, row in runner.map_unordered(simulate_step, items):
            results[key] = row
    finally:
        runner.close()
    wall = time.perf_counter() - began
    errors, by_population, failed, signed = [], {}, [], []
    for key, row in results.items():
        name, spec = sample[int(key)]
        population = name.split(" x ")[0]
        if "step_time_s" not in row:
            failed.append(row.get("error", "?"))
            continue
        error = estimates[key] / row["step_time_s"] - 1.0
        errors.append(abs(error))
        by_population.setdefault(population, []).append(abs(error))
        signed.append((error, name, layout(spec)))
    des_s = sum(row.get("wall_s", 0.0) for row in results.values())

    def distribution(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {
            "count": len(ordered),
            "median": statistics.median(ordered),
            "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "max": ordered[-1],
        }

    return {
        "error": distribution(errors),
        "error_by_population": {k: distribution(v) for k, v in sorted(by_population.items())},
        "worst": [
            {"error": e, "configuration": name, "layout": text}
            for e, name, text in sorted(signed, key=lambda r: -abs(r[0]))[:WORST]
        ],
        "failed": len(failed),
        "failures": failed[:3],
        "des_per_s_one_core": len(results) / des_s if des_s else 0.0,
        "des_wall_s": wall,
        "workers": workers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--sample", type=int, default=500, help="random configurations")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="for the DES")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random sample")
    parser.add_argument("--space-model", default="llama3-70b", help="workload of the space")
    parser.add_argument(
        "--space-sizes",
        default="2048,3072,4096,6144,8192",
        help="cluster sizes of the space (default: those simtrain plan tries for Llama 3 70B, "
        "15T tokens in 60 days on H100)",
    )
    args = parser.parse_args()
    if args.sample < 1 or args.workers < 1:
        parser.error(
            f"--sample and --workers must be at least 1 (got {args.sample} and {args.workers})"
        )
    load = os.getloadavg()[0]
    sizes = tuple(int(n) for n in args.space_sizes.split(","))
    space = planner_specs(args.space_model, sizes, 16 * 2**20)
    speed = estimator_speed(space)
    agree = agreement(random_sample(args.sample, args.seed), args.workers)
    report = {
        "load_1min_before": load,
        "load_1min_after": os.getloadavg()[0],
        "estimator": {"space": f"{args.space_model} on {sizes} H100", **speed},
        **agree,
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"load average {load:.2f} -> {report['load_1min_after']:.2f}")
    print(f"estimator on {report['estimator']['space']}: {speed['configurations']:,} "
          f"configurations, {speed['cold_per_s']:,.0f}/s cold, {speed['warm_per_s']:,.0f}/s "
          f"warm, {speed['cold_gc_paused_per_s']:,.0f}/s cold with the collector paused as "
          f"in a search (one core)")  # fmt: skip
    print(f"simulator: {agree['des_per_s_one_core']:.2f} configurations/s on one core "
          f"({agree['des_wall_s']:.0f} s on {agree['workers']} workers)")  # fmt: skip
    e = agree["error"]
    print(
        f"|estimate/simulation - 1| on {e['count']} random configurations: median "
        f"{e['median']:.2e}, p95 {e['p95']:.2e}, max {e['max']:.2e} ({agree['failed']} failed)"
    )
    for name, d in agree["error_by_population"].items():
        print(f"  {name}: {d['count']} configurations, median {d['median']:.2e}, "
              f"p95 {d['p95']:.2e}, max {d['max']:.2e}")  # fmt: skip
    print("largest disagreements (estimate / simulation - 1):")
    for row in agree["worst"]:
        print(f"  {row['error']:+.3f}  {row['configuration']}: {row['layout']}")


if __name__ == "__main__":
    main()
