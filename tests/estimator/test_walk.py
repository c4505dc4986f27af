"""The action walk charges gradient buckets by the engine's rule (issue 17).

The engine (``simtrain.engine.core._Contention``) charges a compute task that starts while a
collective is in flight ``contended/normal - 1`` times its overlap with the task's own
duration, once per (compute, collective) pair; the walk must give the same times.
"""

from __future__ import annotations

import pytest

from simtrain.api import compute_model_for
from simtrain.engine.host import issue_profile
from simtrain.estimator.chunks import BODIES
from simtrain.estimator.walk import OpTimes, SegmentTimes, walk
from simtrain.parallel.builder import chunk_ops, make_shard
from simtrain.parallel.segments import Segment, SegmentPlan, segment_ops
from simtrain.specs.loader import load_experiment

# three compute tasks: layer 0, then two of layer 1; slowdowns 1, 1 and 0.5
PLAN = SegmentPlan(
    tuple(Segment((), False, (), layer, (layer,)) for layer in (0, 1, 1)), trailing=()
)
TIMES = SegmentTimes(compute_s=(1.0, 2.0, 2.0), contended_s=(2.0, 4.0, 3.0))


def no_comm(_):
    raise AssertionError("the plan has no collectives")


def test_a_bucket_slows_the_tasks_after_it_over_their_own_durations():
    alone = walk(PLAN, TIMES, no_comm)
    assert alone.compute_end_s == pytest.approx(5.0)
    # issued at 1 for 3 s: the next task (2 s, slowdown 1) overlaps it for its whole 2 s and
    # runs 2 s longer, to 5; the flight is over when the last task starts
    timing = walk(PLAN, TIMES, no_comm, buckets=((0, 3.0),))
    assert timing.compute_end_s == pytest.approx(7.0)
    assert timing.trailing_s == ()


def test_a_bucket_issues_after_the_last_task_of_its_layer():
    timing = walk(PLAN, TIMES, no_comm, buckets=((1, 1.0),))
    assert timing.compute_end_s == pytest.approx(5.0)
    assert timing.trailing_s == ((0.0, 1.0),)  # left in flight for the next action


def test_collectives_in_flight_at_the_start_slow_the_first_tasks():
    timing = walk(PLAN, TIMES, no_comm, incoming=((0.0, 0.5), (0.5, 1.0)))
    # the first task (1 s, slowdown 1) is charged 0.5 s by each: by the first at its start,
    # by the second from the second's start (the engine's debt, paid at the task's end)
    assert timing.compute_end_s == pytest.approx(6.0)


@pytest.mark.parametrize("body", BODIES)
def test_op_times_sum_to_the_models_task_and_host_times_exactly(body):
    """A plan's times from cached per-op times are the model's own floats (issue 17)."""
    spec = load_experiment("experiments/quickstart.yaml")
    model = compute_model_for(spec)
    assert model.calibration.collective_sms  # contended times differ from the plain ones
    ops = chunk_ops(spec, make_shard(spec), range(0, 2), True, True)
    plan = segment_ops(getattr(ops, body), True)
    cached = OpTimes(model)
    by_ops = SegmentTimes.of(plan, cached.device_s, cached.profile, 1e-5, cached.contended_s)
    again = SegmentTimes.of(plan, cached.device_s, cached.profile, 1e-5, cached.contended_s)
    direct = SegmentTimes.of(
        plan,
        model.task_time_s,
        lambda run: issue_profile(run, model),
        1e-5,
        lambda run: model.task_time_s(run, contended=True),
    )
    assert by_ops == again == direct
    assert by_ops.contended_s != by_ops.compute_s
    assert all(cached.host_s(seg.ops) == model.host_time_s(seg.ops) for seg in plan.segments)
