"""CostSpec: what a GPU-hour costs, how much power a job draws and how clean that power is.

The section is optional in an experiment; every field left out falls back to a preset with
its source (``simtrain/catalog/prices.py`` for prices, ``simtrain/catalog/power.py`` for power,
PUE and grid intensity).
"""

from __future__ import annotations

from typing import Literal

from simtrain.specs.base import Spec, bounded

GridPreset = Literal["us-average", "france", "zero"]
"""Names of the grid carbon-intensity presets (values and sources in ``catalog/power.py``)."""


class CostSpec(Spec):
    """Price, power and carbon assumptions of a run (all optional; presets otherwise)."""

    usd_per_gpu_hour: float | None = bounded(
        None, ge=0, le=1000, why="100x the highest on-demand GPU price"
    )
    """US dollars per GPU-hour; omit for the accelerator's dated preset (hardware.md §7.4)."""
    device_power_watts: float | None = bounded(
        None, gt=0, le=1e5, why="50x the most power-hungry accelerator (~2 kW)"
    )
    """Power cap of one device (W); omit for the catalog TDP."""
    compute_power_fraction_of_tdp: float | None = bounded(None, gt=0, le=1, why="a fraction")
    """Device power while its compute stream is busy, as a fraction of the cap."""
    comm_power_fraction_of_tdp: float | None = bounded(None, ge=0, le=1, why="a fraction")
    """Device power while it waits on exposed communication, as a fraction of the cap."""
    idle_power_fraction_of_tdp: float | None = bounded(None, ge=0, le=1, why="a fraction")
    """Device power while idle in a pipeline bubble, as a fraction of the cap."""
    host_power_watts_per_node: float | None = bounded(
        None, ge=0, le=1e6, why="a whole rack of ~100 kW, ten times over"
    )
    """Power of one node besides its accelerators (CPUs, NICs, switches, fans), in W."""
    pue: float | None = bounded(None, ge=1, le=10, why="5x the worst data centres surveyed (~2)")
    """Power usage effectiveness: facility power over IT power (>= 1)."""
    grid: GridPreset | None = None
    """Grid carbon intensity preset; omit for us-average."""
    grid_gco2_per_kwh: float | None = bounded(
        None, ge=0, le=1e4, why="10x the dirtiest grids (~1,000 gCO2e/kWh)"
    )
    """Grid carbon intensity in gCO2e per kWh; takes precedence over ``grid``."""
