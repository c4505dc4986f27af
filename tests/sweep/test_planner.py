import pytest
import yaml

from simtrain.errors import SpecError
from simtrain.sweep.planner import cluster_sizes, plan
from simtrain.sweep.space import LayoutSpace

SMALL = {"name": "small", "num_layers": 8, "hidden_size": 2048, "num_heads": 16,
         "vocab_size": 32000, "seq_length": 2048}  # fmt: skip
TOKENS = 4.8e10  # in one day at 60 % MFU this takes 3 GPUs: sizes 3, 4, 6 and 8 are tried
SPACE = LayoutSpace(tp=(1, 2, 4), pp=(1, 2), schedules=(("1f1b", 1), ("interleaved", 2)),
                    cp=(1,), zero=(0, 1, 3), micro_batch_sizes=(1, 2),
                    recompute=("none", "full"))  # fmt: skip


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "small-model.yaml"
    path.write_text(yaml.safe_dump({"model": SMALL}))
    return str(path)


def tiny_plan(tiny_model, deadline_days=1.0, **kwargs):
    kwargs = {"batch_tokens": 2048 * 64, "failure_preset": None, "num_workers": 1,
              "space": SPACE, **kwargs}  # fmt: skip
    return plan(tiny_model, TOKENS, deadline_days, "H100-SXM", **kwargs)


def test_layouts_keep_tp_in_a_node_and_batches_the_schedules_can_split():
    model = {"seq_length": 8192, "num_layers": 32}
    layouts = list(LayoutSpace().layouts(model, 1024, 8, 16 * 2**20))
    assert len({(p["parallel.tp"], p["parallel.pp"], p["parallel.cp"]) for p in layouts}) > 20
    for p in layouts:
        assert p["parallel.tp"] <= 8 and p["parallel.sp"] == (p["parallel.tp"] > 1)
        dp, mbs = p["parallel.dp"], p["parallel.micro_batch_size"]
        assert p["parallel.tp"] * p["parallel.pp"] * p["parallel.cp"] * dp == 1024
        batch = p["parallel.global_batch_size"]
        assert batch % (mbs * dp) == 0 and abs(batch * 8192 / 2**24 - 1) <= 0.25
        m = batch // (mbs * dp)
        if p["parallel.pipeline_schedule"] == "interleaved":
            assert m % p["parallel.pp"] == 0 and p["parallel.vpp"] > 1
        if p["parallel.pipeline_schedule"] == "dualpipe":
            assert m % 2 == 0 and m >= 2 * p["parallel.pp"]
        if p["parallel.pp"] == 1:
            assert p["parallel.pipeline_schedule"] == "1f1b"


def test_cluster_sizes_below_the_bound_when_max_gpus_is_too_small():
    assert cluster_sizes(2064, 8, None) == [2048, 3072, 4096, 6144, 8192]
    assert cluster_sizes(234, 8, 16) == [4, 8, 16]


@pytest.fixture(scope="module")
def two_stage(tiny_model):
    return tiny_plan(tiny_model)


def test_plan_picks_the_cheapest_in_time_and_simulates_the_picks(two_stage):
    result = two_stage
    best = result.cheapest
    assert best is not None and best.simulated and result.fastest.simulated
    assert best.num_gpus < result.fastest.num_gpus and best.cost_usd < result.fastest.cost_usd
    assert best.goodput == 1.0 and best.spare_nodes == 0
    assert abs(best.estimate_error) < 0.05  # the estimate it was picked by agrees
    # failure-free: days = steps x step time; dollars = GPU-hours x the H100 preset
    steps = TOKENS / (best.parallel["global_batch_size"] * 2048)
    assert best.days == pytest.approx(-(-steps // 1) * best.step_time_s / 86400)
    assert best.cost_usd == pytest.approx(best.days * 24 * best.num_gpus * result.usd_per_gpu_hour)
    c = result.counts
    assert result.inputs["sizes"] == [3, 4, 6, 8]
    assert c["enumerated"] == c["invalid"] + c["estimated"] + c["bounded"] + c["error"] > 200
    assert 1 <= c["simulated"] <= 2 * len(result.options)
    assert not all(o.simulated for o in result.options)  # sizes not picked: estimate only


@pytest.mark.slow
def test_two_stage_plan_agrees_with_the_exhaustive_one(tiny_model, two_stage):
    exhaustive = tiny_plan(tiny_model, exhaustive=True)
    assert exhaustive.counts["simulated"] > 10 * two_stage.counts["simulated"]
    assert all(o.simulated for o in exhaustive.options)
    assert two_stage.cheapest.parallel == exhaustive.cheapest.parallel
    assert two_stage.cheapest.step_time_s == pytest.approx(exhaustive.cheapest.step_time_s)


def test_spares_are_billed_as_set(tiny_model, two_stage):
    base = two_stage.cheapest
    held = tiny_plan(tiny_model, spares="100%").cheapest  # one node: the job's own
    assert held.spare_nodes == 1 and held.num_gpus == base.num_gpus
    per_node = min(8, held.num_gpus)
    assert held.cost_usd == pytest.approx(
        base.cost_usd * (held.num_gpus + per_node) / held.num_gpus
    )


def test_a_missed_deadline_says_how_many_gpus_would_meet_it(tiny_model):
    # 0.1 days needs about 30 GPUs at 60 % MFU; at most 8 are allowed
    late = tiny_plan(tiny_model, deadline_days=0.1, budget_usd=1.0, max_gpus=8)
    assert late.inputs["sizes"] == [2, 4, 8]
    assert late.cheapest is None and late.fastest is None
    assert not late.options[0].meets_deadline and not late.options[0].within_budget
    assert "needs >= " in late.advice and "GPUs to finish in 0.1 days" in late.advice
    assert "--max-gpus" in late.advice
    fastest = min(late.options, key=lambda o: o.days)
    needed = int(late.advice.split(">= ")[1].split()[0].replace(",", ""))
    assert needed == -(-fastest.num_gpus * fastest.days // 0.1) > 8


def test_plan_rejects_bad_numbers_and_unknown_accelerators(tiny_model):
    with pytest.raises(SpecError, match="'--deadline-days' must be > 0"):
        plan(tiny_model, TOKENS, 0, "H100-SXM")
    with pytest.raises(SpecError, match="'--accelerator' must be a known accelerator"):
        plan(tiny_model, TOKENS, 1, "H900")
    with pytest.raises(SpecError, match="'--spares' must be a node count"):
        plan(tiny_model, TOKENS, 1, "H100-SXM", spares="lots")
