"""Eager PyTorch modules as the kernels they launch: bytes per element, forward and backward.

A stack that writes its model as plain PyTorch modules and runs them eagerly (torchtitan's
Llama, ``training.framework: torchtitan``; the profile field ``eager_modules``) launches one
ATen kernel per operator, each a full pass over HBM, where a fused kernel (Transformer
Engine, Apex, Megatron's fused ops, XLA, torch.compile) reads its inputs and writes its output
once. The modules and their autograd backward, as docs/references/frameworks.md §Eager modules
lists them (torchtitan ``models/norms.py`` and ``models/llama/model.py``, 2024; PyTorch's
derivative formulas), cost per element of their input (16-bit activations, fp32 where the
module upcasts; per-row reductions of one value per token are left out):

=========================  ==========================================================  =====
module                     kernels (bytes read + written per element)                  bytes
=========================  ==========================================================  =====
RMSNorm forward            to fp32 2+4, pow 4+4, mean 4, x·rsqrt 4+4, to bf16 4+2,       36
                           ·weight 2+2
RMSNorm backward           ·weight: grad·w 2+2, grad·out 2+2+2 and its sum over tokens   92
                           2; to-fp32 backward 2+4; x·r: grad·r 4+4, grad·x 4+4+4 and
                           its row sum 4; mean backward 4; pow backward: x.pow(1) 4+4,
                           ·2 4+4, ·grad 4+4+4; the two fp32 gradients added 4+4+4;
                           to bf16 4+2
rotary (complex), each     to fp32 2+4, complex multiply 4+4, to bf16 4+2; backward     20
way, per rotated element   the same three in reverse
repeat_kv, each way        per key/value tensor: read the kv heads, write all heads     2·(kv+q)
                           (the backward sums them back)
SiLU(w1·x) · (w3·x)        forward: silu 2+2, multiply 2+2+2 (per ffn element)          10
  backward                 grad·up 2+2+2, grad·silu 2+2+2, silu backward 2+2+2           18
gradient sum               x feeds wq, wk and wv (two adds), and w1 and w3 (one add):    6
                           each add reads two 16-bit gradients and writes one
cross-entropy forward      logits to fp32 2+4, log-softmax 4+4 (per logit)              14
  backward                 nll_loss zeros 4, log-softmax backward 4+4+4, to bf16 4+2    22
  compiled, forward        16-bit logits read for the maximum and the exponentials' sum  4
  compiled, backward       16-bit logits read, 16-bit gradient written                   4
=========================  ==========================================================  =====

The fused equivalents simtrain charges otherwise (:mod:`simtrain.workload.transformer`,
:mod:`simtrain.workload.branches`): a norm reads and writes its 16-bit tensor (4 bytes per
element, 8 backward), rotary 4 each way, the gated activation 6 and 12, the loss 12 and 12.
"""

from __future__ import annotations

from typing import Literal

EagerModules = Literal["none", "norm", "head", "all"]
"""Which modules run eagerly: none (fused kernels), norm (the final norm only: torch.compile
per transformer block and a compiled loss), head (the final norm and the loss: compiled
blocks, eager loss) or all."""

RMSNORM_FWD_BYTES = 36
"""Bytes per element of an eager RMSNorm forward (see the module table)."""
RMSNORM_BWD_BYTES = 92
"""Bytes per element of its autograd backward."""
ROPE_BYTES = 20
"""Bytes per rotated element of the complex-number rotary embedding, each way."""
SWIGLU_FWD_BYTES = 10
"""Bytes per ffn element of ``silu(w1·x) * (w3·x)`` forward."""
SWIGLU_BWD_BYTES = 18
"""Bytes per ffn element of its backward."""
GRAD_SUM_BYTES = 6
"""Bytes per element of one autograd gradient accumulation (two 16-bit reads, one write)."""
CROSS_ENTROPY_FWD_BYTES = 14
"""Bytes per logit of the fp32 cross-entropy forward."""
CROSS_ENTROPY_BWD_BYTES = 22
"""Bytes per logit of its backward."""
COMPILED_CROSS_ENTROPY_FWD_BYTES = 4
"""Bytes per logit of a compiled cross-entropy forward (``torch.compile`` of the same
function): the 16-bit logits read twice, for the row maximum and the sum of exponentials,
the upcast fused into both reads (assumed: two reduction passes)."""
COMPILED_CROSS_ENTROPY_BWD_BYTES = 4
"""Bytes per logit of its backward: the 16-bit logits read, their 16-bit gradient written."""


def kv_expand_bytes(tokens: int, q_width: int, kv_width: int) -> float:
    """Bytes of ``repeat_kv`` on keys and values, each way (0 without grouped queries).

    Each of the two tensors is read at its kv width and written at the query width
    (``expand`` then ``reshape`` copies); the backward reads the query-wide gradient and
    writes the kv-wide sum.

    Examples:
        >>> kv_expand_bytes(1, 4096, 1024)
        20480
        >>> kv_expand_bytes(1, 4096, 4096)
        0
    """
    if kv_width >= q_width:
        return 0
    return 2 * tokens * 2 * (q_width + kv_width)
