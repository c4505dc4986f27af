"""Dollars, energy and carbon per step, per million tokens and for the whole run.

The arithmetic, from first principles (every figure for the whole job):

- per step: GPU-hours = num_gpus · step_time_s / 3600; USD = GPU-hours · USD per GPU-hour;
  energy and CO2 from :mod:`simtrain.metrics.energy`;
- per million tokens: the per-step figures · 10⁶ / tokens per step;
- whole run (when ``training.total_tokens`` > 0): steps = ceil(total_tokens / tokens per step);
  productive time = steps · step_time_s; wall time = productive time / goodput, where goodput is
  the reliability layer's ETTR when the experiment has a ``reliability`` section, else 1.
  GPU-hours, dollars, energy and CO2 scale with wall time: lost time is billed, and the devices
  are assumed to draw their mean step power during it.

Prices come from ``cost.usd_per_gpu_hour``, else an explicit
``reliability.gpu_hour_price_usd``, else the accelerator's dated preset
(:mod:`simtrain.catalog.prices`); an accelerator without a preset reports no dollars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simtrain.catalog.prices import PRESET_PRICES
from simtrain.metrics.energy import power_model, step_energy
from simtrain.specs.experiment import ExperimentSpec

if TYPE_CHECKING:
    from simtrain.metrics.result import SimulationResult

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class RunTotals:
    """Length and GPU-hours of a whole training run.

    Attributes:
        num_steps: optimizer steps to consume the tokens.
        productive_s: steps · step time (no failures).
        wall_s: productive time / goodput.
        gpu_hours: wall time · GPUs / 3600.
    """

    num_steps: int
    productive_s: float
    wall_s: float
    gpu_hours: float


def run_totals(
    total_tokens: float,
    tokens_per_step: float,
    step_time_s: float,
    num_gpus: int,
    goodput: float = 1.0,
) -> RunTotals:
    """Steps, time and GPU-hours to train on ``total_tokens``.

    Examples:
        >>> t = run_totals(1e6, 1e3, 2.0, 8, goodput=0.5)  # 1000 steps of 2 s, half lost
        >>> t.num_steps, t.productive_s, t.wall_s, round(t.gpu_hours, 3)
        (1000, 2000.0, 4000.0, 8.889)
    """
    steps = math.ceil(total_tokens / tokens_per_step)
    productive = steps * step_time_s
    wall = productive / goodput
    return RunTotals(steps, productive, wall, wall * num_gpus / 3600.0)


def resolve_price(spec: ExperimentSpec) -> tuple[float | None, str]:
    """USD per GPU-hour of the experiment and where it comes from (None: no price known)."""
    if spec.cost is not None and spec.cost.usd_per_gpu_hour is not None:
        return spec.cost.usd_per_gpu_hour, "cost.usd_per_gpu_hour"
    rel = spec.reliability
    if rel is not None and rel.gpu_hour_price_usd is not None:
        return rel.gpu_hour_price_usd, "reliability.gpu_hour_price_usd"
    folded = {name.lower(): p for name, p in PRESET_PRICES.items()}
    preset = folded.get(spec.cluster.accelerator.lower())
    if preset is None:
        return None, (
            f"no price: docs/references/hardware.md §7.4 lists none for "
            f"{spec.cluster.accelerator}; "
            "set cost.usd_per_gpu_hour"
        )
    return preset.usd_per_gpu_hour, f"{preset.offer}, {preset.date} ({preset.source})"


def _scaled(usd: float | None, energy_kwh: float | None, co2_g: float | None, factor: float):
    return {
        "usd": None if usd is None else usd * factor,
        "energy_kwh": None if energy_kwh is None else energy_kwh * factor,
        "co2_kg": None if co2_g is None else co2_g * factor / 1e3,
    }


def cost_summary(
    result: SimulationResult, goodput: float = 1.0, goodput_source: str = "assumed (no failures)"
) -> dict[str, Any]:
    """The ``cost`` section of the report: price, power, and per step / per Mtoken / run.

    Args:
        result: a simulated step.
        goodput: fraction of wall time that trains (ETTR); 1 without a reliability model.
        goodput_source: where ``goodput`` comes from, for the report.
    """
    spec = result.spec
    price, price_source = resolve_price(spec)
    model = power_model(spec.cost, result.accelerator)
    step_s, gpus = result.step_time_s, result.num_gpus
    gpu_hours = gpus * step_s / 3600.0
    usd = None if price is None else gpu_hours * price
    energy = (
        None
        if model is None
        else step_energy(result.ranks, result.weights, step_s, spec.cluster.num_nodes, model)
    )
    kwh = None if energy is None else energy.facility_kwh
    co2_g = None if energy is None else energy.co2_g
    per_step = {"gpu_hours": gpu_hours, **_scaled(usd, kwh, co2_g, 1.0)}
    per_mtok_factor = 1e6 / result.tokens_per_step
    out: dict[str, Any] = {
        "usd_per_gpu_hour": price,
        "price_source": price_source,
        "goodput": goodput,
        "goodput_source": goodput_source,
        "per_step": per_step,
        "per_million_tokens": {
            "gpu_hours": gpu_hours * per_mtok_factor,
            **_scaled(usd, kwh, co2_g, per_mtok_factor),
        },
        "power": None,
        "run": None,
    }
    if model is not None and energy is not None:
        out["power"] = {
            "device_cap_watts": model.cap_watts,
            "device_mean_watts": energy.devices_j / gpus / step_s,
            "host_watts_per_node": model.host_watts_per_node,
            "pue": model.pue,
            "grid_gco2_per_kwh": model.grid_gco2_per_kwh,
            "facility_mean_kw": energy.facility_j / step_s / 1e3,
            "sources": model.sources,
        }
    if spec.training.total_tokens > 0:
        totals = run_totals(
            spec.training.total_tokens, result.tokens_per_step, step_s, gpus, goodput
        )
        factor = totals.wall_s / step_s  # steps' worth of wall time, lost time included
        out["run"] = {
            "total_tokens": spec.training.total_tokens,
            "num_steps": totals.num_steps,
            "productive_days": totals.productive_s / SECONDS_PER_DAY,
            "wall_days": totals.wall_s / SECONDS_PER_DAY,
            "gpu_hours": totals.gpu_hours,
            **_scaled(usd, kwh, co2_g, factor),
        }
    return out
