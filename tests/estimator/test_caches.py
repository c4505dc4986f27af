"""The estimator's shared caches give what working everything out afresh gives (issue 17).

A search estimates thousands of layouts with one :class:`~simtrain.estimator.Estimator`,
whose caches let layouts share work; a cache keyed too loosely would hand one layout
another's result. These tests compare an estimate that reuses cached work with one that
recomputes it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from simtrain.estimator import Estimator
from simtrain.estimator.chain import chain_actions
from simtrain.estimator.pipeline import schedule_shape
from simtrain.estimator.step import _cut
from simtrain.estimator.walk import NO_HOST
from simtrain.specs.loader import experiment_from_dict
from tests.conftest import LLAMA_TINY, experiment_dict


class _Forgetful(dict[Any, Any]):
    """A cache that keeps nothing: every lookup misses, as if there were no cache."""

    def __setitem__(self, key: Any, value: Any) -> None:
        """Drop the entry."""


def _spec(framework: str, zero_stage: int, batch: int) -> Any:
    """Llama-tiny with 8 layers on 16 GPUs, pp 2 x dp 8, 1F1B, ``batch / 8`` microbatches."""
    return experiment_from_dict(
        experiment_dict(
            {**LLAMA_TINY, "num_layers": 8},
            parallel={"pp": 2, "zero_stage": zero_stage, "global_batch_size": batch},
            training={"framework": framework},
        )
    )


def _recomputed(spec: Any) -> tuple[tuple[float, ...], list[Any]]:
    """``spec``'s estimate and gradient reductions, every reducing action worked out anew."""
    estimator = Estimator()
    estimator.estimate(spec)  # builds the contexts
    (context,) = estimator._contexts.values()
    context.reductions = _Forgetful()
    context.grads.clear()
    estimator._chains.clear()
    estimate = estimator.estimate(spec)
    found = (estimate.step_time_s, estimate.compute_s, estimate.exposed_comm_s)
    return found, sorted(context.grads.items(), key=repr)


@pytest.mark.parametrize(("framework", "zero_stage"), [("deepspeed", 2), ("megatron-core", 1)])
def test_reducing_actions_share_their_buckets_as_if_worked_out_afresh(framework, zero_stage):
    # DeepSpeed's ZeRO-2 reduces after every microbatch's backward: a rank's 16 backwards
    # of one chunk share one entry, and a second layout of the same chunks (another batch)
    # reuses the first's
    shared = Estimator()
    shared.estimate(_spec(framework, zero_stage, 64))
    spec = _spec(framework, zero_stage, 128)
    estimate = shared.estimate(spec)
    (context,) = shared._contexts.values()
    # a few kinds per rank (by the action after it), not one per microbatch
    assert 0 < len(context.reductions) < spec.parallel.num_microbatches
    found = (estimate.step_time_s, estimate.compute_s, estimate.exposed_comm_s)
    shape_key = (spec.parallel.pp, spec.parallel.num_microbatches)
    grads = sorted(
        ((k, v) for k, v in context.grads.items() if (k[0][1], k[0][2]) == shape_key), key=repr
    )
    assert (found, grads) == _recomputed(spec)


def _fields(estimate: Any) -> tuple[float, ...]:
    """An estimate's times and action count (not its wall time)."""
    return (estimate.step_time_s, estimate.compute_s, estimate.exposed_comm_s,
            estimate.bubble_s, estimate.num_actions)  # fmt: skip


@pytest.mark.parametrize(
    ("framework", "schedules", "reducers"),
    [
        # Megatron-Core's ZeRO-1 and ZeRO-2 reduce alike (once per step, the parameters
        # gathered after the optimizer): all-reduce (ZeRO-0) and reduce-scatter only
        ("megatron-core", ("1f1b", "zb-h1"), 2),
        # DeepSpeed runs bf16 ZeRO-0 as ZeRO-1, and its ZeRO-2 reduces after every
        # microbatch: a reducer of its own
        ("deepspeed", ("1f1b",), 2),
    ],
)
def test_zero_stages_and_schedules_of_one_placement_estimate_as_if_alone(
    framework, schedules, reducers
):
    # one estimator over the ZeRO stages and schedules of one placement: they share a
    # context (its rows and per-rank sums), and the stages that reduce alike share
    # gradient reductions and optimizer steps; each must come out as from a fresh estimator
    shared = Estimator()
    for schedule in schedules:
        for zero_stage in (0, 1, 2):
            parallel = {"pp": 2, "zero_stage": zero_stage, "global_batch_size": 64,
                        "pipeline_schedule": schedule}  # fmt: skip
            data = experiment_dict(
                {**LLAMA_TINY, "num_layers": 8},
                parallel=parallel,
                training={"framework": framework},
            )
            spec = experiment_from_dict(data)
            assert _fields(shared.estimate(spec)) == _fields(Estimator().estimate(spec))
    keys = {key[2] for context in shared._contexts.values() for key in context.grads}
    assert len(keys) == reducers


@pytest.mark.parametrize(
    ("schedule", "vpp"), [("1f1b", 1), ("interleaved", 2), ("zb-h1", 1), ("zb-h2", 1)]
)
def test_a_chain_resumed_where_it_was_left_ends_as_one_pass(schedule, vpp):
    # the estimator keeps a chain's state at its first owning action and resumes copies of
    # it (Estimator._resumed); stopping there and resuming must change nothing
    shape = schedule_shape(schedule, 4, 16, vpp)
    rng = random.Random(0)
    table = [
        (a, a + rng.uniform(0.0, 0.1), rng.uniform(0.0, 0.2), a * rng.uniform(0.5, 1.5),
         NO_HOST, rng.uniform(0.0, 0.5), rng.random() < 0.3)
        for a in (rng.uniform(0.5, 2.0) for _ in shape.slots)
    ]  # fmt: skip
    position, _, transfers = _cut(shape)
    assert 0 < position < len(shape.rank)
    syncs = tuple(rng.random() < 0.3 for _ in shape.slots)  # host waits before these
    for rules in ((True, True, ()), (False, False, ()), (True, False, syncs), (False, True, syncs)):
        whole = chain_actions(shape, table, 4, *rules)
        prefix = chain_actions(shape, table, 4, *rules, end=position)
        kept = prefix.kept(transfers).resumed(transfers, shape.num_transfers)
        resumed = chain_actions(shape, table, 4, *rules, kept, position)
        # everything but the arrivals of transfers nothing receives after the cut
        assert _kept(resumed) == _kept(whole)


def _kept(state: Any) -> tuple[Any, ...]:
    """What the estimator keeps of a chain (:meth:`Estimator._chain`)."""
    return (state.compute_free, state.hold, state.pp_free, state.marks, state.host_free,
            state.unsynced)  # fmt: skip


@pytest.mark.parametrize(
    ("framework", "schedule", "vpp"),
    [("megatron-core", "1f1b", 1), ("megatron-core", "interleaved", 2),
     ("megatron-core", "zb-h1", 1), ("deepspeed", "1f1b", 1)],
)  # fmt: skip
def test_zero_stages_resuming_a_shared_chain_estimate_as_if_alone(framework, schedule, vpp):
    # ZeRO-0, 1 and 2 of one placement chain the same rows up to the first action that
    # owns gradients: the later stages resume the first's chain from there, and must come
    # out as from a fresh estimator (DeepSpeed's ZeRO-2 reduces after every microbatch: its
    # chain differs earlier and runs from the start)
    shared = Estimator()
    for zero_stage in (0, 1, 2):
        parallel = {"pp": 2, "vpp": vpp, "zero_stage": zero_stage, "global_batch_size": 64,
                    "pipeline_schedule": schedule}  # fmt: skip
        spec = experiment_from_dict(
            experiment_dict(
                {**LLAMA_TINY, "num_layers": 8},
                parallel=parallel,
                training={"framework": framework},
            )
        )
        assert _fields(shared.estimate(spec)) == _fields(Estimator().estimate(spec))
    # one prefix: ZeRO-0's, resumed by ZeRO-1 (Megatron-Core's ZeRO-2 shares ZeRO-1's chain)
    assert len(shared._prefixes) == 1
