"""Compute that overlaps communication pays the interference slowdown, once per overlap."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simtrain.api import compute_model_for, network_model_for, simulate
from simtrain.engine import execute, run_program
from simtrain.parallel.builder import build_program
from simtrain.parallel.program import Program, Task
from tests.conftest import make_experiment

times = st.floats(1e-6, 1.0)


def overlapped_program(comm_first: bool) -> Program:
    """Rank 0: compute A alongside collective C; compute B needs C."""
    program = Program(world_size=2, simulated_ranks=(0,), weights={0: 2})
    comm = Task(0, "tp_comm", "C", "tp_comm", group=(0, 1))
    compute = Task(0, "compute", "A")
    first, second = (comm, compute) if comm_first else (compute, comm)
    program.add(first)
    program.add(second)
    c_index = 0 if comm_first else 1
    program.add(Task(0, "compute", "B", deps=(c_index,)))
    return program


@given(d=times, fraction=st.floats(0.0, 1.0), sigma=st.floats(0.0, 1.0), comm_first=st.booleans())
def test_hidden_collective_costs_exactly_the_slowdown_of_what_it_overlaps(
    d, fraction, sigma, comm_first
):
    c = d * fraction  # the collective is shorter than the compute it hides behind
    program = overlapped_program(comm_first)
    comm, a = (0, 1) if comm_first else (1, 0)
    durations = [0.0] * 3
    durations[comm], durations[a], durations[2] = c, d, d
    contended = [0.0] * 3
    contended[a], contended[2] = d * (1 + sigma), d * (1 + sigma)
    with_interference = execute(program, durations, contended)
    without = execute(program, durations)
    assert without.step_time_s == pytest.approx(2 * d)
    assert with_interference.step_time_s == pytest.approx(2 * d + sigma * c, rel=1e-9, abs=1e-15)


def test_exposed_collective_costs_its_full_time_without_slowdown():
    # B waits for C and nothing runs beside C: no interference, compute plus communication.
    program = Program(world_size=2, simulated_ranks=(0,), weights={0: 2})
    program.add(Task(0, "tp_comm", "C", "tp_comm", group=(0, 1)))
    program.add(Task(0, "compute", "B", deps=(0,)))
    result = execute(program, [3.0, 5.0], [0.0, 7.5])
    assert result.step_time_s == pytest.approx(8.0)


def test_overlapped_data_parallel_reduction_slows_the_backward_a_little():
    spec = make_experiment()
    program = build_program(spec)
    compute, network = compute_model_for(spec), network_model_for(spec)
    on = run_program(program, compute, network, interference=True)
    off = run_program(program, compute, network, interference=False)
    assert off.step_time_s <= on.step_time_s <= off.step_time_s * 1.25
    assert simulate(spec).step_time_s == pytest.approx(on.step_time_s)
