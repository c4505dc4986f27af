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
last column shows it is not (docs/references/amd.md §2.3).

The one power measurement (FORGE-L on 1,024 GCDs: 0.2507 TF/s per watt for 2 x 46.95 TF/s,
a mean of 374.6 W per MI250X module, docs/references/amd.md §2.3) then asks what the gap is
made of. Under simtrain's power by state (docs/references/energy.md §1.1: compute at the
power cap, exposed communication at half, idle at a fifth), the script prints the module
power of the simulated step, and of the measured step with the gap spent idle, waiting on
communication, or computing (kernels slower than simulated). It fits nothing.

Usage (from the repository root):
  PYTHONPATH=. python experiments/calibration/forge_gap.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fit_vendor import load_runs

from simtrain.api import simulate
from simtrain.catalog import get_accelerator, get_link
from simtrain.compute import calibration_for
from simtrain.metrics.energy import power_model
from simtrain.workload.counts import count_parameters

GRAD_BYTES_PER_PARAM = 2
"""bf16 (FORGE-S/M/L) and fp16 (175B) gradients, reduced in their own dtype by ZeRO-1."""
POWER_ROW = "forge-l-1024"
"""The row whose run logged its power (FORGE's notebook, cell 19)."""
MEASURED_MODULE_W = 2 * 46.95 / 0.2507
"""Mean MI250X module power of that run: the notebook's TF/s per watt for 2 GCDs at 46.95."""
GCDS_PER_MODULE = 2


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
    power_check(next(r for r in load_runs("mi250x") if r.name == POWER_ROW))


def power_check(run) -> None:
    """Module power of ``run``'s simulated step and of its measured step, by what fills the gap."""
    result = simulate(run.spec)
    rank = result.ranks[0]
    model = power_model(run.spec.cost, get_accelerator(run.spec.cluster.accelerator))
    assert model is not None
    known_j = (
        rank.busy_s * model.compute_watts
        + rank.exposed_comm_s * model.comm_watts
        + rank.bubble_s * model.idle_watts
    )
    gap = run.measured_s - result.step_time_s
    print(
        f"\n{POWER_ROW}: mean module power, measured {MEASURED_MODULE_W:.1f} W "
        f"(cap {GCDS_PER_MODULE * model.cap_watts:.0f} W)"
    )
    simulated_w = module_w(known_j, result.step_time_s)
    print(f"  simulated step {result.step_time_s:.1f} s: {simulated_w:.0f} W")
    for label, watts in (
        ("idle", model.idle_watts),
        ("waiting on communication", model.comm_watts),
        ("computing (slower kernels)", model.compute_watts),
    ):
        measured_w = module_w(known_j + gap * watts, run.measured_s)
        print(f"  measured step {run.measured_s:.1f} s, gap {label}: {measured_w:.0f} W")


def module_w(gcd_joules: float, step_s: float) -> float:
    """Mean power of one MI250X module from one GCD's energy over a step."""
    return GCDS_PER_MODULE * gcd_joules / step_s


if __name__ == "__main__":
    main()
