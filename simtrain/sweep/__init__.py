"""simtrain.sweep layer (see DESIGN.md): sweeps over configurations and capacity planning.

Entry points: :func:`sweep` (a sweep YAML or :class:`~simtrain.specs.sweep.SweepSpec` -> a
pandas table), :func:`run_sweep` (the same with counts, store and executor options) and
:func:`plan` (cluster size and layout for a whole training run). The
pieces: lazy enumeration and cheap pruning (:mod:`~simtrain.sweep.enumerate`, pure), the
per-configuration task (:mod:`~simtrain.sweep.evaluate`), executors (local processes or Ray),
the SQLite result store, the Pareto front and the planner.

The names are loaded on first use, so importing the package costs nothing (pandas comes
with the driver).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["STATUSES", "PlanOption", "PlanResult", "SweepResult", "plan", "run_sweep", "sweep"]

_LAZY: dict[str, str] = {
    "PlanOption": "simtrain.sweep.planner",
    "PlanResult": "simtrain.sweep.planner",
    "plan": "simtrain.sweep.planner",
    "STATUSES": "simtrain.sweep.run",
    "SweepResult": "simtrain.sweep.run",
    "run_sweep": "simtrain.sweep.run",
    "sweep": "simtrain.sweep.run",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simtrain.sweep' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
