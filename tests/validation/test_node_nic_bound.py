"""A step's data-parallel traffic cannot leave a node faster than the node's NICs carry it.

On Frontier (8 GCDs, 4 Slingshot-11 NICs) a tensor-parallel job has several data-parallel
groups per node, all reducing at once. ZeRO-1's reduce-scatter and all-gather each send
(DP - 1) / DP of a rank's gradient bytes across the node boundary per group, so one step's
data-parallel time is at least ``groups x 2 x bytes x (DP - 1) / DP`` over the node's
4 x 23.82 GB/s (docs/references/amd.md §2.3). Before each group's replicas shared the NICs
(``network.fabric_clos.nic_flows``) simtrain ran these rings at twice (TP 2) or twice again
(TP 16) that rate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simtrain.api import load_experiment, simulate
from simtrain.catalog import get_link

SUITE = Path(__file__).resolve().parents[2] / "experiments/validation/mi250x"


@pytest.mark.parametrize(
    ("row", "groups_per_node"),
    [("forge-m-512", 2), ("gpt-175b-384", 8)],
)
def test_data_parallel_time_is_at_least_the_node_nic_bound(row, groups_per_node):
    spec = load_experiment(SUITE / f"{row}.yaml")
    result = simulate(spec)
    p, c = spec.parallel, spec.cluster
    dp = c.num_gpus // (p.tp * p.pp)
    grad_bytes = result.num_params / p.tp * 2  # bf16 / fp16 gradients, reduced as they are
    node_bytes = groups_per_node * 2 * grad_bytes * (dp - 1) / dp
    nic_bw = c.nics_per_node * get_link(c.scale_out_link).effective_bandwidth_bytes_per_s
    dp_comm_s = result.ranks[0].by_category_s["dp_comm"]
    assert dp_comm_s >= 0.99 * node_bytes / nic_bw
    assert dp_comm_s <= 1.5 * node_bytes / nic_bw  # and not far above it: the NICs bind
