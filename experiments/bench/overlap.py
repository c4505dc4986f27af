"""Overlap benchmark: step time and exposed communication with and without each overlap.

Usage: PYTHONPATH=. python experiments/bench/overlap.py [--json] [--base-only]

Two runs on 64 H100 (nodes of 8, one NDR NIC per GPU):

- ``dense-tp8``: Llama 3 70B, TP8 with sequence parallelism, PP2, DP4 (ZeRO-1), FP8, as NeMo
  runs it (``training.framework: nemo``: userbuffers TP overlap, overlapped gradient
  reduction and parameter gather, asynchronous pipeline sends);
- ``moe-ep8``: Mixtral 8x7B, TP2 with sequence parallelism, EP8 across two nodes, DP32
  (ZeRO-1), BF16, Megatron-Core with combined 1F1B (``parallel.overlap_ep_comm: true``).

Each run is simulated as its stack runs it, then with one overlap switched off at a time
(``parallel.*`` overrides), then with every overlap off. ``--base-only`` runs only the
unmodified experiments (no ``parallel.*`` overlap field, so no combined 1F1B), so that the
same script measures a checkout that predates the overlap switches (the "before" column of
issue 20's closing note; such a checkout reports no exposed time by category: "-").
The machine may be loaded: wall times are indicative.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import yaml

from simtrain.api import simulate
from simtrain.specs.loader import apply_overrides, experiment_from_dict

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = {"accelerator": "H100-SXM", "num_gpus": 64, "gpus_per_node": 8}


def workload(name: str) -> dict[str, Any]:
    """The ``model`` section of ``workloads/<name>.yaml``."""
    return yaml.safe_load((ROOT / "workloads" / f"{name}.yaml").read_text())["model"]


RUNS: dict[str, dict[str, Any]] = {
    "dense-tp8": {
        "name": "llama3-70b-tp8-h100",
        "model": workload("llama3-70b"),
        "parallel": {
            "tp": 8,
            "sp": True,
            "pp": 2,
            "zero_stage": 1,
            "micro_batch_size": 1,
            "global_batch_size": 128,
        },
        "cluster": CLUSTER,
        "training": {"dtype": "fp8", "framework": "nemo"},
    },
    "moe-ep8": {
        "name": "mixtral-8x7b-ep8-h100",
        "model": workload("mixtral-8x7b"),
        "parallel": {
            "tp": 2,
            "sp": True,
            "ep": 8,
            "zero_stage": 1,
            "micro_batch_size": 1,
            "global_batch_size": 256,
        },
        "cluster": CLUSTER,
        "training": {"dtype": "bf16", "framework": "megatron-core"},
    },
}
SHIPPED = {"moe-ep8": ["parallel.overlap_ep_comm=true"]}
"""Overlaps the run's stack performs that its framework profile does not switch on."""
WITHOUT = {
    "dense-tp8": {
        "TP overlap wgrad only": ["parallel.tp_comm_overlap=wgrad"],
        "no TP overlap": ["parallel.tp_comm_overlap=none"],
        "no DP grad overlap": ["parallel.overlap_grad_reduce=false"],
        "no param-gather overlap": ["parallel.overlap_param_gather=false"],
        "blocking PP sends": ["parallel.overlap_p2p_comm=false"],
    },
    "moe-ep8": {
        "no EP overlap": ["parallel.overlap_ep_comm=false"],
        "no TP overlap": ["parallel.tp_comm_overlap=none"],
        "no DP grad overlap": ["parallel.overlap_grad_reduce=false"],
    },
}


def all_off(run: str) -> list[str]:
    """Every override of ``run`` at once (the last one wins where two set the same field)."""
    return [item for overrides in WITHOUT[run].values() for item in overrides]


def measure(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """One simulated step of ``data`` with ``overrides``: the figures of the tables."""
    spec = experiment_from_dict(apply_overrides(data, overrides))
    began = time.perf_counter()
    report = simulate(spec).summary()
    wall = time.perf_counter() - began
    return {
        "step_s": report["step_time_s"],
        "compute_s": report["compute_s"],
        "exposed_comm_s": report["exposed_comm_s"],
        "exposed_by_category_s": report.get("exposed_comm_by_category_s"),
        "bubble_s": report["bubble_s"],
        "mfu": report["mfu"],
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument(
        "--base-only",
        action="store_true",
        help="only the unmodified experiments (for a checkout without the overlap switches)",
    )
    args = parser.parse_args()
    rows = []
    for run, data in RUNS.items():
        if args.base_only:
            variants = {"unmodified experiment": []}
        else:
            variants = {"as the stack runs it": SHIPPED.get(run, [])}
            variants.update({k: SHIPPED.get(run, []) + v for k, v in WITHOUT[run].items()})
            variants["every overlap off"] = all_off(run)
        for name, overrides in variants.items():
            rows.append({"run": run, "variant": name, **measure(data, overrides)})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    cats = ("tp_comm", "ep_comm", "dp_comm", "pp_comm")
    print(
        f"{'run':10} {'variant':24} {'step s':>7} {'exposed':>8} "
        + " ".join(f"{c[:2] + ' exp':>7}" for c in cats)
        + f" {'bubble':>7} {'MFU':>6}"
    )
    for r in rows:
        exposed = r["exposed_by_category_s"]
        by_category = (
            " ".join(f"{exposed.get(c, 0.0):7.3f}" for c in cats)
            if exposed is not None
            else " ".join(f"{'-':>7}" for _ in cats)
        )
        print(
            f"{r['run']:10} {r['variant']:24} {r['step_s']:7.3f} {r['exposed_comm_s']:8.3f} "
            + by_category
            + f" {r['bubble_s']:7.3f} {r['mfu']:6.1%}"
        )


if __name__ == "__main__":
    main()
