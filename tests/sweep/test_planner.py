import pytest
import yaml

from simtrain.errors import SpecError
from simtrain.sweep.planner import SCHEDULES, layout_sweep, plan
from tests.sweep.helpers import TINY_BASE


@pytest.fixture
def tiny_model(tmp_path):
    path = tmp_path / "tiny-model.yaml"
    path.write_text(yaml.safe_dump({"model": TINY_BASE["model"]}))
    return str(path)


def test_layout_sweep_keeps_tp_in_a_node_and_batch_a_multiple_of_dp():
    base = {"cluster": {"gpus_per_node": 8}}
    spec = layout_sweep({"seq_length": 8192}, base, [1024, 24576], 16 * 2**20)
    sizes = spec.zip[0]
    for n, pp, gbs in zip(*sizes.values(), strict=True):
        dp = n // (8 * pp)
        assert gbs % dp == 0 and abs(gbs * 8192 - 16 * 2**20) <= dp * 8192 / 2
    assert len(spec.zip[1]["parallel.vpp"]) == len(SCHEDULES)


def test_plan_picks_the_cheapest_in_time_and_reports_late_ones(tiny_model):
    result = plan(tiny_model, 1e9, 1.0, "H100-SXM", batch_tokens=8192, failure_preset=None,
                  num_workers=1)  # fmt: skip
    best = result.cheapest
    assert best is not None and best is result.fastest
    assert best.num_gpus == 8 and best.parallel["tp"] == 8 and best.goodput == 1.0
    # failure-free: days = steps x step time; dollars = GPU-hours x the H100 preset
    steps = 1e9 / (best.parallel["global_batch_size"] * 512)
    assert best.days == pytest.approx(-(-steps // 1) * best.step_time_s / 86400)
    assert best.cost_usd == pytest.approx(best.days * 24 * 8 * result.usd_per_gpu_hour)

    late = plan(tiny_model, 1e9, 1e-6, "H100-SXM", batch_tokens=8192, failure_preset=None,
                budget_usd=1.0, num_workers=1)  # fmt: skip
    assert late.cheapest is None and late.fastest is None
    assert not late.options[0].meets_deadline and not late.options[0].within_budget


def test_plan_rejects_bad_numbers_and_unknown_accelerators(tiny_model):
    with pytest.raises(SpecError, match="'--deadline-days' must be > 0"):
        plan(tiny_model, 1e9, 0, "H100-SXM")
    with pytest.raises(SpecError, match="'--accelerator' must be a known accelerator"):
        plan(tiny_model, 1e9, 1, "H900")
