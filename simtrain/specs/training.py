"""TrainingSpec and SimulationSpec: what the job computes and how simtrain models it."""

from __future__ import annotations

import warnings
from typing import Literal

from pydantic import model_validator

from simtrain.specs.base import Spec, bounded
from simtrain.specs.framework import (
    DEFAULT_FRAMEWORK,
    AttentionKernel,
    ExecutionMode,
    GradReduceDtype,
)
from simtrain.specs.variability import VariabilitySpec

Dtype = Literal["bf16", "fp16", "fp8", "mxfp8"]
Optimizer = Literal["adam", "adamw", "adafactor", "lion", "adam8bit", "sgd"]
FlopsConvention = Literal["simtrain", "megatron", "palm", "causal", "noncausal"]


class TrainingSpec(Spec):
    """Numerics, software stack and length of the training run.

    Fields that default to None take their value from the framework profile named by
    ``framework`` when the experiment is validated; an experiment may still set them.
    """

    framework: str = DEFAULT_FRAMEWORK
    """Software stack profile (``simtrain list frameworks``): sets the defaults below marked
    'from the framework profile' and how collectives, overlap and memory behave."""
    dtype: Dtype = "bf16"
    """Compute dtype of the linear layers (sets the peak FLOP/s used): bf16, fp16, fp8
    (TransformerEngine recipe: linear layers in FP8, attention and LM head in BF16) or mxfp8
    (the same with Blackwell's block-scaled MXFP8)."""
    fp8_recipe: Literal["delayed", "current", "blockwise"] | None = None
    """FP8 scaling recipe: delayed (per-tensor, amax history; the default), current
    (per-tensor, an amax pass before each cast) or blockwise (DeepSeek-V3's 1x128/128x128
    tiles). Only with dtype fp8; mxfp8 has its own 32-element block scaling."""
    activation_fp8_input_store: bool = False
    """Keep the input of the SwiGLU activation (the gate and up outputs) in FP8 for the
    backward, 1 byte per element instead of 2, cast back before its gradient
    (Megatron-Core's ``--activation-func-fp8-input-store``; DeepSeek-V3 §3.3.2 caches the
    MoE SwiGLU inputs in FP8). Only with a swiglu model."""
    optimizer: Optimizer = "adam"
    """Optimizer: adam or adamw (12 bytes of FP32 state per parameter), adafactor (4),
    lion (8), adam8bit (about 6) or sgd with momentum (8); plus the 16-bit weight and
    gradient."""
    grad_reduce_dtype: GradReduceDtype | None = None
    """Dtype of the data-parallel gradient reduction (default from the framework profile;
    Megatron-Core reduces fp32 main grads)."""
    attention_kernel: AttentionKernel | None = None
    """Attention implementation: flash (FlashAttention-2), flash1 (FlashAttention v1),
    flash3 (FlashAttention-3, Hopper),
    cudnn (cuDNN fused attention, as Transformer Engine runs it), unfused (batched GEMMs
    plus Megatron's fused softmax and dropout kernels, as Megatron-LM ran in 2021) or torch
    (plain PyTorch attention: separate mask, softmax and dropout kernels on the scores);
    default from the framework profile."""
    execution_mode: ExecutionMode | None = None
    """How kernels reach the GPU: eager (issued one by one from Python), cuda_graphs
    (captured and replayed) or compiled (XLA, torch.compile); default from the framework
    profile."""
    total_tokens: float = bounded(
        0.0, ge=0, le=1e16, why="600x the largest published run (Llama 3: 15.6T tokens)"
    )
    """Tokens of the whole run, for run-level time and cost (0 = report one step only)."""

    @model_validator(mode="after")
    def _check_fp8(self) -> TrainingSpec:
        if self.fp8_recipe is not None and self.dtype != "fp8":
            warnings.warn(
                f"training.fp8_recipe has no effect with training.dtype={self.dtype} "
                "(only with fp8)",
                UserWarning,
                stacklevel=2,
            )
        return self


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
    variability: VariabilitySpec = VariabilitySpec()
    """Spread of rank speeds and fail-slow stragglers within a step (seeded)."""


class ExpectedSpec(Spec):
    """A published figure the experiment should reproduce, checked by ``simtrain validate``."""

    metric: Literal[
        "tflops_per_gpu", "model_tflops_per_gpu", "step_time_s", "mfu", "hfu", "tokens_per_s"
    ]
    """Report key to compare."""
    flops_convention: FlopsConvention = "simtrain"
    """How the source counted model FLOPs, for model_tflops_per_gpu and mfu: simtrain,
    megatron (Eq. 3, full recomputation counted), palm (6N + 12·L·H·Q·T), causal (MaxText)
    or noncausal (LLM Foundry)."""
    value: float = bounded(gt=0, le=1e18, why="above any metric simtrain reports")
    """Published value of the metric."""
    tolerance: float = bounded(0.10, gt=0, lt=1, why="a relative error of 100% checks nothing")
    """Allowed relative error, e.g. 0.1 for ±10 %."""
    source: str
    """Where the published value comes from (paper, table, row)."""
    note: str = ""
    """Caveats, e.g. a row expected to fail until a feature lands."""

    @model_validator(mode="after")
    def _check_convention(self) -> ExpectedSpec:
        if self.flops_convention != "simtrain" and self.metric not in (
            "model_tflops_per_gpu",
            "mfu",
        ):
            raise ValueError(
                f"expected.flops_convention={self.flops_convention} needs expected.metric "
                f"model_tflops_per_gpu or mfu (got {self.metric})"
            )
        return self
