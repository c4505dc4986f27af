"""DualPipe with expert and context parallelism: builds, runs, pairs its chunks, and reduced
mode (one rank per stage) agrees with full mode (every rank) at 64 GPUs."""

from __future__ import annotations

import pytest

from simtrain.api import simulate
from simtrain.parallel.overlap import paired_steps, step_actions
from tests.conftest import LLAMA_TINY, make_experiment

MOE = {
    **LLAMA_TINY,
    "name": "moe-small",
    "num_layers": 4,
    "hidden_size": 1024,
    "num_heads": 16,
    "seq_length": 1024,
    "num_experts": 32,
    "moe_top_k": 4,
    "moe_ffn_hidden_size": 512,
}
DUALPIPE_EP = (
    "parallel.pp=4",
    "parallel.pipeline_schedule=dualpipe",
    "parallel.ep=16",
    "cluster.num_gpus=64",
    "parallel.global_batch_size=128",
    "training.execution_mode=cuda_graphs",
)


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_reduced_and_full_mode_agree_on_ep_with_dualpipe(dispatcher):
    spec = make_experiment(*DUALPIPE_EP, f"parallel.moe_dispatcher={dispatcher}", model=MOE)
    reduced, full = simulate(spec, full=False), simulate(spec, full=True)
    assert len(full.ranks) == 64 and len(reduced.ranks) == 4
    assert full.step_time_s == pytest.approx(reduced.step_time_s, rel=5e-3)
    exposed = reduced.summary()["exposed_comm_by_category_s"]["ep_comm"]
    assert exposed == pytest.approx(full.summary()["exposed_comm_by_category_s"]["ep_comm"])


def test_dualpipe_pairs_its_forward_backward_chunks_and_hides_all_to_alls():
    on = make_experiment(*DUALPIPE_EP, "parallel.moe_dispatcher=deepep", model=MOE)
    assert on.parallel.overlap_ep_comm  # on by default under DualPipe
    pairs = [s for s in paired_steps(step_actions(on.parallel)[1]) if len(s) == 2]
    assert pairs and all(a.kind == "F" and b.kind == "B" for a, b in pairs)
    off = make_experiment(*DUALPIPE_EP, "parallel.moe_dispatcher=deepep",
                          "parallel.overlap_ep_comm=false", model=MOE)  # fmt: skip
    hidden, exposed = simulate(on).summary(), simulate(off).summary()
    assert hidden["step_time_s"] < exposed["step_time_s"]
    ep = "exposed_comm_by_category_s"
    assert hidden[ep]["ep_comm"] < 0.8 * exposed[ep]["ep_comm"]


@pytest.mark.parametrize(
    "overrides",
    [
        ("parallel.ep=2",),
        ("parallel.cp=2",),
        ("parallel.ep=2", "parallel.cp=2"),
        ("parallel.ep=4", "parallel.cp=2", "parallel.tp=2", "parallel.sp=true", "parallel.etp=1"),
    ],
    ids=["ep", "cp", "ep-cp", "ep-cp-tp-folded"],
)
def test_dualpipe_with_expert_and_context_parallelism_runs(overrides):
    # Regression: these raised AttributeError ('int' object has no attribute 'is_moe').
    spec = make_experiment(
        "parallel.pp=2",
        "parallel.pipeline_schedule=dualpipe",
        "cluster.num_gpus=16",
        "parallel.global_batch_size=32",
        *overrides,
        model={**MOE, "num_layers": 2},
    )
    assert simulate(spec).step_time_s > 0
