"""Plan benchmark (issue 17): wall and CPU time of `simtrain plan`, side by side per checkout.

Usage: PYTHONPATH=. python experiments/bench/plan.py [--baseline DIR] [--runs 3]
       [--cases 70b,8b,8b-2e11] [--json]

Each case runs the whole ``simtrain plan ... --json`` process (default workers: one per
core) from this checkout and, with ``--baseline DIR``, from another checkout (a
``git worktree`` or ``git archive`` of ``main`` or of the tag ``wave2-base``), the
checkouts alternating run by run so that both see the same machine. Per case and checkout
it prints the median wall time, the median CPU time of the whole process tree (user +
sys of the driver and its workers) and the median CPU time *other* processes used while it
ran (from ``/proc/stat``: on a shared machine a run is only as fast as the cores it gets),
the least-disturbed run's wall time, the layouts searched and simulated, and whether the
picks (cheapest and fastest: GPUs and layout) are the same in every run.

Targets on an idle 2-core machine: Llama 3 70B (15T tokens, 60 days, H100) <= 15 s; Llama 3
8B on <= 16 GPUs <= 5 s. On a loaded machine read the CPU columns, and the wall time of
the run that others disturbed least.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLAN = ["plan", "--accelerator", "H100-SXM", "--json"]
CASES: dict[str, tuple[list[str], float]] = {
    "70b": (["--model", "llama3-70b", "--tokens", "15e12", "--deadline-days", "60"], 15.0),
    "8b": (
        ["--model", "llama3-8b", "--tokens", "1e11", "--deadline-days", "30", "--max-gpus", "16"],
        5.0,
    ),
    "8b-2e11": (
        ["--model", "llama3-8b", "--tokens", "2e11", "--deadline-days", "30", "--max-gpus", "16"],
        5.0,
    ),
}
"""Case -> (plan arguments, target wall seconds on an idle 2-core machine)."""
ENTRY = "import sys; sys.argv[0] = 'simtrain'; from simtrain.__main__ import run; run()"


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores, /proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def run_once(checkout: Path, argv: list[str]) -> dict[str, Any]:
    """One whole ``simtrain`` process: wall, own CPU, others' CPU, and the plan's JSON."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    before, machine = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_s()
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *argv], cwd=checkout, env=env, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - began
    after, machine = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_s() - machine
    own = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):  # 1: no plan meets the deadline (the JSON is printed)
        raise SystemExit(f"{checkout}: simtrain {' '.join(argv)} failed:\n{done.stderr}")
    plan = json.loads(done.stdout)
    search = plan["search"]
    picks = [
        (o.get("num_gpus"), json.dumps(o.get("parallel"), sort_keys=True))
        for o in (plan, plan.get("fastest_within_budget") or {})
    ]
    return {
        "wall_s": wall,
        "cpu_s": own,
        "others_cpu_s": max(0.0, machine - own),
        "enumerated": search["enumerated"],
        "estimated": search["estimated"],
        "simulated": search["simulated"],
        "stage_wall_s": search.get("stage_wall_s", {}),
        "picks": picks,
    }


def summarise(runs: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """Medians over runs, the least-disturbed run's wall time, and whether picks agree."""
    calm = min(runs, key=lambda r: r["others_cpu_s"])
    return {
        "runs": len(runs),
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "others_cpu_s": statistics.median(r["others_cpu_s"] for r in runs),
        "calm_wall_s": calm["wall_s"],
        "calm_others_cpu_s": calm["others_cpu_s"],
        "enumerated": runs[0]["enumerated"],
        "estimated": runs[0]["estimated"],
        "simulated": runs[0]["simulated"],
        "picks": runs[0]["picks"],
        "same_picks": all(r["picks"] == runs[0]["picks"] for r in runs),
        "target_s": target,
        "all": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to time alongside")
    parser.add_argument("--runs", type=int, default=3, help="runs per case and checkout")
    parser.add_argument("--cases", default="70b,8b", help=f"of {', '.join(CASES)}")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    checkouts = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    load_before = os.getloadavg()[0]
    table: dict[str, dict[str, Any]] = {}
    for case in args.cases.split(","):
        if case not in CASES:
            raise SystemExit(f"'--cases' must name cases of {', '.join(CASES)} (got {case!r})")
        argv, target = CASES[case]
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
        for _ in range(args.runs):  # alternate the checkouts: both see the same machine
            for name, checkout in checkouts.items():
                runs[name].append(run_once(checkout, [*PLAN, *argv]))
        table[case] = {name: summarise(r, target) for name, r in runs.items()}
        if args.baseline:
            this, base = table[case]["this"], table[case]["baseline"]
            table[case]["same_picks_as_baseline"] = this["picks"] == base["picks"]
    load = {"load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps({**load, "checkouts": {k: str(v) for k, v in checkouts.items()},
                          "cases": table}, indent=1))  # fmt: skip
        return
    print(f"load average {load_before:.2f} -> {load['load_1min_after']:.2f}; ", end="")
    print("; ".join(f"{k} = {v}" for k, v in checkouts.items()))
    print(
        f"{'case':<8} {'checkout':<9} {'wall s':>7} {'CPU s':>6} {'others':>7} "
        f"{'calm wall':>9} {'target':>6} {'layouts':>8} {'estim.':>7} {'sim.':>5}  picks"
    )
    for case, rows in table.items():
        for name in checkouts:
            row = rows[name]
            same = "same" if row["same_picks"] else "DIFFER between runs"
            if name == "this" and "same_picks_as_baseline" in rows:
                same += ", = baseline" if rows["same_picks_as_baseline"] else ", != BASELINE"
            print(
                f"{case:<8} {name:<9} {row['wall_s']:>7.2f} {row['cpu_s']:>6.2f} "
                f"{row['others_cpu_s']:>7.2f} {row['calm_wall_s']:>9.2f} {row['target_s']:>6.1f} "
                f"{row['enumerated']:>8,} {row['estimated']:>7,} {row['simulated']:>5}  {same}"
            )
    print("wall, CPU (this process tree) and others (CPU of other processes meanwhile): medians;")
    print("calm wall: the run others disturbed least. Targets hold on an idle 2-core machine.")


if __name__ == "__main__":
    main()
