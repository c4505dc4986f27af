import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtrain.engine import run_program
from simtrain.errors import SpecError
from simtrain.parallel.schedule_timing import (
    ScheduleMetrics,
    StageTimes,
    inflight_timeline,
    schedule_metrics,
    schedule_program,
)
from simtrain.parallel.schedules import build_schedule

EQUAL = StageTimes(forward_s=1.0, backward_s=2.0, weight_s=1.0)  # T_F = T_B = T_W = 1


def replay(name: str, pp: int, m: int, vpp: int = 1, times: StageTimes = EQUAL) -> ScheduleMetrics:
    program = schedule_program(build_schedule(name, pp, m, vpp), times)
    result = run_program(program)
    return schedule_metrics(program, result.start_s, result.end_s)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["gpipe", "1f1b"]),
    st.integers(1, 8),
    st.integers(1, 16),
    st.floats(0.5, 3.0),
    st.floats(0.5, 3.0),
)
def test_gpipe_and_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(name, pp, m, t_f, t_b):
    metrics = replay(name, pp, m, times=StageTimes(t_f, t_b, 0.0))
    assert metrics.bubble_fraction == pytest.approx((pp - 1) / (m + pp - 1), rel=1e-12, abs=1e-12)
    assert metrics.step_time_s == pytest.approx((m + pp - 1) * (t_f + t_b), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(1, 4), st.integers(2, 4))
def test_interleaved_bubble_is_p_minus_1_over_vm_plus_p_minus_1(pp, rounds, vpp):
    m = pp * rounds
    metrics = replay("interleaved", pp, m, vpp)
    expected = (pp - 1) / (vpp * m + pp - 1)
    assert metrics.bubble_fraction == pytest.approx(expected, rel=1e-12)
    # chunks take 1/v of a stage: total work per rank is unchanged
    assert metrics.step_time_s == pytest.approx(3 * m + 3 * (pp - 1) / vpp, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(0, 8))
def test_zb_h1_bubble_time_is_p_minus_1_times_tf_plus_tb_minus_tw(pp, extra):
    m = pp + extra  # the closed form needs m >= p (enough Ws to fill the cool-down)
    metrics = replay("zb-h1", pp, m)
    t_f, t_b, t_w = 1.0, 1.0, 1.0  # split B = backward_s - weight_s
    expected = (pp - 1) * (t_f + t_b - t_w)
    assert metrics.bubble_time_s == pytest.approx([expected] * pp)
    # a third of 1F1B's bubble (p-1)(T_F+T_B+T_W) at equal times
    one_f_one_b = replay("1f1b", pp, m)
    assert sum(one_f_one_b.bubble_time_s) == pytest.approx(3 * sum(metrics.bubble_time_s))


def test_zb_h2_fills_more_of_the_bubble_than_zb_h1():
    # At T_F = T_B = T_W both reach the bound 3m + p - 1 of a synchronised step (the last
    # stage cannot start earlier); with T_W < T_B the extra warm-up forwards of H2 pay off.
    assert replay("zb-h2", 4, 8).step_time_s == replay("zb-h1", 4, 8).step_time_s == 27.0
    times = StageTimes(forward_s=1.0, backward_s=2.5, weight_s=0.5)
    h1, h2 = replay("zb-h1", 4, 8, times=times), replay("zb-h2", 4, 8, times=times)
    assert h2.step_time_s < h1.step_time_s < replay("1f1b", 4, 8, times=times).step_time_s


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(1, 16))
def test_1f1b_peak_inflight_is_p_minus_i(pp, m):
    metrics = replay("1f1b", pp, m)
    assert metrics.peak_inflight_microbatches == tuple(min(pp - i, m) for i in range(pp))


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 16), (6, 12)])
def test_gpipe_holds_all_microbatches(pp, m):
    assert replay("gpipe", pp, m).peak_inflight_microbatches == (m,) * pp


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 12), (6, 12)])
def test_zb_h2_first_stage_holds_2p_minus_1(pp, m):
    peaks = replay("zb-h2", pp, m).peak_inflight_microbatches
    assert peaks == tuple(2 * (pp - i) - 1 for i in range(pp))


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 12), (6, 12), (8, 16)])
def test_dualpipe_peak_inflight_is_pp_plus_1(pp, m):
    metrics = replay("dualpipe", pp, m)
    assert max(metrics.peak_inflight_microbatches) == pp + 1
    assert metrics.peak_inflight_microbatches[0] == pp + 1


@pytest.mark.parametrize(("pp", "vpp"), [(2, 2), (4, 2), (4, 4), (8, 3)])
def test_interleaved_first_rank_memory_factor_matches_korthikanti(pp, vpp):
    # first rank holds p·(1 + (p-1)/(p·v)) stage-equivalents (Korthikanti §4.2.3)
    metrics = replay("interleaved", pp, 2 * pp, vpp)
    assert metrics.peak_inflight_microbatches[0] == pytest.approx(pp * (1 + (pp - 1) / (pp * vpp)))


def test_p2p_time_delays_the_step_and_runs_on_sender_streams():
    actions = build_schedule("1f1b", 2, 2)
    program = schedule_program(actions, StageTimes(1.0, 2.0, 1.0, p2p_s=0.5))
    p2p = [t for t in program.tasks if t.category == "pp_comm"]
    # 2 activations down + 2 gradients up
    assert sorted((t.rank, t.stream) for t in p2p) == [
        (0, "pp_comm:1"),
        (0, "pp_comm:1"),
        (1, "pp_comm:0"),
        (1, "pp_comm:0"),
    ]
    result = run_program(program)
    metrics = schedule_metrics(program, result.start_s, result.end_s)
    # free comm: 3 slots of (1+2) = 9; each of the two crossings on the critical path adds 0.5
    assert metrics.step_time_s == pytest.approx(10.0)


def test_inflight_timeline_frees_before_the_next_forward():
    program = schedule_program(build_schedule("1f1b", 2, 3), EQUAL)
    result = run_program(program)
    counts = [c for _, c in inflight_timeline(program, result.start_s, result.end_s, rank=1)]
    assert counts == [1, 0, 1, 0, 1, 0]


def test_split_and_full_backward_durations():
    zb = schedule_program(build_schedule("zb-h1", 2, 2), StageTimes(1.0, 3.0, 1.0))
    assert {t.label[1]: t.duration_s for t in zb.tasks} == {"F": 1.0, "B": 2.0, "W": 1.0}
    plain = schedule_program(build_schedule("gpipe", 2, 2), StageTimes(1.0, 3.0, 1.0))
    assert {t.label[1]: t.duration_s for t in plain.tasks} == {"F": 1.0, "B": 3.0}


def test_stage_times_reject_weight_longer_than_backward():
    with pytest.raises(SpecError, match=r"'weight_s' must be at most 'backward_s'=1\.0"):
        StageTimes(1.0, 1.0, 2.0)
    with pytest.raises(SpecError, match="'forward_s' must be >= 0"):
        StageTimes(-1.0)


@pytest.mark.parametrize("pp", [2, 4, 6, 8])
def test_dualpipe_bubble_and_memory_do_not_grow_with_microbatches(pp):
    # pipeline-theory.md §9: neither DualPipe's bubble nor its activation memory grows with m.
    small, large = replay("dualpipe", pp, 2 * pp), replay("dualpipe", pp, 4 * pp + 2)
    assert small.bubble_time_s == pytest.approx(large.bubble_time_s)
    assert small.peak_inflight_microbatches == large.peak_inflight_microbatches
    # half the 1F1B bubble or better: (p-1)(T_F+T_B+T_W) for 1F1B at equal times
    assert max(small.bubble_time_s) <= (pp - 1) * 3 / 2
