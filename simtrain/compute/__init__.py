"""Compute models: how long an operator takes on an accelerator."""

from simtrain.compute.calibration import CALIBRATIONS, ComputeCalibration, calibration_for
from simtrain.compute.roofline import ComputeModel, RooflineComputeModel

__all__ = [
    "CALIBRATIONS",
    "ComputeCalibration",
    "ComputeModel",
    "RooflineComputeModel",
    "calibration_for",
]
