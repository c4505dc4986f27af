from pathlib import Path

import pandas as pd
import pytest

from simtrain.specs.sweep import base_mapping, sweep_from_dict
from simtrain.sweep import run_sweep, sweep
from simtrain.sweep.store import ResultStore
from tests.sweep.helpers import TINY_BASE, tiny_sweep, write_sweep

COMPARED = ["status", "error", "step_time_s", "mfu", "fits", "key"]


def test_sweep_returns_every_configuration_in_order_with_counts(tmp_path):
    table = sweep(write_sweep(tmp_path), num_workers=2)
    assert len(table) == 12
    assert table["parallel.tp"].tolist() == [1] * 4 + [2] * 4 + [16] * 4
    assert table.attrs["counts"]["ok"] == 7 and table.attrs["counts"]["invalid"] == 5
    done = table[table.status == "ok"]
    assert done["step_time_s"].gt(0).all() and done["fits"].all()
    assert done["usd_per_million_tokens"].gt(0).all()


def test_a_failing_configuration_is_recorded_and_the_sweep_goes_on(tmp_path):
    # vpp 2 with pp 1 passes the spec's checks but no pipeline schedule can run it
    spec = sweep_from_dict(
        tiny_sweep(
            axes={"parallel.pp": [1, 2]},
            set={"parallel.pipeline_schedule": "interleaved", "parallel.vpp": 2,
                 "model.num_layers": 4},
        )
    )  # fmt: skip
    result = run_sweep(spec, base_mapping(spec, Path()), num_workers=1)
    assert result.table["status"].tolist() == ["error", "ok"]
    assert "vpp" in result.table["error"][0]
    assert result.counts["error"] == 1 and result.counts["ok"] == 1


def test_resume_skips_what_is_done_and_gives_the_same_table(tmp_path):
    spec = sweep_from_dict(tiny_sweep())
    store = tmp_path / "s.sqlite"
    full = run_sweep(spec, TINY_BASE, store=store, num_workers=1)
    assert full.counts["evaluated"] == 7
    # lose two results, as if the sweep had been killed before they finished
    db = ResultStore(store)
    keep = dict(list(db.get_all().items())[:5])
    db.clear()
    for key, row in keep.items():
        db.put(key, "v", row, {})
    db.close()
    resumed = run_sweep(spec, TINY_BASE, store=store, num_workers=1, resume=True)
    assert resumed.counts["from_store"] == 5 and resumed.counts["evaluated"] == 2
    pd.testing.assert_frame_equal(full.table[COMPARED], resumed.table[COMPARED])


def test_a_non_empty_store_needs_resume_or_overwrite(tmp_path):
    spec = sweep_from_dict(tiny_sweep(axes={"parallel.tp": [1]}))
    store = tmp_path / "s.sqlite"
    run_sweep(spec, TINY_BASE, store=store, num_workers=1)
    with pytest.raises(Exception, match="already holds 1 results"):
        run_sweep(spec, TINY_BASE, store=store, num_workers=1)
    again = run_sweep(spec, TINY_BASE, store=store, num_workers=1, overwrite=True)
    assert again.counts["evaluated"] == 1


@pytest.mark.needs_extra("ray")
def test_ray_gives_the_same_results_as_local_processes(tmp_path):
    spec = sweep_from_dict(tiny_sweep())
    local = run_sweep(spec, TINY_BASE, num_workers=2)
    ray = run_sweep(spec, TINY_BASE, executor="ray", num_workers=2)
    assert ray.counts == local.counts
    pd.testing.assert_frame_equal(local.table[COMPARED], ray.table[COMPARED])
