"""Where the MI250X suite's FORGE misses sit: the gap per row beside the data-parallel load.

For every FORGE row (GPT-NeoX + DeepSpeed ZeRO-1 on Frontier, docs/references/amd.md §2.1)
it prints the measured and simulated step time (as ``fit_vendor.py --report`` simulates it),
the gap between them, and what a network explanation of the gap would have to move: the
gradient bytes each GCD reduces (bf16/fp16, 2 bytes per parameter of its tensor-parallel
shard), the data-parallel groups sharing a node, and the bytes the node's NICs carry per step
for ZeRO-1's reduce-scatter and all-gather (each ring crosses every node boundary once per
channel; ``groups_per_node x 2 x gradient bytes x (DP - 1) / DP``), with the seconds that takes
at the node's measured NIC rate (4 x 23.82 GB/s, osu_bw on LUMI-G). If the data-parallel
network were the mechanism, the gap per NIC byte would be about the same across rows; the
last column shows it is not (docs/references/amd.md §2.3). It fits nothing.

Usage (from the repository root):
  PYTHONPATH=. python experiments/calibration/forge_gap.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fit_vendor import load_runs

from simtrain.catalog import get_link
from simtrain.compute import calibration_for
from simtrain.workload.counts import count_parameters

GRAD_BYTES_PER_PARAM = 2
"""bf16 (FORGE-S/M/L) and fp16 (175B) gradients, reduced in their own dtype by ZeRO-1."""


def main() -> None:
    """Print one line per FORGE row (see the module docstring)."""
    cal = calibration_for("MI250X")
    print(
        f"{'row':<14} {'TPxDP':>7} {'meas s':>7} {'sim s':>7} {'gap s':>6} {'gap/sim':>7} "
        f"{'grad GB':>7} {'grp/node':>8} {'NIC GB':>7} {'NIC s':>6} {'gap s/NIC GB':>12}"
    )
    for run in load_runs("mi250x"):
        if not run.name.startswith(("forge-", "gpt-175b-")):
            continue
        spec = run.spec
        p, c = spec.parallel, spec.cluster
        dp = c.num_gpus // (p.tp * p.pp)
        nic_bw = c.nics_per_node * get_link(c.scale_out_link).effective_bandwidth_bytes_per_s
        grad = count_parameters(spec.model).total / (p.tp * p.pp) * GRAD_BYTES_PER_PARAM
        # Tensor-parallel ranks are consecutive: a node holds min(TP, 8) data-parallel groups,
        # whose rings leave the node only when the job spans more than one.
        groups = min(p.tp, c.gpus_per_node) if c.num_gpus > c.gpus_per_node else 0
        nic_bytes = groups * 2 * grad * (dp - 1) / dp
        sim = run.simulate(cal)
        gap = run.measured_s - sim
        per_byte = f"{gap / (nic_bytes / 1e9):12.3f}" if nic_bytes else f"{'-':>12}"
        print(
            f"{run.name:<14} {f'{p.tp}x{dp}':>7} {run.measured_s:7.2f} {sim:7.2f} {gap:6.2f} "
            f"{gap / sim:+7.0%} {grad / 1e9:7.1f} {groups:8d} {nic_bytes / 1e9:7.1f} "
            f"{nic_bytes / nic_bw:6.2f} {per_byte}",
            flush=True,
        )


if __name__ == "__main__":
    main()
