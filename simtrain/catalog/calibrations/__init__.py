"""Compute calibrations as data files, one per accelerator family, with their provenance.

Each ``*.yaml`` here is a :class:`~simtrain.specs.calibration.ComputeCalibration`: the
efficiency constants of the compute model for the accelerators it lists, with where they come
from (a fit on named measurements with its hold-out, or an assumption). A part that shares
another's silicon is listed in that file's ``inherited_by`` and reported ``inherited``; a part
no file names gets the A100 *fractions* (efficiencies relative to its own peak and bandwidth),
reported ``assumed``, so every report says how far to trust it. Files are read on first use,
not at import.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from simtrain.errors import SpecError
from simtrain.specs.calibration import ComputeCalibration
from simtrain.specs.safe_yaml import load_yaml_text

CALIBRATION_DIR = Path(__file__).parent
INHERIT_FROM = "a100"  # the best-measured part; others fall back to its fractions


@cache
def calibrations() -> dict[str, ComputeCalibration]:
    """Every calibration file, by name."""
    found = {}
    for path in sorted(CALIBRATION_DIR.glob("*.yaml")):
        data = load_yaml_text(path.read_text(encoding="utf-8"), str(path))
        cal = ComputeCalibration.model_validate(data)
        found[cal.name] = cal
    return found


@cache
def calibration_for(accelerator: str) -> ComputeCalibration:
    """The calibration of catalog accelerator ``accelerator``.

    A file that lists the part gives its own provenance; a file that the part is
    ``inherited_by`` gives the same constants marked ``inherited`` (``assumed`` if they are
    themselves assumed); a part no file names
    gets the A100 efficiency fractions marked ``assumed`` (not calibrated).
    """
    for cal in calibrations().values():
        if accelerator in cal.accelerators:
            return cal
    for cal in calibrations().values():
        if accelerator in cal.inherited_by:
            # Same silicon carries the constants, not more certainty than they have.
            assumed = cal.provenance == "assumed"
            return cal.model_copy(
                update={
                    "accelerators": [accelerator],
                    "provenance": "assumed" if assumed else "inherited",
                    "source": f"{cal.accelerators[0]}'s "
                    f"{'assumption' if assumed else 'fit'}: same silicon; {cal.source}",
                }
            )
    base = calibrations()[INHERIT_FROM]
    return base.model_copy(
        update={
            "name": f"{INHERIT_FROM}-fractions",
            "collective_sms": _collective_units(accelerator, base),
            "accelerators": [accelerator],
            "provenance": "assumed",
            "source": (
                f"no measured runs for {accelerator}: {base.accelerators[0]}'s efficiency "
                "fractions (relative to its own peak and bandwidth), not calibrated"
            ),
            "fit": None,
        }
    )


def _collective_units(accelerator: str, base: ComputeCalibration) -> int:
    """Compute units a collective takes on a part without its own calibration.

    GPUs run collectives as kernels on their SMs/CUs: the same share of the device as on the
    base part. TPUs move collective data with DMA engines beside the matrix units, so
    collectives take none of them.
    """
    from simtrain.catalog import ACCELERATORS

    part = ACCELERATORS.get(accelerator)
    donor = ACCELERATORS.get(base.accelerators[0])
    if part is None or donor is None or part.vendor == "google":
        return 0
    share = base.collective_sms / donor.num_compute_units
    return round(share * part.num_compute_units)


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
