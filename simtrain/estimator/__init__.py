"""simtrain.estimator: the analytical step-time estimate (pure; no SimPy).

:class:`Estimator` combines the engine's own building blocks (the chunk ops of
``simtrain.parallel.builder``, the compute model, the network model) in closed form along the
critical path of the pipeline schedule, and agrees with the discrete-event engine
(``tests/estimator``), host stream and compute/communication interference included. A
configuration costs under a millisecond once an Estimator's caches hold its chunks (a search
shares them), several milliseconds cold (``experiments/bench/search.py`` measures both).
Searches use it to rank and prune configurations before simulating the best
(:mod:`simtrain.sweep.search`); :meth:`Estimator.lower_bound` (compute alone, a fraction of
a millisecond) lets the planner skip configurations that cannot enter the best.
"""

from simtrain.estimator.step import Estimator, StepEstimate, estimate_step

__all__ = ["Estimator", "StepEstimate", "estimate_step"]
