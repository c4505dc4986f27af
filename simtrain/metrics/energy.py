"""Energy and carbon of a simulated step: device power by state, host overhead, PUE, grid.

Each device draws a power that depends on what its compute stream is doing, taken from the
step's time accounting (:class:`~simtrain.metrics.timeline.RankTime`, whose three parts add up
to the step time):

    device J = busy_s · P_compute + exposed_comm_s · P_comm + bubble_s · P_idle

with every P a fraction (<= 1) of the device's power cap (its TDP), so no device ever exceeds
the cap. Communication that overlaps compute costs nothing extra: the device is already at
P_compute. Nodes add a constant host power; the facility multiplies IT energy by the PUE;
carbon is facility kWh times the grid intensity. The presets and their sources are in
:mod:`simtrain.catalog.power`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simtrain.catalog import power
from simtrain.metrics.timeline import RankTime
from simtrain.specs.cost import CostSpec
from simtrain.specs.hardware import AcceleratorSpec

J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class PowerModel:
    """Resolved power and carbon assumptions of a run.

    Attributes:
        cap_watts: power cap of one device (TDP unless overridden).
        compute_watts: device power while computing.
        comm_watts: device power while waiting on exposed communication.
        idle_watts: device power in a bubble.
        host_watts_per_node: node power besides the accelerators.
        pue: facility power over IT power.
        grid_gco2_per_kwh: grams of CO2e per kWh drawn by the facility.
        sources: where each figure comes from, by attribute name.
    """

    cap_watts: float
    compute_watts: float
    comm_watts: float
    idle_watts: float
    host_watts_per_node: float
    pue: float
    grid_gco2_per_kwh: float
    sources: dict[str, str]


def power_model(cost: CostSpec | None, accelerator: AcceleratorSpec) -> PowerModel | None:
    """Resolve the power assumptions of an experiment; None when no device power is known.

    A device power is known from ``cost.device_power_watts`` or the catalog TDP; TPU v5p has
    neither, so its energy is not reported rather than guessed.
    """
    c = cost or CostSpec()
    cap = c.device_power_watts or accelerator.tdp_watts
    if cap is None:
        return None
    sources: dict[str, str] = {
        "cap_watts": "cost.device_power_watts"
        if c.device_power_watts
        else f"catalog TDP of {accelerator.name} ({accelerator.source})"
    }

    def pick(name: str, given: float | None, preset: power.Preset) -> float:
        sources[name] = f"cost.{name}" if given is not None else preset.source
        return preset.value if given is None else given

    fractions = [
        pick("compute_power_fraction_of_tdp", c.compute_power_fraction_of_tdp,
             power.COMPUTE_POWER_FRACTION_OF_TDP),
        pick("comm_power_fraction_of_tdp", c.comm_power_fraction_of_tdp,
             power.COMM_POWER_FRACTION_OF_TDP),
        pick("idle_power_fraction_of_tdp", c.idle_power_fraction_of_tdp,
             power.IDLE_POWER_FRACTION_OF_TDP),
    ]  # fmt: skip
    host = pick("host_power_watts_per_node", c.host_power_watts_per_node,
                power.HOST_POWER_WATTS_PER_NODE)  # fmt: skip
    pue = pick("pue", c.pue, power.PUE)
    if c.grid_gco2_per_kwh is not None:
        grid, sources["grid_gco2_per_kwh"] = c.grid_gco2_per_kwh, "cost.grid_gco2_per_kwh"
    else:
        name = c.grid or power.DEFAULT_GRID
        preset = power.grid_intensity(name)
        grid, sources["grid_gco2_per_kwh"] = preset.value, f"grid preset {name!r}: {preset.source}"
    return PowerModel(
        cap_watts=cap,
        compute_watts=cap * fractions[0],
        comm_watts=cap * fractions[1],
        idle_watts=cap * fractions[2],
        host_watts_per_node=host,
        pue=pue,
        grid_gco2_per_kwh=grid,
        sources=sources,
    )


@dataclass(frozen=True)
class StepEnergy:
    """Energy of one step of the whole job.

    Attributes:
        devices_j: all accelerators.
        hosts_j: all nodes besides their accelerators.
        facility_j: (devices + hosts) times PUE: what the grid delivers.
        co2_g: grams of CO2e of the facility energy.
    """

    devices_j: float
    hosts_j: float
    facility_j: float
    co2_g: float

    @property
    def facility_kwh(self) -> float:
        """Facility energy in kWh."""
        return self.facility_j / J_PER_KWH


def step_energy(
    ranks: Sequence[RankTime],
    weights: dict[int, int],
    step_time_s: float,
    num_nodes: int,
    model: PowerModel,
) -> StepEnergy:
    """Energy of one step: every simulated rank counted as many times as it stands for.

    Examples:
        >>> m = PowerModel(700, 700, 350, 140, 4600, 1.2, 429, {})
        >>> e = step_energy([RankTime(0, 0.8, 0.1, 0.1)], {0: 8}, 1.0, 1, m)
        >>> round(e.devices_j), round(e.hosts_j), round(e.facility_j)  # 8·(560+35+14) = 4872
        (4872, 4600, 11366)
    """
    devices = sum(
        weights[r.rank]
        * (r.busy_s * model.compute_watts + r.exposed_comm_s * model.comm_watts
           + (r.bubble_s + r.exposed_host_s) * model.idle_watts)
        for r in ranks
    )  # fmt: skip
    hosts = num_nodes * model.host_watts_per_node * step_time_s
    facility = (devices + hosts) * model.pue
    return StepEnergy(devices, hosts, facility, facility / J_PER_KWH * model.grid_gco2_per_kwh)
