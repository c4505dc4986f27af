import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from simtrain.sweep.pareto import meaningful_panels, pareto_front, pareto_mask, plot_pareto
from simtrain.sweep.store import ResultStore


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=15))
def test_front_rows_are_not_dominated_and_the_rest_are(points):
    values = np.array(points, dtype=float)
    mask = pareto_mask(values, [True, False])  # maximise the first, minimise the second
    for i, row in enumerate(values):
        dominated = any(
            o[0] >= row[0] and o[1] <= row[1] and (o[0] > row[0] or o[1] < row[1]) for o in values
        )
        assert mask[i] == (not dominated)


def test_pareto_front_skips_unsimulated_rows_and_plot_writes_a_file(tmp_path):
    table = pd.DataFrame(
        {
            "status": ["ok", "ok", "oom", "ok"],
            "tokens_per_s": [10.0, 5.0, 99.0, 12.0],
            "num_gpus": [8, 8, 8, 16],
            "memory_headroom_bytes": [1e9, 5e9, None, 2e9],
            "usd_per_million_tokens": [1.0, 2.0, None, 1.5],
        }
    )
    front = pareto_front(table, {"num_gpus": "min", "tokens_per_s": "max"})
    assert front.index.tolist() == [0, 3]
    out = plot_pareto(table, tmp_path / "front.png")
    assert out.stat().st_size > 1000


def test_pareto_plot_draws_only_axes_that_vary():
    table = pd.DataFrame(
        {
            "status": ["ok", "ok", "ok"],
            "tokens_per_s": [10.0, 5.0, 12.0],
            "num_gpus": [64, 64, 64],  # one cluster size: no GPUs panel
            "memory_headroom_bytes": [1e9, 5e9, 2e9],
            "usd_per_million_tokens": [None, None, None],  # no price: no $ panel
        }
    )
    assert [panel[0] for panel in meaningful_panels(table)] == ["memory_headroom_bytes"]
    flat = table.assign(memory_headroom_bytes=[1e9, 1e9 + 1e6, 1e9])  # 0.1 %: flat
    assert meaningful_panels(flat) == []
    assert plot_pareto(flat, "never-written.png") is None


def test_store_survives_reopening_and_replaces_by_key(tmp_path):
    path = tmp_path / "s.sqlite"
    store = ResultStore(path)
    store.put("a", "v", {"status": "ok", "error": "", "mfu": 0.1}, {"x": 1})
    store.put("a", "v", {"status": "ok", "error": "", "mfu": 0.2}, {"x": 1})
    store.close()
    again = ResultStore(path)
    assert again.keys() == {"a"} and again.get_all()["a"]["mfu"] == 0.2
    again.clear()
    assert len(again) == 0
