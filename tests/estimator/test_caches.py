"""The estimator's shared caches give what working everything out afresh gives (issue 17).

A search estimates thousands of layouts with one :class:`~simtrain.estimator.Estimator`,
whose caches let layouts share work; a cache keyed too loosely would hand one layout
another's result. These tests compare an estimate that reuses cached work with one that
recomputes it.
"""

from __future__ import annotations

from typing import Any

import pytest

from simtrain.estimator import Estimator
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
