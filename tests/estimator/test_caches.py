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
