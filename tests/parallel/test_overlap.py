"""Overlap as one mechanism: what a declared overlap may cost, and what no overlap costs.

With a compute double whose time is proportional to FLOPs (and slowed by ``1 + sigma`` while
a collective of its rank is in flight) and a constant-bandwidth network, a step with every
overlap off is exactly its compute plus its communication; with an overlap on, a collective
shorter than the compute it hides behind adds at most ``sigma`` times its own duration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtrain.engine import execute
from simtrain.engine.timing import contended_durations, task_durations
from simtrain.network.base import ConstantBandwidthNetwork
from simtrain.parallel.builder import build_program
from simtrain.parallel.overlap import (
    feasible_steps,
    paired_steps,
    schedule_actions,
    step_actions,
    tp_overlapped,
)
from simtrain.workload.primitives import collective, gemm
from tests.conftest import LLAMA_TINY, make_experiment

MOE_TINY = {**LLAMA_TINY, "name": "moe-tiny", "num_experts": 4, "moe_top_k": 2}


@dataclass
class FlopCompute:
    """Compute double: ``flops / rate`` per op, ``1 + sigma`` times that under contention."""

    flops_per_s: float
    sigma: float
    calibration: object = field(default_factory=lambda: SimpleNamespace(collective_sms=1))

    def op_time_s(self, op) -> float:
        return op.flops / self.flops_per_s

    def task_time_s(self, ops, contended: bool = False) -> float:
        base = sum(self.op_time_s(op) for op in ops)
        return base * (1 + self.sigma) if contended else base

    def host_time_s(self, ops) -> float:
        return 0.0


def replay(spec, sigma: float, bandwidth: float):
    """Engine result, durations and program of ``spec`` under the doubles."""
    program = build_program(spec)
    compute = FlopCompute(1e12, sigma)
    durations = task_durations(program, compute, ConstantBandwidthNetwork(bandwidth))
    result = execute(program, durations, contended_durations(program, compute))
    return result, durations, program


def sums(program, durations):
    """Summed compute, and summed communication, of the rank's tasks."""
    compute = sum(d for t, d in zip(program.tasks, durations, strict=True) if t.stream == "compute")
    comm = [(t, d) for t, d in zip(program.tasks, durations, strict=True) if t.stream != "compute"]
    return compute, comm


TP_CASE = (
    "parallel.tp=4",
    "parallel.sp=true",
    "cluster.num_gpus=4",
    "parallel.global_batch_size=2",
)


@settings(max_examples=15, deadline=None)
@given(sigma=st.floats(0.0, 0.5), bandwidth=st.floats(1e11, 1e13))
def test_without_overlap_the_step_is_compute_plus_communication(sigma, bandwidth):
    spec = make_experiment(*TP_CASE, "parallel.tp_comm_overlap=none", model=LLAMA_TINY)
    result, durations, program = replay(spec, sigma, bandwidth)
    compute, comm = sums(program, durations)
    assert result.step_time_s == pytest.approx(compute + sum(d for _, d in comm), rel=1e-9)


@settings(max_examples=15, deadline=None)
@given(sigma=st.floats(0.0, 0.5), bandwidth=st.floats(3e10, 1e11))
def test_overlapped_tp_collectives_cost_at_most_the_interference(sigma, bandwidth):
    # From 30 GB/s up, every chunk of a collective is shorter than the GEMM chunk it hides
    # behind (below, the tiny layer's transfers outlast its GEMMs at 1 TFLOP/s).
    spec = make_experiment(*TP_CASE, "parallel.tp_comm_overlap=gemm", model=LLAMA_TINY)
    result, durations, program = replay(spec, sigma, bandwidth)
    compute, comm = sums(program, durations)
    declared = sum(d for t, d in comm if t.ops[0].overlap_ops > 0)
    exposed = sum(d for t, d in comm if t.ops[0].overlap_ops == 0)
    assert declared > 0.02 * compute  # the overlap has something to hide
    assert compute <= result.step_time_s
    assert result.step_time_s <= compute + exposed + sigma * declared + 1e-12


def test_gemm_mode_hides_more_than_wgrad_and_wgrad_more_than_none():
    steps = {}
    for mode in ("none", "wgrad", "gemm"):
        spec = make_experiment(*TP_CASE, f"parallel.tp_comm_overlap={mode}", model=LLAMA_TINY)
        steps[mode] = replay(spec, 0.1, 1e12)[0].step_time_s
    assert steps["gemm"] < steps["wgrad"] < steps["none"]


def test_userbuffers_chunks_keep_flops_and_bytes():
    ag = collective("attn_all_gather", "all_gather", "tp", "fwd", 8e6, 0)
    fc = gemm("qkv", "fwd", 4098, 1024, 512, 2, 0)
    rs = collective("attn_reduce_scatter", "reduce_scatter", "tp", "fwd", 8e6, 0)
    out = tp_overlapped([ag, fc, fc, rs], "gemm", 4, 1)
    gemms = [op for op in out if op.kind == "gemm"]
    comms = [op for op in out if op.is_comm]
    assert sum(op.flops for op in gemms) == pytest.approx(2 * fc.flops)
    assert sum(op.bytes_accessed for op in gemms) == pytest.approx(2 * fc.bytes_accessed)
    assert sum(op.comm_bytes for op in comms) == pytest.approx(16e6)
    assert [op.overlap_ops for op in comms] == [1, 1, 0]  # gather, RS chunks, RS last
    # Outside the transformer layers (embedding, LM head) nothing changes.
    assert tp_overlapped([ag, fc], "gemm", 4, 0) == [ag, fc]


MOE_CASE = (
    "parallel.ep=2",
    "cluster.num_gpus=2",
    "parallel.global_batch_size=8",
    "parallel.overlap_grad_reduce=false",
)


@settings(max_examples=10, deadline=None)
@given(sigma=st.floats(0.0, 0.5), bandwidth=st.floats(3e9, 1e10))
def test_paired_microbatches_hide_all_to_alls_at_the_interference_cost(sigma, bandwidth):
    spec = make_experiment(*MOE_CASE, "parallel.overlap_ep_comm=true", model=MOE_TINY)
    result, durations, program = replay(spec, sigma, bandwidth)
    compute, comm = sums(program, durations)
    paired = {str(a) for step in paired_steps(step_actions(spec.parallel)[0]) if len(step) > 1
              for a in step}  # fmt: skip
    hidden = sum(d for t, d in comm if t.label.split(":")[0] in paired)
    exposed = sum(d for t, d in comm if t.label.split(":")[0] not in paired)
    assert hidden > 0.02 * compute
    assert compute <= result.step_time_s <= compute + exposed + sigma * hidden + 1e-12


def test_without_pairing_every_all_to_all_is_exposed():
    spec = make_experiment(*MOE_CASE, "parallel.overlap_ep_comm=false", model=MOE_TINY)
    result, durations, program = replay(spec, 0.2, 3e8)
    compute, comm = sums(program, durations)
    assert result.step_time_s == pytest.approx(compute + sum(d for _, d in comm), rel=1e-9)


def test_combined_1f1b_warms_up_one_more_microbatch():
    spec = make_experiment(*MOE_CASE, "parallel.overlap_ep_comm=true", model=MOE_TINY)
    actions = [str(a) for a in step_actions(spec.parallel)[0]]
    assert actions == ["0F0", "0F1", "0B0", "0F2", "0B1", "0F3", "0B2", "0B3"]
    steps = [[str(a) for a in s] for s in paired_steps(step_actions(spec.parallel)[0])]
    assert steps == [["0F0"], ["0F1", "0B0"], ["0F2", "0B1"], ["0F3", "0B2"], ["0B3"]]


def test_gpipe_turn_pairs_that_wait_on_themselves_are_split():
    # GPipe, 2 stages, 4 microbatches: rank 0's last forward and first backward would pair,
    # but that backward's gradients come back only after the forward reached stage 1.
    actions = schedule_actions("gpipe", 2, 4, 1, True)
    steps, order = feasible_steps(actions, 2)
    assert all(len(step) == 1 for step in steps[0])
    assert [len(s) for s in paired_steps(actions[0])].count(2) == 1  # what would deadlock
    assert sorted(order) == [(r, i) for r in (0, 1) for i in range(len(steps[r]))]


@pytest.mark.parametrize(("name", "pp", "m"), [("1f1b", 4, 8), ("dualpipe", 4, 8)])
def test_pairs_that_can_run_are_kept(name, pp, m):
    actions = schedule_actions(name, pp, m, 1, True)
    num_chunks = 1 + max(a.stage for acts in actions.values() for a in acts)
    steps, _ = feasible_steps(actions, num_chunks)
    assert steps == {rank: paired_steps(acts) for rank, acts in actions.items()}
    assert any(len(step) == 2 for rank_steps in steps.values() for step in rank_steps)
