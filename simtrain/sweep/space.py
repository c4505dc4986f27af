"""The planner's search space: every parallel layout of one model on one cluster size.

:func:`layouts` enumerates, lazily, the Cartesian product of the parallel axes DESIGN.md
names (tp with sequence parallelism, pp with each pipeline schedule and its virtual stages,
cp, ep for MoE models, dp derived, ZeRO stage 0-3 where 3 is FSDP, micro-batch size and
activation recomputation), the software stacks asked for (framework profiles,
``training.framework``), and the global batch nearest the target tokens per step that the
layout can split. Points are plain dotted-field mappings; the spec's own rules
(:class:`~simtrain.specs.experiment.ExperimentSpec`) still judge them, so a point here only
skips what could never be valid (degrees that do not divide the cluster). Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from simtrain.errors import SpecError
from simtrain.specs.base import divisors


@dataclass(frozen=True)
class LayoutSpace:
    """The values each parallel axis takes in a plan's search.

    Attributes:
        tp: tensor-parallel degrees (with sequence parallelism, as Megatron-LM trains).
        pp: pipeline degrees.
        schedules: (schedule, virtual stages) pairs tried when pp > 1.
        cp: context-parallel degrees.
        ep: expert-parallel degrees (MoE models only; 1 for dense ones).
        zero: ZeRO stages (3 is FSDP's full sharding).
        micro_batch_sizes: sequences per microbatch.
        recompute: activation recomputation modes.
        frameworks: framework profiles (None: the default profile). A stack refuses what it
            cannot run (FSDP has no ZeRO-1, for instance): the spec's rules judge that.
        max_batch_deviation: largest relative gap between a layout's global batch and the
            target tokens per step (a layout whose nearest splittable batch is further off
            trains a different recipe and is left out).
    """

    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = (1, 2, 4, 8, 16)
    schedules: tuple[tuple[str, int], ...] = (
        ("1f1b", 1),
        ("interleaved", 2),
        ("interleaved", 4),
        ("zb-h1", 1),
        ("dualpipe", 1),
    )
    cp: tuple[int, ...] = (1, 2)
    ep: tuple[int, ...] = (1, 2, 4, 8)
    zero: tuple[int, ...] = (0, 1, 2, 3)
    micro_batch_sizes: tuple[int, ...] = (1, 2, 4)
    recompute: tuple[str, ...] = ("none", "selective", "full")
    frameworks: tuple[str | None, ...] = (None,)
    max_batch_deviation: float = 0.25

    def layouts(
        self, model: dict[str, Any], num_gpus: int, gpus_per_node: int, batch_tokens: float
    ) -> Iterator[dict[str, Any]]:
        """Every layout of ``model`` on ``num_gpus`` GPUs, as ``parallel.*`` field values.

        Tensor parallelism stays inside a node (its collectives need the scale-up fabric).
        The global batch is the multiple of (micro-batch × dp) nearest ``batch_tokens``; the
        interleaved schedule needs the microbatches in multiples of pp, DualPipe an even
        number of at least 2·pp.

        Examples:
            >>> space = LayoutSpace(tp=(8,), pp=(1,), cp=(1,), zero=(1,),
            ...                     micro_batch_sizes=(1,), recompute=("full",))
            >>> [p["parallel.global_batch_size"] for p in space.layouts(
            ...     {"seq_length": 8192, "num_layers": 32}, 64, 8, 16 * 2**20)]
            [2048]
        """
        seq, layers = model["seq_length"], model["num_layers"]
        experts = int(model.get("num_experts") or 0)
        eps = [e for e in self.ep if experts and experts % e == 0] or [1]
        fits = set(divisors(num_gpus))
        for tp, pp, cp in itertools.product(self.tp, self.pp, self.cp):
            if tp > gpus_per_node or pp > layers or tp * pp * cp not in fits:
                continue
            dp = num_gpus // (tp * pp * cp)
            schedules = self.schedules if pp > 1 else (("1f1b", 1),)
            for (schedule, vpp), ep, mbs in itertools.product(
                schedules, eps, self.micro_batch_sizes
            ):
                if (dp * cp) % ep:
                    continue
                batch = _batch(batch_tokens / seq, mbs * dp, schedule, pp)
                if abs(batch * seq / batch_tokens - 1) > self.max_batch_deviation:
                    continue
                zeros = self.zero if dp * cp > 1 else self.zero[:1]  # nothing to shard
                for zero, recompute, framework in itertools.product(
                    zeros, self.recompute, self.frameworks
                ):
                    stack = {} if framework is None else {"training.framework": framework}
                    yield {
                        **stack,
                        "parallel.tp": tp,
                        "parallel.sp": tp > 1,
                        "parallel.pp": pp,
                        "parallel.pipeline_schedule": schedule,
                        "parallel.vpp": vpp,
                        "parallel.cp": cp,
                        "parallel.ep": ep,
                        "parallel.dp": dp,
                        "parallel.zero_stage": zero,
                        "parallel.micro_batch_size": mbs,
                        "parallel.recompute": recompute,
                        "parallel.global_batch_size": batch,
                    }


def frameworks_to_search(setting: str | None) -> tuple[str | None, ...]:
    """The ``frameworks`` of a space from a ``--frameworks`` setting.

    ``None`` is the default profile alone; ``all`` is every profile; otherwise a
    comma-separated list of profile names, each searched once.

    Raises:
        SpecError: an unknown profile name (the message lists the known ones), or ``all``
            in a list.

    Examples:
        >>> frameworks_to_search(None), frameworks_to_search("deepspeed, torchtitan, deepspeed")
        ((None,), ('deepspeed', 'torchtitan'))
    """
    from simtrain.catalog.frameworks import framework_names, get_framework

    if setting is None:
        return (None,)
    if setting.strip() == "all":
        return tuple(framework_names())
    names = tuple(name.strip() for name in setting.split(",") if name.strip())
    if not names:
        raise SpecError(f"'--frameworks' must name a profile or all (got {setting!r})")
    if "all" in names:
        raise SpecError(f"'--frameworks' must be all alone or a list of profiles (got {setting!r})")
    names = tuple(dict.fromkeys(names))  # a profile named twice is searched once
    for name in names:
        get_framework(name, "--frameworks")
    return names


def _batch(sequences: float, per_microbatch: int, schedule: str, pp: int) -> int:
    """Global batch nearest ``sequences`` that the layout's microbatches can make up.

    Examples:
        >>> _batch(2048, 16, "1f1b", 4), _batch(100, 16, "interleaved", 4)
        (2048, 128)
    """
    count = max(1, round(sequences / per_microbatch))
    if schedule == "interleaved" and pp > 1:
        count = max(pp, round(count / pp) * pp)
    elif schedule == "dualpipe":
        count = max(2 * pp, round(count / 2) * 2)
    return count * per_microbatch
