"""The shipped DeepSeek-V3 experiment: the layout the report describes, and a full run."""

from pathlib import Path

import pytest

from simtrain.api import load_experiment, simulate
from simtrain.limits import estimate_tasks

CASE = Path(__file__).parents[2] / "experiments" / "deepseek-v3-2048xh800.yaml"


def test_the_experiment_is_the_published_layout():
    spec = load_experiment(CASE)
    p = spec.parallel
    assert (p.pp, p.ep, p.dp, p.tp, p.zero_stage) == (16, 64, 128, 1, 1)
    assert p.pipeline_schedule == "dualpipe" and p.overlap_ep_comm
    assert p.moe_dispatcher == "deepep" and spec.training.dtype == "fp8"
    assert (spec.cluster.accelerator, spec.cluster.num_gpus) == ("H800", 2048)
    assert spec.model.moe_router_group_topk == 4
    assert estimate_tasks(spec)[0] < 1_000_000  # simulates in seconds


@pytest.mark.slow
def test_the_overlap_hides_part_of_the_all_to_alls():
    spec = load_experiment(CASE)
    on = simulate(spec).summary()
    off = simulate(load_experiment(CASE, ["parallel.overlap_ep_comm=false"])).summary()
    exposed = "exposed_comm_by_category_s"
    assert 0 < on[exposed]["ep_comm"] < off[exposed]["ep_comm"]
    assert on["step_time_s"] < off["step_time_s"]
