"""ModelSpec: the shape of a dense or mixture-of-experts decoder-only transformer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simtrain.specs.base import MAX_LAYERS, Spec, bounded, must_divide


class ModelSpec(Spec):
    """A decoder-only transformer, dense or mixture-of-experts.

    Covers GPT (learned positions, GELU, biases, LayerNorm), Llama (RoPE, SwiGLU, RMSNorm,
    GQA) and MoE variants of either.
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
    activation: Literal["gelu", "swiglu"] = "gelu"
    """MLP activation: gelu (two matrices) or swiglu (gate, up and down matrices)."""
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    """Normalisation layer: layernorm (weight and bias) or rmsnorm (weight only)."""
    use_bias: bool = True
    """Whether linear layers carry a bias vector (GPT yes, Llama no)."""
    position_embedding: Literal["learned", "rope"] = "learned"
    """Learned absolute position table (s x h parameters) or rotary embeddings (none)."""
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

    @property
    def kv_heads(self) -> int:
        """Key/value heads after applying the default."""
        return self.num_kv_heads or self.num_heads

    @property
    def head_size(self) -> int:
        """Per-head dimension after applying the default."""
        return self.head_dim or self.hidden_size // self.num_heads

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
        if self.head_dim is None and (
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
        if self.first_dense_layers > self.num_layers:
            problems.append(
                f"model.first_dense_layers={self.first_dense_layers} must be at most "
                f"model.num_layers={self.num_layers}"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self
