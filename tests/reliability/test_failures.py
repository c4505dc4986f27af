"""Failure sources: job-level rates, Weibull inter-arrivals, stragglers, policy variants."""

import dataclasses

import numpy as np
import pytest
from reliability_helpers import restart_params

from simtrain.reliability import monte_carlo
from simtrain.reliability.failures import InterArrivalSampler, job_sources
from simtrain.reliability.run import StragglerSource
from simtrain.specs.reliability import FailureProcessSpec, ReliabilitySpec


@pytest.mark.parametrize("shape", [None, 0.6, 1.0, 2.5])
def test_sampler_keeps_the_mean_whatever_the_shape(shape):
    sampler = InterArrivalSampler(np.random.default_rng(0), 100.0, shape)
    draws = np.array([sampler() for _ in range(20_000)])
    assert draws.mean() == pytest.approx(100.0, rel=0.03)
    if shape is not None and shape < 1:
        assert draws.std() > draws.mean()  # bursty: more spread than exponential


def test_rates_scale_with_devices_and_merge_by_cause():
    spec = ReliabilitySpec(
        failures=(
            FailureProcessSpec(component="gpu", rate_per_device_hour=1e-5),
            FailureProcessSpec(component="gpu", rate_per_device_hour=2e-5),
            FailureProcessSpec(component="host", rate_per_device_hour=1e-4, device="node"),
        ),
        failure_rate_scale=2.0,
    )
    sources = {s.cause: s.rate_per_s for s in job_sources(spec, 1024, 8)}
    assert sources["gpu"] * 3600 == pytest.approx(2 * 3e-5 * 1024)
    assert sources["host"] * 3600 == pytest.approx(2 * 1e-4 * 128)


def test_stragglers_cost_their_duration_times_the_lost_speed():
    params = restart_params(0.0, 3600.0, 0.0, 0.0, 1000 * 3600.0)
    slow = StragglerSource(rate_per_s=1 / 3600.0, slowdown_factor=1.25, duration_s=600.0)
    (run,) = monte_carlo(dataclasses.replace(params, stragglers=(slow,)), 1, seed=0)
    # ≈1 episode per hour, each worth 600 · (1 − 1/1.25) = 120 s of lost time
    expected_lost_s = run.wall_s / 3600.0 * 120.0
    assert run.lost_s["straggler"] == pytest.approx(expected_lost_s, rel=0.1)


def test_weibull_bursts_keep_the_failure_count():
    exp = restart_params(1 / 3600.0, 600.0, 5.0, 60.0, 2000 * 3600.0)
    bursty = dataclasses.replace(
        exp, sources=(dataclasses.replace(exp.sources[0], weibull_shape=0.7),)
    )
    runs = [monte_carlo(p, 1, seed=1)[0] for p in (exp, bursty)]
    per_hour = [sum(r.interruptions.values()) / r.wall_s * 3600 for r in runs]
    assert per_hour[0] == pytest.approx(1.0, rel=0.1)
    assert per_hour[1] == pytest.approx(1.0, rel=0.1)
