"""Optimizers: state bytes per parameter and the cost of one update step.

Every optimizer here runs under mixed precision as Megatron-LM and DeepSpeed run it: 16-bit
weights and gradients for the model, FP32 master weights (4 bytes) for the update, plus the
optimizer's own moments (``docs/references/numerics.md`` §Optimizers):

============  =====================================================  =================
optimizer     state per parameter (beyond 16-bit weight + gradient)   bytes
============  =====================================================  =================
adam, adamw   FP32 master, momentum, variance (ZeRO §3)               12
adafactor     FP32 master; second moment factored into one row and    4 (+ O(r + c)
              one column vector per r x c matrix, no momentum           per matrix)
              (Shazeer & Stern 2018)
lion          FP32 master and momentum (Chen et al. 2023)             8
adam8bit      FP32 master; momentum and variance in 8 bits with one   6 + 8/2048
              FP32 absmax per 2,048-value block (Dettmers et al. 2022)
sgd           FP32 master and momentum                                8
============  =====================================================  =================

Adafactor's factored statistics add 4·(r + c) bytes per r x c matrix, under 0.1 % of a
parameter's bytes for matrices wider than 8,192, and are counted as zero: its states are a
third of Adam's.

The update is memory-bound: :data:`OPTIMIZERS` gives the bytes it reads and writes per
parameter (the FP32 gradient, master and states read; master and states written; the 16-bit
weight written) and its FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.workload.ops import Op
from simtrain.workload.primitives import memory_op


@dataclass(frozen=True)
class OptimizerCost:
    """State and step cost of one optimizer, per parameter.

    Attributes:
        state_bytes: bytes of FP32 master weights and optimizer states.
        step_bytes: bytes the update reads and writes.
        step_flops: floating-point operations of the update.
    """

    state_bytes: float
    step_bytes: float
    step_flops: float


OPTIMIZERS: dict[str, OptimizerCost] = {
    # read grad 4, master 4, m 4, v 4; write master, m, v 12 and the 16-bit weight 2
    "adam": OptimizerCost(12.0, 30.0, 10.0),
    # as adam, plus a decoupled weight-decay multiply-add
    "adamw": OptimizerCost(12.0, 30.0, 12.0),
    # two passes over the grad (row/column means of g^2, then the update), master read and
    # written, the 16-bit weight written: 8 + 4 + 4 + 2
    "adafactor": OptimizerCost(4.0, 18.0, 14.0),
    # read grad, master, m; write master, m and the 16-bit weight: 12 + 8 + 2
    "lion": OptimizerCost(8.0, 22.0, 8.0),
    # read grad 4, master 4, m 1, v 1; write master 4, m 1, v 1, weight 2 (block scales
    # negligible); dequantise and requantise both moments
    "adam8bit": OptimizerCost(6.0 + 8.0 / 2048, 18.0, 20.0),
    # momentum SGD: read grad, master, momentum; write master, momentum, weight
    "sgd": OptimizerCost(8.0, 22.0, 4.0),
}
"""Cost per parameter of every optimizer ``training.optimizer`` accepts."""


def optimizer_op(num_params_local: float, optimizer: str) -> Op:
    """The optimizer update of ``num_params_local`` parameters on one rank (memory-bound).

    Examples:
        >>> optimizer_op(1e9, "adam").bytes_accessed / 1e9
        30.0
    """
    cost = OPTIMIZERS[optimizer]
    return memory_op(
        "optimizer_step",
        "optimizer",
        "optimizer",
        num_params_local * cost.step_bytes,
        -1,
        flops=cost.step_flops * num_params_local,
    )
