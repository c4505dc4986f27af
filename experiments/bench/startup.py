"""Start-up benchmark (issue 17): whole-process wall time of short commands, median of N runs.

Usage: python experiments/bench/startup.py [--runs 5] [--checkout DIR] [--json]

Each command runs in a fresh interpreter, exactly as the ``simtrain`` console script does
(``from simtrain.__main__ import run; run()``), with the checkout DIR first on ``sys.path`` (the
current one by default; ``--checkout /tmp/base`` times another worktree, e.g. the tag
``wave2-base`` for a before/after table). Targets on the project's 2-core machine:
``simtrain --help`` <= 0.3 s, ``simtrain run experiments/quickstart.yaml --json`` <= 0.8 s.
The 1-minute load average is printed alongside: on a shared machine, times scale with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "simtrain --help": (["--help"], 0.3),
    "simtrain list accelerators": (["list", "accelerators"], None),
    "simtrain run experiments/quickstart.yaml --json": (
        ["run", "experiments/quickstart.yaml", "--json"],
        0.8,
    ),
}
"""Label -> (arguments, target seconds or None)."""
ENTRY = "import sys; sys.argv[0] = 'simtrain'; from simtrain.__main__ import run; run()"


def wall_s(argv: list[str], checkout: Path) -> float:
    """Seconds of one whole ``simtrain argv`` process run from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", ENTRY, *argv],
        cwd=checkout,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per command (median)")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="checkout to time")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    for label, (argv, target) in COMMANDS.items():
        wall_s(argv, args.checkout)  # warm the file cache and .pyc files
        times = [wall_s(argv, args.checkout) for _ in range(args.runs)]
        rows.append(
            {
                "command": label,
                "median_s": statistics.median(times),
                "min_s": min(times),
                "target_s": target,
                "runs": args.runs,
            }
        )
    load = {"load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps({"checkout": str(args.checkout), **load, "rows": rows}, indent=1))
        return
    print(
        f"checkout {args.checkout}; load average {load_before:.2f} -> {load['load_1min_after']:.2f}"
    )
    print(f"{'command':<50} {'median s':>9} {'min s':>7} {'target':>7}")
    for row in rows:
        target = "-" if row["target_s"] is None else f"{row['target_s']:.1f}"
        print(f"{row['command']:<50} {row['median_s']:>9.3f} {row['min_s']:>7.3f} {target:>7}")


if __name__ == "__main__":
    main()
