"""The estimator's lower bound never exceeds its estimate, and a search pruned by it finds the
same best layouts as estimating every one (issue 17: the planner's branch and bound)."""

from __future__ import annotations

from collections import Counter

import pytest

from simtrain.estimator import Estimator
from simtrain.specs.loader import experiment_from_dict, load_yaml_tree
from simtrain.sweep.plan_search import PlanProblem, _best_of_size
from simtrain.sweep.search import Stage1
from simtrain.sweep.space import LayoutSpace
from tests.conftest import GPT_TINY, LLAMA_TINY, ROOT
from tests.estimator.test_agreement import MOE_TINY, random_experiments


@pytest.mark.parametrize(
    ("model", "seed", "batch"),
    [({**GPT_TINY, "num_layers": 12}, 11, 64), ({**LLAMA_TINY, "num_layers": 13}, 12, 64),
     (MOE_TINY, 13, 64), ({**LLAMA_TINY, "num_layers": 8}, 14, 512)],
)  # fmt: skip
def test_the_lower_bound_is_below_the_estimate(model, seed, batch):
    # tiny models are mostly communication and launches: the bound is loose, never wrong
    estimator = Estimator()
    for spec in random_experiments(model, 40, seed, batch=batch):
        bound = estimator.lower_bound(spec)
        assert 0 < bound <= estimator.estimate(spec).step_time_s * (1 + 1e-9), spec.parallel


def test_branch_and_bound_keeps_the_best_that_estimating_everything_keeps():
    model = {**LLAMA_TINY, "num_layers": 8}
    space = LayoutSpace(tp=(1, 2, 4), pp=(1, 2, 4), cp=(1, 2), micro_batch_sizes=(1, 2))
    problem = PlanProblem(model, {"accelerator": "H100-SXM", "gpus_per_node": 8}, (16,),
                       16 * model["seq_length"] * 8, 1e9, space)  # fmt: skip
    points = list(enumerate(point for _, point in problem.points()))
    layouts = problem.layouts()
    found = {}
    for top in (3, None):
        counts: Counter[str] = Counter()
        kept = _best_of_size(layouts, Stage1(), 16, points, top, "test", counts, [])
        found[top] = ([index for _, index, _ in kept], counts)
    pruned, counts = found[3]
    everything, all_counts = found[None]
    assert pruned == everything[:3]
    assert counts["bounded"] > 0 and all_counts["bounded"] == 0
    assert counts["estimated"] + counts["bounded"] == all_counts["estimated"] > 100


@pytest.mark.parametrize(
    ("model", "seed"), [({**LLAMA_TINY, "num_layers": 8}, 21), ({**GPT_TINY, "num_layers": 12}, 22)]
)
def test_an_estimate_is_skipped_only_when_it_exceeds_the_limit(model, seed):
    # the walked bound (a rank's actions back to back) never exceeds the estimate
    estimator = Estimator()
    skipped = 0
    for spec in random_experiments(model, 40, seed, batch=64):
        step = estimator.estimate(spec).step_time_s
        assert estimator.estimate_within(spec, step * (1 + 1e-9)) is not None, spec.parallel
        for fraction in (0.5, 0.8, 0.95):
            found = estimator.estimate_within(spec, fraction * step)
            skipped += found is None
            assert found is None or found.step_time_s == step
    assert skipped > 0


def test_a_layout_whose_reduced_counts_are_not_linear_is_chained_in_full_and_counted():
    """Llama 3 8B, tp 1 pp 2 cp 2 dp 2, 64 microbatches of zb-h1: the first warm-up's reduced
    counts are not linear yet and the next warm-up has none, so the step is chained in full
    (it once was extrapolated below its bound) and counted as ``not_linear``."""
    model = load_yaml_tree(ROOT / "workloads" / "llama3-8b.yaml")["model"]
    spec = experiment_from_dict(
        {
            "name": "not-linear",
            "model": model,
            "parallel": {
                "tp": 1,
                "pp": 2,
                "cp": 2,
                "micro_batch_size": 1,
                "global_batch_size": 128,
                "zero_stage": 0,
                "pipeline_schedule": "zb-h1",
                "recompute": "full",
            },
            "cluster": {"accelerator": "H100-SXM", "num_gpus": 8, "gpus_per_node": 8},
            "training": {"framework": "megatron-core"},
        }
    )
    estimator = Estimator()
    step = estimator.estimate(spec).step_time_s
    assert estimator.stats == Counter({"not_linear": 1})
    assert estimator.lower_bound(spec) <= step
