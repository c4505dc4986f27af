"""MoE benchmark: the DeepSeek-V3 experiment's wall time, and what its overlaps hide.

Usage: PYTHONPATH=. python experiments/bench/moe.py [--json] [--global-batch N]

Runs ``experiments/deepseek-v3-2048xh800.yaml`` (DualPipe PP16, EP64, ZeRO-1, FP8, DeepEP
dispatch, 2,048 H800) as shipped and with each overlap or dispatcher switched off, each in a
fresh process through the CLI (so the wall time includes start-up, as a user sees it), and
prints step time, exposed communication by category and wall time. Target (issue 20): the
shipped experiment completes in at most 10 s of wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "deepseek-v3-2048xh800.yaml"
VARIANTS = {
    "as shipped": [],
    "no two-microbatch overlap": ["parallel.overlap_ep_comm=false"],
    "plain all-to-all": ["parallel.moe_dispatcher=alltoall"],
    "plain all-to-all, no overlap": [
        "parallel.moe_dispatcher=alltoall",
        "parallel.overlap_ep_comm=false",
    ],
}


def run(overrides: list[str]) -> tuple[dict, float]:
    """The report of one variant and the wall seconds of its ``simtrain run``."""
    argv = [sys.executable, "-m", "simtrain", "run", str(EXPERIMENT), "--json"]
    for item in overrides:
        argv += ["--set", item]
    began = time.perf_counter()
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return json.loads(out), time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument(
        "--global-batch", type=int, default=None, help="override parallel.global_batch_size"
    )
    args = parser.parse_args()
    extra = [f"parallel.global_batch_size={args.global_batch}"] if args.global_batch else []
    rows = []
    for name, overrides in VARIANTS.items():
        report, wall = run(overrides + extra)
        exposed = report["exposed_comm_by_category_s"]
        rows.append(
            {
                "variant": name,
                "step_s": report["step_time_s"],
                "compute_s": report["compute_s"],
                "exposed_comm_s": report["exposed_comm_s"],
                "exposed_ep_s": exposed.get("ep_comm", 0.0),
                "ep_comm_s": report["breakdown_s"].get("ep_comm", 0.0),
                "bubble_s": report["bubble_s"],
                "mfu": report["mfu"],
                "wall_s": wall,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(
        f"{'variant':30} {'step s':>8} {'compute':>8} {'exposed':>8} {'exp. EP':>8} "
        f"{'EP (sum)':>8} {'bubble':>8} {'MFU':>6} {'wall s':>7}"
    )
    for r in rows:
        print(
            f"{r['variant']:30} {r['step_s']:8.3f} {r['compute_s']:8.3f} "
            f"{r['exposed_comm_s']:8.3f} {r['exposed_ep_s']:8.3f} {r['ep_comm_s']:8.3f} "
            f"{r['bubble_s']:8.3f} {r['mfu']:6.1%} {r['wall_s']:7.1f}"
        )


if __name__ == "__main__":
    main()
