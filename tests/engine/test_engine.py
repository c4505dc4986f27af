import pytest

from simtrain.engine import run_program
from simtrain.errors import EngineDeadlock
from simtrain.parallel.program import Program, Task


def program(*tasks: Task) -> Program:
    prog = Program(world_size=4, simulated_ranks=tuple(sorted({t.rank for t in tasks})))
    for task in tasks:
        prog.add(task)
    return prog


def test_stream_order_and_dependencies():
    prog = program(
        Task(0, "compute", "a", duration_s=1.0),
        Task(0, "compute", "b", duration_s=2.0),  # after a on the same stream
        Task(0, "comm", "c", duration_s=0.5, deps=(0,)),  # overlaps b
        Task(1, "compute", "d", duration_s=1.0, deps=(2,)),  # waits for c on rank 0
    )
    result = run_program(prog)
    assert list(result.start_s) == [0.0, 1.0, 1.0, 1.5]
    assert list(result.end_s) == [1.0, 3.0, 1.5, 2.5]
    assert result.step_time_s == 3.0


def test_collective_starts_when_the_last_member_arrives():
    prog = program(
        Task(0, "compute", "x", duration_s=1.0),
        Task(1, "compute", "y", duration_s=3.0),
        Task(0, "comm", "ar", duration_s=0.25, deps=(0,), collective_key="k", group=(0, 1)),
        Task(1, "comm", "ar", duration_s=0.25, deps=(1,), collective_key="k", group=(0, 1)),
    )
    result = run_program(prog)
    assert result.start_s[2] == result.start_s[3] == 3.0
    assert result.end_s[2] == result.end_s[3] == 3.25


def test_cycle_is_reported_as_deadlock():
    prog = program(
        Task(0, "compute", "a", duration_s=1.0, deps=(1,)),
        Task(1, "compute", "b", duration_s=1.0, deps=(0,)),
    )
    with pytest.raises(EngineDeadlock, match="2 of 2 tasks never ran"):
        run_program(prog)


def test_mismatched_collective_order_deadlocks():
    prog = program(
        Task(0, "comm", "k1", duration_s=1.0, collective_key="k1", group=(0, 1)),
        Task(0, "comm", "k2", duration_s=1.0, collective_key="k2", group=(0, 1)),
        Task(1, "comm", "k2", duration_s=1.0, collective_key="k2", group=(0, 1)),
        Task(1, "comm", "k1", duration_s=1.0, collective_key="k1", group=(0, 1)),
    )
    with pytest.raises(EngineDeadlock):
        run_program(prog)


def test_models_required_for_untimed_tasks():
    prog = program(Task(0, "compute", "a"))
    with pytest.raises(ValueError, match="need models"):
        run_program(prog)
