"""Compute models: how long an operator takes on an accelerator, and issuing it on the host."""

from simtrain.compute.calibration import ComputeCalibration, calibration_for, calibrations
from simtrain.compute.roofline import ComputeModel, RooflineComputeModel

__all__ = [
    "ComputeCalibration",
    "ComputeModel",
    "RooflineComputeModel",
    "calibration_for",
    "calibrations",
]
