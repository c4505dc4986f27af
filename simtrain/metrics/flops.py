"""Step-level FLOP accounting: model FLOPs (MFU) and hardware FLOPs (HFU, Megatron TF/s).

- *Model FLOPs* count the work the model needs, once: forward and backward matmuls of every
  sequence (:func:`simtrain.workload.counts.model_flops_per_sequence`). MFU divides them by
  the step time and the dense peak of all devices (PaLM's definition).
- *Hardware FLOPs* add activation recomputation. Megatron-LM's reported "TF/s per GPU"
  (Narayanan et al. 2021, Eq. 3) is hardware FLOPs per second per GPU, so ``tflops_per_gpu``
  in simtrain's report follows that convention; HFU divides it by the peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.parallel.stages import recomputed_layer_count
from simtrain.specs.experiment import ExperimentSpec
from simtrain.workload.counts import model_flops_per_sequence, recompute_flops_per_sequence


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
    extra = sequences * recompute_flops_per_sequence(spec.model, p.recompute)
    if p.recompute == "full" and p.recompute_layer_fraction < 1:
        layers = spec.model.num_layers
        extra *= recomputed_layer_count(layers, p.pp * p.vpp, p.recompute_layer_fraction) / layers
    return StepFlops(model=model, hardware=model + extra)
