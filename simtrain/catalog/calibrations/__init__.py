"""Compute calibrations as data files, one per accelerator family, with their provenance.

Each ``*.yaml`` here is a :class:`~simtrain.specs.calibration.ComputeCalibration`: the
efficiency constants of the compute model for the accelerators it lists, with where they come
from (a fit on named measurements with its hold-out, or an assumption). An accelerator no file
lists inherits the A100 *fractions* (efficiencies relative to its own peak and bandwidth),
marked ``inherited`` so every report can say so. Files are read on first use, not at import.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from simtrain.errors import SpecError
from simtrain.specs.calibration import ComputeCalibration

CALIBRATION_DIR = Path(__file__).parent
INHERIT_FROM = "a100"  # the best-measured part; others fall back to its fractions


@cache
def calibrations() -> dict[str, ComputeCalibration]:
    """Every calibration file, by name."""
    found = {}
    for path in sorted(CALIBRATION_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        cal = ComputeCalibration.model_validate(data)
        found[cal.name] = cal
    return found


@cache
def calibration_for(accelerator: str) -> ComputeCalibration:
    """The calibration of catalog accelerator ``accelerator`` (inherited when none lists it)."""
    for cal in calibrations().values():
        if accelerator in cal.accelerators:
            return cal
    base = calibrations()[INHERIT_FROM]
    return base.model_copy(
        update={
            "name": f"{INHERIT_FROM}-inherited",
            "accelerators": [accelerator],
            "provenance": "inherited",
            "source": (
                f"no measurements of {accelerator} in the calibration set: inherits the "
                f"{base.name} efficiency fractions (relative to its own peak and bandwidth)"
            ),
            "fit": None,
        }
    )


def load_calibration_file(path: str | Path) -> ComputeCalibration:
    """A calibration file named by ``cluster.calibration`` (e.g. from ``simtrain calibrate``).

    Raises:
        SpecError: the file is missing, not YAML, or not a valid calibration (one line).
    """
    file = Path(path)
    if not file.is_file():
        raise SpecError(f"'cluster.calibration' must name a calibration file (got '{file}')")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
        return ComputeCalibration.model_validate(data)
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        problem = str(exc).splitlines()[0]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        problem = f"{where}: {first['msg']}"
    raise SpecError(f"'cluster.calibration' file '{file}' is not a valid calibration ({problem})")
