"""Linear layers as ops, at the training precision or under an FP8 recipe.

Under FP8 training as TransformerEngine runs it (``docs/references/numerics.md`` §FP8), the
three GEMMs of every linear layer (forward, input gradient, weight gradient) take 8-bit
operands: E4M3 activations and weights forward, E5M2 gradients backward (HYBRID format), or
E4M3 block-scaled data under MXFP8. Attention, the LM head, the MoE router and every
elementwise op stay in BF16. Each 8-bit GEMM operand is produced by a memory-bound cast:

- forward: the input X is cast once into two copies, row-wise (for the forward GEMM) and
  column-wise/transposed (kept for the weight-gradient GEMM, X^T @ dY): read 2 bytes, write
  1 + 1 bytes per element;
- backward: the output gradient dY likewise (row-wise for the input gradient, column-wise
  for the weight gradient);
- weights: cast once per step (both copies), not per microbatch; the builder emits that cast
  after the optimizer step (:func:`weight_cast_op`).

Recipes differ in the scale bookkeeping the casts carry (bytes per element cast):

- ``delayed`` (per-tensor delayed scaling: the scale comes from an amax history, and the cast
  kernel records the new amax on the fly): 2 read + 2 written = 4;
- ``current`` (per-tensor current scaling: an amax pass over the tensor, then the cast): 6;
- ``blockwise`` (DeepSeek-V3's 1x128 activation / 128x128 weight tiles with FP32 scales):
  4 + 2·4/128;
- ``mxfp8`` (Blackwell: 32-element blocks with one E8M0 scale byte, both copies): 4 + 2/32.

Under the per-tensor recipes (``delayed``, ``current``) the input- and weight-gradient GEMMs
accumulate with split accumulation (partial sums promoted to FP32 at intervals, cuBLASLt's
fast accumulation off) and the forward GEMM with fast accumulation: TransformerEngine's
``_2X_ACC_FPROP = False``, ``_2X_ACC_DGRAD = _2X_ACC_WGRAD = True`` passed as
``use_split_accumulator`` to its GEMMs, and torchao's float8 defaults (``use_fast_accum``
on the output GEMM only); ``docs/references/numerics.md`` §FP8. Those ops carry
``split_accumulator``; the compute model prices it per part. The block-scaled recipes are
left as they are (DeepSeek-V3's kernels promote in every GEMM; Blackwell's MXFP8 GEMMs have
no fast-accumulation mode).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simtrain.workload.ops import Op
from simtrain.workload.primitives import linear, memory_op
from simtrain.workload.shard import Shard

CAST_BYTES_PER_ELEMENT = {
    "delayed": 4.0,
    "current": 6.0,
    "blockwise": 4.0 + 2 * 4 / 128,
    "mxfp8": 4.0 + 2 / 32,
}
"""Bytes read and written per element cast to FP8 (both copies), by recipe (see above)."""
SPLIT_ACCUMULATOR_RECIPES = frozenset({"delayed", "current"})
"""Recipes whose backward GEMMs accumulate with split accumulation (see above)."""


@dataclass(frozen=True)
class LinearOps:
    """The ops of one linear layer for one microbatch.

    Attributes:
        forward: the input cast (under FP8) and the forward GEMM.
        dgrad: the output-gradient cast (under FP8) and the input-gradient GEMM.
        wgrad: the weight-gradient GEMM.
    """

    forward: tuple[Op, ...]
    dgrad: tuple[Op, ...]
    wgrad: Op


def fp8_cast(name: str, phase: str, elements: float, recipe: str, layer: int) -> Op:
    """A memory-bound cast of ``elements`` 16-bit values into both FP8 copies."""
    return memory_op(name, "elementwise", phase, elements * CAST_BYTES_PER_ELEMENT[recipe], layer)


def linear_layer(
    name: str, tokens: int, n_in: int, n_out: int, shard: Shard, layer: int, batch: int = 1
) -> LinearOps:
    """Ops of a linear layer y = x @ W (``batch`` of them as one grouped GEMM).

    Examples:
        >>> ops = linear_layer("qkv", 1024, 64, 192, Shard(1, dtype="fp8"), 0)
        >>> [op.name for op in ops.forward], ops.forward[1].dtype
        (['qkv_cast', 'qkv'], 'fp8')
        >>> [op.name for op in linear_layer("qkv", 1024, 64, 192, Shard(1), 0).forward]
        ['qkv']
        >>> [o.split_accumulator for o in (ops.forward[1], ops.dgrad[1], ops.wgrad)]
        [False, True, True]
    """
    fwd, dgrad, wgrad = linear(
        name, tokens, n_in, n_out, shard.linear_bytes, layer, batch, shard.linear_dtype
    )
    if not shard.low_precision:
        return LinearOps((fwd,), (dgrad,), wgrad)
    recipe = shard.recipe
    if recipe in SPLIT_ACCUMULATOR_RECIPES:
        dgrad = replace(dgrad, split_accumulator=True)
        wgrad = replace(wgrad, split_accumulator=True)
    return LinearOps(
        (fp8_cast(f"{name}_cast", "fwd", batch * tokens * n_in, recipe, layer), fwd),
        (fp8_cast(f"{name}_grad_cast", "bwd_input", batch * tokens * n_out, recipe, layer), dgrad),
        wgrad,
    )


def high_precision_linear(
    name: str, tokens: int, n_in: int, n_out: int, shard: Shard, layer: int, dtype_bytes: int
) -> LinearOps:
    """A linear layer that stays in 16 (or 32) bits under FP8 training (LM head, router)."""
    fwd, dgrad, wgrad = linear(
        name, tokens, n_in, n_out, dtype_bytes, layer, dtype=shard.high_dtype
    )
    return LinearOps((fwd,), (dgrad,), wgrad)


def weight_cast_op(fp8_weight_elements: float, recipe: str) -> Op:
    """The once-per-step cast of the rank's FP8 linear weights into both 8-bit copies."""
    return fp8_cast("fp8_weight_cast", "optimizer", fp8_weight_elements, recipe, -1)
