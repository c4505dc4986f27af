"""TrainingSpec and SimulationSpec: what the job computes and how simtrain models it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simtrain.specs.base import Spec

Dtype = Literal["bf16", "fp16", "fp8"]


class TrainingSpec(Spec):
    """Numerics and length of the training run."""

    dtype: Dtype = "bf16"
    """Compute dtype of matrix multiplications (sets the peak FLOP/s used)."""
    optimizer: Literal["adam", "sgd"] = "adam"
    """Optimizer: adam (mixed precision, 16 bytes of model state per parameter) or sgd."""
    grad_reduce_dtype: Literal["fp32", "bf16"] = "fp32"
    """Dtype of the data-parallel gradient reduction (Megatron reduces fp32 main grads)."""
    attention_kernel: Literal["flash", "unfused"] = "flash"
    """Attention implementation: flash (fused, causal blocks skipped) or unfused (batched
    GEMMs plus softmax and dropout kernels, as Megatron-LM ran in 2021)."""
    total_tokens: float = Field(default=0.0, ge=0)
    """Tokens of the whole run, for run-level time and cost (0 = report one step only)."""


class SimulationSpec(Spec):
    """Modelling choices: which network model, how much detail, symmetry reduction."""

    network_model: Literal["nccl", "flow", "alpha_beta"] = "nccl"
    """nccl (closed form on the topology's effective bandwidths, NCCL's algorithm and
    protocol choice; fast), flow (flows share links max-min fairly: contention, ECMP) or
    alpha_beta (a textbook ring on catalog bandwidths, for teaching)."""
    collective_algorithm: str = "auto"
    """Collective algorithm (ring, tree, nvls, sharp, hierarchical, ...), or auto to pick the
    fastest as NCCL's tuner does."""
    full: bool = False
    """Simulate every rank instead of one per symmetry class (for checking)."""


class ExpectedSpec(Spec):
    """A published figure the experiment should reproduce, checked by ``simtrain validate``."""

    metric: Literal["tflops_per_gpu", "step_time_s", "mfu", "hfu", "tokens_per_s"]
    """Report key to compare."""
    value: float = Field(gt=0)
    """Published value of the metric."""
    tolerance: float = Field(default=0.10, gt=0, lt=1)
    """Allowed relative error, e.g. 0.1 for ±10 %."""
    source: str
    """Where the published value comes from (paper, table, row)."""
    note: str = ""
    """Caveats, e.g. a row expected to fail until a feature lands."""
