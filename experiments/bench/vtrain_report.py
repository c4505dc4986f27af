"""Wall time of predicting vTrain's measured iterations, this checkout against a baseline.

Usage:
  python experiments/bench/vtrain_report.py [--baseline wave2-base] [--every 1]

Predicts the step time of every ``--every``-th row of vTrain's 1,549 measured A100
iterations (``experiments/calibration/vtrain.py`` builds each row's experiment) with
``simtrain.api.simulate``, once with this checkout's code and once with the code of the git
revision ``--baseline`` (checked out in a temporary worktree), one after the other in this
run, and prints a table of the wall and CPU times (the child's process time, user + sys)
and their ratios. Each side runs in a child process of its own, so neither imports the
other's package. On a shared machine compare the CPU ratio. Issue 12 asks the ratio to stay
at or under 1.5 for all rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments" / "calibration"))

from vtrain import CSV_PATH  # noqa: E402  (the measured rows, wherever this checkout finds them)

CHILD = """
import json, sys, time
from pathlib import Path
tree, every, csv_path = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
sys.path[:0] = [tree, tree + "/experiments/calibration"]
import vtrain
from simtrain.api import simulate
rows = vtrain.load_rows(csv_path)[::every]
specs = [vtrain.row_experiment(row) for row in rows]
began, cpu = time.perf_counter(), time.process_time()
for spec in specs:
    simulate(spec)
wall_s, cpu_s = time.perf_counter() - began, time.process_time() - cpu
print(json.dumps({"rows": len(rows), "wall_s": wall_s, "cpu_s": cpu_s}))
"""


def time_tree(tree: Path, every: int) -> dict[str, float]:
    """Run the prediction of the rows with the code of ``tree``; its rows and wall seconds."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(every), str(CSV_PATH)],
        cwd=tree,
        # a baseline checked out in a temporary folder has no shared/reference above it
        env={**os.environ, "SIMTRAIN_REFERENCE_DIR": str(CSV_PATH.parent)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"error: predicting with {tree} failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="wave2-base", help="git revision to compare with")
    parser.add_argument("--every", type=int, default=1, help="time every N-th row (default 1)")
    args = parser.parse_args()
    if args.every < 1:
        sys.exit(f"error: '--every' must be at least 1 (got {args.every})")
    with tempfile.TemporaryDirectory(prefix="simtrain-baseline-") as tmp:
        base = Path(tmp) / "tree"
        added = subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline],
            capture_output=True,
            text=True,
            check=False,
        )
        if added.returncode != 0:
            sys.exit(f"error: '--baseline' {args.baseline!r}: {added.stderr.strip()}")
        try:
            before = time_tree(base, args.every)
            after = time_tree(ROOT, args.every)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                capture_output=True,
                check=False,
            )
    print("| code | rows | wall s | CPU s | CPU s/row |\n|---|---:|---:|---:|---:|")
    for name, t in ((args.baseline, before), ("this checkout", after)):
        print(
            f"| {name} | {t['rows']} | {t['wall_s']:.1f} | {t['cpu_s']:.1f} "
            f"| {t['cpu_s'] / t['rows']:.4f} |"
        )
    print(
        f"\nratio (this checkout / {args.baseline}): CPU {after['cpu_s'] / before['cpu_s']:.2f}, "
        f"wall {after['wall_s'] / before['wall_s']:.2f}"
    )


if __name__ == "__main__":
    main()
