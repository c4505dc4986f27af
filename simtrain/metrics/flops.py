"""Step-level FLOP accounting: model FLOPs (MFU), hardware FLOPs (HFU), and named conventions.

- *Model FLOPs* count the work the model needs, once: forward and backward matmuls of every
  sequence (:func:`simtrain.workload.counts.model_flops_per_sequence`). MFU divides them by
  the step time and the dense peak of all devices (PaLM's definition).
- *Hardware FLOPs* add activation recomputation. Megatron-LM's reported "TF/s per GPU"
  (Narayanan et al. 2021, Eq. 3) is hardware FLOPs per second per GPU, so ``tflops_per_gpu``
  in simtrain's report follows that convention; HFU divides it by the peak.

Papers count model FLOPs in different ways, so the same run has different MFUs. The report
gives the model FLOPs per token under each named convention (``docs/references/models.md``
§FLOP conventions), and ``expected.flops_convention`` compares a published figure in the
convention its source used:

=============  ==========================================================================
convention     model FLOPs per token
=============  ==========================================================================
``simtrain``   6·(matmul weights a token uses, LM head included) + 6·L·keys·H·(d_qk+d_v):
               attention without causal savings (keys = s, or the window)
``megatron``   Narayanan et al. 2021, Eq. 3: ``simtrain`` plus one more forward of every
               layer (full recomputation counted whatever the run does); for GPT
               96·s·l·h²·(1 + s/6h + V/16lh) per sequence
``palm``       Chowdhery et al. 2022, App. B: 6·N + 12·L·H·Q·T with N all (active)
               parameters, H heads of dimension Q, T the sequence length
``causal``     MaxText: ``simtrain`` with half the attention term (the causal mask; a
               window counts min(s, w)/2 keys)
``noncausal``  LLM Foundry: 6·N + 12·L·d_model·s (N the active parameters, without an
               untied input embedding, a lookup table)
=============  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.parallel.stages import recomputed_layer_count
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.model import ModelSpec
from simtrain.workload.counts import (
    attention_fwd_flops_per_query,
    count_parameters,
    matmul_params_per_token,
    model_flops_per_sequence,
    recompute_flops_per_sequence,
)

FLOPS_CONVENTIONS = ("simtrain", "megatron", "palm", "causal", "noncausal")
"""Named model-FLOP conventions, in the order the report lists them."""


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one optimizer step over the whole job.

    Attributes:
        model: model FLOPs (no recomputation).
        hardware: model FLOPs plus recomputation.
    """

    model: float
    hardware: float


def step_flops(spec: ExperimentSpec) -> StepFlops:
    """Model and hardware FLOPs of one step of ``spec``."""
    sequences = spec.parallel.global_batch_size
    model = sequences * model_flops_per_sequence(spec.model)
    p = spec.parallel
    extra = sequences * recompute_flops_per_sequence(spec.model, p.recompute, p.selective_modules)
    if p.recompute == "full" and p.recompute_layer_fraction < 1:
        layers = spec.model.num_layers
        extra *= recomputed_layer_count(layers, p.pp * p.vpp, p.recompute_layer_fraction) / layers
    return StepFlops(model=model, hardware=model + extra)


def model_flops_per_token(model: ModelSpec, convention: str = "simtrain") -> float:
    """Model FLOPs (forward and backward) per trained token under ``convention``.

    Examples:
        PaLM 540B's 46.2 % MFU at 238.3K tokens/s on 6,144 TPU v4 chips of 275 TF/s
        (Chowdhery et al. 2022, Table 3) uses the palm convention:

        >>> m = ModelSpec(num_layers=118, hidden_size=18432, num_heads=48, num_kv_heads=1,
        ...               head_dim=256, ffn_hidden_size=73728, vocab_size=256000,
        ...               seq_length=2048, activation="swiglu", use_bias=False,
        ...               norm_bias=False, position_embedding="rope", block="parallel",
        ...               tied_embeddings=True)
        >>> round(model_flops_per_token(m, "palm") * 238.3e3 / (6144 * 275e12), 3)
        0.462
    """
    s, layers = model.seq_length, model.num_layers
    if convention == "simtrain":
        return model_flops_per_sequence(model) / s
    if convention == "megatron":
        full = recompute_flops_per_sequence(model, "full")
        return (model_flops_per_sequence(model) + full) / s
    if convention == "causal":
        keys = model.attended_keys / 2
        attention = 3 * layers * attention_fwd_flops_per_query(model, keys)
        return 6 * matmul_params_per_token(model) + attention
    active = count_parameters(model).active
    if convention == "palm":
        return 6 * active + 3 * layers * attention_fwd_flops_per_query(model, s)
    if convention == "noncausal":
        lookup = 0 if model.tied_embeddings else model.vocab_size * model.hidden_size
        return 6 * (active - lookup) + 12 * layers * model.hidden_size * s
    valid = ", ".join(FLOPS_CONVENTIONS)
    raise ValueError(f"flops convention must be one of {valid} (got {convention!r})")


def flops_per_token_by_convention(model: ModelSpec) -> dict[str, float]:
    """Model FLOPs per token under every named convention."""
    return {name: model_flops_per_token(model, name) for name in FLOPS_CONVENTIONS}
