"""Speed benchmark of the flow-level network model (issue 3): wall time per collective.

Cases, all on the dgx-h100-superpod preset (rail-optimized NDR, 8 x H100 per node) scaled to
16,384 GPUs, flow-level, Simple protocol:

- a 1 GiB ring all-reduce over all 16,384 GPUs (8 rings of 16,384 flows, 32,766 steps);
- a 1 GiB hierarchical all-reduce over the same GPUs;
- a 1 GiB all-to-all (direct) over 256 GPUs (65,280 flows).

The target is at most 2 s of wall time per case on one core. Topology construction is timed
separately. Run: PYTHONPATH=. python experiments/bench/collectives.py
"""

from __future__ import annotations

import time

from simtrain.network.flow_model import FlowNetworkModel
from simtrain.paths import data_dir
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.loader import apply_overrides, load_yaml_tree
from simtrain.topology import build_topology

GiB = 2**30
CASES = [
    ("all_reduce", 16384, "ring"),
    ("all_reduce", 16384, "hierarchical"),
    ("all_to_all", 256, "direct"),
]
BUSBW_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_to_all": lambda n: (n - 1) / n}


def main() -> None:
    data = load_yaml_tree(data_dir("topologies") / "dgx-h100-superpod.yaml")
    cluster = ClusterSpec.model_validate(
        apply_overrides(data, ["cluster.num_gpus=16384"])["cluster"]
    )
    began = time.perf_counter()
    topology = build_topology(cluster)
    build_s = time.perf_counter() - began
    print(
        f"dgx-h100-superpod x {cluster.num_gpus} GPUs: {topology.num_links} links, "
        f"built in {build_s:.3f} s"
    )
    header = (
        f"{'collective':<12} {'ranks':>6} {'algo':<13} {'sim time (ms)':>14} "
        f"{'busbw (GB/s)':>13} {'wall (s)':>9}"
    )
    print(header)
    print("-" * len(header))
    for kind, n, algo in CASES:
        model = FlowNetworkModel(topology, algorithm=algo, protocol="simple")
        began = time.perf_counter()
        time_s = model.collective_time_s(kind, range(n), GiB)
        wall_s = time.perf_counter() - began
        busbw = GiB / time_s * BUSBW_FACTOR[kind](n) / 1e9
        print(f"{kind:<12} {n:>6} {algo:<13} {time_s * 1e3:>14.2f} {busbw:>13.2f} {wall_s:>9.3f}")


if __name__ == "__main__":
    main()
