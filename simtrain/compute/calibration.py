"""The compute model's calibration for an accelerator (data in ``simtrain/catalog/calibrations``).

Calibrations are data, not code (DESIGN.md): see :mod:`simtrain.catalog.calibrations` for the
files and :class:`~simtrain.specs.calibration.ComputeCalibration` for their fields.
"""

from __future__ import annotations

from simtrain.catalog.calibrations import calibration_for, calibrations
from simtrain.specs.calibration import ComputeCalibration

__all__ = ["ComputeCalibration", "calibration_for", "calibrations"]
