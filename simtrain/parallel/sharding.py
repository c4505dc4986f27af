"""ZeRO-3 / FSDP parameter all-gathers as a stack issues them: granularity and prefetch.

A sharded rank must all-gather a layer's parameters before computing with them. How many
collectives that takes and how early they are issued is the stack's, read from its framework
profile (:class:`~simtrain.specs.framework.ShardingBehaviour`):

- *granularity*: one gather per unit (an FSDP-wrapped transformer block, FSDP's flat
  parameter or FSDP2's grouped all-gather), one per weight tensor (DeepSpeed's per-module
  fetch) or tensors coalesced into buckets. Each gather is its own collective, so each pays the
  ring latency of its group (``(n-1)·α`` for n ranks) on top of its bytes: fine-grained
  gathers on a large data-parallel group are latency-bound.
- *prefetch*: while a layer computes, the stack may already have issued the gathers of the
  next ones, up to ``prefetch_units`` gathers and ``prefetch_bytes`` bytes ahead (FSDP: one
  unit, its rate limiter; DeepSpeed: the 5e7-element prefetch bucket). A gather that is not
  prefetched is issued when its layer starts, and that layer waits for it.
- *recomputation*: under activation recomputation the recomputed forward either shares the
  backward's gather (FSDP: checkpointing inside the unit) or gathers again (DeepSpeed's hooks
  fire again).
- *copy-out*: a stack that gathers into flat buffers of its own (FSDP2,
  ``gather_output_buffers`` > 0) copies each gathered unit into its per-parameter tensors on
  the compute stream before the unit runs (``foreach_all_gather_copy_out``:
  ``split_with_sizes_copy``, the gathered bytes read and written once); FSDP1's flat
  parameter, DeepSpeed and Megatron compute on the gathered buffer itself.

The gathers become collective ops in the op sequence, with ``overlap_ops`` counting the
compute ops that run while each is in flight (:mod:`simtrain.parallel.segments`).
"""

from __future__ import annotations

from collections.abc import Sequence

from simtrain.specs.framework import ShardingBehaviour
from simtrain.workload.ops import Op
from simtrain.workload.primitives import collective, memory_op
from simtrain.workload.transformer import ACT_BYTES


def fetch_units(tensors: Sequence[int], behaviour: ShardingBehaviour) -> list[float]:
    """Bytes of each all-gather for one layer whose weight tensors have ``tensors`` elements.

    Examples:
        >>> from simtrain.catalog.frameworks import get_framework
        >>> fsdp = get_framework("pytorch-fsdp1").sharding
        >>> fetch_units([100, 300], fsdp)
        [800.0]
        >>> fetch_units([100, 300], get_framework("deepspeed").sharding)
        [200.0, 600.0]
    """
    sizes = [float(t * ACT_BYTES) for t in tensors if t > 0]
    if not sizes:
        return []
    if behaviour.gather_granularity == "per_unit":
        return [sum(sizes)]
    if behaviour.gather_granularity == "per_tensor":
        return sizes
    buckets: list[float] = []
    for size in sizes:
        if buckets and buckets[-1] + size <= behaviour.gather_bucket_bytes:
            buckets[-1] += size
        else:
            buckets.append(size)
    return buckets


def copy_out_op(gathered_bytes: float, phase: str, layer: int) -> Op:
    """The copy of a gathered unit out of the all-gather's flat buffer into its parameters.

    Examples:
        >>> copy_out_op(1e9, "fwd", 3).bytes_accessed
        2000000000.0
    """
    return memory_op("param_copy_out", "elementwise", phase, 2 * gathered_bytes, layer)


def _runs(ops: Sequence[Op], split_recompute: bool) -> list[tuple[int, list[Op]]]:
    """Consecutive ops of one layer (and, if asked, of one recompute/other phase)."""
    runs: list[tuple[tuple[int, bool], list[Op]]] = []
    for op in ops:
        key = (op.layer, split_recompute and op.phase == "recompute")
        if runs and runs[-1][0] == key:
            runs[-1][1].append(op)
        else:
            runs.append((key, [op]))
    return [(key[0], run) for key, run in runs]


def with_param_gathers(
    ops: Sequence[Op],
    tensors: dict[int, list[int]],
    axis: str,
    behaviour: ShardingBehaviour,
) -> list[Op]:
    """``ops`` with the parameter all-gathers inserted where the stack issues them.

    Args:
        ops: one pass (forward, backward, ...) of a model chunk, layer after layer.
        tensors: local weight-tensor elements per layer (-1: the input embedding).
        axis: mesh axis of the shard group.
        behaviour: the stack's sharding behaviour.
    """
    runs = _runs(ops, behaviour.regather_for_recompute)
    units = [fetch_units(tensors.get(layer, []), behaviour) for layer, _ in runs]
    if behaviour.gather_output_buffers:
        runs = [
            (layer, [copy_out_op(sum(units[r]), run[0].phase, layer), *run] if units[r] else run)
            for r, (layer, run) in enumerate(runs)
        ]
    compute = [sum(not op.is_comm for op in run) for _, run in runs]
    result: list[Op] = []
    issued = [0] * len(runs)  # gathers of each run already issued
    emitted_compute = 0  # compute ops appended so far

    def issue(run: int, index: int) -> None:
        layer = runs[run][0]
        # compute ops between now and the start of the consuming run run concurrently
        window = sum(compute[:run]) - emitted_compute
        result.append(
            collective(
                "param_all_gather", "all_gather", axis, "fwd", units[run][index], layer, window
            )
        )
        issued[run] += 1

    for r, (_, run) in enumerate(runs):
        while issued[r] < len(units[r]):  # not prefetched: issued now, the run waits
            issue(r, issued[r])
        # Prefetch the following runs' gathers, in order, within the stack's limits.
        ahead_units = ahead_bytes = 0.0
        for later in range(r + 1, len(runs)):
            for index in range(len(units[later])):
                size = units[later][index]
                if index < issued[later]:
                    ahead_units += 1
                    ahead_bytes += size
                    continue
                if (
                    ahead_units + 1 > behaviour.prefetch_units
                    or ahead_bytes + size > behaviour.prefetch_bytes
                ):
                    break
                issue(later, index)
                ahead_units += 1
                ahead_bytes += size
            else:
                continue
            break
        result += run
        emitted_compute += compute[r]
    return result
