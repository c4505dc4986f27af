"""The analytic checkpoint clock against a step-by-step account."""

import math

import pytest
from reliability_helpers import restart_params

from simtrain.reliability import monte_carlo, simulate_run
from simtrain.reliability.checkpoint import CheckpointClock, CheckpointPlan, CheckpointTier
from simtrain.reliability.run import RunParams


def test_failure_free_run_pays_one_stall_per_checkpoint():
    params = restart_params(0.0, interval_s=100.0, stall_s=5.0, restart_s=0.0, total_work_s=1050)
    (run,) = monte_carlo(params, num_runs=1, seed=0)
    # checkpoints after 100, 200, ..., 1000 s of work: 10 stalls, none at the very end
    assert run.num_checkpoints == 10
    assert run.wall_s == pytest.approx(1050 + 10 * 5.0)
    assert run.lost_s["checkpoint"] == pytest.approx(50.0)
    assert run.ettr == pytest.approx(1050 / 1100)


def test_advance_in_pieces_equals_advance_at_once():
    plan = CheckpointPlan(100.0, 5.0, (CheckpointTier(1, 0.0, 1.0),), 5.0)
    once, pieces = CheckpointClock(plan, 10_000.0), CheckpointClock(plan, 10_000.0)
    once.advance(0.0, 737.0, 1.0)
    t = 0.0
    for step in (3.0, 101.0, 2.5, 330.0, 0.5, 300.0):
        pieces.advance(t, t + step, 1.0)
        t += step
    assert t == 737.0
    assert pieces.work_s == pytest.approx(once.work_s)
    assert pieces.num_checkpoints == once.num_checkpoints == 7
    assert pieces.stall_left_s == pytest.approx(once.stall_left_s)


def test_snapshot_is_durable_only_after_the_persist():
    # interval 100 s, stall 1 s, persist 30 s: checkpoint 1 ends its stall at 101 s
    plan = CheckpointPlan(100.0, 1.0, (CheckpointTier(1, 30.0, 2.0),), 30.0)
    clock = CheckpointClock(plan, 10_000.0)
    clock.advance(0.0, 120.0, 1.0)
    lost, load_s = clock.restore(120.0, set())
    assert lost == pytest.approx(119.0)  # the persist was still running: back to zero
    assert load_s == 2.0
    clock = CheckpointClock(plan, 10_000.0)
    clock.advance(0.0, 140.0, 1.0)
    lost, _ = clock.restore(140.0, set())
    assert lost == pytest.approx(39.0)  # durable at 131 s: only the work after it is lost


def test_in_memory_falls_back_to_storage_when_the_peer_is_lost():
    plan = CheckpointPlan(
        10.0, 0.1, (CheckpointTier(1, 0.0, 0.5, 0.5), CheckpointTier(5, 3.0, 20.0)), 3.0
    )
    clock = CheckpointClock(plan, 10_000.0)
    clock.advance(0.0, 75.0, 1.0)  # 7 checkpoints: memory has work 70, storage work 50
    lost, load_s = clock.restore(75.0, {0})
    assert lost == pytest.approx(74.3 - 50.0)  # 7 cycles of 10.1 s end at 70.7 s
    assert clock.work_s == pytest.approx(50.0)
    assert load_s == 20.0
    clock = CheckpointClock(plan, 10_000.0)
    clock.advance(0.0, 75.0, 1.0)
    _, load_s = clock.restore(75.0, set())
    assert clock.work_s == pytest.approx(70.0)
    assert load_s == 0.5


def test_no_checkpoint_and_frequent_failures_gives_up_instead_of_hanging():
    params = RunParams(
        total_work_s=1e6,
        step_time_s=1.0,
        num_nodes=8,
        dp=1,
        sources=restart_params(1e-3, 1, 0, 0, 1).sources,
        checkpoint=CheckpointPlan(math.inf, 0.0, (CheckpointTier(1, 0.0, 0.0),), 0.0),
        recovery=restart_params(1e-3, 1, 0, 0, 1).recovery,
        max_wall_s=2e6,
    )
    run = simulate_run(params, __import__("numpy").random.default_rng(0))
    assert not run.finished
    assert run.wall_s == pytest.approx(2e6)
