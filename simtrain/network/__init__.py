"""Network models: how long data movement takes on a cluster."""

from simtrain.network.base import (
    COLLECTIVE_KINDS,
    CollectiveKind,
    ConstantBandwidthNetwork,
    NetworkModel,
)

__all__ = ["COLLECTIVE_KINDS", "CollectiveKind", "ConstantBandwidthNetwork", "NetworkModel"]
