"""simtrain.estimator: the analytical step-time estimate (pure; no SimPy).

:class:`Estimator` combines the engine's own building blocks (the chunk ops of
``simtrain.parallel.builder``, the compute model, the network model) in closed form along the
critical path of the pipeline schedule, in about a millisecond per configuration, and agrees
with the discrete-event engine (``tests/estimator``). Searches use it to rank and prune
configurations before simulating the best (:mod:`simtrain.sweep.search`).
"""

from simtrain.estimator.step import Estimator, StepEstimate, estimate_step

__all__ = ["Estimator", "StepEstimate", "estimate_step"]
