"""Benchmark: how long and how much memory simtrain takes to refuse each hostile input.

Runs the corpus of ``tests/hostile/corpus.py`` (every case in-process, one child per core,
under an address-space cap; see ``tests/hostile/runner.py``) and prints the six outcome counts
of issue 19, the worst time and peak RSS, and the ten slowest cases. The target: no input
takes more than 10 s or 1 GB to reject.

``--repo DIR`` runs the same corpus against another checkout (e.g. a worktree of the tag
``wave2-base`` for the "before" counts). ``--shipped`` instead runs the shipped experiments,
sweeps and topology presets as real commands under ``python -X dev -W error::UserWarning``
and reports any that warns or fails.

Usage (from the repository root)::

    PYTHONPATH=. python experiments/bench/hostile.py
    PYTHONPATH=. python experiments/bench/hostile.py --repo /tmp/hostile-base --json before.json
    PYTHONPATH=. python experiments/bench/hostile.py --shipped
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.hostile.runner import OUTCOMES, run_corpus, slowest, summary  # noqa: E402

MiB = 2**20


def corpus(repo: Path, jobs: int, out: str) -> None:
    began = time.perf_counter()
    results = run_corpus(repo, jobs=jobs)
    info = summary(results)
    if out:
        Path(out).write_text(json.dumps({"summary": info, "results": results}, indent=1))
    print(f"{info['cases']} cases against {repo} in {time.perf_counter() - began:.0f} s")
    print("| kind | cases |\n|---|---:|")
    for kind, count in info["by_kind"].items():
        print(f"| {kind} | {count} |")
    print("\n| outcome | cases |\n|---|---:|")
    for outcome in OUTCOMES:
        print(f"| {outcome} | {info['outcomes'][outcome]} |")
    print(f"| clean | {info['clean']} |")
    worst_s = max(r["wall_s"] for r in results)
    worst_rss = max(r["peak_rss_bytes"] for r in results)
    print(f"\nslowest case {worst_s:.2f} s; largest peak RSS {worst_rss / MiB:.0f} MiB")
    print("\n| # | case | wall s | peak RSS MiB | outcome |\n|---:|---|---:|---:|---|")
    for i, r in enumerate(slowest(results), start=1):
        print(
            f"| {i} | {r['kind']}/{r['name']} | {r['wall_s']:.2f} | "
            f"{r['peak_rss_bytes'] / MiB:.0f} | {','.join(r['outcomes']) or 'clean'} |"
        )


def shipped(with_sweeps: bool) -> None:
    commands: list[list[str]] = []
    for path in sorted((ROOT / "experiments").rglob("*.yaml")):
        rel = str(path.relative_to(ROOT))
        if path.name.startswith("_"):
            continue
        if "sweeps" in path.parts:
            if with_sweeps:  # the shipped sweep simulates hundreds of configurations
                commands.append(["sweep", rel, "--store", "{tmp}/s.sqlite"])
        elif "reliability" in path.parts:
            commands.append(["reliability", rel, "--runs", "5"])
        else:
            commands.append(["run", rel])
    for path in sorted((ROOT / "topologies").glob("*.yaml")):
        commands.append(["topology", str(path.relative_to(ROOT))])
    commands.append(["schedule", "--schedule", "interleaved", "--pp", "4", "--microbatches", "8",
                     "--vpp", "2"])  # fmt: skip
    commands.append(["list", "accelerators"])
    failures = 0
    print("| command | exit | s | stderr |\n|---|---:|---:|---|")
    for argv in commands:
        with tempfile.TemporaryDirectory() as tmp:
            argv = [a.replace("{tmp}", tmp) for a in argv]
            began = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-X", "dev", "-W", "error::UserWarning", "-m", "simtrain", *argv],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
        err = " ".join(done.stderr.split())[:100]
        failures += done.returncode != 0 or bool(err)
        print(f"| {' '.join(argv[:2])} | {done.returncode} | {time.perf_counter() - began:.1f} "
              f"| {err} |")  # fmt: skip
    print(f"\n{len(commands)} commands, {failures} with a warning, an error or a failure")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(ROOT), help="checkout to test (default: this)")
    parser.add_argument("--jobs", type=int, default=2, help="child processes (default 2)")
    parser.add_argument("--json", default="", help="write every case's result here")
    parser.add_argument("--shipped", action="store_true", help="run the shipped inputs instead")
    parser.add_argument(
        "--with-sweeps", action="store_true", help="with --shipped: run the sweeps too (long)"
    )
    args = parser.parse_args()
    if args.shipped:
        shipped(args.with_sweeps)
    else:
        corpus(Path(args.repo).resolve(), args.jobs, args.json)


if __name__ == "__main__":
    main()
