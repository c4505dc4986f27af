"""ModelSpec: the shape of a dense or mixture-of-experts decoder-only transformer."""

from __future__ import annotations

import warnings
from typing import Literal

from pydantic import Field, model_validator

from simtrain.specs.base import MAX_LAYERS, Spec, bounded, must_divide

Activation = Literal["gelu", "relu", "squared_relu", "swiglu", "geglu"]
GATED_ACTIVATIONS = frozenset({"swiglu", "geglu"})
"""Gated linear units: gate and up projections, then their product (three matrices)."""


class MLASpec(Spec):
    """Multi-head latent attention (DeepSeek-V2/V3) dimensions.

    Queries, keys and values come from low-rank latents, with a decoupled rotary key shared
    by every head. Per layer: a down-projection h -> q_lora_rank (normalised, then
    up-projected to every head's nope and rope query parts) and h -> kv_lora_rank +
    qk_rope_head_dim (the KV latent, normalised, up-projected to every head's nope key and
    value; plus the shared rotary key), and the output projection heads*v_head_dim -> h
    (``docs/references/models.md`` §MLA).
    """

    q_lora_rank: int = bounded(gt=0, le=65536, why="40x DeepSeek-V3's 1,536")
    """Rank of the query latent (1,536 in DeepSeek-V3)."""
    kv_lora_rank: int = bounded(gt=0, le=65536, why="128x DeepSeek-V3's 512")
    """Rank of the compressed key/value latent (512 in DeepSeek-V3)."""
    qk_nope_head_dim: int = bounded(gt=0, le=4096, why="32x DeepSeek-V3's 128")
    """Per-head query/key dimension without rotary embedding (128 in DeepSeek-V3)."""
    qk_rope_head_dim: int = bounded(ge=0, le=4096, why="64x DeepSeek-V3's 64")
    """Per-head rotary query/key dimension, shared rotary key (64 in DeepSeek-V3)."""
    v_head_dim: int = bounded(gt=0, le=4096, why="32x DeepSeek-V3's 128")
    """Per-head value dimension (128 in DeepSeek-V3)."""


class ModelSpec(Spec):
    """A decoder-only transformer, dense or mixture-of-experts.

    Covers GPT (learned positions, GELU, biases, LayerNorm), Llama (RoPE, SwiGLU, RMSNorm,
    GQA), parallel attention+MLP blocks (GPT-J, GPT-NeoX, PaLM, Falcon), ALiBi (BLOOM, MPT),
    sliding-window attention (Mistral), multi-head latent attention (DeepSeek-V2/V3) and MoE
    variants of any of them.
    """

    name: str = Field(default="model", max_length=200)
    """Display name, e.g. ``gpt3-175b``."""
    num_layers: int = bounded(gt=0, le=MAX_LAYERS, why="50x the deepest published LLM")
    """Number of transformer layers (blocks)."""
    hidden_size: int = bounded(
        gt=0, le=1 << 20, why="50x the widest published model (GPT 1T: 25,600)"
    )
    """Model width h (embedding dimension)."""
    num_heads: int = bounded(gt=0, le=1 << 14, why="100x the most heads published (128)")
    """Number of attention (query) heads a."""
    num_kv_heads: int | None = bounded(None, gt=0, le=1 << 14, why="as num_heads")
    """Key/value heads for grouped-query attention; omit for multi-head attention (= num_heads),
    1 for multi-query attention."""
    head_dim: int | None = bounded(
        None, gt=0, le=1 << 14, why="64x the widest head published (256)"
    )
    """Dimension of one head; omit for hidden_size / num_heads."""
    ffn_hidden_size: int | None = bounded(
        None, gt=0, le=1 << 22, why="40x the widest MLP published (~100K)"
    )
    """Hidden width of the dense MLP; omit for 4 * hidden_size."""
    vocab_size: int = bounded(gt=0, le=1 << 24, why="64x the largest vocabulary published (256K)")
    """Vocabulary size V (padded size, as the framework allocates it)."""
    seq_length: int = bounded(gt=0, le=1 << 24, why="16x the longest context trained (1M tokens)")
    """Training sequence length s in tokens."""
    activation: Activation = "gelu"
    """MLP activation: gelu, relu (OPT) or squared_relu (two matrices), or the gated swiglu
    (Llama) or geglu (Gemma) (gate, up and down matrices)."""
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    """Normalisation layer: layernorm (weight and bias) or rmsnorm (weight only)."""
    use_bias: bool = True
    """Whether linear layers carry a bias vector (GPT yes, Llama no); the per-kind switches
    below override it."""
    qkv_bias: bool | None = None
    """Bias on the query/key/value projections; omit to follow use_bias (GPT-J: false)."""
    attn_out_bias: bool | None = None
    """Bias on the attention output projection; omit to follow use_bias."""
    mlp_bias: bool | None = None
    """Biases on the MLP (and expert) matrices; omit to follow use_bias."""
    norm_bias: bool | None = None
    """Bias of LayerNorm; omit for true (PaLM and MPT: false). RMSNorm has none."""
    position_embedding: Literal["learned", "rope", "alibi", "none"] = "learned"
    """learned absolute table (s x h parameters), rope (rotary, no parameters), alibi
    (linear biases added to the attention scores, BLOOM/MPT) or none."""
    rotary_fraction: float = bounded(1.0, gt=0, le=1, why="a fraction of the head")
    """Share of each head's dimensions that rotary embedding rotates (GPT-J, GPT-NeoX: 0.25)."""
    block: Literal["serial", "parallel"] = "serial"
    """serial: MLP after attention, or parallel: attention and MLP on the same normalised
    input, summed (GPT-J, GPT-NeoX, PaLM, Falcon): one TP reduction per layer, not two."""
    parallel_block_norms: int = bounded(1, ge=1, le=2, why="one shared norm or one per branch")
    """Norms feeding a parallel block: 1 shared (GPT-J, PaLM) or 2, one per branch, both on
    the block input (GPT-NeoX, Falcon-40B)."""
    embedding_norm: bool = False
    """A norm right after the token embedding (BLOOM)."""
    sliding_window: int | None = bounded(None, gt=0, le=1 << 24, why="as model.seq_length")
    """Keys each query attends to at most (Mistral: 4,096); omit for full causal attention."""
    mla: MLASpec | None = None
    """Multi-head latent attention dimensions (DeepSeek-V2/V3); omit for multi-head,
    grouped-query or multi-query attention."""
    tied_embeddings: bool = False
    """Whether the LM head reuses the input embedding matrix."""
    dropout: bool = True
    """Whether training applies dropout (hidden and attention): GPT/Megatron yes, Llama no.
    Dropout adds mask writes and stores 1-byte masks for the backward."""

    num_experts: int = bounded(
        0, ge=0, le=1 << 14, why="64x the most routed experts published (256)"
    )
    """Routed experts per MoE layer; 0 for a dense model."""
    moe_top_k: int = bounded(2, gt=0, le=1 << 14, why="as num_experts")
    """Experts each token is routed to."""
    moe_ffn_hidden_size: int | None = bounded(None, gt=0, le=1 << 22, why="as ffn_hidden_size")
    """Hidden width of one expert's MLP; omit for ffn_hidden_size."""
    moe_layer_frequency: int = bounded(1, gt=0, le=MAX_LAYERS, why="as num_layers")
    """Every k-th layer (after the leading dense ones) is an MoE layer; 1 for all."""
    first_dense_layers: int = bounded(0, ge=0, le=MAX_LAYERS, why="as num_layers")
    """Leading layers that stay dense in an MoE model (DeepSeek-V3 uses 3)."""
    num_shared_experts: int = bounded(0, ge=0, le=1 << 14, why="as num_experts")
    """Always-active shared experts per MoE layer, each of width moe_ffn_hidden_size."""
    moe_capacity_factor: float | None = bounded(
        None, gt=0, le=1 << 14, why="a factor of num_experts already holds every token"
    )
    """Expert capacity as a multiple of the balanced load (tokens beyond it are dropped);
    omit for dropless routing."""
    moe_token_imbalance: float = bounded(
        1.0, ge=1.0, le=1 << 14, why="all tokens on one expert is num_experts x the mean"
    )
    """Tokens of the busiest expert rank relative to the mean (1 = perfectly balanced)."""
    moe_router_num_groups: int | None = bounded(None, gt=0, le=1 << 14, why="as num_experts")
    """Group-limited routing: the experts form this many equal groups (DeepSeek-V3: 8, one
    per node of its expert-parallel group); omit for routing over all experts."""
    moe_router_group_topk: int | None = bounded(None, gt=0, le=1 << 14, why="as num_experts")
    """Groups each token may be routed into (DeepSeek-V3: 4, "at most 4 nodes"); used with
    moe_router_num_groups."""

    @property
    def kv_heads(self) -> int:
        """Key/value heads after applying the default (every head under MLA)."""
        return self.num_kv_heads or self.num_heads

    @property
    def head_size(self) -> int:
        """Per-head query/key dimension: head_dim or hidden / heads (nope + rope under MLA)."""
        if self.mla is not None:
            return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def v_head_size(self) -> int:
        """Per-head value dimension (equal to head_size except under MLA)."""
        return self.mla.v_head_dim if self.mla is not None else self.head_size

    @property
    def is_gated(self) -> bool:
        """True for gated activations (gate, up and down matrices)."""
        return self.activation in GATED_ACTIVATIONS

    @property
    def rotary_dim(self) -> int:
        """Dimensions of each query/key head that rotary embedding rotates (0 without rope)."""
        if self.position_embedding != "rope":
            return 0
        if self.mla is not None:
            return self.mla.qk_rope_head_dim
        return round(self.head_size * self.rotary_fraction)

    @property
    def num_block_norms(self) -> int:
        """Norm layers inside one transformer block."""
        return self.parallel_block_norms if self.block == "parallel" else 2

    @property
    def has_qkv_bias(self) -> bool:
        """Whether the query/key/value projections carry biases."""
        return self.use_bias if self.qkv_bias is None else self.qkv_bias

    @property
    def has_attn_out_bias(self) -> bool:
        """Whether the attention output projection carries a bias."""
        return self.use_bias if self.attn_out_bias is None else self.attn_out_bias

    @property
    def has_mlp_bias(self) -> bool:
        """Whether MLP and expert matrices carry biases."""
        return self.use_bias if self.mlp_bias is None else self.mlp_bias

    @property
    def has_norm_bias(self) -> bool:
        """Whether the norm layers carry a bias vector (LayerNorm only)."""
        return self.norm == "layernorm" and (self.norm_bias is None or self.norm_bias)

    @property
    def attended_keys(self) -> int:
        """Keys one query is counted against: the sequence, or the window when shorter."""
        return min(self.seq_length, self.sliding_window or self.seq_length)

    @property
    def ffn_size(self) -> int:
        """Dense MLP hidden width after applying the default."""
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def expert_ffn_size(self) -> int:
        """One expert's MLP hidden width after applying the default."""
        return self.moe_ffn_hidden_size or self.ffn_size

    @property
    def is_moe(self) -> bool:
        """True when the model has routed experts."""
        return self.num_experts > 0

    def is_moe_layer(self, layer: int) -> bool:
        """Whether 0-based ``layer`` holds experts instead of a dense MLP."""
        if not self.is_moe or layer < self.first_dense_layers:
            return False
        return (layer - self.first_dense_layers) % self.moe_layer_frequency == (
            self.moe_layer_frequency - 1
        )

    @property
    def num_moe_layers(self) -> int:
        """Number of layers that hold experts."""
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    @model_validator(mode="after")
    def _check_shape(self) -> ModelSpec:
        problems = []
        if self.mla is not None:
            problems += self._mla_problems(self.mla)
        elif self.head_dim is None and (
            msg := must_divide(
                "model.num_heads", self.num_heads, "model.hidden_size", self.hidden_size
            )
        ):
            problems.append(msg)
        if msg := must_divide(
            "model.num_kv_heads", self.kv_heads, "model.num_heads", self.num_heads
        ):
            problems.append(msg)
        if self.is_moe and self.moe_top_k > self.num_experts:
            problems.append(
                f"model.moe_top_k={self.moe_top_k} must be at most "
                f"model.num_experts={self.num_experts}"
            )
        if (self.moe_router_num_groups is None) != (self.moe_router_group_topk is None):
            problems.append(
                "model.moe_router_num_groups and model.moe_router_group_topk must be set "
                f"together (got {self.moe_router_num_groups} and {self.moe_router_group_topk})"
            )
        elif self.moe_router_num_groups is not None and self.moe_router_group_topk is not None:
            groups, topk = self.moe_router_num_groups, self.moe_router_group_topk
            if self.is_moe and (msg := must_divide(
                "model.moe_router_num_groups", groups, "model.num_experts", self.num_experts
            )):  # fmt: skip
                problems.append(msg)
            if topk > groups:
                problems.append(
                    f"model.moe_router_group_topk={topk} must be at most "
                    f"model.moe_router_num_groups={groups}"
                )
        if self.first_dense_layers > self.num_layers:
            problems.append(
                f"model.first_dense_layers={self.first_dense_layers} must be at most "
                f"model.num_layers={self.num_layers}"
            )
        if self.sliding_window is not None and self.sliding_window > self.seq_length:
            problems.append(
                f"model.sliding_window={self.sliding_window} must be at most "
                f"model.seq_length={self.seq_length}"
            )
        if self.position_embedding == "rope" and self.mla is None:
            rotated = self.head_size * self.rotary_fraction
            if abs(rotated - round(rotated)) > 1e-9 or round(rotated) % 2:
                problems.append(
                    f"model.rotary_fraction={self.rotary_fraction} times the head dimension "
                    f"{self.head_size} must be a whole even number of dimensions "
                    "(rotary embedding rotates pairs)"
                )
        if problems:
            raise ValueError("; ".join(problems))
        self._warn_unused()
        return self

    def _mla_problems(self, mla: MLASpec) -> list[str]:
        """Cross-field rules of multi-head latent attention."""
        heads = self.num_heads
        problems = []
        if self.num_kv_heads not in (None, heads):
            problems.append(
                f"model.num_kv_heads={self.num_kv_heads} must be omitted or equal "
                f"model.num_heads={heads} with model.mla (one latent serves every head)"
            )
        if self.head_dim is not None:
            problems.append(
                f"model.head_dim={self.head_dim} must be omitted with model.mla "
                "(set model.mla.qk_nope_head_dim, qk_rope_head_dim and v_head_dim)"
            )
        if mla.qk_rope_head_dim % 2:
            problems.append(
                f"model.mla.qk_rope_head_dim={mla.qk_rope_head_dim} must be even "
                "(rotary embedding rotates pairs)"
            )
        if (self.position_embedding == "rope") != (mla.qk_rope_head_dim > 0):
            problems.append(
                f"model.mla.qk_rope_head_dim={mla.qk_rope_head_dim} must be positive exactly "
                f"when model.position_embedding=rope (got {self.position_embedding})"
            )
        q_width = heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
        if mla.q_lora_rank >= q_width:
            problems.append(
                f"model.mla.q_lora_rank={mla.q_lora_rank} must be below the query width "
                f"num_heads*(qk_nope_head_dim+qk_rope_head_dim)={q_width} it compresses"
            )
        kv_width = heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        if mla.kv_lora_rank >= kv_width:
            problems.append(
                f"model.mla.kv_lora_rank={mla.kv_lora_rank} must be below the key/value width "
                f"num_heads*(qk_nope_head_dim+v_head_dim)={kv_width} it compresses"
            )
        if self.block == "parallel":
            problems.append("model.mla needs model.block=serial (got parallel)")
        return problems

    def _warn_unused(self) -> None:
        """Warn about settings that have no effect on this shape."""
        unused = []
        if self.rotary_fraction != 1.0 and (
            self.position_embedding != "rope" or self.mla is not None
        ):
            unused.append("model.rotary_fraction has no effect (needs rope without mla)")
        if self.parallel_block_norms != 1 and self.block == "serial":
            unused.append("model.parallel_block_norms has no effect (needs block=parallel)")
        if self.norm_bias is not None and self.norm == "rmsnorm":
            unused.append("model.norm_bias has no effect (RMSNorm has no bias)")
        for message in unused:
            warnings.warn(message, UserWarning, stacklevel=3)
