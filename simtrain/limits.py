"""Work estimates before work: how big a simulation would be, counted from the spec alone.

Each estimate is computed in microseconds from the validated spec, before anything is built,
and compared with a limit that a CLI flag raises. Above the limit the command stops with one
line that gives the estimate, the limit and the flag, e.g.::

    error: the step's program tasks must be at most 5,000,000 (got about 1,310,760,000: 1
    simulated rank x 8,192 microbatches x 5,000 layers x 32 tasks per layer); raise the limit
    with --max-tasks 1310760000

The defaults are a few times the largest shipped experiment (Megatron-LM's 1T-parameter GPT
on 3,072 GPUs builds 1.4 M tasks; the Llama 3 reliability study runs about a million
failure-process events), so a real study never meets them; they exist so that a typo such as
``num_layers: 1e6`` answers in milliseconds instead of hanging or exhausting memory.

The estimates are upper-bound approximations, documented with their arithmetic; they only
decide whether to start, never what a result is.
"""

from __future__ import annotations

import math
from typing import Any

from simtrain.errors import SpecError

MAX_DEVICES = 1 << 20
"""Most accelerators in one job: 1,048,576, 16x the largest clusters announced (65,536)."""
MAX_DEVICES_WHY = "16x the largest clusters announced (65,536 accelerators)"
MAX_LAYERS = 10_000
"""Most transformer layers: 50x the deepest published LLM (~200 layers)."""
MAX_TASKS = 5_000_000
"""Default ``--max-tasks``: tasks in one step's program (about 3 GB and a few minutes)."""
MAX_CONFIGS = 1_000_000
"""Default ``--max-configs``: configurations one sweep enumerates."""
MAX_EVENTS = 10_000_000
"""Default ``--max-events``: failure-process events of a reliability study, all runs."""
MAX_TOPOLOGY_ELEMENTS = 4_000_000
"""Default ``--max-topology-elements``: devices, switches and directed links of a network."""
MAX_SCHEDULE_TASKS = 2_000_000
"""Default ``--max-tasks`` of ``simtrain schedule`` (forward, backward, weight per stage)."""

TASKS_PER_LAYER_MICROBATCH = 32
"""Program tasks per layer, microbatch and simulated rank: compute per phase plus tensor-,
context- and expert-parallel collectives. Measured 20-27 on the shipped experiments (dense and
MoE, with and without TP/SP); 32 bounds them."""
TASKS_PER_RANK_LAYER = 8
"""Tasks per layer and simulated rank that do not repeat per microbatch: gradient buckets,
ZeRO gathers, optimizer."""


def _refuse(what: str, estimate: int, detail: str, limit: int, flag: str) -> SpecError:
    return SpecError(
        f"{what} must be at most {limit:,} (got about {estimate:,}: {detail}); raise the "
        f"limit with {flag} {estimate}"
    )


def check_limit(value: int, flag: str) -> int:
    """A limit given on the command line must be a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"'{flag}' must be a positive integer (got {value!r})")
    return value


def estimate_tasks(spec: Any, full: bool | None = None) -> tuple[int, str]:
    """Tasks of one step's program, and the arithmetic.

    Simulated ranks are one per pipeline stage (every rank with ``full``); each runs its
    microbatches through its share of the layers.

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> p = NS(pp=4, dp=2, tp=2, cp=1, vpp=1, num_microbatches=8)
        >>> spec = NS(parallel=p, model=NS(num_layers=32), simulation=NS(full=False))
        >>> estimate_tasks(spec)[0]
        8448
    """
    p, m = spec.parallel, spec.model
    full = spec.simulation.full if full is None else full
    world = (p.dp or 1) * p.tp * p.pp * p.cp
    ranks = world if full else p.pp
    layers = max(1, math.ceil(m.num_layers / p.pp))
    per_rank = layers * (p.num_microbatches * TASKS_PER_LAYER_MICROBATCH + TASKS_PER_RANK_LAYER)
    detail = (
        f"{ranks:,} simulated rank{'s' if ranks > 1 else ''} x {p.num_microbatches:,} "
        f"microbatches x {layers:,} layers x {TASKS_PER_LAYER_MICROBATCH} tasks per layer"
    )
    return ranks * per_rank, detail


def check_tasks(spec: Any, full: bool | None, limit: int = MAX_TASKS) -> None:
    """Refuse a step whose program would exceed ``limit`` tasks (``--max-tasks``)."""
    estimate, detail = estimate_tasks(spec, full)
    if estimate > limit:
        raise _refuse("the step's program tasks", estimate, detail, limit, "--max-tasks")


def estimate_topology_elements(cluster: Any) -> tuple[int, str]:
    """Devices, switches and directed links of a cluster's network, and the arithmetic.

    Inside a node every device links to a switch or to every peer; each NIC has a leaf port
    and each leaf and spine up to ``switch_radix`` ports, all links counted both ways.
    """
    topo = cluster.topology
    devices = cluster.num_gpus
    if topo.kind == "torus_3d":
        links = 6 * devices
        return devices + links, f"{devices:,} chips with 6 directed torus links each"
    g = min(cluster.gpus_per_node, devices)
    nodes = -(-devices // g)
    intra = 2 * devices * max(1, g - 1) if g <= 16 else 4 * devices
    nics = nodes * min(cluster.nics_per_node or g, g)
    radix = topo.switch_radix
    switches = 2 * -(-nics // max(1, radix // 2)) + 1
    fabric = 2 * nics * 3  # NIC ports plus at most two tiers of uplinks, both directions
    total = devices + nodes + switches + intra + fabric
    return total, f"{devices:,} devices, {nics:,} NICs, about {switches:,} switches and links"


def check_topology(cluster: Any, limit: int = MAX_TOPOLOGY_ELEMENTS) -> None:
    """Refuse a network larger than ``limit`` elements (``--max-topology-elements``)."""
    estimate, detail = estimate_topology_elements(cluster)
    if estimate > limit:
        raise _refuse(
            "the network's devices, switches and links",
            estimate,
            detail,
            limit,
            "--max-topology-elements",
        )


def estimate_reliability_events(params: Any, num_runs: int, num_policies: int) -> tuple[int, str]:
    """Events of a Monte Carlo reliability study, and the arithmetic.

    A run lasts at most ``min(horizon, max_wall)`` seconds; every failure brings a repair, every
    straggler episode an end, and planned maintenance recurs on its interval.
    """
    wall_s = min(params.horizon_s, params.max_wall_s)
    rate = 2 * sum(s.rate_per_s for s in params.sources)
    rate += 2 * sum(s.rate_per_s for s in params.stragglers)
    if math.isfinite(params.maintenance_interval_s):
        rate += 1 / params.maintenance_interval_s
    per_run = 10 + rate * wall_s
    total = per_run * num_runs * num_policies
    detail = (
        f"{num_runs:,} runs x {num_policies} policies x {per_run:,.0f} events per run of up to "
        f"{wall_s / 86400:,.0f} days"
    )
    return (int(total) if math.isfinite(total) else 2**63), detail


def check_reliability(
    params: Any, num_runs: int, num_policies: int, limit: int = MAX_EVENTS
) -> None:
    """Refuse a reliability study above ``limit`` events (``--max-events``)."""
    estimate, detail = estimate_reliability_events(params, num_runs, num_policies)
    if estimate > limit:
        raise _refuse("the reliability study's events", estimate, detail, limit, "--max-events")


def check_configs(count: int, limit: int = MAX_CONFIGS) -> None:
    """Refuse a sweep of more than ``limit`` configurations (``--max-configs``)."""
    if count > limit:
        shown = f"{count:,}" if count < 10**30 else f"{count:.3g}"
        raise SpecError(
            f"the sweep's configurations must be at most {limit:,} (got {shown}); raise the "
            f"limit with --max-configs, or narrow the axes"
        )
