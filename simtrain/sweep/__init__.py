"""simtrain.sweep layer (see DESIGN.md): sweeps over configurations and capacity planning.

Entry points: :func:`sweep` (a sweep YAML or :class:`~simtrain.specs.sweep.SweepSpec` -> a
pandas table) and :func:`run_sweep` (the same with counts, store and executor options). The
pieces: lazy enumeration and cheap pruning (:mod:`~simtrain.sweep.enumerate`, pure), the
per-configuration task (:mod:`~simtrain.sweep.evaluate`), executors (local processes or Ray),
the SQLite result store, the Pareto front and the planner.
"""

from __future__ import annotations

from simtrain.sweep.run import STATUSES, SweepResult, run_sweep, sweep

__all__ = ["STATUSES", "SweepResult", "run_sweep", "sweep"]
