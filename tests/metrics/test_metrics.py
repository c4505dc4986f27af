import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simtrain.api import simulate
from simtrain.metrics.timeline import covered_up_to, merge_intervals, union_intervals
from tests.conftest import GPT_TINY, LLAMA_TINY, make_experiment

configs = st.fixed_dictionaries(
    {
        "model": st.sampled_from([GPT_TINY, LLAMA_TINY]),
        "tp": st.sampled_from([1, 2]),
        "pp": st.sampled_from([1, 2]),
        "micro": st.sampled_from([1, 2]),
        "schedule": st.sampled_from(["1f1b", "gpipe", "zb-h1"]),
        "recompute": st.sampled_from(["none", "selective", "full"]),
        "zero": st.sampled_from([0, 1, 2]),
        "accelerator": st.sampled_from(["H100-SXM", "A100-80GB", "MI300X", "B200"]),
        "sp": st.booleans(),
    }
)


def spec_from(c):
    return make_experiment(
        f"parallel.tp={c['tp']}",
        f"parallel.pp={c['pp']}",
        f"parallel.micro_batch_size={c['micro']}",
        f"parallel.pipeline_schedule={c['schedule']}",
        f"parallel.recompute={c['recompute']}",
        f"parallel.zero_stage={c['zero']}",
        f"parallel.sp={str(c['sp'] and c['tp'] > 1).lower()}",
        f"cluster.accelerator={c['accelerator']}",
        "parallel.global_batch_size=32",
        model=c["model"],
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs)
def test_utilisation_is_a_fraction_and_time_is_accounted(config):
    result = simulate(spec_from(config))
    summary = result.summary()
    assert 0 < summary["mfu"] <= summary["hfu"] <= 1
    for rank in result.ranks:
        total = rank.busy_s + rank.exposed_comm_s + rank.exposed_host_s + rank.bubble_s
        assert total == pytest.approx(result.step_time_s, rel=1e-9)
    assert summary["tokens_per_s"] == pytest.approx(32 * 128 / result.step_time_s)


def test_full_and_reduced_modes_agree():
    spec = make_experiment("parallel.tp=2", "parallel.pp=2", "parallel.global_batch_size=32")
    reduced, full = simulate(spec, full=False), simulate(spec, full=True)
    assert full.step_time_s == pytest.approx(reduced.step_time_s, rel=1e-9)
    assert len(full.ranks) == 16 and len(reduced.ranks) == 2


def test_more_microbatches_shrink_the_bubble():
    deep = ("parallel.pp=4", "model.num_layers=8")
    small = simulate(make_experiment(*deep, "parallel.global_batch_size=16"))
    large = simulate(make_experiment(*deep, "parallel.global_batch_size=64"))
    assert large.summary()["bubble_fraction"] < small.summary()["bubble_fraction"]


def test_interval_helpers():
    merged = merge_intervals([(0, 2), (1, 3), (5, 6)])
    assert merged == [(0, 3), (5, 6)]
    starts, ends = union_intervals(np.array([5.0, 0.0, 1.0]), np.array([6.0, 2.0, 3.0]))
    assert list(zip(starts, ends, strict=True)) == merged
    # covered length before t: [0,3) and [5,6) give 0, 2, 3, 3, 3.5, 4
    t = np.array([0.0, 2.0, 3.0, 4.0, 5.5, 9.0])
    assert list(covered_up_to(t, starts, ends)) == [0.0, 2.0, 3.0, 3.0, 3.5, 4.0]
