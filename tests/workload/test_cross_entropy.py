"""The loss's memory traffic follows the stack's cross-entropy (docs/references/frameworks.md
§Megatron's vocabulary-parallel cross-entropy)."""

import pytest

from simtrain.specs.model import ModelSpec
from simtrain.workload.shard import Shard
from simtrain.workload.transformer import (
    VOCAB_PARALLEL_CE_BWD_BYTES,
    VOCAB_PARALLEL_CE_FWD_BYTES,
    head_ops,
)

MODEL = ModelSpec(num_layers=2, hidden_size=256, num_heads=4, vocab_size=1024, seq_length=128)


def _loss_bytes(shard: Shard) -> tuple[float, float]:
    ops = {op.name: op for op in head_ops(MODEL, shard)}
    return ops["cross_entropy"].bytes_accessed, ops["cross_entropy_bwd"].bytes_accessed


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_megatron_cross_entropy_counts_its_passes_over_the_rank_logits(tp):
    logits = 2 * MODEL.seq_length * MODEL.vocab_size // tp  # micro-batch 2
    fwd, bwd = _loss_bytes(Shard(2, tp=tp, cross_entropy="vocab_parallel_fp32"))
    # upcast 6, max 4, shift 8, exp 8, sum 4, divide 8; scale 8, cast back 6
    assert VOCAB_PARALLEL_CE_FWD_BYTES == 6 + 4 + 8 + 8 + 4 + 8
    assert VOCAB_PARALLEL_CE_BWD_BYTES == 8 + 6
    assert (fwd, bwd) == (logits * 38, logits * 14)
    fused = _loss_bytes(Shard(2, tp=tp))
    assert fused == (logits * 12, logits * 12)
