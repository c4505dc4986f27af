"""What a software stack keeps in memory beyond model states and Korthikanti's activations.

Each mechanism is driven by a framework-profile field (simtrain/catalog/frameworks/*.yaml):
FSDP2's unsharded gradients under pipelining, FP8 all-gathers, PyTorch TP's gathered linear
inputs, the vocabulary-parallel loss and the pipeline engine's stage outputs.
"""

import itertools

import pytest

from simtrain.catalog.frameworks import get_framework
from simtrain.memory import estimate_memory, estimate_stage_memory, layer_activation_bytes
from simtrain.memory.activations import peak_inflight
from simtrain.memory.model_states import (
    fp8_copy_bytes,
    rank_params,
    rank_stages,
    unsharded_grad_bytes,
)
from simtrain.parallel.overlap import step_actions
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
    assert output_layer("pytorch-fsdp2") - output_layer("megatron-core") == pytest.approx(expected)


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
    not fit in that block) on the rank of the loss only; nothing for Megatron's fused loss."""
    spec = pipelined("parallel.pp=1", "parallel.global_batch_size=8")
    m = spec.model
    logits = m.seq_length * m.vocab_size / 2  # micro-batch 1, tp = 2
    assert estimate_memory(spec, 80e9).breakdown_bytes["overhead.loss_cache"] == pytest.approx(
        2 * logits
    )
    megatron = estimate_stage_memory(pipelined(framework="megatron-core"), 80e9, 1)
    assert "overhead.loss_cache" not in megatron.breakdown_bytes


def test_the_pipeline_engine_keeps_every_microbatchs_logits_on_the_last_stage():
    """torch.distributed.pipelining's output_chunks: 2 bytes per logit per microbatch of the
    step on the last stage, instead of the freed logits' cached block."""
    spec = pipelined()
    m = spec.model
    logits = m.seq_length * m.vocab_size / 2  # micro-batch 1, tp = 2
    last = estimate_stage_memory(spec, 80e9, 1).breakdown_bytes
    assert last["activations.pipeline_outputs"] == pytest.approx(2 * 8 * logits)
    assert "overhead.loss_cache" not in last
    first = estimate_stage_memory(spec, 80e9, 0).breakdown_bytes
    assert "activations.pipeline_outputs" not in first
    megatron = estimate_stage_memory(pipelined(framework="megatron-core"), 80e9, 1)
    assert "activations.pipeline_outputs" not in megatron.breakdown_bytes


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved"])
def test_the_pipeline_engine_keeps_a_receive_buffer_per_microbatch(schedule):
    """Closed form: per model stage of the rank, m - (its microbatches in flight) activation
    buffers unless it is the first stage and m gradient buffers unless it is the last, each
    s·b·h/t; Megatron's four per-transfer buffers instead."""
    vpp = ("parallel.vpp=2",) if schedule == "interleaved" else ()
    spec = pipelined(f"parallel.pipeline_schedule={schedule}", *vpp)
    m, p = spec.model, spec.parallel
    boundary = 2 * m.seq_length * m.hidden_size / 2  # micro-batch 1, SP over tp = 2
    last = p.pp * p.vpp - 1
    schedule_actions = step_actions(p)
    for rank in range(p.pp):
        expected = 0
        for stage in rank_stages(p.pp, p.vpp, p.pipeline_schedule, rank):
            if stage:
                expected += p.num_microbatches - peak_inflight(schedule_actions[rank], {stage})
            if stage != last:
                expected += p.num_microbatches
        est = estimate_stage_memory(spec, 80e9, rank).breakdown_bytes
        assert est["buffers.pp_recv"] == pytest.approx(expected * boundary)
        assert "buffers.pp_p2p" not in est
    megatron = estimate_stage_memory(pipelined(framework="megatron-core"), 80e9, 0)
    assert megatron.breakdown_bytes["buffers.pp_p2p"] == pytest.approx(4 * boundary)


def zero3(*overrides: str, framework: str = "torchtitan", vocab_size: int = 1024):
    """LLAMA_TINY on dp = 16 under ZeRO-3 (FSDP), one sequence per GPU."""
    return make_experiment(
        f"training.framework={framework}",
        "parallel.zero_stage=3",
        "parallel.micro_batch_size=1",
        "parallel.global_batch_size=16",
        *overrides,
        model={**LLAMA_TINY, "vocab_size": vocab_size},
    )


def test_fsdp2_keeps_the_root_unit_gathered_through_the_step():
    """The 16-bit embedding, final norm and LM head (untied): 2·(2·V·h + h) bytes on top of
    the gathered blocks; FSDP1 reshards its units like a block."""
    spec = zero3()
    m = spec.model
    root = 2 * (2 * m.vocab_size * m.hidden_size + m.hidden_size)
    assert rank_params(spec, 0).outside_layers == pytest.approx(root / 2)
    est = estimate_memory(spec, 80e9).breakdown_bytes
    assert est["buffers.zero3_root"] == pytest.approx(root)
    fsdp1 = estimate_memory(zero3(framework="pytorch-fsdp1"), 80e9).breakdown_bytes
    assert "buffers.zero3_root" not in fsdp1
    # under ZeRO-2 every parameter is gathered anyway
    assert (
        "buffers.zero3_root"
        not in estimate_memory(zero3("parallel.zero_stage=2"), 80e9).breakdown_bytes
    )


def test_fsdp2_holds_two_flat_all_gather_buffers_apart_from_the_parameters():
    """Two gathered units on the all-gather stream besides the gathered layer itself, under
    ZeRO-3 and under ZeRO-2 gathered in the forward (FSDP2 under pipelining)."""
    spec = zero3()
    unit = 2 * rank_params(spec, 0).largest_layer
    est = estimate_memory(spec, 80e9).breakdown_bytes
    assert est["buffers.gather_outputs"] == pytest.approx(2 * unit)
    assert est["buffers.zero3_gather"] == pytest.approx(unit)
    piped = estimate_stage_memory(pipelined(), 80e9, 0)
    assert piped.breakdown_bytes["buffers.gather_outputs"] == pytest.approx(
        2 * 2 * rank_params(pipelined(), 0).largest_layer
    )
    fsdp1 = estimate_memory(zero3(framework="pytorch-fsdp1"), 80e9).breakdown_bytes
    assert "buffers.gather_outputs" not in fsdp1


def test_the_loss_phase_leaves_no_room_for_the_backward_only_buffers():
    """The loss phase ends before the first layer's backward: the prefetched gather and the
    gradient bucket count only beyond it (here, with a 64K vocabulary, the loss phase is far
    larger), while a rank without a loss keeps them."""
    spec = zero3("parallel.recompute=full", vocab_size=65536)
    est = estimate_memory(spec, 80e9).breakdown_bytes
    assert "activations.output_layer" in est
    for key in ("buffers.zero3_prefetch", "buffers.dp_bucket", "activations.recompute_working"):
        assert key not in est
    first = estimate_stage_memory(pipelined("parallel.recompute=full"), 80e9, 0).breakdown_bytes
    assert "buffers.dp_bucket" in first
    assert "activations.recompute_working" in first


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


def test_fsdp2_shards_the_fp32_master_and_keeps_fp32_sharded_gradients():
    """Closed form: no 16-bit shard under ZeRO-3 and 4 bytes per sharded gradient under
    ZeRO-2/3, over the shard group; the optimizer's 12 bytes (master and moments) as before."""
    for zero in (2, 3):
        spec = zero3(f"parallel.zero_stage={zero}")
        params = rank_params(spec, 0)
        n = spec.parallel.dp
        states = estimate_memory(spec, 80e9).breakdown_bytes
        assert states["gradients"] == pytest.approx(4 * params.dense / n)
        assert states["optimizer"] == pytest.approx(12 * params.dense / n)
        assert states["weights"] == pytest.approx(0 if zero == 3 else 2 * params.dense)
    fsdp1 = estimate_memory(zero3(framework="pytorch-fsdp1"), 80e9).breakdown_bytes
    params = rank_params(zero3(), 0)
    assert fsdp1["weights"] == pytest.approx(2 * params.dense / 16)
    assert fsdp1["gradients"] == pytest.approx(2 * params.dense / 16)


def test_fsdp2_materialises_a_units_gradients_before_reducing_them():
    """The unit's 16-bit gradients (2 bytes per parameter of the largest layer), and, when
    each backward reduce-scatters, its fp32 reduce-scatter input as the gradient bucket;
    under a deferred pipeline reduction the bucket stays the profile's."""
    spec = zero3("parallel.recompute=full")  # small vocabulary: the backward phase dominates
    unit = rank_params(spec, 0).largest_layer
    est = estimate_memory(spec, 80e9).breakdown_bytes
    assert est["buffers.unit_grads"] == pytest.approx(2 * unit)
    assert est["buffers.dp_bucket"] == pytest.approx(4 * unit)
    piped = pipelined()
    first = estimate_stage_memory(piped, 80e9, 0).breakdown_bytes
    assert first["buffers.unit_grads"] == pytest.approx(2 * rank_params(piped, 0).largest_layer)
    assert first["buffers.dp_bucket"] == pytest.approx(piped.parallel.grad_bucket_size_bytes)
    megatron = estimate_memory(zero3(framework="megatron-core"), 80e9).breakdown_bytes
    assert "buffers.unit_grads" not in megatron


def test_a_compiled_loss_keeps_16_bit_logits_and_their_gradient_only():
    """torchtitan 2025 compiles the loss with the blocks: 4 bytes per logit at its peak (the
    16-bit logits and gradient) and no cached block, where the 2024 stack's eager loss keeps
    12 bytes (fp32 log-softmax and gradients) plus the freed 16-bit block; eager runs of
    either stack keep the eager loss."""

    def output_layer(framework: str, mode: str) -> tuple[float, float]:
        spec = pipelined(
            "parallel.pp=1", "parallel.tp=1", "parallel.sp=false",
            "parallel.global_batch_size=16", f"training.execution_mode={mode}",
            framework=framework,
        )  # fmt: skip
        items = estimate_memory(spec, 80e9).breakdown_bytes
        return items["activations.output_layer"], items.get("overhead.loss_cache", 0.0)

    m = pipelined().model
    logits = m.seq_length * m.vocab_size  # micro-batch 1, tp = 1
    eager_layer, eager_cache = output_layer("torchtitan", "compiled")
    compiled_layer, compiled_cache = output_layer("torchtitan-2025", "compiled")
    assert eager_layer - compiled_layer == pytest.approx((12 - 4) * logits)
    assert eager_cache == pytest.approx(2 * logits) and compiled_cache == 0.0
    assert output_layer("torchtitan-2025", "eager") == (eager_layer, eager_cache)
