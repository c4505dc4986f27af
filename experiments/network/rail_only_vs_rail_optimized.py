"""Rail-only against rail-optimized for a GPT-3 175B hybrid-parallel step (issue 3).

Same 1,024 H100 (128 DGX nodes, 8 NDR NICs each), same program (GPT-3 175B, tp=8 inside a
node, pp=8, dp=16, global batch 512, micro-batch 1, 1F1B, full recomputation), timed with
the flow-level network model on two networks: ``dgx-h100-superpod`` (rail-optimized: spines
join all rails) and ``rail-only-h100`` (no spine between rails; cross-rail traffic goes
through NVLink). The alpha-beta model is shown for reference.

The rail-only paper (Wang et al., 2023, "How to Build Low-cost Networks for Large Language
Models (without Sacrificing Performance)") reports that rail-only matches the performance of
a rail-optimized any-to-any network for hybrid-parallel LLM training, because with Megatron's
rank order the tensor-parallel traffic stays in the NVLink domain and the pipeline and
data-parallel traffic joins GPUs of the same local index, i.e. the same rail; only
all-to-all (MoE) traffic crosses rails, at a small overhead.

Run: PYTHONPATH=. python experiments/network/rail_only_vs_rail_optimized.py
"""

from __future__ import annotations

import time

from simtrain.catalog import get_accelerator
from simtrain.compute.roofline import RooflineComputeModel
from simtrain.engine import run_program
from simtrain.network.alpha_beta import AlphaBetaNetwork
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.parallel.builder import build_program
from simtrain.paths import data_dir
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.loader import deep_merge, experiment_from_dict, load_yaml_tree

STEP = {
    "name": "gpt3-175b-1024xh100",
    "parallel": {
        "tp": 8,
        "pp": 8,
        "global_batch_size": 512,
        "micro_batch_size": 1,
        "recompute": "full",
        "pipeline_schedule": "1f1b",
    },
}


def step_time_s(preset: str, flow: bool) -> float:
    data = deep_merge(load_yaml_tree(data_dir("workloads") / "gpt3-175b.yaml"), STEP)
    data = deep_merge(data, load_yaml_tree(data_dir("topologies") / f"{preset}.yaml"))
    spec = experiment_from_dict(data, preset)
    compute = RooflineComputeModel(get_accelerator(spec.cluster.accelerator), spec.training.dtype)
    network = (
        FlowNetworkModel.from_cluster(spec.cluster)
        if flow
        else AlphaBetaNetwork.from_cluster(spec.cluster)
    )
    return run_program(build_program(spec), compute, network).step_time_s


def main() -> None:
    print(f"{'network':<20} {'model':<11} {'step (s)':>9} {'wall (s)':>9}")
    times = {}
    for preset in ("dgx-h100-superpod", "rail-only-h100"):
        for flow in (False, True):
            began = time.perf_counter()
            times[preset, flow] = step_time_s(preset, flow)
            name = "flow" if flow else "alpha-beta"
            wall = time.perf_counter() - began
            print(f"{preset:<20} {name:<11} {times[preset, flow]:>9.3f} {wall:>9.1f}")
    diff = times["rail-only-h100", True] / times["dgx-h100-superpod", True] - 1
    print(f"rail-only vs rail-optimized step time (flow model): {diff * 100:+.2f} %")
    for n in (64, 256):
        a2a_ms = [
            cluster_model(preset).collective_time_s("all_to_all", range(n), 2**28) * 1e3
            for preset in ("dgx-h100-superpod", "rail-only-h100")
        ]
        print(
            f"256 MiB all-to-all over {n} GPUs: rail-optimized {a2a_ms[0]:.2f} ms, "
            f"rail-only {a2a_ms[1]:.2f} ms"
        )


def cluster_model(preset: str) -> FlowNetworkModel:
    data = load_yaml_tree(data_dir("topologies") / f"{preset}.yaml")
    return FlowNetworkModel.from_cluster(ClusterSpec.model_validate(data["cluster"]))


if __name__ == "__main__":
    main()
