"""Calibrations of the collective library (NCCL, RCCL) per accelerator family: data files.

NCCL's tuning model (``simtrain/collectives/protocols.py``) gives the latency and bandwidth
of every algorithm and protocol; a measured curve adds what that model leaves out on a real
machine: a fixed cost per collective call (``launch_overhead_s``: kernel launch, proxy
start-up, stream synchronisation). Each family has one YAML file in
``simtrain/catalog/collective_calibrations/`` with its provenance (``fitted`` by the command
and on the rows it names, ``inherited`` from another family, or ``assumed``), its fit and
held-out split and their errors. Accelerators no file lists use ``default.yaml``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from simtrain.specs.base import Spec, bounded
from simtrain.specs.safe_yaml import load_yaml_text

CALIBRATION_DIR = Path(__file__).with_name("collective_calibrations")


class CollectiveFit(Spec):
    """How a calibration was fitted: command, data, split and errors."""

    command: str
    """Command that fits (and with ``--write`` rewrites) the file."""
    dataset: str
    """Measured data, with its reference section."""
    fit_rows: list[str]
    """Rows the constants were fitted on (declared in the fit script before fitting)."""
    held_out_rows: list[str]
    """Rows kept out of the fit and reported."""
    fit_error: float = bounded(ge=-100, le=100, why="a relative error; 100x is no fit")
    """Relative error on the fit rows (signed, worst absolute value)."""
    held_out_error: float | None = bounded(
        None, ge=-100, le=100, why="a relative error; 100x is no fit"
    )
    """Relative error on the held-out rows (signed, worst absolute value)."""
    date: str
    """When it was fitted (ISO date)."""


class CollectiveCalibration(Spec):
    """Constants the closed-form and flow network models add to NCCL's tuning model."""

    name: str
    """File name without extension."""
    accelerators: list[str]
    """Catalog accelerators this file calibrates (empty for the default)."""
    provenance: Literal["fitted", "inherited", "assumed"]
    """fitted on measured data, inherited from another family, or assumed."""
    launch_overhead_s: float = bounded(
        ge=0, le=1e-3, why="a millisecond, 50x NCCL's per-call overhead"
    )
    """Fixed cost of one collective or point-to-point call beyond NCCL's cost model."""
    source: str
    """Where the number comes from (a docs/references section, or the file inherited)."""
    fit: CollectiveFit | None = None
    """The fit, when ``provenance`` is fitted."""


@cache
def _load_all() -> tuple[CollectiveCalibration, ...]:
    files = sorted(CALIBRATION_DIR.glob("*.yaml"))
    return tuple(
        CollectiveCalibration.model_validate(load_yaml_text(p.read_text(), str(p))) for p in files
    )


def collective_calibration_for(accelerator: str) -> CollectiveCalibration:
    """The calibration of ``accelerator``'s collective library (``default`` if none names it).

    Examples:
        >>> collective_calibration_for("A100-80GB").provenance
        'fitted'
    """
    key = accelerator.lower()
    default = None
    for calibration in _load_all():
        if key in (name.lower() for name in calibration.accelerators):
            return calibration
        if calibration.name == "default":
            default = calibration
    assert default is not None, "simtrain/catalog/collective_calibrations/default.yaml is missing"
    return default
