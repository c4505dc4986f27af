"""What a software stack keeps in memory beyond model states and Korthikanti's activations.

Each mechanism is driven by a framework-profile field (simtrain/catalog/frameworks/*.yaml):
FSDP2's unsharded gradients under pipelining, FP8 all-gathers, PyTorch TP's gathered linear
inputs, the vocabulary-parallel loss and the pipeline engine's stage outputs.
"""

import itertools

import pytest

from simtrain.catalog.frameworks import get_framework
from simtrain.memory import estimate_memory, estimate_stage_memory, layer_activation_bytes
from simtrain.memory.model_states import fp8_copy_bytes, rank_params, unsharded_grad_bytes
from tests.conftest import LLAMA_TINY, make_experiment


def pipelined(*overrides: str, framework: str = "torchtitan"):
    """LLAMA_TINY (4 layers) on pp = 2, tp = 2 with SP, dp = 4, ZeRO-2, 8 microbatches."""
    return make_experiment(
        f"training.framework={framework}",
        "parallel.pp=2",
        "parallel.tp=2",
        "parallel.sp=true",
        "parallel.zero_stage=2",
        "parallel.micro_batch_size=1",
        "parallel.global_batch_size=32",
        *overrides,
        model={**LLAMA_TINY, "num_layers": 4},
    )


def test_fsdp2_pipeline_keeps_unsharded_gradients_in_the_reduce_dtype():
    """Closed form: 4 bytes (fp32 reduce dtype) per parameter the rank holds, for the step."""
    spec = pipelined()
    assert spec.parallel.num_microbatches == 8
    for rank in range(2):
        params = rank_params(spec, rank)
        expected = 4 * (params.dense + params.experts)
        assert unsharded_grad_bytes(spec, rank) == pytest.approx(expected, rel=1e-12)
        est = estimate_stage_memory(spec, 80e9, rank)
        assert est.breakdown_bytes["gradients.unsharded_accumulation"] == pytest.approx(expected)
        assert est.gradients_bytes == pytest.approx(expected + est.breakdown_bytes["gradients"])
    # in 16 bits when the gradients are reduced in bf16
    bf16 = pipelined("training.grad_reduce_dtype=bf16")
    params = rank_params(bf16, 0)
    assert unsharded_grad_bytes(bf16, 0) == pytest.approx(2 * (params.dense + params.experts))


@pytest.mark.parametrize(
    "overrides",
    [
        ("parallel.global_batch_size=4",),  # one microbatch: reduced in its only backward
        ("parallel.pp=1", "parallel.global_batch_size=8"),  # no pipeline engine
    ],
)
def test_no_unsharded_accumulation_without_a_deferred_reduction(overrides):
    spec = pipelined(*overrides)
    assert unsharded_grad_bytes(spec, 0) == 0
    assert "gradients.unsharded_accumulation" not in estimate_memory(spec, 80e9).breakdown_bytes


def test_megatron_reduces_its_own_gradient_buffer():
    assert not get_framework("megatron-core").sharding.pipeline_defers_grad_reduce
    assert unsharded_grad_bytes(pipelined(framework="megatron-core"), 0) == 0


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_memory_is_monotone_in_microbatches_in_flight(schedule):
    """More microbatches of a step can only add in-flight activations (and, from two on, the
    deferred unsharded gradients): stage 0's peak never falls as the count grows."""
    peaks, inflight = [], []
    for m in range(1, 9):
        spec = pipelined(
            f"parallel.global_batch_size={4 * m}", f"parallel.pipeline_schedule={schedule}"
        )
        est = estimate_stage_memory(spec, 80e9, 0)
        peaks.append(est.peak_bytes)
        inflight.append(est.inflight_microbatches)
    assert all(a <= b for a, b in itertools.pairwise(peaks))
    assert all(a <= b for a, b in itertools.pairwise(inflight))
    assert peaks[-1] > peaks[0]


def test_the_pipeline_engine_keeps_each_inflight_stage_output():
    """torch.distributed.pipelining keeps the output of every in-flight microbatch; Megatron
    frees it once sent. One s·b·h/t tensor per microbatch in flight on a sending stage."""
    spec = pipelined()
    m = spec.model
    est = estimate_stage_memory(spec, 80e9, 0)
    sbh = m.seq_length * m.hidden_size  # micro-batch 1
    expected = 2 * sbh / 2 * est.inflight_microbatches
    assert est.breakdown_bytes["activations.stage_outputs"] == pytest.approx(expected)
    assert "activations.stage_outputs" not in estimate_stage_memory(spec, 80e9, 1).breakdown_bytes
    megatron = estimate_stage_memory(pipelined(framework="megatron-core"), 80e9, 0)
    assert "activations.stage_outputs" not in megatron.breakdown_bytes


def test_pytorch_tp_keeps_the_gathered_linear_inputs():
    """Under SP, DTensor TP saves the whole-sequence inputs of the column-parallel linears:
    2 tensors of s·b·h instead of s·b·h/t (Korthikanti §4.2.2 keeps the shard)."""
    spec = pipelined()
    m, t = spec.model, 2
    sbh = m.seq_length * m.hidden_size
    sharded = layer_activation_bytes(m, 1, tp=t, sp=True)
    gathered = layer_activation_bytes(m, 1, tp=t, sp=True, gathered_inputs=True)
    assert gathered - sharded == pytest.approx(2 * 2 * sbh * (1 - 1 / t))
    # without SP the inputs are whole anyway
    assert layer_activation_bytes(m, 1, tp=t, gathered_inputs=True) == layer_activation_bytes(
        m, 1, tp=t
    )


def test_the_vocabulary_parallel_loss_keeps_the_stacks_bytes_per_logit():
    """PyTorch's loss_parallel holds 16 bytes per logit at its fused backward (Megatron 4)."""

    def output_layer(framework: str) -> float:
        spec = pipelined(framework=framework)
        return estimate_stage_memory(spec, 80e9, 1).breakdown_bytes["activations.output_layer"]

    spec = pipelined()
    m = spec.model
    logits = m.seq_length * m.vocab_size / 2  # micro-batch 1, vocabulary split over tp = 2
    sbh = m.seq_length * m.hidden_size
    # 12 more bytes per logit, and the LM head's input whole (s·b·h) rather than s·b·h/2
    expected = 12 * logits + 2 * sbh * (1 - 1 / 2)
    assert output_layer("torchtitan") - output_layer("megatron-core") == pytest.approx(expected)


def test_fp8_all_gather_holds_gathered_linear_weights_in_one_byte():
    """torchtitan gathers FP8 weights: under ZeRO-2 the kept unsharded linear weights take
    1 byte each, and no separate 8-bit copies exist; plain FSDP2 gathers 16 bits."""
    titan = estimate_stage_memory(pipelined("training.dtype=fp8"), 80e9, 0)
    plain = pipelined("training.dtype=fp8", framework="pytorch-fsdp2")
    fsdp2 = estimate_stage_memory(plain, 80e9, 0)
    params = rank_params(pipelined(), 0)
    assert fsdp2.weights_bytes - titan.weights_bytes == pytest.approx(params.linear_weights)
    assert titan.breakdown_bytes["weights"] == pytest.approx(
        2 * (params.dense - params.linear_weights) + params.linear_weights
    )
    # torchao casts at each use: no kept copies; Transformer Engine keeps two per weight
    assert fp8_copy_bytes(pipelined("training.dtype=fp8", framework="pytorch-fsdp2"), 0) == 0
    assert fp8_copy_bytes(pipelined("training.dtype=fp8", framework="megatron-core"), 0) > 0


def test_torchao_fp8_saves_16_bit_linear_inputs():
    """Float8Linear saves its high-precision input: FP8 changes no saved activation under
    torchtitan, while Transformer Engine keeps 8-bit inputs."""

    def layers(framework: str, dtype: str) -> float:
        spec = pipelined(f"training.dtype={dtype}", "parallel.recompute=none", framework=framework)
        return estimate_stage_memory(spec, 80e9, 0).breakdown_bytes["activations.layers"]

    assert layers("torchtitan", "fp8") == layers("torchtitan", "bf16")
    assert layers("megatron-core", "fp8") < layers("megatron-core", "bf16")


def test_the_allocator_keeps_the_freed_16_bit_logits_block_at_the_loss():
    """2 bytes per logit (the 16-bit logits freed before the backward, whose fp32 tensors do
    not fit in that block) on the last stage only; nothing for Megatron's fused loss."""
    spec = pipelined()
    m = spec.model
    logits = m.seq_length * m.vocab_size / 2  # micro-batch 1, tp = 2
    last = estimate_stage_memory(spec, 80e9, 1).breakdown_bytes
    assert last["overhead.loss_cache"] == pytest.approx(2 * logits)
    assert "overhead.loss_cache" not in estimate_stage_memory(spec, 80e9, 0).breakdown_bytes
    megatron = estimate_stage_memory(pipelined(framework="megatron-core"), 80e9, 1)
    assert "overhead.loss_cache" not in megatron.breakdown_bytes


@pytest.mark.parametrize("framework", ["torchtitan", "megatron-core"])
def test_the_loss_phase_and_a_layer_recompute_never_add_up(framework):
    """Under full recomputation the last stage's peak holds the larger of the loss phase and
    one layer's recomputation: their sum would count tensors that never coexist."""
    spec = pipelined("parallel.recompute=full", framework=framework)
    last = estimate_stage_memory(spec, 80e9, 1)
    first = estimate_stage_memory(spec, 80e9, 0)
    working = first.breakdown_bytes["activations.recompute_working"]  # no loss on stage 0
    loss_phase = last.breakdown_bytes["activations.output_layer"] + last.breakdown_bytes.get(
        "overhead.loss_cache", 0.0
    )
    excess = last.breakdown_bytes.get("activations.recompute_working", 0.0)
    assert excess == pytest.approx(max(0.0, working - loss_phase))
    assert loss_phase + excess == pytest.approx(max(loss_phase, working))
