"""The host stream: kernel issue runs ahead of the device and sets the pace only when it must."""

from dataclasses import dataclass
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simtrain.api import compute_model_for, network_model_for, simulate
from simtrain.engine import run_program
from simtrain.engine.host import issue_profile, op_readiness
from simtrain.parallel.builder import build_program
from simtrain.parallel.program import Program, Task
from simtrain.workload.ops import Op
from tests.conftest import GPT_TINY, make_experiment

OP = Op(name="k", kind="elementwise", bytes_accessed=1.0)


@dataclass
class FixedCompute:
    """Test double: every op takes ``device_s`` on the device and ``issue_s`` on the host."""

    device_s: float
    issue_s: float
    execution_mode: str = "eager"

    @property
    def host(self):
        return self

    @property
    def per_kernel_s(self) -> float:
        return self.issue_s

    per_collective_s = 0.0

    def op_time_s(self, op: Op) -> float:
        return self.device_s

    def task_time_s(self, ops) -> float:
        return self.device_s * len(ops)

    def host_time_s(self, ops) -> float:
        return self.issue_s * len(ops)


class NoNetwork:
    def collective_time_s(self, kind, ranks, size_bytes) -> float:
        return 0.0

    def p2p_time_s(self, src, dst, size_bytes) -> float:
        return 0.0


def kernel_by_kernel_end(n: int, d: float, h: float) -> float:
    """End of n kernels when kernel i is issued at (i+1)·h and runs d once issued and free."""
    device_free = 0.0
    for i in range(n):
        device_free = max(device_free, (i + 1) * h) + d
    return device_free


def one_rank_program(num_tasks: int, ops_per_task: int) -> Program:
    program = Program(world_size=1, simulated_ranks=(0,), weights={0: 1})
    ops = (OP,) * ops_per_task
    for i in range(num_tasks):
        program.add(Task(0, "compute", f"t{i}", ops=ops, deps=(i - 1,) if i else ()))
    return program


@given(
    n=st.integers(1, 40),
    d=st.floats(1e-6, 1e-3),
    h=st.floats(1e-6, 1e-3),
    tasks=st.integers(1, 5),
)
def test_step_matches_kernel_by_kernel_issue_of_uniform_ops(n, d, h, tasks):
    result = run_program(one_rank_program(tasks, n), FixedCompute(d, h), NoNetwork())
    expected = kernel_by_kernel_end(tasks * n, d, h)
    assert result.step_time_s == pytest.approx(expected, rel=1e-9)


def test_readiness_is_first_issue_when_device_bound_and_host_lag_when_host_bound():
    ten = issue_profile((OP,) * 10, FixedCompute(10.0, 10.0))
    assert op_readiness(ten, d=1000.0) == pytest.approx(10.0)
    # host-bound: the device waits until only the last kernel is left to issue
    assert op_readiness(ten, d=10.0) == pytest.approx(100.0 - 0.9 * 10.0)


@dataclass
class PerOpCompute:
    """Test double: op ``k<i>`` takes ``device_s[i]`` on the device, ``issue_s[i]`` to issue."""

    device_s: list[float]
    issue_s: list[float]
    execution_mode: str = "eager"
    per_kernel_s = 1.0  # only read to tell that the host stream is on
    per_collective_s = 0.0

    @property
    def host(self):
        return self

    def _index(self, op: Op) -> int:
        return int(op.name[1:])

    def op_time_s(self, op: Op) -> float:
        return self.device_s[self._index(op)]

    def task_time_s(self, ops) -> float:
        return sum(self.op_time_s(op) for op in ops)

    def host_time_s(self, ops) -> float:
        return sum(self.issue_s[self._index(op)] for op in ops)


@given(
    times=st.lists(
        st.tuples(st.floats(1e-6, 1e-3), st.floats(1e-6, 1e-3)), min_size=1, max_size=24
    ),
    cuts=st.sets(st.integers(1, 23), max_size=4),
)
def test_step_matches_kernel_by_kernel_issue_of_unequal_ops(times, cuts):
    """Long and short kernels in any order, in tasks of any size: exact issue-by-issue end."""
    device_s, issue_s = [d for d, _ in times], [h for _, h in times]
    ops = [Op(name=f"k{i}", kind="elementwise", bytes_accessed=1.0) for i in range(len(times))]
    bounds = [0, *sorted(c for c in cuts if c < len(ops)), len(ops)]
    program = Program(world_size=1, simulated_ranks=(0,), weights={0: 1})
    for i, (a, b) in enumerate(pairwise(bounds)):
        program.add(Task(0, "compute", f"t{i}", ops=tuple(ops[a:b]), deps=(i - 1,) if i else ()))
    result = run_program(program, PerOpCompute(device_s, issue_s), NoNetwork())
    device_free = issued = 0.0
    for d, h in times:
        issued += h
        device_free = max(device_free, issued) + d
    assert result.step_time_s == pytest.approx(device_free, rel=1e-9)


def test_host_free_execution_adds_no_tasks_and_no_time():
    program = one_rank_program(3, 4)
    free = run_program(program, FixedCompute(1e-3, 0.0, "compiled"), NoNetwork())
    assert len(free.program.tasks) == 3
    assert free.step_time_s == pytest.approx(12e-3)


def test_small_model_in_eager_mode_exposes_host_time_compiled_does_not():
    eager = simulate(make_experiment())
    compiled = simulate(make_experiment("training.execution_mode=compiled"))
    assert eager.summary()["exposed_host_s"] > 0
    assert "host" in eager.summary()["breakdown_s"]
    assert compiled.summary()["exposed_host_s"] == 0
    assert compiled.step_time_s < eager.step_time_s
    for rank in eager.ranks:
        total = rank.busy_s + rank.exposed_comm_s + rank.exposed_host_s + rank.bubble_s
        assert total == pytest.approx(eager.step_time_s, rel=1e-9)


def test_pipeline_transfers_stop_the_host_in_eager_mode():
    spec = make_experiment("parallel.pp=2")
    program = build_program(spec)
    compute, network = compute_model_for(spec), network_model_for(spec)
    synced = run_program(program, compute, network, sync_on_p2p=True)
    free = run_program(program, compute, network, sync_on_p2p=False)
    tasks = synced.program.tasks
    waiting = [
        t for t in tasks if t.stream == "host" and any(tasks[d].stream == "pp_comm" for d in t.deps)
    ]
    assert waiting, "with eager pipeline transfers, some host tasks wait for a transfer"
    assert synced.step_time_s >= free.step_time_s


def _host_waits_on_transfers(result) -> int:
    tasks = result.program.tasks
    return sum(
        1
        for t in tasks
        if t.stream == "host" and any(tasks[d].category == "pp_comm" for d in t.deps)
    )


def test_only_batched_pipeline_transfers_stop_the_host():
    # Megatron synchronises the device after a batched send/receive (batch_p2p_sync); with
    # overlapped transfers (overlap_p2p_comm, so no batching) it waits on the device only
    # (docs/references/frameworks.md §Communication overlap in Megatron-Core and NeMo)
    common = ("parallel.pp=2", "parallel.vpp=2", "parallel.pipeline_schedule=interleaved")
    model = {**GPT_TINY, "num_layers": 4}
    batched = make_experiment(*common, "parallel.overlap_p2p_comm=false", model=model)
    overlapped = make_experiment(*common, "parallel.overlap_p2p_comm=true", model=model)
    assert build_program(batched).syncs_on_p2p and not build_program(overlapped).syncs_on_p2p
    assert _host_waits_on_transfers(simulate(batched)) > 0
    assert _host_waits_on_transfers(simulate(overlapped)) == 0


def test_a_host_sync_pays_the_device_backlog_closed_form():
    # task 0 is device-bound (4 ops of 1 ms issued at 0.1 ms each), task 1 host-bound (4 ops
    # of 0.1 ms issued at 1 ms each); run ahead, the host issues task 1 while task 0 runs:
    # step = max over kernels; made to wait for the device (Task.host_sync), the host starts
    # task 1's issue only when task 0 ends, so the backlog of task 0 is paid.
    device, host = (1e-3, 1e-4), (1e-4, 1e-3)

    @dataclass
    class TwoPhase(FixedCompute):
        def op_time_s(self, op: Op) -> float:
            return device[op.layer]

        def task_time_s(self, ops) -> float:
            return sum(device[op.layer] for op in ops)

        def host_time_s(self, ops) -> float:
            return sum(host[op.layer] for op in ops)

    def program(sync: bool) -> Program:
        p = Program(world_size=1, simulated_ranks=(0,), weights={0: 1})
        p.add(Task(0, "compute", "t0", ops=(Op("a", "elementwise", layer=0),) * 4))
        ops = (Op("b", "elementwise", layer=1),) * 4
        p.add(Task(0, "compute", "t1", ops=ops, deps=(0,), host_sync=sync))
        return p

    ahead = run_program(program(False), TwoPhase(0.0, 1e-4), NoNetwork()).step_time_s
    synced = run_program(program(True), TwoPhase(0.0, 1e-4), NoNetwork()).step_time_s
    # run ahead: task 0 ends at 0.1 + 4 ms; task 1's kernels were issued at 0.4 + 1, 2, 3, 4 ms
    assert ahead == pytest.approx(4.4e-3 + 1e-4)
    # synced: task 1's issue starts at 4.1 ms; its last kernel is issued at 8.1 ms
    assert synced == pytest.approx(4.1e-3 + 4e-3 + 1e-4)


def test_deepspeed_marks_batch_loads_and_the_loss_megatron_core_marks_nothing():
    spec = make_experiment("parallel.pp=2", "training.framework=deepspeed")
    program = build_program(spec)
    marked = {(t.stage, t.label[1], t.microbatch) for t in program.tasks if t.host_sync}
    microbatches = {t.microbatch for t in program.tasks if t.microbatch >= 0}
    # first and last stage load each microbatch; the last stage reads its loss
    expected = {(s, "F", m) for s in (0, 1) for m in microbatches}
    expected |= {(1, "B", m) for m in microbatches}
    assert marked == expected
    ranks_per_stage = len(program.simulated_ranks) // 2
    assert sum(t.host_sync for t in program.tasks) == len(expected) * ranks_per_stage
    core = build_program(make_experiment("parallel.pp=2"))
    assert not any(t.host_sync for t in core.tasks)


def test_host_syncs_slow_a_small_deepspeed_step_and_the_estimator_follows():
    from simtrain.estimator import Estimator

    spec = make_experiment("training.framework=deepspeed")
    program = build_program(spec)
    compute, network = compute_model_for(spec), network_model_for(spec)
    synced = run_program(program, compute, network).step_time_s
    for task in program.tasks:
        task.host_sync = False
    free = run_program(program, compute, network).step_time_s
    assert synced > free
    assert Estimator().estimate(spec).step_time_s == pytest.approx(synced, rel=0.02)


def test_host_sync_marks_survive_the_trace_file():
    from simtrain.parallel.trace import program_from_dict, program_to_dict

    program = build_program(make_experiment("training.framework=deepspeed"))
    back = program_from_dict(program_to_dict(program))
    assert [t.host_sync for t in back.tasks] == [t.host_sync for t in program.tasks]
    assert any(t.host_sync for t in back.tasks)
