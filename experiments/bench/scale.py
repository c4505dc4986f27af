"""Scale benchmark: wall time, engine events and peak memory of one simulated step.

Usage: python experiments/bench/scale.py [--json] [--cases a,b,c,d,e] [--growth]

Cases (issue 5):
  a  Llama 3 405B on 16,384 H100 (TP8 PP16 DP128, interleaved with 4 virtual stages,
     16 microbatches per DP group) on the llama3-roce-h100 topology, default network model
  e  case a with the flow-level network model (contention between replicas)
  b  GPT-3 175B on 1,024 A100 (TP8 PP8 DP16, 1F1B, global batch 256), full mode: every rank
  c  Mixtral 8x7B on 256 H100 (TP2 PP4 EP8 DP32, global batch 512)
  d  GPT-6.7B-like (32 layers, hidden 4096, 32 heads, seq 2048) TP8 x DP8 on 64 H100
plus a bare SimPy loop of timeouts: the machine's reference event rate.

Each case runs in a fresh process (so peak RSS is its own); the table reports wall and CPU
time (the case's process time, user + sys: the figure to compare on a shared machine) of
build + timing + replay + metrics, the SimPy events of the replay and their rate (events
over the replay's own wall time, comparable with the bare SimPy loop), and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import time
from pathlib import Path
from queue import Empty

ROOT = Path(__file__).resolve().parents[2]

CASES = {
    "a": (
        "llama3-405b-16384xh100",
        ["workloads/llama3-405b.yaml", "topologies/llama3-roce-h100.yaml"],
        {
            "parallel": {
                "tp": 8,
                "sp": True,
                "pp": 16,
                "vpp": 4,
                "micro_batch_size": 1,
                "global_batch_size": 2048,
                "pipeline_schedule": "interleaved",
                "rank_order": "tp-cp-pp-dp",
                "zero_stage": 2,
            },
            "cluster": {"num_gpus": 16384},
        },
    ),
    "b": (
        "gpt3-175b-1024xa100-full",
        ["workloads/gpt3-175b.yaml"],
        {
            "parallel": {
                "tp": 8,
                "pp": 8,
                "micro_batch_size": 1,
                "global_batch_size": 256,
                "recompute": "full",
            },
            "cluster": {"accelerator": "A100-80GB", "num_gpus": 1024, "gpus_per_node": 8},
            "simulation": {"full": True},
        },
    ),
    "c": (
        "mixtral-8x7b-256xh100-ep8",
        ["workloads/mixtral-8x7b.yaml"],
        {
            "parallel": {
                "tp": 2,
                "sp": True,
                "pp": 4,
                "ep": 8,
                "micro_batch_size": 1,
                "global_batch_size": 512,
            },
            "cluster": {"accelerator": "H100-SXM", "num_gpus": 256, "gpus_per_node": 8},
        },
    ),
    "d": (
        "gpt-6.7b-64xh100-tp8dp8",
        [],
        {
            "model": {
                "name": "gpt-6.7b",
                "num_layers": 32,
                "hidden_size": 4096,
                "num_heads": 32,
                "vocab_size": 51200,
                "seq_length": 2048,
                "tied_embeddings": True,
            },
            "parallel": {"tp": 8, "micro_batch_size": 1, "global_batch_size": 128},
            "cluster": {"accelerator": "H100-SXM", "num_gpus": 64, "gpus_per_node": 8},
        },
    ),
}


CASES["e"] = (
    "llama3-405b-16384xh100-flow",
    CASES["a"][1],
    {**CASES["a"][2], "simulation": {"network_model": "flow"}},
)


def _spec(case: str):
    from simtrain.specs.loader import deep_merge, experiment_from_dict, load_yaml_tree

    name, bases, body = CASES[case]
    data: dict = {}
    for base in bases:
        data = deep_merge(data, load_yaml_tree(ROOT / base))
    return experiment_from_dict(deep_merge(data, {"name": name, **body}), name)


def _run_case(case: str, queue) -> None:
    from simtrain.api import simulate

    spec = _spec(case)
    began, cpu = time.perf_counter(), time.process_time()
    # The cases are large on purpose: past simtrain's default task limit (case b: 6.4M).
    result = simulate(spec, max_tasks=50_000_000)
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    queue.put(
        {
            "case": spec.name,
            "wall_s": wall,
            "cpu_s": cpu,
            "events": result.num_events,
            "events_per_s": result.num_events / result.replay_wall_s,
            "replay_wall_s": result.replay_wall_s,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "tasks": result.replay.num_tasks,  # host tasks counted, not recorded
            "simulated_ranks": len(result.ranks),
            "step_time_s": result.step_time_s,
        }
    )


def bare_simpy_rate(num_events: int = 500_000) -> float:
    """Events per second of a bare SimPy process that only yields timeouts."""
    import simpy

    env = simpy.Environment()

    def ticker():
        timeout = env.timeout
        for _ in range(num_events):
            yield timeout(1.0)

    env.process(ticker())
    began = time.perf_counter()
    env.run()
    return num_events / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print a JSON list of rows")
    parser.add_argument("--cases", default="a,b,c,d,e", help="comma-separated case letters")
    parser.add_argument(
        "--growth", action="store_true", help="also print how wall time grows with dp and pp"
    )
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    bare = bare_simpy_rate()
    rows = []
    for case in args.cases.split(","):
        queue = context.Queue()
        process = context.Process(target=_run_case, args=(case, queue))
        process.start()
        row = _result(queue, process, case)
        process.join()
        row["bare_simpy_events_per_s"] = bare
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'case':<28} {'wall s':>8} {'CPU s':>8} {'replay s':>9} {'tasks':>9} {'events':>9} "
        f"{'events/s':>10} {'% bare':>7} {'RSS MiB':>8} {'step s':>8}"
    )
    for r in rows:
        print(
            f"{r['case']:<28} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} {r['replay_wall_s']:>9.2f} "
            f"{r['tasks']:>9,} {r['events']:>9,} {r['events_per_s']:>10,.0f} "
            f"{r['events_per_s'] / bare:>7.1%} {r['peak_rss_bytes'] / 2**20:>8.0f} "
            f"{r['step_time_s']:>8.3f}"
        )
    print(f"bare SimPy timeout loop: {bare:,.0f} events/s")
    if args.growth:
        growth_tables()


def _result(queue, process, case: str) -> dict:
    """The case's row from ``queue``; exits naming the case if its process died without one."""
    while True:
        try:
            return queue.get(timeout=1.0)
        except Empty:
            if not process.is_alive():
                raise SystemExit(
                    f"case {case} failed (exit code {process.exitcode}); its error is above"
                ) from None


def _growth_spec(dp: int, pp: int, layers: int, microbatches: int):
    from simtrain.specs.loader import experiment_from_dict

    return experiment_from_dict(
        {
            "name": f"growth-dp{dp}-pp{pp}",
            "model": {
                "num_layers": layers,
                "hidden_size": 4096,
                "num_heads": 32,
                "vocab_size": 51200,
                "seq_length": 2048,
                "tied_embeddings": True,
            },
            "parallel": {
                "tp": 8,
                "pp": pp,
                "micro_batch_size": 1,
                "global_batch_size": microbatches * dp,
            },
            "cluster": {"accelerator": "H100-SXM", "num_gpus": 8 * pp * dp, "gpus_per_node": 8},
        }
    )


def growth_tables() -> None:
    """Reduced-mode wall time as dp grows (flat) and as pp x layers x microbatches grows."""
    from simtrain.api import simulate

    print("\nwall time as dp grows (tp 8, pp 4, 16 layers, 8 microbatches per DP group)")
    print(f"{'dp':>6} {'GPUs':>7} {'wall s':>8} {'tasks':>8}")
    for dp in (8, 32, 128, 512, 1024):
        began = time.perf_counter()
        result = simulate(_growth_spec(dp, 4, 16, 8))
        print(
            f"{dp:>6} {8 * 4 * dp:>7} {time.perf_counter() - began:>8.2f} "
            f"{len(result.program.tasks):>8,}"
        )
    print("\nwall time as pp x layers x microbatches grows (tp 8, dp 8; 4 layers per stage)")
    print(f"{'pp':>4} {'layers':>7} {'microbatches':>13} {'product':>9} {'wall s':>8} {'tasks':>8}")
    for pp in (2, 4, 8, 16):
        began = time.perf_counter()
        result = simulate(_growth_spec(8, pp, 4 * pp, 2 * pp))
        product = pp * 4 * pp * 2 * pp
        print(
            f"{pp:>4} {4 * pp:>7} {2 * pp:>13} {product:>9,} "
            f"{time.perf_counter() - began:>8.2f} {len(result.program.tasks):>8,}"
        )


if __name__ == "__main__":
    main()
