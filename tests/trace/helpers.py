"""Shared helpers of the trace import/replay tests."""

from __future__ import annotations

import json
from pathlib import Path

from simtrain.cli.app import run_app

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "experiments" / "quickstart.yaml")
# TP2 x DP2 x PP2 on 8 H100, 4 layers: small enough to export and replay in well under a second.
SMALL_3D = [
    "--set",
    "parallel.pp=2",
    "--set",
    "model.num_layers=4",
    "--set",
    "cluster.num_gpus=8",
    "--set",
    "parallel.global_batch_size=8",
    # rank speeds fixed: run and replay are compared exactly
    "--set",
    "simulation.variability.rank_speed_cv=0",
    "--set",
    "simulation.variability.straggler_probability=0",
]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; return exit code, stdout and stderr."""
    code = run_app(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def report(capsys, *argv: str) -> dict:
    """The JSON report of a CLI command that must succeed."""
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)
