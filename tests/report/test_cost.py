"""Cost, energy and carbon: published-run sanity from first principles, arithmetic identities."""

import math
from typing import get_args

import pytest

from simtrain.api import simulate
from simtrain.catalog.power import GRID_GCO2_PER_KWH
from simtrain.catalog.prices import PRESET_PRICES, preset_price
from simtrain.errors import SpecError
from simtrain.metrics.cost import cost_summary, resolve_price, run_totals
from simtrain.specs.cost import GridPreset
from simtrain.specs.loader import load_experiment
from tests.conftest import ROOT, make_experiment

LLAMA3_405B = ROOT / "experiments" / "validation" / "llama3" / "llama3-405b-8192.yaml"


@pytest.fixture(scope="module")
def tiny_pipeline():
    spec = make_experiment(
        "parallel.pp=2", "parallel.global_batch_size=8", "training.total_tokens=1e9"
    )
    return simulate(spec)


@pytest.mark.parametrize("tflops_per_gpu", [400.0, 376.0])
def test_llama3_405b_gpu_hours_match_published(tflops_per_gpu):
    """15.6T tokens on 16,384 H100 at the published throughput vs 30.84M GPU-hours.

    400 TF/s per GPU is Llama 3's figure at 16K GPUs (41% of 989 TF/s, hardware.md §7.1);
    376 TF/s is 38% MFU, the low end of the range. Model FLOPs per token come from simtrain's
    own count (6·N plus attention), not from the paper.
    """
    from simtrain.workload.counts import model_flops_per_sequence

    model = load_experiment(LLAMA3_405B).model
    flops_per_token = model_flops_per_sequence(model) / model.seq_length
    num_gpus, tokens_per_step = 16384, 2048 * 8192
    tokens_per_s = num_gpus * tflops_per_gpu * 1e12 / flops_per_token
    totals = run_totals(15.6e12, tokens_per_step, tokens_per_step / tokens_per_s, num_gpus)
    assert totals.gpu_hours == pytest.approx(30.84e6, rel=0.15)


def test_deepseek_v3_cost_from_published_throughput():
    """DeepSeek-V3 report (arXiv:2412.19437): 180K H800 GPU-hours per trillion tokens on 2,048
    GPUs, 14.8T pre-training tokens (2,664K GPU-hours), plus 119K (context extension) and 5K
    (post-training): 2,788K GPU-hours, $5.576M at $2 per GPU-hour (hardware.md §7.4)."""
    num_gpus, tokens_per_step = 2048, 15_360 * 4096  # the report's batch; any value works
    job_tokens_per_s = 1e12 / (180e3 * 3600 / num_gpus)
    totals = run_totals(14.8e12, tokens_per_step, tokens_per_step / job_tokens_per_s, num_gpus)
    assert totals.gpu_hours == pytest.approx(2.664e6, rel=1e-3)
    assert totals.wall_s / 86400 / 14.8 == pytest.approx(3.66, abs=0.05)  # "3.7 days per T"
    price = PRESET_PRICES["H800"].usd_per_gpu_hour
    usd = (totals.gpu_hours + 119e3 + 5e3) * price
    assert usd == pytest.approx(5.576e6, rel=0.15)
    assert usd == pytest.approx(5.576e6, rel=1e-3)


def test_run_totals_rounds_steps_up_and_divides_by_goodput():
    totals = run_totals(1001, 100, 2.0, 4, goodput=0.8)
    assert totals.num_steps == 11
    assert totals.productive_s == 22.0
    assert totals.wall_s == pytest.approx(27.5)
    assert totals.gpu_hours == pytest.approx(27.5 * 4 / 3600)


def test_price_presets_are_dated_and_unknown_accelerators_have_none():
    for price in PRESET_PRICES.values():
        assert price.date and price.source.startswith("docs/references/hardware.md §7.4")
    assert preset_price("h100-sxm").usd_per_gpu_hour == 2.49
    with pytest.raises(SpecError, match=r"cost\.usd_per_gpu_hour"):
        preset_price("MI300X")


def test_price_precedence():
    assert resolve_price(make_experiment())[0] == 2.49
    spec = make_experiment(reliability={"gpu_hour_price_usd": 3.0})
    assert resolve_price(spec) == (3.0, "reliability.gpu_hour_price_usd")
    spec = make_experiment(reliability={"gpu_hour_price_usd": 3.0}, cost={"usd_per_gpu_hour": 1.5})
    assert resolve_price(spec) == (1.5, "cost.usd_per_gpu_hour")
    price, source = resolve_price(make_experiment("cluster.accelerator=MI300X"))
    assert price is None and "set cost.usd_per_gpu_hour" in source


def test_cost_spec_rejects_typos_and_bad_values():
    with pytest.raises(SpecError, match=r"'cost\.usd_per_gpu_hr' is not a known field"):
        make_experiment(cost={"usd_per_gpu_hr": 2.0})
    with pytest.raises(SpecError, match=r"cost\.pue"):
        make_experiment(cost={"pue": 0.9})


def test_per_step_per_token_and_run_arithmetic(tiny_pipeline):
    r = tiny_pipeline
    cost = cost_summary(r)
    gpu_hours = r.num_gpus * r.step_time_s / 3600
    assert cost["per_step"]["gpu_hours"] == pytest.approx(gpu_hours)
    assert cost["per_step"]["usd"] == pytest.approx(gpu_hours * 2.49)
    per_mtok = cost["per_million_tokens"]
    assert per_mtok["usd"] == pytest.approx(gpu_hours * 2.49 * 1e6 / r.tokens_per_step)
    run = cost["run"]
    steps = math.ceil(1e9 / r.tokens_per_step)
    assert run["num_steps"] == steps
    assert run["usd"] == pytest.approx(steps * cost["per_step"]["usd"])
    assert run["energy_kwh"] == pytest.approx(steps * cost["per_step"]["energy_kwh"])
    half = cost_summary(r, goodput=0.5, goodput_source="test")
    assert half["run"]["usd"] == pytest.approx(2 * run["usd"])
    assert half["run"]["wall_days"] == pytest.approx(2 * run["productive_days"])


def test_energy_identities_and_tdp_cap(tiny_pipeline):
    r = tiny_pipeline
    cost = cost_summary(r)
    power = cost["power"]
    cap = r.accelerator.tdp_watts
    # device power lies between the idle floor and the TDP cap
    assert 0.2 * cap <= power["device_mean_watts"] <= cap
    devices_j = power["device_mean_watts"] * r.num_gpus * r.step_time_s
    hosts_j = power["host_watts_per_node"] * r.spec.cluster.num_nodes * r.step_time_s
    facility_kwh = (devices_j + hosts_j) * power["pue"] / 3.6e6
    assert cost["per_step"]["energy_kwh"] == pytest.approx(facility_kwh)
    assert cost["per_step"]["co2_kg"] == pytest.approx(facility_kwh * 429 / 1e3)


def test_overrides_and_grid_presets(tiny_pipeline):
    spec = tiny_pipeline.spec.model_copy(
        update={"cost": make_experiment(cost={"grid": "zero", "pue": 1.0}).cost}
    )
    cost = cost_summary(simulate(spec))
    assert cost["per_step"]["co2_kg"] == 0.0 and cost["power"]["pue"] == 1.0
    assert set(GRID_GCO2_PER_KWH) == set(get_args(GridPreset))
    with pytest.raises(SpecError, match=r"cost\.grid"):
        make_experiment(cost={"grid": "mars"})


def test_accelerator_without_power_figure_reports_no_energy():
    r = simulate(make_experiment("cluster.accelerator=TPUv5p", "cluster.gpus_per_node=4",
                                 cost={"usd_per_gpu_hour": 1.0}))  # fmt: skip
    cost = cost_summary(r)
    assert cost["power"] is None and cost["per_step"]["energy_kwh"] is None
    assert cost["per_step"]["usd"] == pytest.approx(r.num_gpus * r.step_time_s / 3600)
