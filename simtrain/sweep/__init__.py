"""simtrain.sweep layer (see DESIGN.md): sweeps over configurations and capacity planning.

Entry points: :func:`sweep` (a sweep YAML or :class:`~simtrain.specs.sweep.SweepSpec` -> a
pandas table), :func:`run_sweep` (the same with counts, store and executor options) and
:func:`plan` (cluster size and layout for a whole training run). The
pieces: lazy enumeration and cheap pruning (:mod:`~simtrain.sweep.enumerate`, pure), the
per-configuration task (:mod:`~simtrain.sweep.evaluate`), executors (local processes or Ray),
the SQLite result store, the Pareto front and the planner.
"""

from __future__ import annotations

from simtrain.sweep.planner import PlanOption, PlanResult, plan
from simtrain.sweep.run import STATUSES, SweepResult, run_sweep, sweep

__all__ = ["STATUSES", "PlanOption", "PlanResult", "SweepResult", "plan", "run_sweep", "sweep"]
