"""The public entry points: load an experiment, simulate it."""

from __future__ import annotations

import functools
import time
import warnings
from importlib.metadata import PackageNotFoundError, version

import numpy as np

from simtrain.catalog import cluster_links, get_accelerator
from simtrain.catalog.calibrations import load_calibration_file
from simtrain.compute.roofline import RooflineComputeModel, check_dtype
from simtrain.engine import collective_choices, run_program
from simtrain.engine.variability import speed_factors
from simtrain.errors import SpecError
from simtrain.gcpause import without_cyclic_gc
from simtrain.limits import MAX_TASKS, MAX_TOPOLOGY_ELEMENTS, check_tasks, check_topology
from simtrain.memory import estimate_memory
from simtrain.metrics.flops import step_flops
from simtrain.metrics.result import MemorySummary, SimulationResult
from simtrain.metrics.timeline import rank_times
from simtrain.network.alpha_beta import AlphaBetaNetwork
from simtrain.network.base import NetworkModel
from simtrain.parallel.builder import build_program
from simtrain.specs.calibration import ComputeCalibration
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import load_experiment
from simtrain.workload.counts import count_parameters

__all__ = ["load_experiment", "simtrain_version", "simulate"]


@functools.cache
def simtrain_version() -> str:
    """The installed simtrain version (read once: the metadata lookup costs ~0.4 ms)."""
    try:
        return version("simtrain")
    except PackageNotFoundError:  # running from a source tree without installing
        return "0+unknown"


def check_hardware(spec: ExperimentSpec) -> None:
    """Cross-check the spec against the catalog (names, dtype support)."""
    acc = get_accelerator(spec.cluster.accelerator)
    cluster_links(spec.cluster)
    check_dtype(acc, spec.training.dtype)


def compute_model_for(
    spec: ExperimentSpec, calibration: ComputeCalibration | None = None
) -> RooflineComputeModel:
    """The compute model of the experiment's accelerator, dtype, attention kernel and mode.

    Its constants are ``calibration`` when given (fits try candidate constants this way),
    else the file that ``cluster.calibration`` names, else the catalog's calibration of the
    part. The engine and the analytical estimator (:mod:`simtrain.estimator`) both time
    compute through this one model.
    """
    training = spec.training
    accelerator = get_accelerator(spec.cluster.accelerator)
    if calibration is None and spec.cluster.calibration:
        calibration = load_calibration_file(spec.cluster.calibration)
        if accelerator.name not in calibration.accelerators:
            raise SpecError(
                f"'cluster.calibration' file '{spec.cluster.calibration}' calibrates "
                f"{', '.join(calibration.accelerators)}, not cluster.accelerator="
                f"{accelerator.name}"
            )
    return RooflineComputeModel(
        accelerator,
        training.dtype,
        calibration,
        attention_kernel=training.attention_kernel,
        execution_mode=training.execution_mode,
    )


def network_model_for(spec: ExperimentSpec) -> NetworkModel:
    """The network model the experiment asks for (``simulation.network_model``).

    ``nccl`` (the default) times every collective in closed form on the effective fabric of
    its group on the cluster's topology, with the algorithm and protocol NCCL's tuner would
    pick (``simulation.collective_algorithm``, ``auto`` by default); ``flow`` runs each
    collective's algorithm through the flow-level model together with all its SPMD replicas
    (:mod:`simtrain.engine.replicas`); ``alpha_beta`` is a textbook ring on catalog figures.
    """
    sim = spec.simulation
    if sim.collective_algorithm != "auto":
        from simtrain.collectives.base import get_algorithm

        get_algorithm(sim.collective_algorithm, field="simulation.collective_algorithm")
    if sim.network_model == "nccl":
        from simtrain.network.nccl import NcclNetwork

        return NcclNetwork.from_experiment(spec)
    if sim.network_model == "flow":
        from simtrain.engine.replicas import ReplicatedNetwork
        from simtrain.network.flow_model import FlowNetworkModel
        from simtrain.parallel.layout import RankLayout

        flow = FlowNetworkModel.from_experiment(spec)
        return ReplicatedNetwork(flow, RankLayout.from_spec(spec.parallel))
    if sim.collective_algorithm not in ("auto", "ring"):
        warnings.warn(
            f"simulation.collective_algorithm={sim.collective_algorithm} has no effect with "
            "simulation.network_model=alpha_beta (ring only); use network_model=nccl or flow",
            UserWarning,
            stacklevel=2,
        )
    return AlphaBetaNetwork.from_cluster(spec.cluster)


@without_cyclic_gc
def simulate(
    spec: ExperimentSpec,
    full: bool | None = None,
    repeat: int = 1,
    *,
    max_tasks: int = MAX_TASKS,
    max_topology_elements: int = MAX_TOPOLOGY_ELEMENTS,
) -> SimulationResult:
    """Simulate one training step of ``spec``.

    Args:
        spec: a validated experiment (see :func:`load_experiment`).
        full: simulate every rank instead of one per symmetry class; defaults to
            ``spec.simulation.full``.
        repeat: steps to replay, each with its own draw of rank speeds
            (``simulation.variability``) from the one generator seeded by ``spec.seed``; the
            result's timeline is the first, ``step_times_s`` holds them all.
        max_tasks: refuse a program estimated above this many tasks (:mod:`simtrain.limits`).
        max_topology_elements: refuse a network (nccl and flow models) above this many
            elements.

    Raises:
        SpecError: the spec names hardware the catalog lacks, or a dtype it cannot run, or the
            work estimate is over a limit.
    """
    began = time.perf_counter()
    check_hardware(spec)
    check_tasks(spec, full, max_tasks)
    if spec.simulation.network_model != "alpha_beta":  # nccl and flow wire the topology
        check_topology(spec.cluster, max_topology_elements)
    acc = get_accelerator(spec.cluster.accelerator)
    program = build_program(spec, full)
    compute = compute_model_for(spec)
    network = network_model_for(spec)
    variability = spec.simulation.variability
    rng = np.random.default_rng(spec.seed)
    runs = []
    for _ in range(max(1, repeat)):
        speed = speed_factors(program.weights, variability, rng) if variability.active else None
        runs.append(run_program(program, compute, network, speed))
    engine = runs[0]
    host = engine.host
    memory = estimate_memory(spec, acc.hbm_capacity_bytes)
    return SimulationResult(
        spec=spec,
        accelerator=acc,
        step_time_s=engine.step_time_s,
        flops=step_flops(spec),
        ranks=rank_times(
            program,
            engine.replayed_start_s,
            engine.replayed_end_s,
            engine.step_time_s,
            host.intervals() if host is not None else None,
        ),
        weights=program.weights,
        memory=MemorySummary(
            memory.peak_bytes,
            memory.capacity_bytes,
            memory.breakdown_bytes,
            memory.near_limit_bytes,
        ),
        num_params=count_parameters(spec.model).total,
        replay=engine,
        num_events=engine.num_events,
        replay_wall_s=engine.replay_wall_s,
        choices=lambda: (
            collective_choices(program, network)
            + [("", "")] * (host.num_tasks if host is not None else 0)
        ),  # host tasks: no comm
        step_times_s=tuple(run.step_time_s for run in runs),
        wall_time_s=time.perf_counter() - began,
        version=simtrain_version(),
        calibration={
            "name": compute.calibration.name,
            "provenance": compute.calibration.provenance,
            "source": compute.calibration.source,
        },
    )
