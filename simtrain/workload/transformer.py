"""Operator sequences of a transformer layer under Megatron-style model parallelism.

For one microbatch on one rank this module lists, in execution order, the forward ops of a
layer, its backward ops (input gradient and weight gradient split, as zero-bubble schedules
need), and the ops of the embedding and the LM head with its loss. A layer is two branches
(:mod:`simtrain.workload.branches`: attention and MLP, or experts from
:mod:`simtrain.workload.moe`) put together as a block:

- ``serial``: norm, attention, residual add, norm, MLP, residual add;
- ``parallel`` (GPT-J, GPT-NeoX, PaLM, Falcon): attention and MLP both read the normalised
  block input (one shared norm, or one norm per branch on the same input), and one residual
  add sums both outputs into the block input.

Tensor-parallel collectives appear inline as ops of kind ``collective`` on axis ``tp``:

- without sequence parallelism, an all-reduce of the row-parallel outputs (forward), and of
  the input gradients of the column-parallel input projections (backward, overlapped with the
  weight-gradient GEMMs that follow) — two of each per serial layer, one of each per parallel
  layer (its branches' partial sums are added before one reduction);
- with sequence parallelism, those become reduce-scatters, and an all-gather precedes the
  input projections (forward); backward swaps the two.

Context-parallel attention (:mod:`simtrain.workload.attention`) and mixture-of-experts MLPs
(:mod:`simtrain.workload.moe`) add their collectives on axes ``cp`` and ``ep``. Elementwise
ops are memory-bound: their cost is the bytes they read and write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simtrain.specs.model import ModelSpec
from simtrain.workload import eager
from simtrain.workload.branches import Branch, Tokens, attention_branch, mla_branch, mlp_branch
from simtrain.workload.linear import high_precision_linear, linear_layer
from simtrain.workload.moe import moe_branch
from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES, collective, memory_op
from simtrain.workload.shard import Shard

__all__ = [
    "ACT_BYTES",
    "LayerOps",
    "Shard",
    "embedding_ops",
    "head_ops",
    "layer_ops",
    "per_op_recompute",
]


def tp_comm(
    name: str, comm: str, phase: str, size_bytes: float, layer: int, overlap_ops: int = 0
) -> Op:
    """A tensor-parallel collective (nccl-tests size convention)."""
    return collective(name, comm, "tp", phase, size_bytes, layer, overlap_ops)


@dataclass(frozen=True)
class LayerOps:
    """Ops of one transformer layer for one microbatch on one rank.

    Attributes:
        forward: forward ops in execution order (collectives inline).
        backward: backward ops in execution order.
        attention_core: the forward ops that selective recomputation re-runs by default
            (``core_attn``).
        recompute_groups: per selective-recompute module (``parallel.recompute_modules``),
            the forward ops it re-runs in the backward (:func:`recompute_groups`).
    """

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    attention_core: tuple[Op, ...]
    recompute_groups: dict[str, tuple[Op, ...]] = field(default_factory=dict)

    def recomputed(self, modules: frozenset[str]) -> list[Op]:
        """The forward ops the selective recompute ``modules`` re-run, in forward order."""
        chosen = {op for m in modules for op in self.recompute_groups.get(m, ())}
        return [op for op in self.forward if op in chosen]


@dataclass(frozen=True)
class _TpRegion:
    """TP collectives around a column- then row-parallel pair of linear layers.

    ``entry``/``entry_grad`` exist only for branches that gather their input
    (:attr:`Branch.gathers_input`); ``entry_grad`` overlaps the ``overlap`` weight-gradient
    GEMMs issued right after it.
    """

    entry: list[Op]
    exit: list[Op]
    exit_grad: list[Op]
    entry_grad: list[Op]


def _tp_region(
    shard: Shard, tag: str, act_bytes: float, layer: int, gathers: bool = True, overlap: int = 1
) -> _TpRegion:
    if shard.tp == 1:
        return _TpRegion([], [], [], [])
    if shard.sp:
        return _TpRegion(
            [tp_comm(f"{tag}_all_gather", "all_gather", "fwd", act_bytes, layer)]
            if gathers
            else [],
            [tp_comm(f"{tag}_reduce_scatter", "reduce_scatter", "fwd", act_bytes, layer)],
            [tp_comm(f"{tag}_grad_all_gather", "all_gather", "bwd_input", act_bytes, layer)],
            [
                tp_comm(
                    f"{tag}_grad_reduce_scatter",
                    "reduce_scatter",
                    "bwd_input",
                    act_bytes,
                    layer,
                    overlap_ops=overlap,
                )
            ]
            if gathers
            else [],
        )
    return _TpRegion(
        [],
        [tp_comm(f"{tag}_all_reduce", "all_reduce", "fwd", act_bytes, layer)],
        [],
        [tp_comm(f"{tag}_grad_all_reduce", "all_reduce", "bwd_input", act_bytes, layer, overlap)]
        if gathers
        else [],
    )


def layer_ops(model: ModelSpec, shard: Shard, layer: int) -> LayerOps:
    """Forward and backward ops of 0-based ``layer`` for one microbatch on one rank."""
    attention = (mla_branch if model.mla is not None else attention_branch)(model, shard, layer)
    mlp = (moe_branch if model.is_moe_layer(layer) else mlp_branch)(model, shard, layer)
    block = _parallel_block if model.block == "parallel" else _serial_block
    forward, backward = block(model, shard, layer, attention, mlp)
    groups = recompute_groups(model, forward, attention, mlp, model.is_moe_layer(layer))
    return LayerOps(tuple(forward), tuple(backward), attention.core, groups)


VOCAB_PARALLEL_CE_FWD_BYTES = 38
"""Bytes per logit of Megatron's vocabulary-parallel cross-entropy forward on upcast logits
(``_VocabParallelCrossEntropy`` called on ``logits.float()``; docs/references/frameworks.md
§Megatron's vocabulary-parallel cross-entropy): the upcast (2 read, 4 written), the row
maximum (4 read), the shift by it (4 + 4), the exponential (4 + 4), the row sum (4 read) and
the in-place division that leaves the softmax for the backward (4 + 4)."""
VOCAB_PARALLEL_CE_BWD_BYTES = 14
"""Bytes per logit of its backward: the in-place scaling of the saved softmax (4 + 4) and the
upcast's backward to the 16-bit gradient (4 read, 2 written)."""

MLA_UP_PROJ_OPS = frozenset(
    {"mla_latent_norm", "mla_q_up_cast", "mla_q_up", "mla_kv_up_cast", "mla_kv_up", "rope"}
)
"""MLA's latent norm, up-projections (with their FP8 casts) and rotary embedding."""
MOE_ACT_OPS = frozenset({"expert_activation", "expert_fc2_cast"})
"""The routed experts' activation function (and the FP8 cast of its output)."""


def recompute_groups(
    model: ModelSpec, forward: list[Op], attention: Branch, mlp: Branch, moe: bool
) -> dict[str, tuple[Op, ...]]:
    """Forward ops of one layer that each selective-recompute module re-runs.

    As Megatron-Core's ``--recompute-modules``: ``core_attn`` the attention core (with the
    rotary embedding); ``layernorm`` the two block norms, with the FP8 cast of each output
    (a fused norm-and-quantise in TransformerEngine); ``mla_up_proj`` MLA's latent norm,
    up-projections and rotary embedding; ``mlp`` a dense MLP; ``moe_act`` the routed
    experts' activation; ``shared_experts`` the shared experts; ``moe`` the whole MoE
    layer, router, dispatch and combine included.
    """
    norms: list[Op] = []
    for i, op in enumerate(forward):
        if op.name in ("norm1", "norm2"):
            norms.append(op)
            after = forward[i + 1] if i + 1 < len(forward) else None
            if after is not None and after.name.endswith("_cast"):
                norms.append(after)
    groups = {"core_attn": attention.core, "layernorm": tuple(norms)}
    if model.mla is not None:
        groups["mla_up_proj"] = tuple(op for op in forward if op.name in MLA_UP_PROJ_OPS)
    if not moe:
        groups["mlp"] = mlp.forward
        return groups
    groups["moe"] = mlp.forward
    groups["moe_act"] = tuple(op for op in mlp.forward if op.name in MOE_ACT_OPS)
    groups["shared_experts"] = tuple(op for op in mlp.forward if op.name.startswith("shared_"))
    return groups


def per_op_recompute(model: ModelSpec, shard: Shard, layer: int, ops: LayerOps) -> list[Op]:
    """Forward ops torchtitan's per-operator selective checkpointing re-runs, in order.

    Its policy (docs/references/frameworks.md §torchtitan) keeps the outputs of the attention
    kernel and of the odd-numbered matmuls of a block, counted in forward order (wq 1, wk 2,
    wv 3, wo 4, w1 5, w3 6, w2 7), and recomputes everything else up to the last tensor the
    backward needs: the norms, the key projection (wk), the rotary embedding and key/value
    expansion, the output projection (wo), the first residual add, the up projection (w3) and
    the activation. simtrain's QKV and gate/up GEMMs are fused, so the recomputed key and up
    projections are GEMMs of their own shapes here. Of the tensor-parallel collectives only
    the reduce-scatters are in the saved list: the sequence-parallel all-gathers before the
    QKV and MLP input projections re-run (and, without sequence parallelism, the all-reduce
    of the recomputed output projection).
    """
    t, tok = shard.tp, Tokens.of(model, shard)
    h, d = model.hidden_size, model.head_size
    kv, ffn = max(1, model.kv_heads // t), model.ffn_size // t
    k_proj = linear_layer("k_proj", tok.full, h, kv * d, shard, layer).forward
    up_proj = linear_layer("mlp_up", tok.full, h, ffn, shard, layer).forward
    kept = {"qkv", "qkv_cast", "mlp_fc1", "mlp_fc1_cast"}
    result: list[Op] = []
    for op in ops.forward:
        if op.name in ("mlp_fc2_cast", "mlp_fc2"):  # w2's output is kept; nothing after it
            break  # is needed by the backward (early stop)
        if op.kind == "attention" or op.name in kept or op.comm == "reduce_scatter":
            if op.name == "qkv":
                result += k_proj
            elif op.name == "mlp_fc1":
                result += up_proj
            continue
        result.append(op)
    return result


def _norm(name: str, phase: str, size: float, layer: int) -> Op:
    return memory_op(name, "norm", phase, size, layer)


def _residual(name: str, phase: str, size: float, layer: int) -> Op:
    return memory_op(name, "elementwise", phase, size, layer)


def norm_bytes(model: ModelSpec, elements: int, eager_norm: bool) -> tuple[float, float]:
    """Forward and backward bytes of a norm over ``elements`` 16-bit values.

    A fused norm reads and writes its tensor (4 bytes per element; the backward reads the
    input and the gradient and writes one, twice that). An eager RMSNorm (torchtitan's
    ``RMSNorm``, fp32 upcast) is a chain of kernels (:mod:`simtrain.workload.eager`);
    LayerNorm is one ATen kernel either way.

    Examples:
        >>> from simtrain.specs.model import ModelSpec
        >>> m = ModelSpec(name="m", num_layers=1, hidden_size=64, num_heads=1,
        ...               vocab_size=128, seq_length=16, norm="rmsnorm")
        >>> norm_bytes(m, 10, False), norm_bytes(m, 10, True)
        ((40, 80), (360, 920))
    """
    if eager_norm and model.norm == "rmsnorm":
        return elements * eager.RMSNORM_FWD_BYTES, elements * eager.RMSNORM_BWD_BYTES
    fused = 2 * elements * ACT_BYTES
    return fused, 2 * fused


def _serial_block(
    model: ModelSpec, shard: Shard, layer: int, attn: Branch, mlp: Branch
) -> tuple[list[Op], list[Op]]:
    tok = Tokens.of(model, shard)
    h = model.hidden_size
    act = tok.full * h * ACT_BYTES  # one full activation tensor [b, s, h]
    norm_f, norm_b = norm_bytes(model, tok.local * h, shard.eager == "all")
    # (bias +) dropout + residual add: read two tensors, write one (and a 1-byte mask).
    bda_bytes = tok.local * h * (3 * ACT_BYTES + (1 if model.dropout else 0))
    a = _tp_region(shard, "attn", act, layer, attn.gathers_input, len(attn.weight_tail))
    m = (
        _TpRegion([], [], [], [])
        if mlp.tp_local
        else _tp_region(shard, "mlp", act, layer, mlp.gathers_input, len(mlp.weight_tail))
    )
    forward = [
        _norm("norm1", "fwd", norm_f, layer),
        *a.entry,
        *attn.forward,
        *a.exit,
        _residual("bias_dropout_add1", "fwd", bda_bytes, layer),
        _norm("norm2", "fwd", norm_f, layer),
        *m.entry,
        *mlp.forward,
        *m.exit,
        _residual("bias_dropout_add2", "fwd", bda_bytes, layer),
    ]
    backward = [
        _residual("bias_dropout_add2_bwd", "bwd_input", bda_bytes, layer),
        *m.exit_grad,
        *mlp.backward,
        *m.entry_grad,
        *mlp.weight_tail,
        _norm("norm2_bwd", "bwd_input", norm_b, layer),
        _residual("bias_dropout_add1_bwd", "bwd_input", bda_bytes, layer),
        *a.exit_grad,
        *attn.backward,
        *a.entry_grad,
        *attn.weight_tail,
        _norm("norm1_bwd", "bwd_input", norm_b, layer),
    ]
    return forward, backward


def _parallel_block(
    model: ModelSpec, shard: Shard, layer: int, attn: Branch, mlp: Branch
) -> tuple[list[Op], list[Op]]:
    """Attention and MLP on the same normalised input; one TP reduction of their sum.

    With one shared norm both branches read one (gathered) tensor and their input gradients
    add up before one reduction; with a norm per branch each branch gathers and reduces its
    own input.
    """
    tok = Tokens.of(model, shard)
    h = model.hidden_size
    act = tok.full * h * ACT_BYTES
    norm_f, norm_b = norm_bytes(model, tok.local * h, shard.eager == "all")
    # x + attention + MLP: read three tensors, write one (and two 1-byte dropout masks).
    bda_bytes = tok.local * h * (4 * ACT_BYTES + (2 if model.dropout else 0))
    # An MLP on the rank's own tokens (MoE under SP) reads the normalised input before the
    # attention's gather and adds its output after the attention's reduction.
    local, mlp = (mlp, Branch((), (), ())) if mlp.tp_local else (Branch((), (), ()), mlp)
    tails = len(attn.weight_tail) + len(mlp.weight_tail)
    block = _tp_region(shard, "block", act, layer, overlap=tails)
    norms = [_norm("norm1", "fwd", norm_f, layer)]
    norms_bwd = [_norm("norm1_bwd", "bwd_input", norm_b, layer)]
    if model.num_block_norms == 2:
        a = _tp_region(shard, "attn", act, layer, overlap=len(attn.weight_tail))
        m = (
            _TpRegion([], [], [], [])
            if local.forward
            else _tp_region(shard, "mlp", act, layer, overlap=len(mlp.weight_tail))
        )
        norms.append(_norm("norm2", "fwd", norm_f, layer))
        norms_bwd.insert(0, _norm("norm2_bwd", "bwd_input", norm_b, layer))
        entry, grads = (
            [*a.entry, *m.entry],
            [
                *mlp.backward,
                *m.entry_grad,
                *mlp.weight_tail,
                *attn.backward,
                *a.entry_grad,
                *attn.weight_tail,
            ],
        )
    else:
        entry, grads = (
            block.entry,
            [
                *mlp.backward,
                *attn.backward,
                *block.entry_grad,
                *attn.weight_tail,
                *mlp.weight_tail,
            ],
        )
    forward = [
        *norms,
        *entry,
        *attn.forward,
        *mlp.forward,
        *block.exit,
        *local.forward,
        _residual("bias_dropout_add", "fwd", bda_bytes, layer),
    ]
    backward = [
        _residual("bias_dropout_add_bwd", "bwd_input", bda_bytes, layer),
        *local.backward,
        *block.exit_grad,
        *grads,
        *norms_bwd,
    ]
    return forward, backward


def embedding_ops(model: ModelSpec, shard: Shard) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Forward and backward ops of the (vocabulary-parallel) input embedding.

    The lookup reads a table row per token (two with a learned position table) and writes
    the activation; BLOOM's embedding norm follows the TP reduction.
    """
    tok = Tokens.of(model, shard)
    act = tok.full * model.hidden_size * ACT_BYTES
    rows = 2 if model.position_embedding == "learned" else 1
    fwd: list[Op] = [memory_op("embedding", "embedding", "fwd", (rows + 1) * act, -1)]
    bwd: list[Op] = []
    if shard.tp > 1:
        comm = "reduce_scatter" if shard.sp else "all_reduce"
        fwd.append(tp_comm(f"embedding_{comm}", comm, "fwd", act, -1))
    if model.embedding_norm:
        size = 2 * tok.local * model.hidden_size * ACT_BYTES
        fwd.append(_norm("embedding_norm", "fwd", size, -1))
        bwd.append(_norm("embedding_norm_bwd", "bwd_input", 2 * size, -1))
    bwd.append(memory_op("embedding_bwd", "embedding", "bwd_weight", (rows + 2) * act, -1))
    return tuple(fwd), tuple(bwd)


def head_ops(model: ModelSpec, shard: Shard) -> tuple[Op, ...]:
    """Final norm, LM head (vocabulary-parallel) and cross-entropy, forward then backward.

    The LM head stays in BF16 under FP8 training (TransformerEngine recipes keep the output
    layer in high precision).
    """
    t = shard.tp
    tok = Tokens.of(model, shard)
    h, vocab = model.hidden_size, model.vocab_size // t
    layer = model.num_layers  # the head comes after the last transformer layer
    act = tok.full * h * ACT_BYTES
    head = high_precision_linear("lm_head", tok.full, h, vocab, shard, layer, ACT_BYTES)
    norm_f, norm_b = norm_bytes(model, tok.local * h, shard.eager != "none")
    ops: list[Op] = [_norm("final_norm", "fwd", norm_f, layer)]
    if t > 1 and shard.sp:
        ops.append(tp_comm("head_all_gather", "all_gather", "fwd", act, layer))
    # fp32 logits: written by the GEMM epilogue, read twice and written once by the loss;
    # eager: the 16-bit logits upcast, then log-softmax and nll_loss; compiled: generated
    # kernels on the 16-bit logits (workload.eager).
    logits = tok.full * vocab
    if shard.eager in ("head", "all"):
        loss_fwd = logits * eager.CROSS_ENTROPY_FWD_BYTES
        loss_bwd = logits * eager.CROSS_ENTROPY_BWD_BYTES
    elif shard.eager == "norm":
        loss_fwd = logits * eager.COMPILED_CROSS_ENTROPY_FWD_BYTES
        loss_bwd = logits * eager.COMPILED_CROSS_ENTROPY_BWD_BYTES
    elif shard.cross_entropy == "vocab_parallel_fp32":
        loss_fwd = logits * VOCAB_PARALLEL_CE_FWD_BYTES
        loss_bwd = logits * VOCAB_PARALLEL_CE_BWD_BYTES
    else:
        loss_fwd = loss_bwd = logits * 4 * 3
    ops += [
        *head.forward,
        memory_op("cross_entropy", "loss", "fwd", loss_fwd, layer),
        memory_op("cross_entropy_bwd", "loss", "bwd_input", loss_bwd, layer),
        *head.dgrad,
    ]
    if t > 1:
        comm = "reduce_scatter" if shard.sp else "all_reduce"
        ops.append(tp_comm(f"head_grad_{comm}", comm, "bwd_input", act, layer, overlap_ops=1))
    ops += [
        head.wgrad,
        _norm("final_norm_bwd", "bwd_input", norm_b, layer),
    ]
    return tuple(ops)
