"""simtrain.memory layer: per-rank memory (model states, activations, buffers) and OOM verdicts.

Pure functions of the experiment spec and the pipeline schedule (DESIGN.md): no engine, no I/O.
"""

from simtrain.memory.activations import layer_activation_bytes, peak_inflight
from simtrain.memory.estimate import MemoryEstimate, estimate_memory, estimate_stage_memory
from simtrain.memory.model_states import (
    ModelStateBytes,
    RankParams,
    model_state_bytes,
    rank_model_states,
    rank_params,
)
from simtrain.memory.timeline import memory_timeline

__all__ = [
    "MemoryEstimate",
    "ModelStateBytes",
    "RankParams",
    "estimate_memory",
    "estimate_stage_memory",
    "layer_activation_bytes",
    "memory_timeline",
    "model_state_bytes",
    "peak_inflight",
    "rank_model_states",
    "rank_params",
]
