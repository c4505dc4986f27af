import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtrain.network.flow import FlowSimulator, Phase, max_min_rates, run_phases, transfer_time_s


def test_two_flows_on_one_link_get_half_each():
    rates = max_min_rates(np.array([[0], [0]]), np.array([100.0]))
    assert rates.tolist() == [50.0, 50.0]


def test_max_min_gives_unused_capacity_to_the_unconstrained_flow():
    # flows A: link 0; B: links 0,1; C: link 1 (cap 10 vs 100): B and C share link 1 at 5,
    # A takes the rest of link 0 = 95.
    routes = np.array([[0, -1], [0, 1], [1, -1]])
    assert max_min_rates(routes, np.array([100.0, 10.0])).tolist() == [95.0, 5.0, 5.0]


def test_rates_recomputed_when_a_flow_ends():
    sim = FlowSimulator(np.array([100.0]))
    sim.add(np.array([[0], [0]]), np.array([50.0, 150.0]))
    assert sim.time_to_next_completion_s() == pytest.approx(1.0)  # both at 50 B/s
    assert sim.advance(1.0).tolist() == [0]
    assert sim.rates() == {1: 100.0}  # the survivor takes the whole link
    assert sim.time_to_next_completion_s() == pytest.approx(1.0)


def test_rates_recomputed_when_a_flow_starts():
    sim = FlowSimulator(np.array([100.0]))
    sim.add(np.array([[0]]), np.array([100.0]))
    sim.advance(0.5)
    sim.add(np.array([[0]]), np.array([100.0]))
    assert sim.rates() == {0: 50.0, 1: 50.0}
    assert sim.time_to_next_completion_s() == pytest.approx(1.0)  # 50 B left at 50 B/s


def test_transfer_time_of_uneven_flows_follows_the_events():
    # 100 and 300 bytes on a 100 B/s link: 2 s together at 50, then 200 B at 100 -> 4 s
    assert transfer_time_s(np.array([[0], [0]]), np.array([100.0, 300.0]), np.array([100.0])) == (
        pytest.approx(4.0)
    )


def test_run_phases_adds_latency_per_repeat_and_sums_phases():
    route = lambda s, d: np.array([[0]] * len(s))  # noqa: E731
    phases = [Phase.of([0], [1], 10.0, repeat=3), Phase.of([0], [1], 20.0, latency_count=0)]
    total = run_phases(phases, route, np.array([10.0]), np.array([0.5]))
    assert total == pytest.approx(3 * (1.0 + 0.5) + 2.0)


routes_strategy = st.integers(2, 6).flatmap(
    lambda num_links: st.tuples(
        st.just(num_links),
        st.lists(
            st.lists(st.integers(0, num_links - 1), min_size=1, max_size=3, unique=True),
            min_size=1,
            max_size=12,
        ),
        st.lists(st.floats(1.0, 100.0), min_size=num_links, max_size=num_links),
        st.lists(st.floats(1.0, 1000.0), min_size=12, max_size=12),
    )
)


def padded(route_lists):
    width = max(len(r) for r in route_lists)
    return np.array([r + [-1] * (width - len(r)) for r in route_lists])


@settings(max_examples=60, deadline=None)
@given(routes_strategy)
def test_max_min_is_feasible_and_every_flow_has_a_fair_bottleneck(case):
    num_links, route_lists, caps, _ = case
    routes, caps = padded(route_lists), np.array(caps)
    rates = max_min_rates(routes, caps)
    load = np.zeros(num_links)
    for row, rate in zip(routes, rates, strict=True):
        load[row[row >= 0]] += rate
    assert (load <= caps * (1 + 1e-9)).all()
    for row, rate in zip(routes, rates, strict=True):
        # bottleneck: a full link on which no other flow gets more
        def fair_and_full(link, rate=rate):
            sharing = [r for rr, r in zip(routes, rates, strict=True) if link in rr]
            return load[link] >= caps[link] * (1 - 1e-9) and rate >= max(sharing) * (1 - 1e-9)

        assert any(fair_and_full(link) for link in row[row >= 0])


@settings(max_examples=60, deadline=None)
@given(routes_strategy)
def test_bytes_delivered_equal_bytes_sent(case):
    num_links, route_lists, caps, sizes = case
    routes = padded(route_lists)
    sizes = np.array(sizes[: len(route_lists)])
    sim = FlowSimulator(np.array(caps))
    ids = sim.add(routes, sizes)
    finished = []
    while sim.num_active:
        finished += sim.advance(sim.time_to_next_completion_s()).tolist()
    assert sorted(finished) == ids.tolist()
    hops = (routes >= 0).sum(axis=1)
    assert sim.link_bytes.sum() == pytest.approx(float((sizes * hops).sum()), rel=1e-9)
    for link in range(num_links):
        carried = sizes[(routes == link).any(axis=1)].sum()
        assert sim.link_bytes[link] == pytest.approx(carried, rel=1e-9, abs=1e-9)


def exact_transfer_time(routes, sizes, caps):
    sim = FlowSimulator(caps)
    sim.add(routes, sizes)
    now = 0.0
    while sim.num_active:
        dt = sim.time_to_next_completion_s()
        sim.advance(dt)
        now += dt
    return now


@settings(max_examples=60, deadline=None)
@given(routes_strategy)
def test_event_window_keeps_the_phase_time_within_about_one_percent(case):
    _, route_lists, caps, sizes = case
    routes, caps = padded(route_lists), np.array(caps)
    sizes = np.array(sizes[: len(route_lists)])
    exact = exact_transfer_time(routes, sizes, caps)
    fast = transfer_time_s(routes, sizes, caps)
    assert fast == pytest.approx(exact, rel=0.02)
