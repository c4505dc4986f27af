"""Parameter counts and model FLOPs of a transformer, as documented closed forms.

Model FLOPs follow the convention of Narayanan et al. (2021, Eq. 3) and Korthikanti et al.
(2022, Eq. 7), which PaLM's MFU also uses: only matrix multiplications count, attention is
counted without causal savings, backward is twice forward, and recomputation is excluded
(hardware FLOPs add it back). For a GPT layer this gives, per token,

    forward FLOPs = 2 * (matmul parameters) + 2 * keys * heads * (d_qk + d_v)

(``keys`` = the sequence, or the sliding window when shorter; d_qk = d_v = head_dim outside
multi-head latent attention, so the attention term is Megatron's 4·s·h), and a training step
of B sequences costs 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) for the GPT shape
(``docs/references/models.md`` §FLOP conventions). The general form below covers GQA, MQA,
gated MLPs, parallel blocks, MLA and MoE (only routed-to experts count for FLOPs: top-k plus
shared experts). Other published conventions live in :mod:`simtrain.workload.conventions`.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.specs.model import ModelSpec


@dataclass(frozen=True)
class ParameterCount:
    """Parameters of a model, split by where they live.

    Attributes:
        embedding: token embedding (plus the learned position table and the embedding norm).
        lm_head: output projection (0 when tied to the embedding).
        attention: all layers' attention projections and their biases (MLA latent norms too).
        mlp_dense: all dense layers' MLPs.
        mlp_experts: all routed experts of all MoE layers.
        mlp_shared: all shared experts of all MoE layers.
        router: MoE gating matrices.
        norms: block normalisation weights (and biases) including the final norm.
        active_experts: routed-expert parameters one token actually uses (top-k of each layer).
    """

    embedding: int
    lm_head: int
    attention: int
    mlp_dense: int
    mlp_experts: int
    mlp_shared: int
    router: int
    norms: int
    active_experts: int

    @property
    def total(self) -> int:
        """All parameters."""
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.mlp_dense
            + self.mlp_experts
            + self.mlp_shared
            + self.router
            + self.norms
        )

    @property
    def active(self) -> int:
        """Parameters one token uses: total minus the routed experts it is not sent to."""
        return self.total - self.mlp_experts + self.active_experts


@dataclass(frozen=True)
class AttentionWeights:
    """Weight-matrix elements of one layer's attention, by how tensor parallelism treats them.

    Attributes:
        split: matrices whose output (column-parallel) or input (row-parallel) dimension is
            cut over the TP group: Q, K, V and output projections, MLA up-projections.
        replicated: matrices every TP rank holds whole: MLA's down-projections (Megatron-Core
            runs them duplicated).
    """

    split: int
    replicated: int

    @property
    def total(self) -> int:
        """Both kinds."""
        return self.split + self.replicated


def attention_weights(model: ModelSpec) -> AttentionWeights:
    """Weight-matrix elements of one layer's attention projections (no biases, no norms).

    Examples:
        DeepSeek-V3's MLA: 7168·1536 + 7168·576 down, 1536·24576 + 512·32768 up, 16384·7168 out.

        >>> from simtrain.specs.model import MLASpec
        >>> mla = MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
        ...               qk_rope_head_dim=64, v_head_dim=128)
        >>> m = ModelSpec(num_layers=1, hidden_size=7168, num_heads=128, vocab_size=10,
        ...               seq_length=16, position_embedding="rope", mla=mla)
        >>> attention_weights(m).total
        187105280
    """
    h, heads = model.hidden_size, model.num_heads
    d_qk, d_v = model.head_size, model.v_head_size
    out = heads * d_v * h
    mla = model.mla
    if mla is not None:
        down = h * (mla.q_lora_rank + mla.kv_lora_rank + mla.qk_rope_head_dim)
        up = mla.q_lora_rank * heads * d_qk + mla.kv_lora_rank * heads * (
            mla.qk_nope_head_dim + d_v
        )
        return AttentionWeights(split=up + out, replicated=down)
    q, kv = heads * d_qk, model.kv_heads * d_qk
    return AttentionWeights(split=h * (q + 2 * kv) + out, replicated=0)


def attention_biases(model: ModelSpec) -> tuple[int, int]:
    """(split, replicated) bias and latent-norm elements of one layer's attention.

    QKV biases are split with their columns; the output-projection bias and MLA's latent
    norms stay whole on every TP rank (as in Megatron).
    """
    replicated = model.hidden_size if model.has_attn_out_bias else 0
    if model.mla is not None:
        return 0, replicated + model.mla.q_lora_rank + model.mla.kv_lora_rank
    q, kv = model.num_heads * model.head_size, model.kv_heads * model.head_size
    return (q + 2 * kv) if model.has_qkv_bias else 0, replicated


def mlp_matrices(model: ModelSpec) -> int:
    """Matrices of one MLP: 2 (gelu, relu, squared_relu), 3 (gate, up, down) when gated."""
    return 3 if model.is_gated else 2


def attention_params_per_layer(model: ModelSpec) -> int:
    """Q, K, V and output projections of one layer, with biases and MLA latent norms."""
    return attention_weights(model).total + sum(attention_biases(model))


def mlp_params(model: ModelSpec, ffn: int) -> int:
    """One MLP of hidden width ``ffn`` (plus biases when the model has them)."""
    matrices = mlp_matrices(model)
    biases = ((matrices - 1) * ffn + model.hidden_size) if model.has_mlp_bias else 0
    return matrices * model.hidden_size * ffn + biases


def norm_params(model: ModelSpec) -> int:
    """One normalisation layer: weight, plus bias for LayerNorm with biases."""
    return (2 if model.has_norm_bias else 1) * model.hidden_size


def count_parameters(model: ModelSpec) -> ParameterCount:
    """Count the parameters of ``model``.

    For the GPT shape (learned positions, biases, LayerNorm, tied embeddings) this is
    Megatron's Eq. 2, P = 12lh^2 (1 + 13/(12h) + (V+s)/(12lh)), plus the final norm (2h).

    Examples:
        >>> m = ModelSpec(num_layers=24, hidden_size=2304, num_heads=24, vocab_size=51200,
        ...               seq_length=2048, tied_embeddings=True)
        >>> round(count_parameters(m).total / 1e9, 2)
        1.65
    """
    h, layers = model.hidden_size, model.num_layers
    embedding = model.vocab_size * h
    embedding += model.seq_length * h if model.position_embedding == "learned" else 0
    embedding += norm_params(model) if model.embedding_norm else 0
    lm_head = 0 if model.tied_embeddings else model.vocab_size * h
    num_moe = model.num_moe_layers
    expert = mlp_params(model, model.expert_ffn_size)
    return ParameterCount(
        embedding=embedding,
        lm_head=lm_head,
        attention=layers * attention_params_per_layer(model),
        mlp_dense=(layers - num_moe) * mlp_params(model, model.ffn_size),
        mlp_experts=num_moe * model.num_experts * expert,
        mlp_shared=num_moe * model.num_shared_experts * expert,
        router=num_moe * h * model.num_experts,
        norms=(model.num_block_norms * layers + 1) * norm_params(model),
        active_experts=num_moe * model.moe_top_k * expert,
    )


def layer_matmul_params_per_token(model: ModelSpec) -> int:
    """Weight-matrix elements one token multiplies by in the transformer layers (no LM head)."""
    h, layers = model.hidden_size, model.num_layers
    matrices = mlp_matrices(model)
    num_moe = model.num_moe_layers
    dense_mlp = matrices * h * model.ffn_size
    moe_mlp = (
        matrices * h * model.expert_ffn_size * (model.moe_top_k + model.num_shared_experts)
        + h * model.num_experts
    )
    return (
        layers * attention_weights(model).total
        + (layers - num_moe) * dense_mlp
        + (num_moe * moe_mlp)
    )


def matmul_params_per_token(model: ModelSpec) -> int:
    """Weight-matrix elements one token multiplies by in a forward pass.

    Biases, norms and the embedding lookup are excluded; the LM head is included (tied or not).
    """
    return layer_matmul_params_per_token(model) + model.vocab_size * model.hidden_size


def attention_fwd_flops_per_query(model: ModelSpec, keys: float) -> float:
    """Forward attention-core FLOPs of one query position in one layer against ``keys`` keys.

    QK^T costs 2·d_qk and AV 2·d_v per (query, key) pair and head.
    """
    return 2.0 * keys * model.num_heads * (model.head_size + model.v_head_size)


def model_flops_per_sequence(model: ModelSpec) -> float:
    """Model FLOPs (forward + backward, no recomputation) to train on one sequence.

    6 FLOPs per matmul parameter per token (2 forward, 4 backward) plus attention scores and
    values, 3 · 2·keys·heads·(d_qk + d_v) per token per layer (forward 1/3, backward 2/3).

    Examples:
        >>> m = ModelSpec(num_layers=24, hidden_size=2304, num_heads=24, vocab_size=51200,
        ...               seq_length=2048)
        >>> s, l, h, V = 2048, 24, 2304, 51200
        >>> closed = 72 * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
        >>> abs(model_flops_per_sequence(m) / closed - 1) < 1e-12
        True
    """
    s = model.seq_length
    attention = 3 * attention_fwd_flops_per_query(model, model.attended_keys) * model.num_layers
    return s * (6 * matmul_params_per_token(model) + attention)


def recompute_flops_per_sequence(
    model: ModelSpec, recompute: str, modules: frozenset[str] | None = None
) -> float:
    """Extra FLOPs of activation recomputation for one sequence (hardware minus model FLOPs).

    ``full`` re-runs each layer's forward (everything but the LM head); ``selective`` re-runs
    the matmuls of its ``modules`` (None: ``core_attn``): the attention core, QK^T and AV,
    4*s^2*(heads*head_dim) per layer per sequence; MLA's up-projections (``mla_up_proj``);
    a dense MLP (``mlp``); the shared experts (``shared_experts``); the router and the
    routed and shared experts (``moe``); ``layernorm`` and ``moe_act`` re-run memory-bound
    ops only. ``minimal`` re-runs the attention core's FLOPs (its other recomputed ops are
    memory-bound); ``per_op`` the key, output and MLP up projections of every layer.
    (Korthikanti et al.'s Eq. 8, 1 + s/(3h), counts twice the selective figure; simtrain
    counts the work the recomputation actually executes.)
    """
    s = model.seq_length
    attention_fwd = s * attention_fwd_flops_per_query(model, model.attended_keys)
    attention_fwd *= model.num_layers
    if recompute == "minimal":
        return attention_fwd
    if recompute == "per_op":  # the key, output and up projections (dense gated layers)
        h, d = model.hidden_size, model.head_size
        per_layer = h * model.kv_heads * d + model.num_heads * model.v_head_size * h
        per_layer += h * model.ffn_size
        return 2 * s * model.num_layers * per_layer
    if recompute == "full":
        return 2 * s * layer_matmul_params_per_token(model) + attention_fwd
    if recompute != "selective":
        return 0.0
    h, num_moe = model.hidden_size, model.num_moe_layers
    expert = mlp_matrices(model) * h * model.expert_ffn_size
    out = model.num_heads * model.v_head_size * h  # MLA's split weights: up-projections + out
    up = attention_weights(model).split - out if model.mla is not None else 0
    per_token = {
        "core_attn": 0.0,  # counted per sequence below (quadratic in s)
        "mla_up_proj": model.num_layers * up,
        "mlp": (model.num_layers - num_moe) * mlp_matrices(model) * h * model.ffn_size,
        "shared_experts": num_moe * expert * model.num_shared_experts,
        "moe": num_moe
        * (expert * (model.moe_top_k + model.num_shared_experts) + h * model.num_experts),
    }
    chosen = modules if modules is not None else frozenset({"core_attn"})
    extra = sum(2 * s * per_token.get(m, 0) for m in chosen)
    return extra + (attention_fwd if "core_attn" in chosen else 0.0)
