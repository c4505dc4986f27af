"""Parameter counts and model FLOPs of a transformer, as documented closed forms.

Model FLOPs follow the convention of Narayanan et al. (2021, Eq. 3) and Korthikanti et al.
(2022, Eq. 7), which PaLM's MFU also uses: only matrix multiplications count, attention is
counted without causal savings, backward is twice forward, and recomputation is excluded
(hardware FLOPs add it back). For a GPT layer this gives, per token,

    forward FLOPs = 2 * (matmul parameters) + 4 * s * (heads * head_dim)

so a training step of B sequences costs 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) for the GPT
shape (``docs/references/training-runs.md`` §2.5). The general form below covers GQA, SwiGLU
and MoE (only routed-to experts count for FLOPs: top-k plus shared experts).
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.specs.model import ModelSpec


@dataclass(frozen=True)
class ParameterCount:
    """Parameters of a model, split by where they live.

    Attributes:
        embedding: token embedding (plus the learned position table).
        lm_head: output projection (0 when tied to the embedding).
        attention: all layers' attention projections and their biases.
        mlp_dense: all dense layers' MLPs.
        mlp_experts: all routed experts of all MoE layers.
        mlp_shared: all shared experts of all MoE layers.
        router: MoE gating matrices.
        norms: normalisation weights (and biases) including the final norm.
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


def _attention_weights(model: ModelSpec) -> int:
    """Weight-matrix elements of one layer's Q, K, V and output projections."""
    h, d = model.hidden_size, model.head_size
    q, kv = model.num_heads * d, model.kv_heads * d
    return h * (q + 2 * kv) + q * h


def _mlp_matrices(model: ModelSpec) -> int:
    """Matrices of one MLP: 2 for GELU, 3 (gate, up, down) for SwiGLU."""
    return 3 if model.activation == "swiglu" else 2


def attention_params_per_layer(model: ModelSpec) -> int:
    """Q, K, V and output projections of one layer (plus biases when the model has them)."""
    q, kv = model.num_heads * model.head_size, model.kv_heads * model.head_size
    biases = (q + 2 * kv + model.hidden_size) if model.use_bias else 0
    return _attention_weights(model) + biases


def mlp_params(model: ModelSpec, ffn: int) -> int:
    """One MLP of hidden width ``ffn`` (plus biases when the model has them)."""
    matrices = _mlp_matrices(model)
    biases = ((matrices - 1) * ffn + model.hidden_size) if model.use_bias else 0
    return matrices * model.hidden_size * ffn + biases


def norm_params(model: ModelSpec) -> int:
    """One normalisation layer: weight and bias for LayerNorm, weight only for RMSNorm."""
    return (2 if model.norm == "layernorm" else 1) * model.hidden_size


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
    embedding = model.vocab_size * h + (
        model.seq_length * h if model.position_embedding == "learned" else 0
    )
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
        norms=(2 * layers + 1) * norm_params(model),
        active_experts=num_moe * model.moe_top_k * expert,
    )


def matmul_params_per_token(model: ModelSpec) -> int:
    """Weight-matrix elements one token multiplies by in a forward pass.

    Biases, norms and the embedding lookup are excluded; the LM head is included (tied or not).
    """
    h, layers = model.hidden_size, model.num_layers
    attention = _attention_weights(model)
    matrices = _mlp_matrices(model)
    num_moe = model.num_moe_layers
    dense_mlp = matrices * h * model.ffn_size
    moe_mlp = (
        matrices * h * model.expert_ffn_size * (model.moe_top_k + model.num_shared_experts)
        + h * model.num_experts
    )
    return (
        layers * attention
        + (layers - num_moe) * dense_mlp
        + num_moe * moe_mlp
        + model.vocab_size * h
    )


def model_flops_per_sequence(model: ModelSpec) -> float:
    """Model FLOPs (forward + backward, no recomputation) to train on one sequence.

    6 FLOPs per matmul parameter per token (2 forward, 4 backward) plus attention scores and
    values, 12 * s * heads * head_dim per token per layer (forward 4, backward 8).

    Examples:
        >>> m = ModelSpec(num_layers=24, hidden_size=2304, num_heads=24, vocab_size=51200,
        ...               seq_length=2048)
        >>> s, l, h, V = 2048, 24, 2304, 51200
        >>> closed = 72 * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
        >>> abs(model_flops_per_sequence(m) / closed - 1) < 1e-12
        True
    """
    s = model.seq_length
    attention = 12 * s * model.num_heads * model.head_size * model.num_layers
    return s * (6 * matmul_params_per_token(model) + attention)


def recompute_flops_per_sequence(model: ModelSpec, recompute: str) -> float:
    """Extra FLOPs of activation recomputation for one sequence (hardware minus model FLOPs).

    ``full`` re-runs each layer's forward (everything but the LM head); ``selective`` re-runs
    only the attention core, QK^T and AV: 4*s^2*(heads*head_dim) per layer per sequence.
    (Korthikanti et al.'s Eq. 8, 1 + s/(3h), counts twice that; simtrain counts the work the
    recomputation actually executes.)
    """
    s = model.seq_length
    attention_fwd = 4 * s * s * model.num_heads * model.head_size * model.num_layers
    if recompute == "selective":
        return attention_fwd
    if recompute == "full":
        layer_matmuls = matmul_params_per_token(model) - model.vocab_size * model.hidden_size
        return 2 * s * layer_matmuls + attention_fwd
    return 0.0
