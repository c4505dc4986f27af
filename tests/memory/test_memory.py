import pytest

from simtrain.memory import (
    estimate_memory,
    estimate_stage_memory,
    layer_activation_bytes,
    model_state_bytes,
    rank_model_states,
    rank_params,
)
from simtrain.specs import ClusterSpec, ExperimentSpec, ModelSpec, ParallelSpec
from simtrain.specs.training import TrainingSpec
from simtrain.workload.counts import count_parameters
from tests.conftest import make_experiment

# GPT-3 22B shape of Korthikanti Table 3: s=2048, h=6144, a=64, b=4 (t=8 where parallel)
S, H, A, B, T, L, V = 2048, 6144, 64, 4, 8, 48, 51200
GPT22B = ModelSpec(num_layers=L, hidden_size=H, num_heads=A, vocab_size=V, seq_length=S)
SBH = S * B * H


@pytest.mark.parametrize(
    ("tp", "sp", "recompute", "korthikanti"),
    [
        (1, False, "none", SBH * (34 + 5 * A * S / H)),  # no parallelism
        (T, False, "none", SBH * (10 + 24 / T + 5 * A * S / (H * T))),  # tensor parallel
        (T, True, "none", SBH * (34 / T + 5 * A * S / (H * T))),  # tensor + sequence parallel
        (T, False, "selective", SBH * (10 + 24 / T)),  # TP + selective recompute
        (T, True, "selective", SBH * 34 / T),  # TP + SP + selective recompute
        (T, False, "full", SBH * 2),  # full recompute
        (T, True, "full", SBH * 2 / T),  # full recompute, input sharded by SP
    ],
)
def test_layer_activations_equal_korthikanti_table_2(tp, sp, recompute, korthikanti):
    got = layer_activation_bytes(GPT22B, B, tp=tp, sp=sp, recompute=recompute)
    assert got == pytest.approx(korthikanti, rel=1e-12)


def test_gqa_and_swiglu_generalise_the_parts():
    llama = ModelSpec(
        num_layers=2,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        ffn_hidden_size=14336,
        vocab_size=128256,
        seq_length=8192,
        activation="swiglu",
    )
    s, h, f, h_kv = 8192, 4096, 14336, 1024
    expected = s * (10 * h + 2 * (2 * h + 2 * h_kv) + 2 * 3 * f)  # selective: no s² term
    assert layer_activation_bytes(llama, 1, recompute="selective") == pytest.approx(expected)
    # context parallelism splits the sequence
    assert layer_activation_bytes(llama, 1, recompute="selective", cp=2) == pytest.approx(
        expected / 2
    )


GB = 1e9


@pytest.mark.parametrize(("stage", "published_gb"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_figure_1_for_7_5b_on_64_ranks(stage, published_gb):
    states = model_state_bytes(7.5e9, zero_stage=stage, shard_size=64)
    assert round(states.total / GB, 1) == published_gb


def test_zero_stages_shard_the_right_parts():
    s1, s2, s3 = (model_state_bytes(1e9, z, 8) for z in (1, 2, 3))
    assert (s1.weights, s1.gradients, s1.optimizer) == (2e9, 2e9, 1.5e9)
    assert (s2.weights, s2.gradients) == (2e9, 0.25e9)
    assert s3.weights == 0.25e9
    assert model_state_bytes(1e9, 0, 8, optimizer="sgd").optimizer == 8e9


def experiment(**parallel) -> ExperimentSpec:
    defaults = {"tp": 1, "pp": 1, "global_batch_size": 64}
    par = ParallelSpec(**{**defaults, **parallel})
    world = par.tp * par.pp * par.cp * (par.dp or 1)
    # Korthikanti's formulas describe unfused attention (the 5·a·s²·b score tensors).
    return ExperimentSpec(
        model=GPT22B,
        parallel=par,
        cluster=ClusterSpec(accelerator="A100-80GB", num_gpus=world),
        training=TrainingSpec(attention_kernel="unfused"),
    )


def test_ranks_hold_all_parameters_once_embedding_first_head_last():
    spec = experiment(pp=4, dp=1)
    params = [rank_params(spec, r) for r in range(4)]
    assert sum(p.dense for p in params) == count_parameters(GPT22B).total
    assert [len(p.layers) for p in params] == [12, 12, 12, 12]
    embedding = V * H + S * H
    head = V * H + 2 * H
    assert params[0].dense - params[1].dense == pytest.approx(embedding)
    assert params[3].dense - params[1].dense == pytest.approx(head)


def test_tensor_parallel_divides_matrices():
    full = rank_params(experiment(dp=1), 0).dense
    split = rank_params(experiment(tp=8, dp=1), 0).dense
    # norms, the output-projection bias and the position table stay replicated (Megatron)
    replicated = S * H + L * (2 * 2 * H + H) + 2 * H
    assert split * 8 - full == pytest.approx(7 * replicated)


def test_interleaved_and_dualpipe_placement():
    inter = experiment(pp=4, vpp=2, dp=1, pipeline_schedule="interleaved")
    assert rank_params(inter, 1).layers == (*range(6, 12), *range(30, 36))
    dual = experiment(pp=4, dp=1, pipeline_schedule="dualpipe", global_batch_size=8)
    plain = experiment(pp=4, dp=1, global_batch_size=8)
    # two model copies: twice the parameters per rank (embedding and head on both ends)
    assert rank_params(dual, 1).layers == (*range(12, 24), *range(24, 36))
    total = sum(rank_params(dual, r).dense for r in range(4))
    assert total == pytest.approx(2 * sum(rank_params(plain, r).dense for r in range(4)))


def test_first_stage_1f1b_activations_are_korthikanti_eq_5():
    p = 4
    spec = experiment(tp=T, sp=True, pp=p, dp=1, micro_batch_size=B)  # m = 16
    est = estimate_stage_memory(spec, 80e9, stage=0)
    eq5 = SBH * L / T * (34 + 5 * A * S / H)
    assert est.breakdown_bytes["activations.layers"] == pytest.approx(eq5, rel=1e-12)
    assert est.inflight_microbatches == p
    # embedding dropout s·b·h·p/t on the first stage
    assert est.breakdown_bytes["activations.embedding_dropout"] == pytest.approx(SBH * p / T)
    assert "activations.output_layer" not in est.breakdown_bytes


def test_interleaved_multiplies_first_stage_activations():
    p, v = 4, 2
    spec = experiment(
        tp=T, sp=True, pp=p, vpp=v, dp=1, micro_batch_size=B, pipeline_schedule="interleaved"
    )
    est = estimate_stage_memory(spec, 80e9, stage=0)
    eq5 = SBH * L / T * (34 + 5 * A * S / H)
    assert est.breakdown_bytes["activations.layers"] == pytest.approx(eq5 * (1 + (p - 1) / (p * v)))


def test_gpipe_stashes_every_microbatch():
    spec = experiment(tp=T, sp=True, pp=4, dp=1, micro_batch_size=B, pipeline_schedule="gpipe")
    est = estimate_stage_memory(spec, 80e9, stage=2)
    assert est.inflight_microbatches == 16
    per_layer = layer_activation_bytes(GPT22B, B, T, True)
    assert est.breakdown_bytes["activations.layers"] == pytest.approx(16 * 12 * per_layer)


def test_single_stage_adds_output_layer_term():
    spec = experiment(tp=T, sp=True, dp=1, micro_batch_size=B, global_batch_size=4)
    est = estimate_stage_memory(spec, 80e9, stage=0)
    assert est.breakdown_bytes["activations.output_layer"] == pytest.approx(
        4 * SBH / T * (1 + V / H)
    )


def test_worst_stage_and_oom_verdict():
    spec = experiment(tp=T, sp=True, pp=4, dp=1, micro_batch_size=B)
    worst = estimate_memory(spec, capacity_bytes=80e9)
    assert worst.stage == 0
    assert worst.peak_bytes == max(
        estimate_stage_memory(spec, 80e9, r).peak_bytes for r in range(4)
    )
    assert worst.peak_bytes == pytest.approx(sum(worst.breakdown_bytes.values()))
    assert estimate_memory(spec, capacity_bytes=1e9).fits is False
    assert estimate_memory(spec, capacity_bytes=1e12).fits is True


def test_zero_and_experts_shard_over_their_groups():
    moe = ModelSpec(
        num_layers=4,
        hidden_size=1024,
        num_heads=8,
        vocab_size=32000,
        seq_length=1024,
        num_experts=8,
        moe_top_k=2,
    )
    par = ParallelSpec(dp=8, ep=4, zero_stage=1, global_batch_size=64)
    spec = ExperimentSpec(
        model=moe, parallel=par, cluster=ClusterSpec(accelerator="A100-80GB", num_gpus=8)
    )
    params = rank_params(spec, 0)
    expert = 2 * 1024 * 4096 + 4096 + 1024  # fc1 and fc2 weights and biases (gelu)
    assert params.experts == pytest.approx(4 * 8 * expert / 4)  # 4 MoE layers, 8 experts, ep 4
    states = rank_model_states(spec, 0)
    assert states.optimizer == pytest.approx(12 * (params.dense / 8 + params.experts / 2))
    est = estimate_memory(spec, 80e9)
    assert est.breakdown_bytes["buffers.ep_all_to_all"] > 0


def test_full_recompute_keeps_one_layer_working_set():
    spec = experiment(tp=T, pp=2, dp=1, micro_batch_size=B, recompute="full")
    est = estimate_stage_memory(spec, 80e9, stage=0)
    assert est.breakdown_bytes["activations.layers"] == pytest.approx(2 * 24 * 2 * SBH)
    assert est.breakdown_bytes["activations.recompute_working"] == pytest.approx(
        layer_activation_bytes(GPT22B, B, T)
    )


def test_single_stage_is_gradient_accumulation_whatever_the_schedule():
    for schedule in ("gpipe", "dualpipe", "zb-h2"):
        spec = experiment(dp=1, micro_batch_size=B, pipeline_schedule=schedule)  # m = 16
        assert estimate_stage_memory(spec, 80e9, 0).inflight_microbatches == 1


def test_flash_attention_stores_no_score_matrix():
    unfused = layer_activation_bytes(GPT22B, 1, tp=8, sp=True)
    flash = layer_activation_bytes(GPT22B, 1, tp=8, sp=True, flash_attention=True)
    s, a = GPT22B.seq_length, GPT22B.num_heads
    assert unfused - flash == pytest.approx(5 * a * s * s / 8)


def test_hybrid_shard_group_sets_the_zero_sharding_factor():
    full = estimate_memory(experiment(zero_stage=3, dp=64), 80e9)
    hybrid = estimate_memory(experiment(zero_stage=3, dp=64, zero_shard_group_size=8), 80e9)
    assert hybrid.breakdown_bytes["optimizer"] == pytest.approx(
        8 * full.breakdown_bytes["optimizer"]
    )


def test_memory_verdict_has_a_near_limit_band_and_only_oom_does_not_fit():
    from simtrain.memory.estimate import memory_verdict

    assert memory_verdict(70e9, 80e9, 4e9) == "fits"
    assert memory_verdict(82e9, 80e9, 4e9) == "near_limit"
    assert memory_verdict(85e9, 80e9, 4e9) == "oom"
    spec = make_experiment("parallel.micro_batch_size=16", "parallel.global_batch_size=256")
    peak = estimate_memory(spec, 80e9).peak_bytes
    assert estimate_memory(spec, peak * 0.99).verdict == "near_limit"
    assert estimate_memory(spec, peak * 0.99).fits
    assert not estimate_memory(spec, peak * 0.5).fits


def test_the_loss_keeps_the_stacks_bytes_per_logit():
    def output_layer(framework):
        spec = make_experiment(f"training.framework={framework}")
        return estimate_memory(spec, 80e9).breakdown_bytes["activations.output_layer"]

    spec = make_experiment()
    m = spec.model
    logits = m.seq_length * m.vocab_size  # micro-batch 1, tp 1
    # fp32 logits (4 bytes) against a fused loss on the 16-bit logits (2 bytes)
    assert output_layer("megatron-core") - output_layer("nemo") == pytest.approx(2 * logits)
    # eager PyTorch at the loss backward: saved fp32 log-softmax, nll_loss gradient and
    # log-softmax gradient (12 bytes)
    assert output_layer("pytorch-fsdp2") - output_layer("megatron-core") == pytest.approx(
        8 * logits
    )
    # torchtitan's eager RMSNorm keeps 6 bytes per element of its input instead of 2
    norm_input = m.seq_length * m.hidden_size
    assert output_layer("torchtitan") - output_layer("pytorch-fsdp2") == pytest.approx(
        4 * norm_input
    )


def test_minimal_recompute_keeps_the_weight_matmul_outputs():
    """MaxText's "minimal" policy: layer input, QKV, the two row-parallel GEMM outputs and
    the MLP's first GEMM outputs (docs/references/tpu.md §7)."""
    gpt = ModelSpec(num_layers=2, hidden_size=1024, num_heads=8, vocab_size=1000, seq_length=512)
    s, h, t = 512, 1024, 4
    kept = layer_activation_bytes(gpt, 1, tp=t, sp=True, recompute="minimal")
    assert kept == pytest.approx(2 * s * h * (3 + 3 + 4) / t)  # 20·s·b·h/t
    selective = layer_activation_bytes(gpt, 1, tp=t, sp=True, recompute="selective")
    full = layer_activation_bytes(gpt, 1, tp=t, sp=True, recompute="full")
    assert full < kept < selective
