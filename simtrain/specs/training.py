"""TrainingSpec and SimulationSpec: what the job computes and how simtrain models it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simtrain.specs.base import Spec
from simtrain.specs.calibration import AttentionKernel, ExecutionMode

Dtype = Literal["bf16", "fp16", "fp8"]


class TrainingSpec(Spec):
    """Numerics and length of the training run."""

    dtype: Dtype = "bf16"
    """Compute dtype of matrix multiplications (sets the peak FLOP/s used)."""
    optimizer: Literal["adam", "sgd"] = "adam"
    """Optimizer: adam (mixed precision, 16 bytes of model state per parameter) or sgd."""
    grad_reduce_dtype: Literal["fp32", "bf16"] = "fp32"
    """Dtype of the data-parallel gradient reduction (Megatron reduces fp32 main grads)."""
    attention_kernel: AttentionKernel = "flash"
    """Attention implementation: flash (FlashAttention-2), flash3 (FlashAttention-3, Hopper),
    cudnn (cuDNN fused attention, as Transformer Engine runs it), or unfused (batched GEMMs
    plus softmax and dropout kernels, as Megatron-LM ran in 2021)."""
    execution_mode: ExecutionMode = "eager"
    """How the framework issues kernels: eager (PyTorch dispatches every kernel from Python),
    cuda_graphs (captured graphs replayed with one launch) or compiled (XLA / whole-graph
    compilation). Sets the host cost of issuing each kernel."""
    total_tokens: float = Field(default=0.0, ge=0)
    """Tokens of the whole run, for run-level time and cost (0 = report one step only)."""


class SimulationSpec(Spec):
    """Modelling choices: which network model, how much detail, symmetry reduction."""

    network_model: Literal["alpha_beta", "flow"] = "alpha_beta"
    """alpha_beta (closed-form per collective, fastest) or flow (max-min fair sharing)."""
    collective_algorithm: str = "auto"
    """Collective algorithm (ring, tree, hierarchical, ...), or auto to pick the fastest."""
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
