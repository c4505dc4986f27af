"""ReliabilitySpec: failures, checkpointing and recovery over a whole run."""

from __future__ import annotations

from simtrain.specs.base import Spec


class ReliabilitySpec(Spec):
    """Failure processes and checkpoint/recovery policy of a training run."""
